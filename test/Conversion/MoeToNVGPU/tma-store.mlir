// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse > %t.fused.mlir
// RUN: moe-opt %t.fused.mlir --moe-gpu-kernel-config="round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=CONFIG
// RUN: moe-opt %t.fused.mlir --moe-gpu-kernel-config="tma-store=false round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %t.fused.mlir --moe-gpu-kernel-config="act-epilogue=true round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=EPI
// RUN: moe-opt %t.fused.mlir -convert-moe-to-nvgpu="round-reuse=0 weight-reuse=0" | FileCheck %s
// RUN: moe-opt %t.fused.mlir -moe-gpu-pipeline="format=isa round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=HOST
// REQUIRES: ptxas
// RUN: moe-opt %t.fused.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: sed -e 's/{block_size = 128 : i64} -> tensor<384x128xf32>/{block_size = 128 : i64, moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true, tma_store = 2>} -> tensor<384x128xf32>/' %t.fused.mlir > %t.p1.mlir
// RUN: not moe-opt %t.p1.mlir -convert-moe-to-nvgpu="act-epilogue=true round-reuse=0 weight-reuse=0" 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: moe-opt %t.fused.mlir --moe-gpu-kernel-config="round-reuse=0 weight-reuse=0" | sed -e 's/tma_store = 2>/tma_store = 4, store_columns = 16>/' > %t.c16.mlir
// RUN: moe-opt %t.c16.mlir -convert-moe-to-nvgpu="round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=C16
// RUN: moe-opt %t.c16.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.c16.ptx
// RUN: FileCheck %s --check-prefix=PTX16 < %t.c16.ptx
// RUN: %ptxas -arch=sm_90a -v %t.c16.ptx -o %t.c16.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: moe-opt %t.fused.mlir --moe-gpu-kernel-config="round-reuse=0 weight-reuse=0" | sed -e 's/tma_store = 2>/tma_store = 8, store_columns = 8>/' > %t.c8.mlir
// RUN: moe-opt %t.c8.mlir -convert-moe-to-nvgpu="round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=C8
// RUN: moe-opt %t.c8.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.c8.ptx
// RUN: %ptxas -arch=sm_90a -v %t.c8.ptx -o %t.c8.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config tma_store (moe-gpu-kernel-config tma-store, on by
// default): the GEMMs with a plain epilogue stage their f32 result tile
// through shared memory and store it by TMA, instead of st.global of the
// accumulator registers (a warp's st.global.v2 touches 8 rows of 32 bytes
// each). Every GEMM of the layer takes it; with tma-store=false none does,
// and neither does P1's activation-backward epilogue (act-epilogue).
// CONFIG-COUNT-5: tma_store = 2
// OFF-NOT:        tma_store
// EPI:            moe.block_matmul {{.*}}tma_store = 2
// EPI:            moe.block_matmul
// EPI-NOT:        tma_store
// EPI-SAME:       pingpong = true
// EPI:            moe.block_matmul {{.*}}tma_store = 2

// The launch records: the result is a tensor map (the last), not a pointer:
// a block GEMM's over [slots, N] with a box of 64 rows of 128 bytes (32
// f32), an expert GEMM's over [E, M, N] with a box of one expert's 64
// rows, so that the TMA clips each expert's rows past M. The shared memory
// grows by the two consumer warpgroups' two 8 KB chunk buffers.
// CHECK-LABEL: func.func private @block_matmul_2_launch(
// CHECK-SAME:    memref<384x256xf32>)
// CHECK-SAME:    dynamic_shared_memory = 230480,
// CHECK-SAME:    tensor_maps = [1 : {{.*}}, 4 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, swizzle = swizzle_128b, {{.*}}>],
// CHECK-SAME:    pointers = [0, 2, 3]>
// CHECK-LABEL: func.func private @expert_matmul_9_launch(
// CHECK-SAME:    memref<2x256x256xf32>)
// CHECK-SAME:    tensor_maps = [0 : {{.*}}, 1 : {{.*}}, 4 : !nvgpu.tensormap.descriptor<tensor = memref<1x64x128xi8, 3>, swizzle = swizzle_128b, {{.*}}>],
// CHECK-SAME:    counters = 1, pointers = [2, 3]>
//
// The expert GEMM's kernel takes its three maps, then the blocks' experts,
// the token ids and the tile counter. Each consumer warpgroup writes a
// 32-column chunk of its 64 rows into a buffer (st.shared of f32 pairs),
// fences the async proxy, its leader waits for the reads of the chunk
// before it (the other buffer), the warpgroup meets at its named barrier
// (10 + warpgroup, 128 threads), and the leader stores the chunk by TMA at
// (byte column, row, expert) and commits it; the kernel waits for its
// stores before it exits.
// CHECK-LABEL: gpu.func @expert_matmul_9(
// CHECK-SAME:    %[[A:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: !llvm.ptr, %[[C:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>) kernel
// CHECK:         nvvm.wgmma.mma_async
// CHECK-COUNT-8: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<3>
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:         nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK:         nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK:         nvvm.cp.async.bulk.tensor.global.shared.cta %[[C]], %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}] : !llvm.ptr, <3>
// CHECK-NEXT:    nvvm.cp.async.bulk.commit.group
// CHECK:         nvvm.cp.async.bulk.wait_group 0{{$}}
// CHECK:         gpu.return

// The resident pipeline builds each GEMM's result descriptor over the
// buffer it writes, as for its operands: a rank-3 ui8 view [E, M, N * 4]
// for the expert GEMMs.
// HOST-LABEL: llvm.func @moe_layer_bwd(
// HOST:         llvm.insertvalue %{{.*}}[3, 2] : !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)>
// HOST:         llvm.call @mgpuTensorMapEncodeTiledMemref(

// In the PTX, TMA stores of 2-D boxes (block GEMMs) and 3-D boxes (expert
// GEMMs), each chunk's read wait, and no st.global of f32 pairs in the
// GEMMs; no spills.
// PTX:     .entry block_matmul_2(
// PTX-NOT: st.global.v2.f32
// PTX:     cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group
// PTX:     cp.async.bulk.wait_group.read 0;
// PTX:     .entry expert_matmul_9(
// PTX-NOT: st.global.v2.f32
// PTX:     cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group
// PTX:     cp.async.bulk.commit_group;
// PTX:     cp.async.bulk.wait_group 0;
// PTXAS-COUNT-12: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:      bytes spill stores

// Set by hand on P1 with its activation-backward epilogue, the conversion
// rejects it: that epilogue writes its own outputs.
// ERR: error: 'moe.block_matmul' op tma_store needs the bf16-operands MMA path, N a multiple of 4, no activation-backward epilogue, no pingpong or cluster, and mma_shape N a multiple of 64, got N = 128

// store_columns: the same 32 KB as four buffers of 16 columns (64-byte rows,
// 64-byte swizzle) or eight of 8 (32-byte rows, 32-byte swizzle), so that
// more of a warpgroup's chunk stores are in flight: each chunk waits for
// the reads of the stores tma_store - 1 chunks back. The shared memory is
// the same as with two 32-column buffers.
// C16-LABEL: func.func private @block_matmul_2_launch(
// C16-SAME:    dynamic_shared_memory = 230480,
// C16-SAME:    4 : !nvgpu.tensormap.descriptor<tensor = memref<64x64xi8, 3>, swizzle = swizzle_64b, {{.*}}>],
// C16-LABEL: func.func private @expert_matmul_9_launch(
// C16-SAME:    4 : !nvgpu.tensormap.descriptor<tensor = memref<1x64x64xi8, 3>, swizzle = swizzle_64b, {{.*}}>],
// C16-LABEL: gpu.func @expert_matmul_9(
// C16:         nvvm.wgmma.mma_async
// C16-COUNT-4: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<3>
// C16:         nvvm.fence.proxy
// C16:         nvvm.cp.async.bulk.wait_group 2 {read}
// C16:         nvvm.cp.async.bulk.tensor.global.shared.cta
// C16:         gpu.return
// C8-LABEL: func.func private @block_matmul_2_launch(
// C8-SAME:    dynamic_shared_memory = 230480,
// C8-SAME:    4 : !nvgpu.tensormap.descriptor<tensor = memref<64x32xi8, 3>, swizzle = swizzle_32b, {{.*}}>],
// C8-LABEL: gpu.func @expert_matmul_9(
// C8:         nvvm.wgmma.mma_async
// C8-COUNT-2: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<3>
// C8:         nvvm.fence.proxy
// C8:         nvvm.cp.async.bulk.wait_group 6 {read}
// C8:         gpu.return
// PTX16:     .entry expert_matmul_9(
// PTX16-NOT: st.global.v2.f32
// PTX16:     cp.async.bulk.wait_group.read 2;
// PTX16:     cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group
