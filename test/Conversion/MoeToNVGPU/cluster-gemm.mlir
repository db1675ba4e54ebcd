// A bf16-operands GEMM kernel of one CTA per tile in clusters of two CTAs
// along N (#moe.gemm_config cluster_n = 2; set by hand or by
// moe-gpu-kernel-config cluster-gemms, no table row takes it: exact on the
// H200 but slower there, docs/sm90a-kernels.md): the pair computes N tiles 2c and
// 2c + 1 of the same rows, so its lhs tile is the same. The kernel is built
// for the cluster (.reqnctapercluster 2, 1, 1: the launch stays an ordinary
// one, its grid N even). The first CTA (cluster rank 0) loads each lhs tile
// into both CTAs' shared memory (TMA multicast, mask 0b11; each CTA's full
// barrier expects the lhs and rhs bytes); each loads its own rhs tile. A
// stage goes back to the first CTA's producer only when both CTAs' consumers
// have released it: its empty barriers count both CTAs' consumer
// warpgroups (4, one arrival each by its first thread), and the second
// CTA's also arrive on them remotely (mapa, mbarrier.arrive
// .release.cluster). barrier.cluster after the mbarrier init (fenced) and
// before the exit keeps either CTA from touching the other's barriers
// before they exist or after it is gone.
// Block GEMM of 64 x 8 tiles of 128x128.
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2>" > %t.mlir
// RUN: moe-opt %t.mlir --convert-moe-to-nvgpu | FileCheck %s
// REQUIRES: ptxas
// RUN: moe-opt %t.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// An odd number of N tiles (N = 384: 3) has no pairs.
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=384,K=256,G=2 --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2>" > %t.odd.mlir
// RUN: not moe-opt %t.odd.mlir --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=ODD

// CHECK:       func.func private @block_matmul_2_launch(
// CHECK-SAME:    grid = [8, 64, 1], block = [384, 1, 1]
// CHECK-LABEL: gpu.func @block_matmul_2(
// CHECK-SAME:    nvvm.cluster_dim = array<i32: 2, 1, 1>
// CHECK:         %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK:         %[[LEADER:.*]] = arith.cmpi eq, %[[RANK]], %c0_i32
// CHECK:         %[[BOTH:.*]] = arith.select %[[LEADER]], %c4{{(_[0-9]+)?}}, %c2{{(_[0-9]+)?}}
// CHECK:         nvgpu.mbarrier.init %{{.*}}[%c6], %[[BOTH]]
// CHECK:         nvvm.fence.mbarrier.init
// CHECK:         gpu.barrier
// CHECK-NEXT:    nvvm.cluster.arrive
// CHECK-NEXT:    nvvm.cluster.wait
// CHECK:         nvgpu.tma.async.load %{{.*}} to %{{[a-z_0-9]+}} multicast_mask = %c3_i16, predicate = %[[LEADER]] :
// CHECK:         nvgpu.tma.async.load %{{.*}} to %{{[a-z_0-9]+}} : <tensor
// CHECK:         scf.if %[[WGLEADER:.*]] {
// CHECK-NEXT:      nvgpu.mbarrier.arrive
// CHECK:           %[[SECOND:.*]] = arith.xori %[[LEADER]], %true
// CHECK:           scf.if %[[SECOND]] {
// CHECK:           %[[REMOTE:.*]] = nvvm.mapa %{{.*}}, %c0_i32{{.*}} : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK:           nvvm.mbarrier.arrive %[[REMOTE]] {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>
// CHECK:         nvvm.cluster.arrive
// CHECK-NEXT:    nvvm.cluster.wait
// CHECK-NEXT:    gpu.return

// PTX-LABEL:   .entry block_matmul_2(
// PTX:           .reqnctapercluster 2, 1, 1
// PTX:           mov.u32 {{%r[0-9]+}}, %cluster_ctarank;
// PTX:           fence.mbarrier_init.release.cluster;
// PTX:           barrier.cluster.arrive;
// PTX-NEXT:      barrier.cluster.wait;
// PTX:           cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster {{.*}}, 3;
// PTX:           mapa.shared::cluster.u64
// PTX:           mbarrier.arrive.release.cluster.shared::cluster.b64
// PTX:           barrier.cluster.arrive;
// PTX-NEXT:      barrier.cluster.wait;

// PTXAS:       Function properties for block_matmul_2
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

// ODD: error: 'moe.block_matmul' op {{.*}}a cluster of 2 CTAs along N needs a multiple of 2 N tiles, got 3
