// RUN: moe-opt %s -split-input-file -convert-moe-to-nvgpu="persistent-gemms=false tma-store=false" -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="rhs-codes=true tma-store=false" | FileCheck %s --check-prefix=CONFIG
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="rhs-codes=true act-epilogue=true tma-store=false" | FileCheck %s --check-prefix=CONFIG-EPI
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --gemm M=256,N=256,K=256,G=1 --print-layer-ir > %t.gemm.mlir
// RUN: moe-opt %t.gemm.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root rhs-codes=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.gemm.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.gemm.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.ptx -o %t.gemm.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root rhs-codes=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: FileCheck %s --check-prefix=P1 < %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config rhs_codes: the GEMM reads its weight as FP8 codes with
// E8M0 scales (half the bytes of the bf16 values through L2, and half the
// operand kernel's writes), and warps 1-3 of the producer warpgroup
// dequantize each K tile into the swizzled bf16 tile the MMAs read. The
// values are the bf16 operand kernel's, so the results are the same bits
// (on the H200: scripts/device/gpu-suite.sh rhs-codes).
//
// The weight [E, N, K] = [2, 128, 256] that an mx_quantize along K makes:
// its operand kernel writes the codes and the scale bytes, K tile (64) by
// K tile, two bytes per row: [4 K tiles * 256 rows / 8, 16]. The GEMM
// takes a third tensor map over them, 16 x 16 boxes (the tile's 128 rows).
// Shared memory: 5 TMA stages of 16 KiB of lhs, 8 KiB of codes and 256
// bytes of scale bytes, and the converters' 2 bf16 rhs tiles of 16 KiB;
// 14 barriers (full and empty per stage, dequantized and free per bf16
// tile).

// CHECK-LABEL: func.func @rhs_codes(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<256x256xbf16>, %[[W:[^:]*]]: tensor<2x128x256xbf16>, %[[BLK:[^:]*]]: tensor<2xi32>)
// CHECK:         call @mx_operand_0_launch(
// CHECK:         %[[WB:.*]] = bufferization.to_buffer %[[W]] read_only
// CHECK:         %[[CODES:.*]] = memref.alloc() : memref<2x128x256xf8E4M3FN>
// CHECK:         %[[SCALES:.*]] = memref.alloc() : memref<128x16xf8E8M0FNU>
// CHECK:         call @mx_operand_1_launch(%[[WB]], %[[CODES]], %[[SCALES]]) : (memref<2x128x256xbf16>, memref<2x128x256xf8E4M3FN>, memref<128x16xf8E8M0FNU>) -> ()
// CHECK:         call @block_matmul_2_launch(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<2x128x256xf8E4M3FN>, memref<2xi32>, memref<128x16xf8E8M0FNU>, memref<256x128xf32>) -> ()
// CHECK-LABEL: func.func private @mx_operand_1_launch(
// CHECK-SAME:      kernel = @moe_kernels::@mx_operand_1, grid = [32, 1, 1], block = [256, 1, 1], pointers = [0, 1, 2], results = 2>
// CHECK-LABEL: func.func private @block_matmul_2_launch(
// CHECK-SAME:      dynamic_shared_memory = 158080,
// CHECK-SAME:      tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>,
// CHECK-SAME:                     1 : !nvgpu.tensormap.descriptor<tensor = memref<128x64xi8, 3>, swizzle = none, l2promo = l2promo_256b, oob = zero, interleave = none>,
// CHECK-SAME:                     3 : !nvgpu.tensormap.descriptor<tensor = memref<16x16xi8, 3>, swizzle = none, l2promo = l2promo_256b, oob = zero, interleave = none>],
// CHECK-SAME:      pointers = [4, 2]>
//
// The operand kernel: the lane quad's amax, then each lane's 8 codes as one
// 8-byte store, and the quad's first lane stores the block's scale byte.
// CHECK-LABEL: gpu.func @mx_operand_1(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr<1>, %[[OUT:[^:]*]]: !llvm.ptr<1>, %[[OUTS:[^:]*]]: !llvm.ptr<1>)
// CHECK-COUNT-2:   gpu.shuffle  xor
// CHECK-COUNT-4:   nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E4M3FN)
// CHECK-NOT:       nvvm.convert.f8x2.to.f16x2
// CHECK:           llvm.getelementptr %[[OUT]]
// CHECK-NEXT:      llvm.store %{{.*}} {alignment = 8 : i64} : vector<8xi8>, !llvm.ptr<1>
// CHECK:           scf.if
// CHECK:           llvm.getelementptr %[[OUTS]]
// CHECK-NEXT:      llvm.store %{{.*}} {alignment = 1 : i64} : i8, !llvm.ptr<1>
// CHECK:           gpu.return
//
// The GEMM: the scale bytes' map is the third argument; 96 arrivals (the
// converters) on each dequantized barrier, 2 (the consumer warpgroups) on
// each free one.
// CHECK-LABEL: gpu.func @block_matmul_2(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[TMS:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>) kernel
// CHECK:           builtin.unrealized_conversion_cast %[[TMS]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<16x16xi8, 3>
// CHECK:           nvgpu.mbarrier.init %{{.*}}[%c10], %c96 : <memorySpace = #gpu.address_space<workgroup>, num_barriers = 14>
// CHECK:           nvgpu.mbarrier.init %{{.*}}[%c12], %c2{{.*}}
// CHECK:           nvgpu.mbarrier.init %{{.*}}[%c11], %c96{{.*}}
// CHECK:           nvgpu.mbarrier.init %{{.*}}[%c13], %c2{{.*}}
// The producer thread: one expect_tx of 16384 + 8192 + 256 bytes, then the
// lhs tile, the scale bytes and the codes.
// CHECK:           nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c24832
// CHECK:           nvgpu.tma.async.load {{.*}} : <tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b
// CHECK:           nvgpu.tma.async.load {{.*}} : <tensor = memref<16x16xi8, 3>, swizzle = none
// CHECK:           nvgpu.tma.async.load {{.*}} : <tensor = memref<128x64xi8, 3>, swizzle = none
// The converters: wait for the stage and for a free bf16 tile, then 6
// rounds of a 16-byte code chunk and its scale byte, decoded with one or
// two bf16 factors (a vote of the warp), two 16-byte stores; fence for the
// async proxy, arrive.
// CHECK:           scf.for
// CHECK:             nvgpu.mbarrier.try_wait.parity
// CHECK:             nvgpu.mbarrier.try_wait.parity
// CHECK:             scf.for %{{.*}} = %{{.*}} to %c6_i32
// CHECK:               llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK:               llvm.load %{{.*}} {alignment = 1 : i64} : !llvm.ptr<3> -> i8
// CHECK:               nvvm.vote.sync  any
// CHECK:               "prmt.b32 $0, $1, 0, 0x1404;"
// CHECK:               llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK:             nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:             nvgpu.mbarrier.arrive
// The consumers wait for the stage (the lhs tile) and for the bf16 rhs
// tile of the same K tile (the dequantized barriers from 10 on).
// CHECK:           nvgpu.mbarrier.try_wait.parity
// CHECK:           arith.constant 10 : index
// CHECK-NEXT:      arith.addi
// CHECK-NEXT:      arith.constant 1000000
// CHECK-NEXT:      nvgpu.mbarrier.try_wait.parity
func.func @rhs_codes(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
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
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5,
           dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232],
           rhs_codes = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// Configurations set by hand that no rhs_codes kernel runs: pre-quantized
// codes (their scales are in the op's layout, not the kernel's), a
// transpose_rhs weight [E, K, N], an expert GEMM (its rhs is slot-major),
// and a producer warpgroup left 24 registers.

func.func @given_codes(%x: tensor<256x256xbf16>, %wq: tensor<2x128x256xf8E4M3FN>,
                       %ws: tensor<2x128x8xf8E8M0FNU>,
                       %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op rhs_codes needs an rhs that an mx_quantize along its last axis makes}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%wq : tensor<2x128x256xf8E4M3FN> scales %ws : tensor<2x128x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5,
           dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232],
           rhs_codes = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

func.func @transposed(%x: tensor<256x256xbf16>, %w: tensor<2x256x128xbf16>,
                      %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  %wq, %ws = moe.mx_quantize %w
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<2x256x128xbf16> -> tensor<2x256x128xf8E4M3FN>, tensor<2x8x128xf8E8M0FNU>
  // expected-error @+1 {{'moe.block_matmul' op rhs_codes needs an rhs stored with K contiguous}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%wq : tensor<2x256x128xf8E4M3FN> scales %ws : tensor<2x8x128xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64, transpose_rhs,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5,
           dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232],
           rhs_codes = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

func.func @expert(%a: tensor<256x128xbf16>, %b: tensor<256x128xbf16>,
                  %blk: tensor<2xi32>) -> tensor<2x128x128xf32> {
  // expected-error @+1 {{'moe.expert_matmul' op rhs_codes needs an rhs stored with K contiguous}}
  %r = moe.expert_matmul lhs(%a : tensor<256x128xbf16>)
      rhs(%b : tensor<256x128xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5,
           dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232],
           rhs_codes = true>}
      -> tensor<2x128x128xf32>
  return %r : tensor<2x128x128xf32>
}

// -----

func.func @few_registers(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
                         %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  %wq, %ws = moe.mx_quantize %w
      {axis = 2 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<2x128x256xbf16> -> tensor<2x128x256xf8E4M3FN>, tensor<2x128x8xf8E8M0FNU>
  // expected-error @+1 {{'moe.block_matmul' op rhs_codes needs an rhs of f8E4M3FN or f8E5M2 codes, K a multiple of 32, N of 8 and one producer warpgroup of at least 40 registers}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%wq : tensor<2x128x256xf8E4M3FN> scales %ws : tensor<2x128x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5,
           dequant_stages = 2, warpgroups = [1, 2], registers = [24, 240],
           rhs_codes = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// moe-gpu-kernel-config with rhs-codes: P1 (the down weight) and P2 (the
// gate/up weight along 2I) read their weights as codes, with 2 bf16 tiles:
// P1's kernel (128x128 at I = 128) with its 6 stages, P2's with its 4; with
// act-epilogue, P1's ping-pong kernel with 40 producer registers (the
// consumers give up 8); the recompute GEMM reads its weight N-major and the
// expert GEMMs have no weight: unchanged.
// CONFIG:       moe.block_matmul
// CONFIG-SAME:    registers = [48, 224], rhs_n_major = true, lhs_gather = true>
// CONFIG:       moe.block_matmul
// CONFIG-SAME:    stages = 6, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], persistent = true, rhs_codes = true>
// CONFIG:       moe.block_matmul
// CONFIG-SAME:    stages = 4, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], persistent = true, rhs_codes = true>
// CONFIG:       moe.expert_matmul
// CONFIG-NOT:     rhs_codes
// CONFIG:       moe.expert_matmul
// CONFIG-NOT:     rhs_codes
// CONFIG-EPI:   moe.block_matmul
// CONFIG-EPI:   moe.block_matmul
// CONFIG-EPI-SAME: stages = 6, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], persistent = true, pingpong = true, rhs_codes = true>

// The operand kernel's codes and scale byte stores, then the GEMM's
// converters (setmaxnreg 40, the chunk and its scale byte from shared
// memory, the vote, the byte permutes and bf16 multiplies, the 16-byte
// stores, the proxy fence) beside the TMA loads and the bf16 wgmma, in the
// order ptxas's input has them.
// PTX-LABEL:   .entry mx_operand_1(
// PTX:         cvt.rn.satfinite.e4m3x2.f32
// PTX:         st.global.v2.b32
// PTX:         st.global.b8
// PTX-LABEL:   .entry block_matmul_2(
// PTX-DAG:     setmaxnreg.dec.sync.aligned.u32 40;
// PTX-DAG:     cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-DAG:     ld.shared.v4.b32
// PTX-DAG:     ld.shared.b8
// PTX-DAG:     vote.sync.any.pred
// PTX-DAG:     prmt.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0, 0x1404;
// PTX-DAG:     mul.rn.bf16x2
// PTX-DAG:     st.shared.v4.b32
// PTX-DAG:     fence.proxy.async.shared::cta;
// PTX-DAG:     setmaxnreg.inc.sync.aligned.u32 232;
// PTX-DAG:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16

// In the layer, P1's kernel and P2's convert their weights.
// P1-LABEL:    .entry block_matmul_5(
// P1-DAG:      prmt.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0, 0x1404;
// P1-DAG:      fence.proxy.async.shared::cta;
// P1-LABEL:    .entry block_matmul_{{[0-9]+}}(
// P1:          prmt.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0, 0x1404;

// PTXAS-NOT:   bytes spill stores, {{[1-9]}}
