// RUN: moe-opt %s -split-input-file -convert-moe-to-nvgpu="mma-path=bf16 persistent-gemms=false" -verify-diagnostics | FileCheck %s
// RUN: not moe-opt %s -convert-moe-to-nvgpu="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not moe-opt %s -convert-moe-to-nvgpu="mma-path=fp4" 2>&1 | FileCheck %s --check-prefix=PATH

// The bf16-dequantization MMA path of sm_90a (mma-path=bf16; the default
// path and the fp8 path have their own tests, convert-moe-to-nvgpu.mlir's
// -bf16-operands and -fp8 siblings). The MX block GEMM: S = 256 slots in 2
// blocks of 128, E = 2 experts, Nout = 256, K = 256.

// CHIP: error: unsupported GPU chip 'sm_80' (supported: sm_90a, sm_100a, sm_120a)
// PATH: error: unknown MMA path 'fp4' (expected fp8, bf16, bf16-operands or block-scale)

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
// 512 threads (two converting producer warpgroups, two consumers), 3 fp8
// stages and 2 bf16 stages: 224 KiB of tiles.
// CHECK-LABEL: func.func private @mx_block_matmul_0_launch(
// CHECK-SAME:      memref<256x256xf8E4M3FN>, memref<256x8xf8E8M0FNU>, memref<2x256x256xf8E4M3FN>, memref<2x256x8xf8E8M0FNU>, memref<2xi32>, memref<256x256xf32>)
// CHECK-SAME:      attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@mx_block_matmul_0,
// CHECK-SAME:        grid = [2, 2, 1], block = [512, 1, 1],
// CHECK-SAME:        dynamic_shared_memory = 230496,
// CHECK-SAME:        tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>, 2 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>],
// CHECK-SAME:        pointers = [1, 3, 5, 4]>}

// CHECK-LABEL: gpu.module @moe_kernels
// CHECK:         memref.global @moe_dynamic_smem : memref<0xi8, 3> {alignment = 1024 : i64}
// CHECK-LABEL:   gpu.func @mx_block_matmul_0(
// CHECK-SAME:        %[[TMA:[^:]*]]: !llvm.ptr, %[[TMB:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr<1>,
// CHECK-SAME:        %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %[[BLK:[^:]*]]: !llvm.ptr<1>) kernel
// CHECK-SAME:        nvvm.maxntid = array<i32: 512, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK:           %[[DA:.*]] = builtin.unrealized_conversion_cast %[[TMA]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>
// CHECK:           %[[DB:.*]] = builtin.unrealized_conversion_cast %[[TMB]]
// CHECK:           %[[BV:.*]] = memref.view {{.*}} to memref<10xi64, 3>
// CHECK:           %[[BARS:.*]] = builtin.unrealized_conversion_cast %[[BV]] : memref<10xi64, 3> to !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 10>
// full[s] (thread 0's expect_tx) and empty[s] (256 converters) for 3
// stages, then dqfull[d] (256 converters) and dqempty[d] (256 consumers).
// CHECK-COUNT-3:   nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c{{1|256}}{{(_[0-9]+)?}} :
// CHECK-COUNT-4:   nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c256
// CHECK:           gpu.barrier
//
// Producers: more registers; thread 0 issues the first two stages' TMA.
// CHECK:           nvvm.setmaxregister increase 144
// CHECK:           llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:           llvm.select %{{.*}} : i1, !llvm.ptr<1>
// CHECK:           nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%{{.*}}], %c32768
// CHECK:           nvgpu.tma.async.load %[[DA]]
// CHECK:           nvgpu.tma.async.load %[[DB]]
// CHECK:           nvgpu.tma.async.load %[[DA]]
// CHECK:           nvgpu.tma.async.load %[[DB]]
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (i32, i32, i32, i32, i32, i32, i32, i32)
// CHECK:             nvgpu.mbarrier.try_wait.parity
// CHECK:             nvgpu.tma.async.load %[[DA]]
// CHECK:             nvgpu.tma.async.load %[[DB]]
// CHECK:             nvgpu.mbarrier.try_wait.parity
// CHECK:             nvgpu.mbarrier.try_wait.parity
// The next tile's scale bytes (outside the matrix: 127).
// CHECK:             llvm.load %{{.*}} invariant {alignment = 1 : i64} : !llvm.ptr<1> -> i8
// One bf16 factor unless a scale byte of the warp exceeds 134 (e4m3).
// CHECK:             arith.cmpi ugt, %{{.*}}, %c134_i32
// CHECK:             nvvm.vote.sync any %c-1_i32
// CHECK:             scf.if
// CHECK:               llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK:               llvm.inline_asm asm_dialect = att "prmt.b32 $0, $1, 0, 0x1404;", "=r,r"
// CHECK:               arith.andi %{{.*}}, %c-2147450880_i32
// CHECK:               arith.shrui %{{.*}}, %c4_i32
// CHECK:               arith.andi %{{.*}}, %c133171184_i32
// CHECK:               llvm.fmul %{{.*}}, %{{.*}} : vector<2xbf16>
// CHECK:               llvm.fmul %{{.*}}, %{{.*}} : vector<2xbf16>
// CHECK:               llvm.inline_asm asm_dialect = att "prmt.b32 $0, $1, 0, 0x3424;"
// CHECK:               llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK:             } else {
// CHECK:               llvm.fmul %{{.*}}, %{{.*}} : vector<2xbf16>
// CHECK-NOT:           llvm.fmul
// CHECK:               llvm.inline_asm
// CHECK:             nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:             nvgpu.mbarrier.arrive %[[BARS]]
// CHECK:             nvgpu.mbarrier.arrive %[[BARS]]
// CHECK-NEXT:        scf.yield
//
// Consumers: the first tile peeled (its first wgmma starts the
// accumulator), 8 bf16 wgmmas per K tile.
// CHECK:           } else {
// CHECK:           nvvm.setmaxregister decrease 112
// CHECK:           nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK:           nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-7:   nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>]
// CHECK-NEXT:      nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:      nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:           scf.for
// CHECK:             nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK-COUNT-8:     nvvm.wgmma.mma_async {{.*}}, D[<f32>, <one>]
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:             nvgpu.mbarrier.arrive %[[BARS]]
// CHECK:             scf.yield
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// Whole tiles: no store guards.
// CHECK-NOT:       scf.if
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

// A transpose_rhs weight [E, K, N] (the recompute's Wgu, quantized along
// H) is transposed to [E, N, K], codes and scales. Partial tiles (N = 96,
// K = 64): the stores are guarded by the row and column limits, and e5m2
// codes move by 3 bits (mask 0x0FE00FE0) with one factor up to scale 142.

// CHECK-LABEL: func.func @transposed_e5m2(
// CHECK-SAME:      %[[RQ:[^:]*]]: tensor<1x64x96xf8E5M2>, %[[RS:[^:]*]]: tensor<1x2x96xf8E8M0FNU>
// CHECK:         %[[E0:.*]] = tensor.empty() : tensor<1x96x64xf8E5M2>
// CHECK:         %[[T0:.*]] = linalg.transpose ins(%[[RQ]] : tensor<1x64x96xf8E5M2>) outs(%[[E0]] : tensor<1x96x64xf8E5M2>) permutation = [0, 2, 1]
// CHECK:         %[[E1:.*]] = tensor.empty() : tensor<1x96x2xf8E8M0FNU>
// CHECK:         %[[T1:.*]] = linalg.transpose ins(%[[RS]] : tensor<1x2x96xf8E8M0FNU>) outs(%[[E1]] : tensor<1x96x2xf8E8M0FNU>) permutation = [0, 2, 1]
// CHECK:         bufferization.to_buffer %[[T0]] read_only
// CHECK:         bufferization.to_buffer %[[T1]] read_only
// CHECK:         call @mx_block_matmul_0_launch(
// CHECK-LABEL: func.func private @mx_block_matmul_0_launch(
// CHECK-SAME:      grid = [1, 1, 1]
// CHECK-LABEL:   gpu.func @mx_block_matmul_0(
// CHECK:           arith.cmpi ugt, %{{.*}}, %c142_i32
// CHECK:           arith.shrui %{{.*}}, %c3_i32
// CHECK:           arith.andi %{{.*}}, %c266342368_i32
// CHECK:           nvvm.setmaxregister decrease 112
// CHECK:           arith.cmpi ult, %{{.*}}, %c96_i32
// CHECK-NEXT:      scf.if
// CHECK-NEXT:        llvm.mlir.undef : vector<2xf32>
func.func @transposed_e5m2(%lq: tensor<128x64xf8E5M2>, %ls: tensor<128x2xf8E8M0FNU>,
                           %rq: tensor<1x64x96xf8E5M2>, %rs: tensor<1x2x96xf8E8M0FNU>,
                           %blk: tensor<1xi32>) -> tensor<128x96xf32> {
  %r = moe.block_matmul
      lhs(%lq : tensor<128x64xf8E5M2> scales %ls : tensor<128x2xf8E8M0FNU>)
      rhs(%rq : tensor<1x64x96xf8E5M2> scales %rs : tensor<1x2x96xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64, transpose_rhs}
      -> tensor<128x96xf32>
  return %r : tensor<128x96xf32>
}

// -----

// P3/P4: moe.expert_matmul contracts over each expert's slots. Both
// slot-major operands are transposed; grid z is the expert, whose slot
// range every thread counts from block_to_expert (shared-memory atomics);
// an expert without blocks stores zeros. M = 96 rows: guarded stores.

// CHECK-LABEL: func.func @expert(
// CHECK-SAME:      %[[LQ:[^:]*]]: tensor<512x96xf8E4M3FN>, %[[LS:[^:]*]]: tensor<16x96xf8E8M0FNU>, %[[RQ:[^:]*]]: tensor<512x128xf8E4M3FN>, %[[RS:[^:]*]]: tensor<16x128xf8E8M0FNU>
// CHECK:         linalg.transpose ins(%[[LQ]] : tensor<512x96xf8E4M3FN>) outs(%{{.*}} : tensor<96x512xf8E4M3FN>) permutation = [1, 0]
// CHECK:         linalg.transpose ins(%[[LS]] : tensor<16x96xf8E8M0FNU>) outs(%{{.*}} : tensor<96x16xf8E8M0FNU>) permutation = [1, 0]
// CHECK:         linalg.transpose ins(%[[RQ]] : tensor<512x128xf8E4M3FN>) outs(%{{.*}} : tensor<128x512xf8E4M3FN>) permutation = [1, 0]
// CHECK:         linalg.transpose ins(%[[RS]] : tensor<16x128xf8E8M0FNU>) outs(%{{.*}} : tensor<128x16xf8E8M0FNU>) permutation = [1, 0]
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<3x96x128xf32>
// CHECK:         call @mx_expert_matmul_0_launch(
// CHECK-LABEL: func.func private @mx_expert_matmul_0_launch(
// CHECK-SAME:      memref<96x512xf8E4M3FN>, memref<96x16xf8E8M0FNU>, memref<128x512xf8E4M3FN>, memref<128x16xf8E8M0FNU>, memref<4xi32>, memref<3x96x128xf32>)
// CHECK-SAME:      grid = [1, 1, 3]
// CHECK-LABEL:   gpu.func @mx_expert_matmul_0(
// CHECK:           llvm.store %c0_i32{{.*}} : i32, !llvm.ptr<3>
// CHECK:           llvm.store %c0_i32{{.*}} : i32, !llvm.ptr<3>
// CHECK:           gpu.barrier
// CHECK:           %[[EXPERT:.*]] = gpu.block_id  z
// CHECK:           scf.for %{{.*}} = %{{.*}} to %c4 step %c512 iter_args
// CHECK:             arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK:             arith.cmpi eq, %{{.*}}, %{{.*}} : i32
// CHECK:           llvm.atomicrmw add %{{.*}} monotonic : !llvm.ptr<3>, i32
// CHECK:           llvm.atomicrmw add %{{.*}} monotonic : !llvm.ptr<3>, i32
// CHECK:           gpu.barrier
// CHECK:           arith.muli %{{.*}}, %c128_i32{{(_[0-9]+)?}} : i32
// CHECK:           nvvm.setmaxregister increase 144
// CHECK:           nvvm.setmaxregister decrease 112
// CHECK:           scf.if
// CHECK:             llvm.mlir.zero
// CHECK:           } else {
// CHECK:             nvvm.wgmma.mma_async
// CHECK:           arith.muli %{{.*}}, %c12288_i64
func.func @expert(%lq: tensor<512x96xf8E4M3FN>, %ls: tensor<16x96xf8E8M0FNU>,
                  %rq: tensor<512x128xf8E4M3FN>, %rs: tensor<16x128xf8E8M0FNU>,
                  %blk: tensor<4xi32>) -> tensor<3x96x128xf32> {
  %r = moe.expert_matmul
      lhs(%lq : tensor<512x96xf8E4M3FN> scales %ls : tensor<16x96xf8E8M0FNU>)
      rhs(%rq : tensor<512x128xf8E4M3FN> scales %rs : tensor<16x128xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 128 : i64}
      -> tensor<3x96x128xf32>
  return %r : tensor<3x96x128xf32>
}

// -----

func.func @small_blocks(%lq: tensor<128x128xf8E4M3FN>, %ls: tensor<128x4xf8E8M0FNU>,
                        %rq: tensor<2x128x128xf8E4M3FN>, %rs: tensor<2x128x4xf8E8M0FNU>,
                        %blk: tensor<2xi32>) -> tensor<128x128xf32> {
  // expected-error @below {{'moe.block_matmul' op block size 64 is not a multiple of the bf16 tile's 128 rows}}
  %r = moe.block_matmul
      lhs(%lq : tensor<128x128xf8E4M3FN> scales %ls : tensor<128x4xf8E8M0FNU>)
      rhs(%rq : tensor<2x128x128xf8E4M3FN> scales %rs : tensor<2x128x4xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 64 : i64}
      -> tensor<128x128xf32>
  return %r : tensor<128x128xf32>
}

// -----

func.func @small_expert_blocks(%lq: tensor<128x64xf8E4M3FN>, %ls: tensor<4x64xf8E8M0FNU>,
                               %rq: tensor<128x64xf8E4M3FN>, %rs: tensor<4x64xf8E8M0FNU>,
                               %blk: tensor<4xi32>) -> tensor<2x64x64xf32> {
  // expected-error @below {{'moe.expert_matmul' op block size 32 is not a multiple of the bf16 tile's 128 slots}}
  %r = moe.expert_matmul
      lhs(%lq : tensor<128x64xf8E4M3FN> scales %ls : tensor<4x64xf8E8M0FNU>)
      rhs(%rq : tensor<128x64xf8E4M3FN> scales %rs : tensor<4x64xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x64x64xf32>
  return %r : tensor<2x64x64xf32>
}
