// Persistent bf16-operands GEMM kernels (#moe.gemm_config persistent;
// moe-gpu-kernel-config persistent-gemms=true, off by default): one CTA per SM (132) or per tile when there are fewer,
// each walking the output tiles c, c + grid, ... with its TMA ring's stage
// and phase carried from one tile to the next. The producer thread runs
// ahead into the next tile while the consumers store this one; the
// consumers hand the last K tile's stage back after wgmma.wait_group 0.
// An expert GEMM first builds the shared table of each expert's first block
// and block count (integer atomics), from which every tile takes its slots.
//
// A block GEMM of 64 x 4 tiles of 128x256: 132 CTAs.
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-kernel-config="persistent-gemms=true" | FileCheck %s --check-prefix=CONFIG
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-kernel-config="persistent-gemms=true" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=BLOCK
// An expert GEMM of 2 x 2 tiles x 4 experts: 16 CTAs.
// RUN: %moe_obj/bin/moe-run --gemm M=256,N=512,K=1024,G=4,kind=expert --print-layer-ir | moe-opt --moe-gpu-kernel-config="persistent-gemms=true" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=EXPERT
// One CTA per tile by default.
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-kernel-config --convert-moe-to-nvgpu | FileCheck %s --check-prefix=GRID
// The PTX of both, and ptxas without spills.
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --gemm M=256,N=512,K=1024,G=4,kind=expert --print-layer-ir | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa persistent-gemms=true" | %python %S/Inputs/extract-ptx.py > %t.expert.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.expert.ptx
// RUN: %ptxas -arch=sm_90a -v %t.expert.ptx -o %t.expert.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa persistent-gemms=true" | %python %S/Inputs/extract-ptx.py > %t.block.ptx
// RUN: FileCheck %s --check-prefix=BLOCK-PTX < %t.block.ptx
// RUN: %ptxas -arch=sm_90a -v %t.block.ptx -o %t.block.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// CONFIG:      moe.block_matmul
// CONFIG-SAME:   moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], {{.*}}, persistent = true>

// BLOCK:       func.func private @block_matmul_2_launch(
// BLOCK-SAME:    grid = [132, 1, 1], block = [384, 1, 1]
// BLOCK-LABEL: gpu.func @block_matmul_2(
// BLOCK:         nvvm.setmaxregister decrease 40
// BLOCK:         %[[CTA:.*]] = gpu.block_id  x
// BLOCK:         scf.for %{{.*}} = %[[CTA]] to %c256{{.*}} step %c132{{.*}} iter_args(%{{.*}} = %c0{{.*}}) -> (index)
// BLOCK:           nvgpu.mbarrier.try_wait.parity
// BLOCK:           nvgpu.tma.async.load
// BLOCK:         nvvm.setmaxregister increase 232
// BLOCK:         %[[CTA2:.*]] = gpu.block_id  x
// BLOCK:         scf.for %{{.*}} = %[[CTA2]] to %c256{{.*}} step %c132{{.*}} iter_args(%{{.*}} = %c0{{.*}}) -> (index)
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
// EXPERT:         scf.for %{{.*}} = %{{.*}} to %c16{{.*}} step %c16{{.*}} iter_args(%{{.*}} = %c0{{.*}}) -> (index)

// GRID:       func.func private @block_matmul_2_launch(
// GRID-SAME:    grid = [4, 64, 1]
// GRID-NOT:   step %c132

// PTX-LABEL: .entry expert_matmul_2(
// PTX:         atom.shared.add.u32
// PTX:         setmaxnreg.dec.sync.aligned.u32 40;
// PTX:         mov.u32 {{.*}}, %ctaid.x;
// PTX:         mbarrier.try_wait.parity.shared.b64
// PTX:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX:         setmaxnreg.inc.sync.aligned.u32 232;
// PTX:         mov.u32 {{.*}}, %ctaid.x;
// PTX:         wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX:         wgmma.wait_group.sync.aligned 0;
// PTX:         mbarrier.arrive.shared.b64
// PTX:         st.global.v2.b32

// BLOCK-PTX-LABEL: .entry block_matmul_2(
// BLOCK-PTX:         setmaxnreg.dec.sync.aligned.u32 40;
// BLOCK-PTX:         mov.u32 {{.*}}, %ctaid.x;
// BLOCK-PTX:         cp.async.bulk.tensor.2d
// BLOCK-PTX:         add.s64 {{.*}}, 132;
// BLOCK-PTX:         setmaxnreg.inc.sync.aligned.u32 232;
// BLOCK-PTX:         wgmma.wait_group.sync.aligned 0;
// BLOCK-PTX:         mbarrier.arrive.shared.b64
// BLOCK-PTX:         st.global.v2.b32
// BLOCK-PTX:         add.s64 {{.*}}, 132;

// PTXAS-NOT:      warning
// PTXAS-COUNT-3:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:      bytes stack frame
