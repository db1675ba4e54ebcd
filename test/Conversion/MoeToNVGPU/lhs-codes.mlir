// RUN: moe-opt %s -split-input-file -convert-moe-to-nvgpu="tma-store=false" -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="lhs-codes=true tma-store=false" | FileCheck %s --check-prefix=CONFIG
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="lhs-codes=true act-epilogue=true tma-store=false" | FileCheck %s --check-prefix=CONFIG-EPI
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --gemm M=256,N=256,K=256,G=1 --print-layer-ir > %t.gemm.mlir
// RUN: moe-opt %t.gemm.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root lhs-codes=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.gemm.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.gemm.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.ptx -o %t.gemm.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root lhs-codes=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: FileCheck %s --check-prefix=LAYER < %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root lhs-codes=true act-epilogue=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.epi.ptx
// RUN: FileCheck %s --check-prefix=LAYER-EPI < %t.epi.ptx
// RUN: %ptxas -arch=sm_90a -v %t.epi.ptx -o %t.epi.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config lhs_codes: a block GEMM reads its lhs rows (x, dy,
// [dg|du] in the layer) as FP8 codes with E8M0 scales, a quarter of the
// bytes of its K tile through L2 at 128x256 and half of what the operand
// kernel writes, and its consumer warpgroups decode each K tile into the
// registers of a register-A wgmma. The values are the bf16 operand
// kernel's, in the same MMA order, so the results are the same bits (on
// the H200: scripts/device/gpu-suite.sh lhs-codes, 7 layers).
//
// The lhs [256, 256] that an mx_quantize along K makes: its operand kernel
// writes the codes, each 64-column K tile of a row in A-fragment order
// (LhsCodeLayout.h), and the scale bytes K tile by K tile, two bytes per
// row: [4 K tiles * 256 rows / 8, 16]. The GEMM's lhs map is over the codes
// (128 rows of 64 bytes, no swizzle), and a third map over the scale bytes
// (16 x 16 boxes: the tile's 128 rows). Shared memory: 4 stages of 8 KiB of
// codes, 32 KiB of rhs and 256 bytes of scale bytes.

// CHECK-LABEL: func.func @lhs_codes(
// CHECK:         %[[CODES:.*]] = memref.alloc() : memref<256x256xf8E4M3FN>
// CHECK:         %[[SCALES:.*]] = memref.alloc() : memref<128x16xf8E8M0FNU>
// CHECK:         call @mx_operand_0_launch(%{{.*}}, %[[CODES]], %[[SCALES]]) : (memref<256x256xbf16>, memref<256x256xf8E4M3FN>, memref<128x16xf8E8M0FNU>) -> ()
// CHECK:         call @mx_operand_1_launch(
// CHECK:         call @block_matmul_2_launch(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<256x256xf8E4M3FN>, memref<2x256x256xbf16>, memref<2xi32>, memref<128x16xf8E8M0FNU>, memref<256x256xf32>) -> ()
// CHECK-LABEL: func.func private @mx_operand_0_launch(
// CHECK-SAME:      kernel = @moe_kernels::@mx_operand_0, grid = [32, 1, 1], block = [256, 1, 1], pointers = [0, 1, 2], results = 2>
// CHECK-LABEL: func.func private @block_matmul_2_launch(
// CHECK-SAME:      dynamic_shared_memory = 165968,
// CHECK-SAME:      tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x64xi8, 3>, swizzle = none, l2promo = l2promo_256b, oob = zero, interleave = none>,
// CHECK-SAME:                     1 : !nvgpu.tensormap.descriptor<tensor = memref<256x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>,
// CHECK-SAME:                     3 : !nvgpu.tensormap.descriptor<tensor = memref<16x16xi8, 3>, swizzle = none, l2promo = l2promo_256b, oob = zero, interleave = none>],
// CHECK-SAME:      pointers = [4, 2]>
//
// The operand kernel: the lane quad's amax, the codes, then one xor
// shuffle with the neighbouring lane (the other 8 columns of the k16 step)
// and two 4-byte stores in fragment order; the quad's first lane stores
// the block's scale byte.
// CHECK-LABEL: gpu.func @mx_operand_0(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr<1>, %[[OUT:[^:]*]]: !llvm.ptr<1>, %[[OUTS:[^:]*]]: !llvm.ptr<1>)
// CHECK-COUNT-2:   gpu.shuffle  xor {{.*}} : f32
// CHECK-COUNT-4:   nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E4M3FN)
// CHECK:           gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : i32
// CHECK:           llvm.getelementptr %[[OUT]]
// CHECK-NEXT:      llvm.store %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK:           llvm.getelementptr %[[OUT]]
// CHECK-NEXT:      llvm.store %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK:           scf.if
// CHECK:           llvm.getelementptr %[[OUTS]]
// CHECK-NEXT:      llvm.store %{{.*}} {alignment = 1 : i64} : i8, !llvm.ptr<1>
// CHECK:           gpu.return
//
// The GEMM: the scale bytes' map is the third argument. The producer
// thread expects 8192 + 32768 + 256 bytes a stage and loads the codes,
// their scale bytes and the rhs.
// CHECK-LABEL: gpu.func @block_matmul_2(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[TMS:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>) kernel
// CHECK:           builtin.unrealized_conversion_cast %[[TMS]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<16x16xi8, 3>
// CHECK:           nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c41216
// CHECK:           nvgpu.tma.async.load {{.*}} : <tensor = memref<128x64xi8, 3>, swizzle = none
// CHECK:           nvgpu.tma.async.load {{.*}} : <tensor = memref<16x16xi8, 3>, swizzle = none
// CHECK:           nvgpu.tma.async.load {{.*}} : <tensor = memref<256x128xi8, 3>, swizzle = swizzle_128b
// The consumers: 16 code bytes and the two scale bytes of each of the
// thread's two rows, the vote (one or two bf16 factors), the byte permutes,
// then after the fence four register-A wgmmas (scale-d 0 for the first K
// tile's first).
// CHECK:           nvgpu.mbarrier.try_wait.parity
// CHECK:           llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK:           llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<3> -> i16
// CHECK:           llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK:           llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<3> -> i16
// CHECK:           nvvm.vote.sync  any
// CHECK:           "prmt.b32 $0, $1, 0, 0x1404;"
// CHECK:           "prmt.b32 $0, $1, 0, 0x3424;"
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK-NOT:       nvvm.wgmma.mma_async
// CHECK:           llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}}, {$256, $257, $258, $259}, $260, p, 1, 1, 0;{{.*}}"=f,
// CHECK-SAME:        ,r,r,r,r,l,n"
// CHECK-COUNT-3:   wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 1
// The other K tiles two at a time (each one's A fragments in registers of
// its own: the MMAs of one tile read them while the next is decoded), an
// odd last one after the loop.
// CHECK:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c2
// CHECK-COUNT-8:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK:           scf.if
// CHECK-COUNT-4:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
func.func @lhs_codes(%x: tensor<256x256xbf16>, %w: tensor<2x256x256xbf16>,
                     %blk: tensor<2xi32>) -> tensor<256x256xf32> {
  %xq, %xs = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w
      {axis = 2 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<2x256x256xbf16> -> tensor<2x256x256xf8E4M3FN>, tensor<2x256x8xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%xq : tensor<256x256xf8E4M3FN> scales %xs : tensor<256x8xf8E8M0FNU>)
      rhs(%wq : tensor<2x256x256xf8E4M3FN> scales %ws : tensor<2x256x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4,
           warpgroups = [1, 2], registers = [40, 232], lhs_codes = true>}
      -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// -----

// Configurations set by hand that no lhs_codes kernel runs: pre-quantized
// codes (their scales are in the op's layout, not the kernel's), an expert
// GEMM (its lhs is slot-major), and a K that is not whole K tiles of 64
// (the fragment order permutes within a K tile).

func.func @given_codes(%xq: tensor<256x256xf8E4M3FN>, %xs: tensor<256x8xf8E8M0FNU>,
                       %w: tensor<2x128x256xbf16>,
                       %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op lhs_codes needs a lhs that an mx_quantize along its last axis makes}}
  %r = moe.block_matmul
      lhs(%xq : tensor<256x256xf8E4M3FN> scales %xs : tensor<256x8xf8E8M0FNU>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
           warpgroups = [1, 2], registers = [40, 232], lhs_codes = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

func.func @expert(%a: tensor<256x128xbf16>, %b: tensor<256x128xbf16>,
                  %blk: tensor<2xi32>) -> tensor<2x128x128xf32> {
  // expected-error @+1 {{'moe.expert_matmul' op lhs_codes needs a block GEMM}}
  %r = moe.expert_matmul lhs(%a : tensor<256x128xbf16>)
      rhs(%b : tensor<256x128xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
           warpgroups = [1, 2], registers = [40, 232], lhs_codes = true>}
      -> tensor<2x128x128xf32>
  return %r : tensor<2x128x128xf32>
}

// -----

func.func @partial_k_tile(%x: tensor<256x96xbf16>, %w: tensor<2x128x96xbf16>,
                          %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  %xq, %xs = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x96xbf16> -> tensor<256x96xf8E4M3FN>, tensor<256x3xf8E8M0FNU>
  // expected-error @+1 {{'moe.block_matmul' op GEMM operand [1, 256, 96] can be written in A-fragment order only as FP8 codes with columns a multiple of 64}}
  %r = moe.block_matmul
      lhs(%xq : tensor<256x96xf8E4M3FN> scales %xs : tensor<256x3xf8E8M0FNU>)
      rhs(%w : tensor<2x128x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
           warpgroups = [1, 2], registers = [40, 232], lhs_codes = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// moe-gpu-kernel-config with lhs-codes: the three block GEMMs read their
// lhs rows as codes (the recompute's x, P1's dy, P2's [dg|du], whose
// mx_quantize is in P1's region); with act-epilogue, P1's ping-pong kernel
// with 32 producer registers (the consumers give up 8); the expert GEMMs
// read both operands slot-major: unchanged.
// CONFIG:       moe.block_matmul
// CONFIG-SAME:    registers = [40, 232], rhs_n_major = true, lhs_codes = true>
// CONFIG:       moe.block_matmul
// CONFIG-SAME:    stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true, lhs_codes = true>
// CONFIG:       moe.block_matmul
// CONFIG-SAME:    stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, lhs_codes = true>
// CONFIG:       moe.expert_matmul
// CONFIG-NOT:     lhs_codes
// CONFIG:       moe.expert_matmul
// CONFIG-NOT:     lhs_codes
// CONFIG-EPI:   moe.block_matmul
// CONFIG-EPI:   moe.block_matmul
// CONFIG-EPI-SAME: stages = 6, warpgroups = [1, 2], registers = [32, 232], persistent = true, pingpong = true, lhs_codes = true>

// The operand kernel's fragment-order stores, then the GEMM: the shared
// loads of codes and scale bytes, the vote, the byte permutes and bf16
// multiplies, and the register-A wgmma (no descriptor for A).
// PTX-LABEL:   .entry mx_operand_0(
// PTX:         cvt.rn.satfinite.e4m3x2.f32
// PTX:         shfl.sync.bfly.b32
// PTX:         st.global.b32
// PTX:         st.global.b8
// PTX-LABEL:   .entry block_matmul_2(
// PTX-DAG:     ld.shared.v4.b32
// PTX-DAG:     ld.shared.b16
// PTX-DAG:     vote.sync.any.pred
// PTX-DAG:     prmt.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0, 0x1404;
// PTX-DAG:     mul.rn.bf16x2
// PTX-DAG:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{.*}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, p, 1, 1, 0;

// In the layer the recompute GEMM (rhs N-major: trans-b 1), P1 (m64n128)
// and P2 take their lhs as codes. (The activation backward's kernel writes
// [dg|du] as bf16 values: P2's codes come from an operand kernel over the
// f32 [dg|du] it also writes.) With act-epilogue, P1 is the ping-pong
// kernel of the activation backward.
// LAYER-LABEL: .entry block_matmul_2(
// LAYER:       wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{.*}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, p, 1, 1, 1;
// LAYER-LABEL: .entry block_matmul_5(
// LAYER:       wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{.*}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, p, 1, 1, 0;
// LAYER-LABEL: .entry act_bwd_operands_6(
// LAYER-LABEL: .entry block_matmul_{{[0-9]+}}(
// LAYER:       wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{.*}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, p, 1, 1, 0;
// LAYER-EPI-LABEL: .entry block_matmul_act_{{[0-9]+}}(
// LAYER-EPI:   wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{.*}}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, p, 1, 1, 0;

// PTXAS-NOT:   bytes spill stores, {{[1-9]}}
