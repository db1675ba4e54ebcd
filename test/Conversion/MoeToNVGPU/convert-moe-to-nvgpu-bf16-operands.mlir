// RUN: moe-opt %s -split-input-file -convert-moe-to-nvgpu="persistent-gemms=false tma-store=false" -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: moe-opt %s -split-input-file -convert-moe-to-nvgpu="persistent-gemms=false tma-store=false in-place-tiles=true" -verify-diagnostics | FileCheck %s --check-prefix=TILES

// The bf16-operands MMA path of sm_90a, the default: every GEMM operand is
// first made bf16 with its contraction axis innermost by an operand kernel
// (@mx_operand_<n>: codes of an mx_quantize recomputed from its input, codes
// given as arguments dequantized, bf16 transposed when K is not innermost),
// then a GEMM kernel streams the bf16 tiles with TMA into bf16 wgmma (384
// threads: one TMA producer warpgroup, two consumer warpgroups, 6 stages).

// A block GEMM whose lhs [S, K] and rhs [E, N, K] come from mx_quantize
// along K (e4m3, RCEIL): two row-mode operand kernels (a lane quad per
// 32-element block, 8 elements a lane: 256 x 32 and 2 x 128 x 32 lanes,
// grid 32 of 256 threads) that round the quantizations' inputs, and the GEMM reads their bf16
// results. S = 256 slots in 2 blocks, N = 128, K = 256: 4 K tiles of 64.

// CHECK-LABEL: func.func @quantized_k_innermost(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<256x256xbf16>, %[[W:[^:]*]]: tensor<2x128x256xbf16>, %[[BLK:[^:]*]]: tensor<2xi32>)
// CHECK-NOT:     moe.block_matmul
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<256x256xbf16> to memref<256x256xbf16>
// CHECK:         %[[XO:.*]] = memref.alloc() : memref<256x256xbf16>
// CHECK:         call @mx_operand_0_launch(%[[XB]], %[[XO]]) : (memref<256x256xbf16>, memref<256x256xbf16>) -> ()
// CHECK:         %[[XV:.*]] = bufferization.to_tensor %[[XO]] restrict writable
// CHECK:         %[[WB:.*]] = bufferization.to_buffer %[[W]] read_only : tensor<2x128x256xbf16> to memref<2x128x256xbf16>
// CHECK:         %[[WO:.*]] = memref.alloc() : memref<2x128x256xbf16>
// CHECK:         call @mx_operand_1_launch(%[[WB]], %[[WO]]) : (memref<2x128x256xbf16>, memref<2x128x256xbf16>) -> ()
// CHECK:         %[[WV:.*]] = bufferization.to_tensor %[[WO]] restrict writable
// CHECK:         %[[A:.*]] = bufferization.to_buffer %[[XV]] read_only
// CHECK:         %[[B:.*]] = bufferization.to_buffer %[[WV]] read_only
// CHECK:         %[[E:.*]] = bufferization.to_buffer %[[BLK]] read_only
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<256x128xf32>
// CHECK:         call @block_matmul_2_launch(%[[A]], %[[B]], %[[E]], %[[OUT]]) : (memref<256x256xbf16>, memref<2x128x256xbf16>, memref<2xi32>, memref<256x128xf32>) -> ()
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<256x128xf32> to tensor<256x128xf32>
// CHECK-NOT:     moe.block_matmul
// CHECK:         return %[[R]]
//
// CHECK-LABEL: func.func private @mx_operand_0_launch(memref<256x256xbf16>, memref<256x256xbf16>)
// CHECK-SAME:      moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@mx_operand_0, grid = [32, 1, 1], block = [256, 1, 1], pointers = [0, 1]>}
// CHECK-LABEL: func.func private @mx_operand_1_launch(memref<2x128x256xbf16>, memref<2x128x256xbf16>)
// CHECK-SAME:      kernel = @moe_kernels::@mx_operand_1, grid = [32, 1, 1], block = [256, 1, 1], pointers = [0, 1]>
// Host arguments lhs, rhs, block_to_expert, result; kernel arguments tmapA,
// tmapB, c (host 3), blockToExpert (host 2). 6 stages of two 16 KiB panels,
// 16 bytes of counters, 12 barriers and 1 KiB of alignment slack.
// CHECK-LABEL: func.func private @block_matmul_2_launch(memref<256x256xbf16>, memref<2x128x256xbf16>, memref<2xi32>, memref<256x128xf32>)
// CHECK-SAME:      attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@block_matmul_2,
// CHECK-SAME:        grid = [1, 2, 1], block = [384, 1, 1],
// CHECK-SAME:        dynamic_shared_memory = 197744,
// CHECK-SAME:        tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>, 1 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>],
// CHECK-SAME:        pointers = [3, 2]>}
//
// The lhs operand kernel: lane `item` (8192 of them, exactly the grid's
// threads, so no lane branches) loads its 8 bf16 values (one 16-byte load),
// takes their amax on the magnitude bits, then the amax of its lane quad
// (two xor shuffles: the quad holds the 32-element block), derives the
// RCEIL scale byte from amax / 448, and rounds each pair with the hardware
// conversion (the first value in the upper byte), then back to f16x2
// exactly, times 2^(byte - 127), as bf16; one 16-byte store.
// CHECK-LABEL: gpu.func @mx_operand_0(
// CHECK-SAME:      %[[SRC:[^:]*]]: !llvm.ptr<1>, %[[DST:[^:]*]]: !llvm.ptr<1>) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>}
// CHECK:           %[[ITEM:.*]] = arith.addi
// CHECK:           %[[LAST:.*]] = arith.minui %[[ITEM]], %c8191_i64 : i64
// CHECK-NOT:       scf.if
// CHECK:           llvm.getelementptr %[[SRC]]
// CHECK-NEXT:      %[[V0:.*]] = llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK:           %[[E0:.*]] = llvm.extractelement %[[V0]][%{{.*}} : i32] : vector<8xbf16>
// CHECK-NEXT:      %[[X0:.*]] = arith.extf %[[E0]] : bf16 to f32
// CHECK:           %[[E1:.*]] = llvm.extractelement %[[V0]][%{{.*}} : i32] : vector<8xbf16>
// CHECK-NEXT:      %[[X1:.*]] = arith.extf %[[E1]] : bf16 to f32
// CHECK-NOT:       llvm.load
// CHECK:           %[[BITS0:.*]] = arith.bitcast %[[X0]] : f32 to i32
// CHECK-NEXT:      %[[MASK:.*]] = arith.constant 2147483647 : i32
// CHECK-NEXT:      %[[MAG0:.*]] = arith.andi %[[BITS0]], %[[MASK]] : i32
// CHECK:           arith.maxui %{{.*}}, %[[MAG0]] : i32
// CHECK-COUNT-7:   arith.maxui
// CHECK:           gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}}, %c32_i32 : f32
// CHECK:           arith.maxui
// CHECK:           gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}}, %c32_i32 : f32
// CHECK:           arith.maxui
// CHECK-NOT:       arith.maxui
// CHECK:           %[[EMAX:.*]] = arith.constant 4.480000e+02 : f32
// CHECK:           arith.divf %{{.*}}, %[[EMAX]] : f32
// CHECK:           %[[INV:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK:           %[[FACTOR:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT:      %[[Y0:.*]] = arith.mulf %[[X0]], %[[INV]] : f32
// CHECK-NEXT:      %[[Y1:.*]] = arith.mulf %[[X1]], %[[INV]] : f32
// CHECK-NEXT:      %[[P:.*]] = nvvm.convert.f32x2.to.f8x2 %[[Y1]], %[[Y0]] {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8>(f8E4M3FN)
// CHECK-NEXT:      %[[H:.*]] = nvvm.convert.f8x2.to.f16x2 %[[P]] : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK:           %[[H0:.*]] = llvm.extractelement %[[H]][%{{.*}} : i32] : vector<2xf16>
// CHECK-NEXT:      %[[F0:.*]] = arith.extf %[[H0]] : f16 to f32
// CHECK-NEXT:      %[[D0:.*]] = arith.mulf %[[F0]], %[[FACTOR]] : f32
// CHECK-NEXT:      arith.truncf %[[D0]] : f32 to bf16
// CHECK-COUNT-3:   nvvm.convert.f32x2.to.f8x2 %{{.*}}, %{{.*}} {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8>(f8E4M3FN)
// CHECK-NOT:       nvvm.convert.f32x2.to.f8x2
// CHECK:           llvm.getelementptr %[[DST]]
// CHECK-NEXT:      llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NOT:       llvm.store
// CHECK:           gpu.return
// CHECK-LABEL: gpu.func @mx_operand_1(
// CHECK-COUNT-2:     gpu.shuffle  xor
// CHECK-COUNT-4:     nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E4M3FN)
// CHECK:             llvm.store %{{.*}} : vector<8xbf16>, !llvm.ptr<1>
//
// The GEMM kernel.
// CHECK-LABEL: gpu.func @block_matmul_2(
// CHECK-SAME:      %[[TMA:[^:]*]]: !llvm.ptr, %[[TMB:[^:]*]]: !llvm.ptr, %[[C:[^:]*]]: !llvm.ptr<1>, %[[BLKP:[^:]*]]: !llvm.ptr<1>) kernel
// CHECK-SAME:      nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK:           %[[DA:.*]] = builtin.unrealized_conversion_cast %[[TMA]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>
// CHECK:           %[[DB:.*]] = builtin.unrealized_conversion_cast %[[TMB]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>
// CHECK:           %[[BV:.*]] = memref.view {{.*}} to memref<12xi64, 3>
// CHECK:           %[[BARS:.*]] = builtin.unrealized_conversion_cast %[[BV]] : memref<12xi64, 3> to !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 12>
// full[s] (thread 0's expect_tx) and empty[s] (the 2 consumer warpgroups,
// one arrival each by its first thread), 6 stages.
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c1{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c2{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c1{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c2{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c1{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c2{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c1{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c2{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c1{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c2{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c1{{(_[0-9]+)?}} :
// CHECK:           nvgpu.mbarrier.init %[[BARS]][%{{.*}}], %c2{{(_[0-9]+)?}} :
// CHECK-NOT:       nvgpu.mbarrier.init
// CHECK:           nvgpu.tma.prefetch.descriptor %[[DA]]
// CHECK-NEXT:      nvgpu.tma.prefetch.descriptor %[[DB]]
// CHECK:           gpu.barrier
// Producer warpgroup: fewer registers; thread 0 alone streams the 4 K tiles
// of its block's expert (rows expert * 128 + n0 of the rhs).
// CHECK:           nvvm.setmaxregister decrease 40
// CHECK:           llvm.getelementptr %[[BLKP]]
// CHECK:           scf.for %{{.*}} = %{{.*}} to %c4 step
// CHECK:             nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK:             nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%{{.*}}], %c32768
// CHECK:             nvgpu.tma.async.load %[[DA]]
// CHECK:             nvgpu.tma.async.load %[[DB]]
// Consumers: 4 k16 bf16 wgmmas per 64-wide K tile; the first starts the
// accumulator; each later tile releases the previous one's stage.
// CHECK:           nvvm.setmaxregister increase 232
// CHECK:           nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK:           nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-3:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NEXT:      nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:      nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:           scf.for %{{.*}} = %c1{{.*}} to %c4 step
// CHECK:             nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:     nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NEXT:        nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:             nvgpu.mbarrier.arrive %[[BARS]]
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// Whole tiles: 32 unguarded f32 pair stores per thread.
// CHECK-NOT:       scf.if
// CHECK-COUNT-32:  llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK-NOT:       llvm.store
// CHECK:           gpu.return
func.func @quantized_k_innermost(%x: tensor<256x256xbf16>,
                                 %w: tensor<2x128x256xbf16>,
                                 %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  %xq, %xs = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w
      {axis = 2 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<2x128x256xbf16> -> tensor<2x128x256xf8E4M3FN>, tensor<2x128x8xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%xq : tensor<256x256xf8E4M3FN> scales %xs : tensor<256x8xf8E8M0FNU>)
      rhs(%wq : tensor<2x128x256xf8E4M3FN> scales %ws : tensor<2x128x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// A transpose_rhs weight [E, K, N] quantized along K (axis 1) with e5m2 /
// FLOOR, with a #moe.gemm_config that reads the rhs K-major (no
// rhs_n_major): a column-mode operand kernel writes it as [E, N, K] through
// a shared-memory tile (one block per 32-row group and 256-column tile:
// 2 x 8 x 1 = 16 blocks). N = 96 is a partial tile: the kernel guards its
// columns, the GEMM its column stores.

// CHECK-LABEL: func.func @quantized_transposed(
// CHECK:         call @mx_operand_0_launch(%{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<256x256xbf16>) -> ()
// CHECK:         call @mx_operand_1_launch(%{{.*}}, %{{.*}}) : (memref<2x256x96xbf16>, memref<2x96x256xbf16>) -> ()
// CHECK:         call @block_matmul_2_launch(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<2x96x256xbf16>, memref<2xi32>, memref<256x96xf32>) -> ()
// CHECK-LABEL: func.func private @mx_operand_1_launch(memref<2x256x96xbf16>, memref<2x96x256xbf16>)
// CHECK-SAME:      kernel = @moe_kernels::@mx_operand_1, grid = [16, 1, 1], block = [256, 1, 1], pointers = [0, 1]>
// CHECK-LABEL: func.func private @block_matmul_2_launch(
// CHECK-SAME:      grid = [1, 2, 1]
// CHECK-SAME:      tensor_maps = [0 : {{.*}}, 1 : {{.*}}], pointers = [3, 2]>
//
// FLOOR for e5m2: the scale byte is amax's exponent minus 15, no division.
// CHECK-LABEL: gpu.func @mx_operand_0(
// CHECK-NOT:         arith.divf
// CHECK:             arith.addi %{{.*}}, %c-15_i32{{(_[0-9]+)?}} : i32
// CHECK-COUNT-4:     nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E5M2)
// CHECK:             llvm.store %{{.*}} : vector<8xbf16>, !llvm.ptr<1>
// Block -> (tile, group, batch); warp w reads rows w + 8 i, lane l the
// columns 8 l .. 8 l + 7 (below 96) with one 16-byte load, into the f32
// tile (two 16-byte stores); after the barrier, thread c reads its column
// of 32 rows and writes them as 4 x 16 bytes of output row c.
// CHECK-LABEL: gpu.func @mx_operand_1(
// CHECK-SAME:      workgroup(%[[TILE:[^ ]*]] : memref<8320xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK:           memref.extract_aligned_pointer_as_index %[[TILE]]
// CHECK-COUNT-4:   llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK:           llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK:           gpu.barrier
// CHECK:           arith.cmpi ult, %{{.*}}, %c96_i64{{(_[0-9]+)?}} : i64
// CHECK-NEXT:      scf.if
// CHECK-COUNT-32:    llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK-NOT:         llvm.load
// CHECK-NOT:         arith.divf
// CHECK:             arith.addi %{{.*}}, %c-15_i32{{(_[0-9]+)?}} : i32
// CHECK-COUNT-16:    nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E5M2)
// CHECK-NEXT:        nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E5M2) -> vector<2xf16>
// CHECK-COUNT-4:     llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NOT:         llvm.store
// CHECK:           gpu.return
//
// The GEMM reads the rhs rows of its block's expert (expert * 96 + n0) and
// stores only the columns below 96.
// CHECK-LABEL: gpu.func @block_matmul_2(
// CHECK:           nvvm.setmaxregister decrease 40
// CHECK:           arith.muli %{{.*}}, %c96_i32 : i32
// CHECK:           nvvm.setmaxregister increase 232
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           %[[INSIDE:.*]] = arith.cmpi ult, %{{.*}}, %c96_i32{{.*}} : i32
// CHECK-NEXT:      scf.if %[[INSIDE]] {
// CHECK:             llvm.store %{{.*}} : vector<2xf32>, !llvm.ptr<1>
// CHECK-NEXT:      }
func.func @quantized_transposed(%x: tensor<256x256xbf16>,
                                %w: tensor<2x256x96xbf16>,
                                %blk: tensor<2xi32>) -> tensor<256x96xf32> {
  %xq, %xs = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      : tensor<256x256xbf16> -> tensor<256x256xf8E5M2>, tensor<256x8xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w
      {axis = 1 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      : tensor<2x256x96xbf16> -> tensor<2x256x96xf8E5M2>, tensor<2x8x96xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%xq : tensor<256x256xf8E5M2> scales %xs : tensor<256x8xf8E8M0FNU>)
      rhs(%wq : tensor<2x256x96xf8E5M2> scales %ws : tensor<2x8x96xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64, transpose_rhs,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
           warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<256x96xf32>
  return %r : tensor<256x96xf32>
}

// -----

// The same GEMM with the configuration moe-gpu-kernel-config chooses
// (rhs_n_major): the operand kernel rounds the weight along K in place, a
// column pair per thread (2 x 8 x 48 = 768 pairs: 3 blocks), 32 4-byte
// stores of the pair; the GEMM reads [E * K, N] rows with two 64-column
// boxes of 64 K rows per stage, the expert's first K row at expert * 256,
// and issues the transposed-B wgmma (B layout row) with a descriptor whose
// LBO is one box (8192 bytes: 1 << 62 | 64 << 32 | 512 << 16, next to A's
// 1 << 62 | 64 << 32 | 1 << 16) and whose k16 steps advance 16 rows
// (2048 bytes, 128 units).

// CHECK-LABEL: func.func @n_major_rhs(
// CHECK:         call @mx_operand_1_launch(%{{.*}}, %{{.*}}) : (memref<2x256x96xbf16>, memref<2x256x96xbf16>) -> ()
// CHECK:         call @block_matmul_2_launch(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<2x256x96xbf16>, memref<2xi32>, memref<256x96xf32>) -> ()
// CHECK-LABEL: func.func private @mx_operand_1_launch(memref<2x256x96xbf16>, memref<2x256x96xbf16>)
// CHECK-SAME:      kernel = @moe_kernels::@mx_operand_1, grid = [3, 1, 1], block = [256, 1, 1], pointers = [0, 1]>
// CHECK-LABEL: func.func private @block_matmul_2_launch(
// CHECK-SAME:      tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, {{.*}}>, 1 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>], pointers = [3, 2]>
// CHECK-LABEL: gpu.func @mx_operand_1(
// CHECK-NOT:         workgroup
// CHECK-COUNT-32:    llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> vector<2xbf16>
// CHECK-COUNT-32:    nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E5M2)
// CHECK-COUNT-32:    llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// CHECK-NOT:         llvm.store
// CHECK:           gpu.return
// CHECK-LABEL: gpu.func @block_matmul_2(
//
// in-place-tiles=true: the weight goes through a shared-memory tile (a
// block per 32 rows and 256 columns: 2 x 8 blocks; warp w reads rows
// w + 8 i with 16-byte loads, then thread c rounds column c, 16 pair
// conversions, and stores its 32 values in place).
// TILES-LABEL: func.func private @mx_operand_1_launch(memref<2x256x96xbf16>, memref<2x256x96xbf16>)
// TILES-SAME:      grid = [16, 1, 1], block = [256, 1, 1], pointers = [0, 1]>
// TILES-LABEL: gpu.func @mx_operand_1(
// TILES-SAME:        workgroup(%{{.*}} : memref<8320xf32, #gpu.address_space<workgroup>>
// TILES-COUNT-4:     llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// TILES:             gpu.barrier
// TILES-COUNT-32:    llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// TILES-COUNT-16:    nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E5M2)
// TILES-COUNT-32:    llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// TILES-NOT:         llvm.store
// TILES:           gpu.return
// CHECK:           nvvm.setmaxregister decrease 40
// CHECK:           arith.muli %{{.*}}, %c256_i32 : i32
// CHECK-COUNT-2:   nvgpu.tma.async.load
// CHECK:           nvvm.setmaxregister increase 232
// CHECK:           arith.constant 4611686293305360384 : i64
// CHECK:           arith.constant 4611686293338849280 : i64
// CHECK:           nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
func.func @n_major_rhs(%x: tensor<256x256xbf16>, %w: tensor<2x256x96xbf16>,
                       %blk: tensor<2xi32>) -> tensor<256x96xf32> {
  %xq, %xs = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      : tensor<256x256xbf16> -> tensor<256x256xf8E5M2>, tensor<256x8xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w
      {axis = 1 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      : tensor<2x256x96xbf16> -> tensor<2x256x96xf8E5M2>, tensor<2x8x96xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%xq : tensor<256x256xf8E5M2> scales %xs : tensor<256x8xf8E8M0FNU>)
      rhs(%wq : tensor<2x256x96xf8E5M2> scales %ws : tensor<2x8x96xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64, transpose_rhs}
      -> tensor<256x96xf32>
  return %r : tensor<256x96xf32>
}

// -----

// An expert GEMM (contraction over slots, axis 0 of both operands): the lhs
// is f32 [S, M] quantized along the slots, the rhs codes [S, N] with their
// scales [S / 32, N] come as arguments (weights=mx style) and are
// dequantized (3 pointer arguments). The GEMM's config is given K-major
// (moe-gpu-kernel-config would read both operands as stored: see
// Inputs/expert-mn-major.mlir), so both operand kernels work in column
// mode and write [M, S] and [N, S]: the values through a shared-memory
// tile (8 row groups x 1 column tile: 8 blocks), the codes a column pair
// per thread (8 x 64 threads: 2 blocks). The GEMM's grid z is the expert.

// CHECK-LABEL: func.func @expert_f32_and_codes(
// CHECK-SAME:      %[[H:[^:]*]]: tensor<256x128xf32>, %[[DQ:[^:]*]]: tensor<256x128xf8E4M3FN>, %[[DS:[^:]*]]: tensor<8x128xf8E8M0FNU>, %[[BLK:[^:]*]]: tensor<2xi32>)
// CHECK:         %[[HB:.*]] = bufferization.to_buffer %[[H]] read_only : tensor<256x128xf32> to memref<256x128xf32>
// CHECK:         call @mx_operand_0_launch(%[[HB]], %{{.*}}) : (memref<256x128xf32>, memref<128x256xbf16>) -> ()
// CHECK:         %[[QB:.*]] = bufferization.to_buffer %[[DQ]] read_only
// CHECK:         %[[SB:.*]] = bufferization.to_buffer %[[DS]] read_only
// CHECK:         call @mx_operand_1_launch(%[[QB]], %[[SB]], %{{.*}}) : (memref<256x128xf8E4M3FN>, memref<8x128xf8E8M0FNU>, memref<128x256xbf16>) -> ()
// CHECK:         call @expert_matmul_2_launch(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<128x256xbf16>, memref<128x256xbf16>, memref<2xi32>, memref<2x128x128xf32>) -> ()
// CHECK-NOT:     moe.expert_matmul
// CHECK-LABEL: func.func private @mx_operand_0_launch(memref<256x128xf32>, memref<128x256xbf16>)
// CHECK-SAME:      kernel = @moe_kernels::@mx_operand_0, grid = [8, 1, 1], block = [256, 1, 1], pointers = [0, 1]>
// CHECK-LABEL: func.func private @mx_operand_1_launch(memref<256x128xf8E4M3FN>, memref<8x128xf8E8M0FNU>, memref<128x256xbf16>)
// CHECK-SAME:      kernel = @moe_kernels::@mx_operand_1, grid = [2, 1, 1], block = [256, 1, 1], pointers = [0, 1, 2]>
// CHECK-LABEL: func.func private @expert_matmul_2_launch(memref<128x256xbf16>, memref<128x256xbf16>, memref<2xi32>, memref<2x128x128xf32>)
// CHECK-SAME:      kernel = @moe_kernels::@expert_matmul_2, grid = [1, 1, 2], block = [384, 1, 1], dynamic_shared_memory = 197744,
// CHECK-SAME:      tensor_maps = [0 : {{.*}}, 1 : {{.*}}], pointers = [3, 2]>
//
// f32 rows, two 16-byte loads per lane and row; RCEIL on e4m3.
// CHECK-LABEL: gpu.func @mx_operand_0(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>) workgroup(
// CHECK-COUNT-8:     llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK-NOT:         arith.extf
// CHECK:           gpu.barrier
// CHECK:             arith.divf
// CHECK-COUNT-16:    nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E4M3FN)
// CHECK-COUNT-4:     llvm.store %{{.*}} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NOT:         arith.divf
// CHECK:           gpu.return
// Codes: 32 code pairs and one pair of scale bytes (scales[g, c], [g, c + 1]),
// no rounding, only the exact conversion and the scale factors.
// CHECK-LABEL: gpu.func @mx_operand_1(
// CHECK-SAME:      %[[CODES:[^:]*]]: !llvm.ptr<1>, %[[SCALES:[^:]*]]: !llvm.ptr<1>, %[[OUT:[^:]*]]: !llvm.ptr<1>) kernel
// CHECK-NOT:         nvvm.convert.f32x2.to.f8x2
// CHECK-COUNT-32:    llvm.load %{{.*}} invariant {alignment = 2 : i64} : !llvm.ptr<1> -> vector<2xi8>
// CHECK:             llvm.getelementptr %[[SCALES]]
// CHECK-NEXT:        llvm.load %{{.*}} invariant {alignment = 2 : i64} : !llvm.ptr<1> -> vector<2xi8>
// CHECK-NOT:         nvvm.convert.f32x2.to.f8x2
// CHECK-COUNT-32:    nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK-COUNT-8:     llvm.store %{{.*}} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NOT:         nvvm.convert.f32x2.to.f8x2
// CHECK:           gpu.return
//
// The expert GEMM: every thread counts the blocks of lower experts and of
// its grid z expert (shared-memory atomics); an expert without blocks
// takes a zero accumulator, the others run the K tiles of their slots; one
// epilogue stores either.
// CHECK-LABEL: gpu.func @expert_matmul_2(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[C:[^:]*]]: !llvm.ptr<1>, %[[BLKP:[^:]*]]: !llvm.ptr<1>) kernel
// CHECK:           gpu.barrier
// CHECK:           %[[Z:.*]] = gpu.block_id z
// CHECK:           scf.for %{{.*}} = %{{.*}} to %c2 step %c384
// CHECK:             llvm.getelementptr %[[BLKP]]
// CHECK:           llvm.atomicrmw add %{{.*}} monotonic : !llvm.ptr<3>, i32
// CHECK-NEXT:      llvm.atomicrmw add %{{.*}} monotonic : !llvm.ptr<3>, i32
// CHECK-NEXT:      gpu.barrier
// CHECK:           nvvm.setmaxregister decrease 40
// CHECK:           nvgpu.tma.async.load
// CHECK:           nvvm.setmaxregister increase 232
// CHECK:           %[[NONE:.*]] = arith.cmpi eq, %{{.*}}, %c0_i64 : i64
// CHECK-NEXT:      %[[ACC:.*]] = scf.if %[[NONE]] -> (!llvm.struct<(f32,
// CHECK-NEXT:        %[[ZERO:.*]] = llvm.mlir.zero : !llvm.struct<(f32,
// CHECK-NEXT:        scf.yield %[[ZERO]]
// CHECK-NEXT:      } else {
// CHECK:             nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT:         llvm.store
// CHECK:             scf.yield
// CHECK-NEXT:      }
// CHECK:           llvm.extractvalue %[[ACC]][0]
// CHECK-COUNT-32:  llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK-NOT:       llvm.store
func.func @expert_f32_and_codes(%h: tensor<256x128xf32>,
                                %dq: tensor<256x128xf8E4M3FN>,
                                %ds: tensor<8x128xf8E8M0FNU>,
                                %blk: tensor<2xi32>) -> tensor<2x128x128xf32> {
  %hq, %hs = moe.mx_quantize %h
      {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x128xf32> -> tensor<256x128xf8E4M3FN>, tensor<8x128xf8E8M0FNU>
  %r = moe.expert_matmul
      lhs(%hq : tensor<256x128xf8E4M3FN> scales %hs : tensor<8x128xf8E8M0FNU>)
      rhs(%dq : tensor<256x128xf8E4M3FN> scales %ds : tensor<8x128xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64,
        moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<2x128x128xf32>
  return %r : tensor<2x128x128xf32>
}

// -----

// bf16 without scales (quant = none): the K-innermost lhs goes to the GEMM
// as it is, and so does the transpose_rhs weight [E, K, N], which the
// kernel reads N-major (rhs_n_major): no operand kernel at all.

// CHECK-LABEL: func.func @bf16_transposed(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<256x256xbf16>, %[[W:[^:]*]]: tensor<2x256x128xbf16>, %[[BLK:[^:]*]]: tensor<2xi32>)
// CHECK:         %[[A:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK:         %[[B:.*]] = bufferization.to_buffer %[[W]] read_only
// CHECK:         call @block_matmul_0_launch(%[[A]], %[[B]], %{{.*}}, %{{.*}})
// CHECK-NOT:     call
// CHECK-NOT:   gpu.func @mx_operand
// CHECK-LABEL: gpu.func @block_matmul_0(
// CHECK-COUNT-4:     nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
func.func @bf16_transposed(%x: tensor<256x256xbf16>, %w: tensor<2x256x128xbf16>,
                           %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x256x128xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64, transpose_rhs} -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// A block GEMM with a bf16 bias [E, N] and K-innermost bf16 operands: no
// operand kernel at all; the bias is a fifth kernel argument (host 3, the
// result moves to host 4), and the epilogue adds bias[expert, n] (the
// tile's expert from block_to_expert), widened from a bf16 pair.

// CHECK-LABEL: func.func @bf16_bias(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<256x256xbf16>, %[[W:[^:]*]]: tensor<2x128x256xbf16>, %[[BLK:[^:]*]]: tensor<2xi32>, %[[BIAS:[^:]*]]: tensor<2x128xbf16>)
// CHECK:         %[[A:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK:         %[[B:.*]] = bufferization.to_buffer %[[W]] read_only
// CHECK:         %[[E:.*]] = bufferization.to_buffer %[[BLK]] read_only
// CHECK:         %[[BB:.*]] = bufferization.to_buffer %[[BIAS]] read_only : tensor<2x128xbf16> to memref<2x128xbf16>
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<256x128xf32>
// CHECK:         call @block_matmul_0_launch(%[[A]], %[[B]], %[[E]], %[[BB]], %[[OUT]])
// CHECK-LABEL: func.func private @block_matmul_0_launch(memref<256x256xbf16>, memref<2x128x256xbf16>, memref<2xi32>, memref<2x128xbf16>, memref<256x128xf32>)
// CHECK-SAME:      tensor_maps = [0 : {{.*}}, 1 : {{.*}}], pointers = [4, 2, 3]>
// CHECK-NOT:   gpu.func @mx_operand
// CHECK-LABEL: gpu.func @block_matmul_0(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[C:[^:]*]]: !llvm.ptr<1>, %[[BLKP:[^:]*]]: !llvm.ptr<1>, %[[BIASP:[^:]*]]: !llvm.ptr<1>) kernel
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           %[[EXP:.*]] = llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT:      %[[EXP64:.*]] = arith.extui %[[EXP]] : i32 to i64
// CHECK:           %[[ROW:.*]] = arith.muli %[[EXP64]], %c128_i64{{.*}} : i64
// CHECK-NEXT:      %[[BROW:.*]] = llvm.getelementptr %[[BIASP]][%[[ROW]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK:           %[[ACC0:.*]] = llvm.insertelement %{{.*}}, %{{.*}}[%{{.*}} : i32] : vector<2xf32>
// CHECK:           %[[ACC:.*]] = llvm.insertelement %{{.*}}, %[[ACC0]][%{{.*}} : i32] : vector<2xf32>
// CHECK:           %[[BP:.*]] = llvm.getelementptr %[[BROW]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK-NEXT:      %[[B16:.*]] = llvm.load %[[BP]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> vector<2xbf16>
// CHECK-NEXT:      %[[B32:.*]] = llvm.fpext %[[B16]] : vector<2xbf16> to vector<2xf32>
// CHECK-NEXT:      %[[SUM:.*]] = llvm.fadd %[[ACC]], %[[B32]] : vector<2xf32>
// CHECK:           llvm.store %[[SUM]], %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK-COUNT-31:  llvm.fadd
// CHECK-NOT:       llvm.fadd
// CHECK:           gpu.return
func.func @bf16_bias(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
                     %blk: tensor<2xi32>, %bias: tensor<2x128xbf16>)
    -> tensor<256x128xf32> {
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      bias(%bias : tensor<2x128xbf16>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// The same with an f32 bias: f32 pairs, added as they are.

// CHECK-LABEL: func.func private @block_matmul_0_launch(memref<256x256xbf16>, memref<2x128x256xbf16>, memref<2xi32>, memref<2x128xf32>, memref<256x128xf32>)
// CHECK-SAME:      pointers = [4, 2, 3]>
// CHECK-LABEL: gpu.func @block_matmul_0(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %[[BIASP:[^:]*]]: !llvm.ptr<1>) kernel
// CHECK:           %[[BROW:.*]] = llvm.getelementptr %[[BIASP]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK:           %[[ACC0:.*]] = llvm.insertelement %{{.*}}, %{{.*}}[%{{.*}} : i32] : vector<2xf32>
// CHECK:           %[[ACC:.*]] = llvm.insertelement %{{.*}}, %[[ACC0]][%{{.*}} : i32] : vector<2xf32>
// CHECK:           %[[BP:.*]] = llvm.getelementptr %[[BROW]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK-NEXT:      %[[B32:.*]] = llvm.load %[[BP]] invariant {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
// CHECK-NEXT:      %[[SUM:.*]] = llvm.fadd %[[ACC]], %[[B32]] : vector<2xf32>
// CHECK:           %[[CP:.*]] = llvm.getelementptr
// CHECK-NEXT:      llvm.store %[[SUM]], %[[CP]] {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK-NOT:       llvm.fpext
// CHECK:           gpu.return
func.func @f32_bias(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
                    %blk: tensor<2xi32>, %bias: tensor<2x128xf32>)
    -> tensor<256x128xf32> {
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      bias(%bias : tensor<2x128xf32>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// Two GEMMs of one block that share a quantized operand: one operand
// kernel, whose result both GEMM launches read.

// CHECK-LABEL: func.func @shared_operand(
// CHECK:         call @mx_operand_0_launch(
// CHECK:         %[[XV:.*]] = bufferization.to_tensor
// CHECK:         %[[A0:.*]] = bufferization.to_buffer %[[XV]] read_only
// CHECK:         call @block_matmul_1_launch(%[[A0]],
// CHECK-NOT:     call @mx_operand
// CHECK:         %[[A1:.*]] = bufferization.to_buffer %[[XV]] read_only
// CHECK:         call @block_matmul_2_launch(%[[A1]],
// CHECK-LABEL: gpu.module @moe_kernels
// CHECK-COUNT-1: gpu.func @mx_operand_
// CHECK-NOT:     gpu.func @mx_operand_
func.func @shared_operand(%x: tensor<256x256xbf16>, %w0: tensor<2x128x256xbf16>,
                          %w1: tensor<2x128x256xbf16>, %blk: tensor<2xi32>)
    -> (tensor<256x128xf32>, tensor<256x128xf32>) {
  %xq, %xs = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
  %r0 = moe.block_matmul
      lhs(%xq : tensor<256x256xf8E4M3FN> scales %xs : tensor<256x8xf8E8M0FNU>)
      rhs(%w0 : tensor<2x128x256xbf16>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  %r1 = moe.block_matmul
      lhs(%xq : tensor<256x256xf8E4M3FN> scales %xs : tensor<256x8xf8E8M0FNU>)
      rhs(%w1 : tensor<2x128x256xbf16>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  return %r0, %r1 : tensor<256x128xf32>, tensor<256x128xf32>
}

// -----

// Rows of a moe.gather_rows are read through the token ids by the operand
// kernels (row mode for the block GEMM; in place for the expert GEMM, which
// reads its lhs M-major: a column pair per thread, 32 slots of the block,
// no shared-memory tile): the gathered copy and the quantizations are
// gone. Padding ids (-1) and ids out of range read a zero row (unsigned
// compare with T = 48).

// CHECK-LABEL: func.func @gathered(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<48x64xbf16>, %[[TOK:[^:]*]]: tensor<128xi32>
// CHECK-NOT:     moe.gather_rows
// CHECK-NOT:     moe.mx_quantize
// CHECK:         call @mx_operand_0_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<48x64xbf16>, memref<128xi32>, memref<128x64xbf16>) -> ()
// CHECK:         call @block_matmul_2_launch(
// CHECK:         call @mx_operand_3_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<48x64xbf16>, memref<128xi32>, memref<128x64xbf16>) -> ()
// CHECK:         call @expert_matmul_5_launch(
// CHECK-LABEL: func.func private @mx_operand_0_launch(
// CHECK-SAME:      pointers = [0, 1, 2]>
// CHECK-LABEL:   gpu.func @mx_operand_0(
// CHECK:           llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:           arith.cmpi ult, %{{.*}}, %c48_i64 : i64
// CHECK-LABEL:   gpu.func @mx_operand_3(
// CHECK-NOT:       gpu.barrier
// CHECK-COUNT-32:  arith.cmpi ult, %{{.*}}, %c48_i64{{(_[0-9]+)?}} : i64
// CHECK-NOT:       gpu.barrier
// CHECK:           gpu.return
// (in-place-tiles=true: warp w reads slots w + 8 i through their ids into
// the tile, then a column a thread is stored in place.)
// TILES-LABEL:   func.func @gathered(
// TILES-LABEL:   gpu.func @mx_operand_3(
// TILES-SAME:        workgroup(
// TILES-NOT:       gpu.barrier
// TILES-COUNT-4:   arith.cmpi ult, %{{.*}}, %c48_i64{{(_[0-9]+)?}} : i64
// TILES:           gpu.barrier
// TILES-COUNT-32:  llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// TILES:           gpu.return
#mx = #moe.mx<f8E4M3FN, block = 32, rule = rceil>
func.func @gathered(%x: tensor<48x64xbf16>, %tok: tensor<128xi32>,
                    %w: tensor<1x96x64xbf16>, %b: tensor<128x96xbf16>,
                    %blk: tensor<1xi32>)
    -> (tensor<128x96xf32>, tensor<1x64x96xf32>) {
  %rows = moe.gather_rows %x[%tok]
      : tensor<48x64xbf16>, tensor<128xi32> -> tensor<128x64xbf16>
  %q, %s = moe.mx_quantize %rows {axis = 1 : i64, quant = #mx}
      : tensor<128x64xbf16> -> tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w {axis = 2 : i64, quant = #mx}
      : tensor<1x96x64xbf16> -> tensor<1x96x64xf8E4M3FN>, tensor<1x96x2xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%q : tensor<128x64xf8E4M3FN> scales %s : tensor<128x2xf8E8M0FNU>)
      rhs(%wq : tensor<1x96x64xf8E4M3FN> scales %ws : tensor<1x96x2xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<128x96xf32>
  %tq, %ts = moe.mx_quantize %rows {axis = 0 : i64, quant = #mx}
      : tensor<128x64xbf16> -> tensor<128x64xf8E4M3FN>, tensor<4x64xf8E8M0FNU>
  %bq, %bs = moe.mx_quantize %b {axis = 0 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  %e = moe.expert_matmul
      lhs(%tq : tensor<128x64xf8E4M3FN> scales %ts : tensor<4x64xf8E8M0FNU>)
      rhs(%bq : tensor<128x96xf8E4M3FN> scales %bs : tensor<4x96xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<1x64x96xf32>
  return %r, %e : tensor<128x96xf32>, tensor<1x64x96xf32>
}

// -----

// The same codes with different scales are two operands: each GEMM gets
// its own dequantization.

// CHECK-LABEL: func.func @same_codes_other_scales(
// CHECK-SAME:      %[[Q:[^:]*]]: tensor<128x64xf8E4M3FN>, %[[S0:[^:]*]]: tensor<128x2xf8E8M0FNU>, %[[S1:[^:]*]]: tensor<128x2xf8E8M0FNU>
// CHECK:         %[[B0:.*]] = bufferization.to_buffer %[[S0]]
// CHECK:         call @mx_operand_0_launch(%{{.*}}, %[[B0]], %{{.*}})
// CHECK:         call @block_matmul_1_launch(
// CHECK:         %[[B1:.*]] = bufferization.to_buffer %[[S1]]
// CHECK:         call @mx_operand_2_launch(%{{.*}}, %[[B1]], %{{.*}})
// CHECK:         call @block_matmul_3_launch(
func.func @same_codes_other_scales(%q: tensor<128x64xf8E4M3FN>,
    %s0: tensor<128x2xf8E8M0FNU>, %s1: tensor<128x2xf8E8M0FNU>,
    %w: tensor<1x96x64xbf16>, %blk: tensor<1xi32>)
    -> (tensor<128x96xf32>, tensor<128x96xf32>) {
  %r0 = moe.block_matmul lhs(%q : tensor<128x64xf8E4M3FN> scales %s0 : tensor<128x2xf8E8M0FNU>)
      rhs(%w : tensor<1x96x64xbf16>) experts(%blk : tensor<1xi32>)
      {block_size = 128 : i64} -> tensor<128x96xf32>
  %r1 = moe.block_matmul lhs(%q : tensor<128x64xf8E4M3FN> scales %s1 : tensor<128x2xf8E8M0FNU>)
      rhs(%w : tensor<1x96x64xbf16>) experts(%blk : tensor<1xi32>)
      {block_size = 128 : i64} -> tensor<128x96xf32>
  return %r0, %r1 : tensor<128x96xf32>, tensor<128x96xf32>
}
// -----

// A CTA's 128 rows must stay inside one block.

func.func @block_size_64(%x: tensor<256x256xbf16>, %w: tensor<4x128x256xbf16>,
                         %blk: tensor<4xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op block size 64 is not a multiple of the bf16-operands tile's 128 rows}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<4x128x256xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 64 : i64} -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// An expert GEMM's 64-slot K tiles must stay inside one block.

func.func @expert_block_size_32(%a: tensor<256x128xbf16>,
                                %b: tensor<256x128xbf16>,
                                %blk: tensor<8xi32>) -> tensor<2x128x128xf32> {
  // expected-error @+1 {{'moe.expert_matmul' op block size 32 is not a multiple of the bf16-operands tile's 64 slots}}
  %r = moe.expert_matmul lhs(%a : tensor<256x128xbf16>)
      rhs(%b : tensor<256x128xbf16>) experts(%blk : tensor<8xi32>)
      {block_size = 32 : i64} -> tensor<2x128x128xf32>
  return %r : tensor<2x128x128xf32>
}

// -----

// A transposed operand needs column pairs: the expert lhs [S, M] with an
// odd M = 33 (the op verifier accepts it; the operand kernel check rejects
// it).

func.func @odd_columns(%a: tensor<128x33xbf16>, %b: tensor<128x128xbf16>,
                       %blk: tensor<1xi32>) -> tensor<2x33x128xf32> {
  // expected-error @+1 {{'moe.expert_matmul' op GEMM operand [1, 128, 33] needs an even number of columns to be written transposed}}
  %r = moe.expert_matmul lhs(%a : tensor<128x33xbf16>)
      rhs(%b : tensor<128x128xbf16>) experts(%blk : tensor<1xi32>)
      {block_size = 128 : i64} -> tensor<2x33x128xf32>
  return %r : tensor<2x33x128xf32>
}

// -----

// A transpose_rhs bf16 weight whose contraction axis K = 40 is not a
// multiple of 32 (whole 32-row blocks per thread); the K-innermost lhs
// [S, 40] needs no operand kernel and passes.

func.func @contraction_40(%x: tensor<256x40xbf16>, %w: tensor<2x40x128xbf16>,
                          %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op GEMM operand [2, 40, 128] needs a multiple of 32 along its contraction axis}}
  %r = moe.block_matmul lhs(%x : tensor<256x40xbf16>)
      rhs(%w : tensor<2x40x128xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64, transpose_rhs} -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// K-innermost bf16 operands that no kernel touches still need TMA rows of
// whole 16 bytes.

func.func @contraction_36(%x: tensor<256x36xbf16>, %w: tensor<2x128x36xbf16>,
                          %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op GEMM contraction size 36 is not a multiple of 8 (16-byte rows of bf16)}}
  %r = moe.block_matmul lhs(%x : tensor<256x36xbf16>)
      rhs(%w : tensor<2x128x36xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64} -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// An expert GEMM with a #moe.gemm_config that reads both slot-major operands
// as stored (lhs_m_major, rhs_n_major; not chosen by moe-gpu-kernel-config
// yet, which the H200 has to validate first): both operand kernels round
// along the slots in place (no shared-memory tile, no transpose, [256, 128]
// out), and the GEMM loads two 64-column boxes of 64 slot rows per operand
// and stage, from the expert's first slot, and issues the transposed-A,
// transposed-B wgmma (A col, B row).

// CHECK-LABEL: func.func @expert_mn_major(
// CHECK:         call @mx_operand_0_launch(%{{.*}}, %{{.*}}) : (memref<256x128xbf16>, memref<256x128xbf16>) -> ()
// CHECK:         call @mx_operand_1_launch(%{{.*}}, %{{.*}}) : (memref<256x128xbf16>, memref<256x128xbf16>) -> ()
// CHECK:         call @expert_matmul_2_launch(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<256x128xbf16>, memref<256x128xbf16>, memref<2xi32>, memref<2x128x128xf32>) -> ()
// CHECK-LABEL: func.func private @expert_matmul_2_launch(
// CHECK-SAME:      tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>, 1 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>]
// CHECK-LABEL: gpu.func @mx_operand_0(
// CHECK-NOT:         workgroup
// CHECK-COUNT-32:    llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// CHECK-LABEL: gpu.func @expert_matmul_2(
// CHECK:           nvvm.setmaxregister decrease 40
// CHECK-COUNT-4:   nvgpu.tma.async.load {{.*}} -> memref<64x128xi8, 3>
// CHECK:           nvvm.setmaxregister increase 232
// CHECK:           nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
func.func @expert_mn_major(%a: tensor<256x128xbf16>, %b: tensor<256x128xbf16>,
                           %blk: tensor<2xi32>) -> tensor<2x128x128xf32> {
  %aq, %as = moe.mx_quantize %a
      {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x128xbf16> -> tensor<256x128xf8E4M3FN>, tensor<8x128xf8E8M0FNU>
  %bq, %bs = moe.mx_quantize %b
      {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x128xbf16> -> tensor<256x128xf8E4M3FN>, tensor<8x128xf8E8M0FNU>
  %r = moe.expert_matmul
      lhs(%aq : tensor<256x128xf8E4M3FN> scales %as : tensor<8x128xf8E8M0FNU>)
      rhs(%bq : tensor<256x128xf8E4M3FN> scales %bs : tensor<8x128xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
           warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true,
           lhs_m_major = true>}
      -> tensor<2x128x128xf32>
  return %r : tensor<2x128x128xf32>
}

// -----

// A configuration set by hand that the kernel cannot run: an N-major rhs
// whose K tile would run into the next expert's rows, and an M-major lhs of
// a block GEMM (its lhs is K-major slot rows).

func.func @n_major_partial_k(%x: tensor<256x96xbf16>, %w: tensor<2x96x128xbf16>,
                             %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op an N-major rhs needs the bf16-operands MMA path, N a multiple of 8 and, for a block GEMM, K a multiple of the tile K 64, got 256x128x96}}
  %r = moe.block_matmul lhs(%x : tensor<256x96xbf16>)
      rhs(%w : tensor<2x96x128xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64, transpose_rhs,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
           warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

func.func @m_major_block(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
                         %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op an M-major lhs needs an expert GEMM (or a block GEMM's transposed product) on the bf16-operands MMA path with M a multiple of 8, got 256x128x256}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
           warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}
