// Persistent bf16-operands GEMM kernels (#moe.gemm_config persistent; the
// default of moe-gpu-kernel-config persistent-gemms for every GEMM but the
// recompute's, P1's as a ping-pong kernel, pingpong-gemm.mlir): one CTA per
// SM (132), or per tile when there are fewer. CTA c computes tile c first,
// then takes tiles from the launch's zeroed counter (the record's
// `counters = 1`, the kernel's last argument): 132 + atomicAdd, until one
// is past the last. Its producer thread takes the ids and hands each to
// the consumers through a two-slot ring of shared words (mbarrier pairs);
// the TMA ring's stage and phase carry from one tile to the next, so the
// producer loads the next tile while the consumers store this one, and the
// consumers hand the last K tile's stage back after wgmma.wait_group 0.
// An expert GEMM first builds the shared table of each expert's first block
// and block count (integer atomics), from which every tile takes its slots.
//
// A block GEMM of 64 x 4 tiles of 128x256: 132 CTAs.
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-kernel-config="tma-store=false" | FileCheck %s --check-prefix=CONFIG
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-kernel-config="tma-store=false" --convert-moe-to-nvgpu="tma-store=false" | FileCheck %s --check-prefix=BLOCK
// An expert GEMM of 2 x 2 tiles x 4 experts: 16 CTAs.
// RUN: %moe_obj/bin/moe-run --gemm M=256,N=512,K=1024,G=4,kind=expert --print-layer-ir | moe-opt --moe-gpu-kernel-config="tma-store=false" --convert-moe-to-nvgpu="tma-store=false" | FileCheck %s --check-prefix=EXPERT
// One CTA per tile with persistent-gemms=false.
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-kernel-config="persistent-gemms=false tma-store=false" --convert-moe-to-nvgpu="tma-store=false" | FileCheck %s --check-prefix=GRID
// The PTX of both, and ptxas without spills.
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --gemm M=256,N=512,K=1024,G=4,kind=expert --print-layer-ir | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.expert.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.expert.ptx
// RUN: %ptxas -arch=sm_90a -v %t.expert.ptx -o %t.expert.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.block.ptx
// RUN: FileCheck %s --check-prefix=BLOCK-PTX < %t.block.ptx
// RUN: %ptxas -arch=sm_90a -v %t.block.ptx -o %t.block.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// CONFIG:      moe.block_matmul
// CONFIG-SAME:   moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], {{.*}}, persistent = true>

// BLOCK:       func.func private @block_matmul_2_launch(
// BLOCK-SAME:    grid = [132, 1, 1], block = [384, 1, 1]
// BLOCK-SAME:    counters = 1, pointers = [3, 2]>
// BLOCK-LABEL: gpu.func @block_matmul_2(
// BLOCK-SAME:    %[[COUNTER:[a-z0-9]+]]: !llvm.ptr<1>) kernel
// BLOCK:         nvvm.setmaxregister decrease 40
// BLOCK:         %[[CTA:.*]] = gpu.block_id  x
// BLOCK:         %[[FIRST:.*]] = arith.index_cast %[[CTA]] : index to i32
// BLOCK:         scf.while ({{.*}}, %{{.*}} = %[[FIRST]]) : (index, index, i32) -> (index, index, i32)
// BLOCK:           nvgpu.mbarrier.try_wait.parity
// BLOCK:           llvm.store %{{.*}} : i32, !llvm.ptr<3>
// BLOCK:           nvgpu.mbarrier.arrive
// BLOCK:           arith.cmpi ult, %{{.*}}, %c256_i32
// BLOCK:           scf.condition
// BLOCK:           llvm.atomicrmw add %[[COUNTER]], %c1_i32 monotonic : !llvm.ptr<1>, i32
// BLOCK:           nvgpu.tma.async.load
// BLOCK:           arith.addi %{{.*}}, %c132_i32
// BLOCK:         nvvm.setmaxregister increase 232
// BLOCK:         scf.while ({{.*}}) : (index, index) -> (index, index, i32)
// BLOCK:           nvgpu.mbarrier.try_wait.parity
// BLOCK:           llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// BLOCK:           nvgpu.mbarrier.arrive
// BLOCK:           scf.condition
// BLOCK:           nvvm.wgmma.mma_async
// BLOCK:           nvvm.wgmma.wait.group.sync.aligned 0
// BLOCK:           nvgpu.mbarrier.arrive
// BLOCK:           llvm.store {{.*}} : vector<2xf32>, !llvm.ptr<1>

// EXPERT:       func.func private @expert_matmul_2_launch(
// EXPERT-SAME:    grid = [16, 1, 1], block = [384, 1, 1]
// EXPERT-LABEL: gpu.func @expert_matmul_2(
// EXPERT:         gpu.barrier
// EXPERT:         llvm.atomicrmw add
// EXPERT:         gpu.barrier
// EXPERT:         scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c1{{.*}} iter_args(%{{.*}} = %c0_i32{{.*}}) -> (i32)
// EXPERT:         gpu.barrier
// EXPERT:         scf.while

// GRID:       func.func private @block_matmul_2_launch(
// GRID-SAME:    grid = [4, 64, 1]
// GRID-NOT:   counters
// GRID-NOT:   scf.while

// PTX-LABEL: .entry expert_matmul_2(
// PTX:         atom.shared.add.u32
// PTX-DAG:     setmaxnreg.dec.sync.aligned.u32 40;
// PTX-DAG:     setmaxnreg.inc.sync.aligned.u32 232;
// PTX-DAG:     mov.u32 {{.*}}, %ctaid.x;
// PTX-DAG:     atom.global.add.u32 {{.*}}, 1;
// PTX-DAG:     ld.shared.b32
// PTX-DAG:     cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-DAG:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX-DAG:     wgmma.wait_group.sync.aligned 0;
// PTX-DAG:     st.global.v2.b32

// BLOCK-PTX-LABEL: .entry block_matmul_2(
// BLOCK-PTX-DAG:     setmaxnreg.dec.sync.aligned.u32 40;
// BLOCK-PTX-DAG:     setmaxnreg.inc.sync.aligned.u32 232;
// BLOCK-PTX-DAG:     atom.global.add.u32 {{.*}}, 1;
// BLOCK-PTX-DAG:     add.s32 {{.*}}, 132;
// BLOCK-PTX-DAG:     ld.shared.b32
// BLOCK-PTX-DAG:     cp.async.bulk.tensor.2d
// BLOCK-PTX-DAG:     wgmma.wait_group.sync.aligned 0;
// BLOCK-PTX-DAG:     st.global.v2.b32

// PTXAS-NOT:      warning
// PTXAS-COUNT-3:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:      bytes stack frame
