// RUN: moe-opt %s -split-input-file -convert-moe-to-nvgpu="mma-path=fp8" | FileCheck %s

// The fp8 MMA path of sm_90a (mma-path=fp8): FP8 wgmma with per-32-block
// promotion. The MX block GEMM: S = 256 slots in 2 blocks of 128, E = 2
// experts, Nout = 256, K = 256 (2 K tiles of 128, 4 32-blocks each).

// The op becomes a call, on buffers of its operands and a new result
// buffer, of the launch function; its body comes from moe-lower-gpu-launches.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @mx_gemm(
// CHECK-SAME:      %[[LQ:[^:]*]]: tensor<256x256xf8E4M3FN>, %[[LS:[^:]*]]: tensor<256x8xf8E8M0FNU>, %[[RQ:[^:]*]]: tensor<2x256x256xf8E4M3FN>, %[[RS:[^:]*]]: tensor<2x256x8xf8E8M0FNU>, %[[BLK:[^:]*]]: tensor<2xi32>)
// CHECK-NOT:     moe.block_matmul
// CHECK:         %[[B0:.*]] = bufferization.to_buffer %[[LQ]] read_only : tensor<256x256xf8E4M3FN> to memref<256x256xf8E4M3FN>
// CHECK:         %[[B1:.*]] = bufferization.to_buffer %[[LS]] read_only
// CHECK:         %[[B2:.*]] = bufferization.to_buffer %[[RQ]] read_only
// CHECK:         %[[B3:.*]] = bufferization.to_buffer %[[RS]] read_only
// CHECK:         %[[B4:.*]] = bufferization.to_buffer %[[BLK]] read_only : tensor<2xi32> to memref<2xi32>
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<256x256xf32>
// CHECK:         call @mx_block_matmul_0_launch(%[[B0]], %[[B1]], %[[B2]], %[[B3]], %[[B4]], %[[OUT]])
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<256x256xf32> to tensor<256x256xf32>
// CHECK:         return %[[R]]
//
// CHECK-LABEL: func.func private @mx_block_matmul_0_launch(
// CHECK-SAME:      memref<256x256xf8E4M3FN>, memref<256x8xf8E8M0FNU>, memref<2x256x256xf8E4M3FN>, memref<2x256x8xf8E8M0FNU>, memref<2xi32>, memref<256x256xf32>)
// CHECK-SAME:      attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@mx_block_matmul_0,
// CHECK-SAME:        grid = [2, 2, 1], block = [384, 1, 1],
// CHECK-SAME:        dynamic_shared_memory = 186704,
// CHECK-SAME:        tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>, 2 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>],
// CHECK-SAME:        pointers = [1, 3, 5, 4]>}

// CHECK-LABEL: gpu.module @moe_kernels
// CHECK:         memref.global @moe_dynamic_smem : memref<0xi8, 3> {alignment = 1024 : i64}
// CHECK-LABEL:   gpu.func @mx_block_matmul_0(
// CHECK-SAME:        %[[TMA:[^:]*]]: !llvm.ptr, %[[TMB:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr<1>,
// CHECK-SAME:        %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %[[BLK:[^:]*]]: !llvm.ptr<1>) kernel
// CHECK-SAME:        nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK:           %[[DA:.*]] = builtin.unrealized_conversion_cast %[[TMA]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>
// CHECK:           %[[DB:.*]] = builtin.unrealized_conversion_cast %[[TMB]]
// CHECK:           memref.get_global @moe_dynamic_smem
// CHECK:           %[[BV:.*]] = memref.view {{.*}} to memref<10xi64, 3>
// CHECK:           %[[BARS:.*]] = builtin.unrealized_conversion_cast %[[BV]] : memref<10xi64, 3> to !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 10>
// Five full barriers (128 scale writers + thread 0's expect_tx) and five
// empty ones (256 consumer threads), alternating.
// CHECK-COUNT-10:  nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c{{129|256}}
// CHECK:           gpu.barrier
//
// Producer: the expert of the CTA's block picks the weight rows.
// CHECK:           nvvm.setmaxregister decrease 40
// CHECK:           %[[BIDX:.*]] = arith.divui %{{.*}}, %c128_i64 : i64
// CHECK:           %[[EP:.*]] = llvm.getelementptr %[[BLK]][%[[BIDX]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK:           %[[E:.*]] = llvm.load %[[EP]] invariant
// CHECK:           %[[EN:.*]] = arith.muli %[[E]], %c256_i32
// CHECK:           %[[ROWB:.*]] = arith.addi %[[EN]],
// CHECK:           scf.for
// CHECK:             nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK:             nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%{{.*}}], %c32768
// CHECK:             nvgpu.tma.async.load %[[DA]][%{{.*}}, %{{.*}}], %[[BARS]][%{{.*}}] to %{{.*}} : {{.*}} -> memref<128x128xi8, 3>
// CHECK:             %[[RB:.*]] = arith.index_cast %[[ROWB]] : i32 to index
// CHECK:             nvgpu.tma.async.load %[[DB]][%{{.*}}, %[[RB]]], %[[BARS]]
// CHECK:             llvm.load {{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-COUNT-4:     llvm.store {{.*}} : f32, !llvm.ptr<3>
// CHECK:             llvm.load {{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-COUNT-4:     llvm.store {{.*}} : f32, !llvm.ptr<3>
// CHECK:             nvgpu.mbarrier.arrive %[[BARS]]
//
// Consumers: per 32-block one fp8 wgmma into a fresh partial (scale-d =
// 0), then the previous partial is pinned and promoted.
// CHECK:           } else {
// CHECK:           nvvm.setmaxregister increase 232
// CHECK:           scf.for {{.*}} iter_args
// CHECK:             nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK-NEXT:        nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-NEXT:        nvvm.wgmma.commit.group.sync.aligned
// CHECK:             nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:             llvm.load {{.*}} : !llvm.ptr<3> -> vector<4xf32>
// CHECK:             llvm.inline_asm has_side_effects asm_dialect = att "", "=f,{{.*}},63"
// CHECK:             llvm.intr.fma
// CHECK:             nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             nvgpu.mbarrier.arrive %[[BARS]]
// CHECK:             llvm.inline_asm has_side_effects
// CHECK-COUNT-64:    llvm.intr.fma
// CHECK:             scf.yield
// CHECK-COUNT-32:  llvm.store {{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK:           gpu.return
func.func @mx_gemm(%lq: tensor<256x256xf8E4M3FN>, %ls: tensor<256x8xf8E8M0FNU>,
                   %rq: tensor<2x256x256xf8E4M3FN>, %rs: tensor<2x256x8xf8E8M0FNU>,
                   %blk: tensor<2xi32>) -> tensor<256x256xf32> {
  %r = moe.block_matmul
      lhs(%lq : tensor<256x256xf8E4M3FN> scales %ls : tensor<256x8xf8E8M0FNU>)
      rhs(%rq : tensor<2x256x256xf8E4M3FN> scales %rs : tensor<2x256x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64}
      -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// -----

// A K the fp8 tiles do not divide falls back to the bf16 path (512
// threads: two converting producer warpgroups).

// CHECK-LABEL: func.func private @mx_block_matmul_0_launch(
// CHECK-SAME:      moe.gpu_launch = #moe.gpu_launch<{{.*}} block = [512, 1, 1]
// CHECK-LABEL: gpu.func @mx_block_matmul_0(
// CHECK:         nvvm.wgmma.mma_async {{.*}}A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
func.func @k_not_tiled(%lq: tensor<128x96xf8E4M3FN>, %ls: tensor<128x3xf8E8M0FNU>,
                       %rq: tensor<1x128x96xf8E4M3FN>, %rs: tensor<1x128x3xf8E8M0FNU>,
                       %blk: tensor<1xi32>) -> tensor<128x128xf32> {
  %r = moe.block_matmul
      lhs(%lq : tensor<128x96xf8E4M3FN> scales %ls : tensor<128x3xf8E8M0FNU>)
      rhs(%rq : tensor<1x128x96xf8E4M3FN> scales %rs : tensor<1x128x3xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<128x128xf32>
  return %r : tensor<128x128xf32>
}
