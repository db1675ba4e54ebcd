// RUN: moe-opt %s | FileCheck %s
// Round trip through the custom form and through the generic form:
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s

// The default options are elided when printing.
// CHECK-LABEL: func.func @defaults
// CHECK: moe.blockwise_bwd x(%{{.*}} : tensor<256x256xbf16>) dy(%{{.*}} : tensor<256x256xbf16>)
// CHECK-SAME: affinities(%{{.*}} : tensor<1024xf32>)
// CHECK-SAME: gate_up(%{{.*}} : tensor<4x256x2x128xbf16>) down(%{{.*}} : tensor<4x128x256xbf16>)
// CHECK-SAME: routing(%{{.*}} : tensor<896xi32>, %{{.*}} : tensor<7xi32>)
// CHECK-SAME: {block_size = 128 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, top_k = 2 : i64}
// CHECK-SAME: -> tensor<256x256xbf16>, tensor<1024xf32>, tensor<4x256x2x128xf32>, tensor<4x128x256xf32>
func.func @defaults(%x: tensor<256x256xbf16>, %dy: tensor<256x256xbf16>,
    %aff: tensor<1024xf32>, %wgu: tensor<4x256x2x128xbf16>,
    %wd: tensor<4x128x256xbf16>, %tok: tensor<896xi32>, %blk: tensor<7xi32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<256x256xbf16>) dy(%dy : tensor<256x256xbf16>)
      affinities(%aff : tensor<1024xf32>)
      gate_up(%wgu : tensor<4x256x2x128xbf16>)
      down(%wd : tensor<4x128x256xbf16>)
      routing(%tok : tensor<896xi32>, %blk : tensor<7xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       activation = #moe.activation<swiglu>, affinity = #moe.affinity<on_i>,
       dx_accumulate = #moe.dx_accumulate<f32>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<256x256xbf16>, tensor<1024xf32>,
         tensor<4x256x2x128xf32>, tensor<4x128x256xf32>
  return
}

// Every option at a non-default value: GeGLU, affinity on H, e5m2 with the
// FLOOR rule, clamps, bias operands and gradients, a checkpoint, bf16 dx
// accumulation, bf16 weight gradients.
// CHECK-LABEL: func.func @all_options
// CHECK: moe.blockwise_bwd
// CHECK-SAME: checkpoint(%{{.*}} : tensor<7x2x128x128xbf16>)
// CHECK-SAME: gate_up_bias(%{{.*}} : tensor<4x2x128xf32>) down_bias(%{{.*}} : tensor<4x256xbf16>)
// CHECK-SAME: activation = #moe.activation<geglu>
// CHECK-SAME: affinity = #moe.affinity<on_h>
// CHECK-SAME: bias
// CHECK-SAME: clamp = #moe.clamp<gate_hi = 7.000000e+00, up_lo = -7.000000e+00, up_hi = 7.000000e+00>
// CHECK-SAME: dx_accumulate = #moe.dx_accumulate<bf16>
// CHECK-SAME: quant = #moe.mx<f8E5M2, block = 32, rule = floor>
// CHECK-SAME: -> tensor<256x256xbf16>, tensor<1024xf32>, tensor<4x256x2x128xbf16>, tensor<4x128x256xbf16>, tensor<4x2x128xf32>, tensor<4x256xf32>
func.func @all_options(%x: tensor<256x256xbf16>, %dy: tensor<256x256xbf16>,
    %aff: tensor<1024xf32>, %wgu: tensor<4x256x2x128xbf16>,
    %wd: tensor<4x128x256xbf16>, %tok: tensor<896xi32>, %blk: tensor<7xi32>,
    %ckpt: tensor<7x2x128x128xbf16>, %bgu: tensor<4x2x128xf32>,
    %bd: tensor<4x256xbf16>) {
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<256x256xbf16>) dy(%dy : tensor<256x256xbf16>)
      affinities(%aff : tensor<1024xf32>)
      gate_up(%wgu : tensor<4x256x2x128xbf16>)
      down(%wd : tensor<4x128x256xbf16>)
      routing(%tok : tensor<896xi32>, %blk : tensor<7xi32>)
      checkpoint(%ckpt : tensor<7x2x128x128xbf16>)
      gate_up_bias(%bgu : tensor<4x2x128xf32>)
      down_bias(%bd : tensor<4x256xbf16>)
      {block_size = 128 : i64, top_k = 2 : i64,
       activation = #moe.activation<geglu>, affinity = #moe.affinity<on_h>,
       clamp = #moe.clamp<up_hi = 7.0, gate_hi = 7.0, up_lo = -7.0>,
       bias, dx_accumulate = #moe.dx_accumulate<bf16>,
       quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      -> tensor<256x256xbf16>, tensor<1024xf32>,
         tensor<4x256x2x128xbf16>, tensor<4x128x256xbf16>,
         tensor<4x2x128xf32>, tensor<4x256xf32>
  return
}

// Pre-quantized weights: e4m3 data with E8M0 scales along the axis each
// weight's GEMM contracts (2I for gate/up, H for down); the FLOOR_ALT rule;
// fp32 dx.
// CHECK-LABEL: func.func @prequantized
// CHECK: gate_up(%{{.*}} : tensor<4x256x2x128xf8E4M3FN> scales %{{.*}} : tensor<4x256x2x4xf8E8M0FNU>)
// CHECK-SAME: down(%{{.*}} : tensor<4x128x256xf8E4M3FN> scales %{{.*}} : tensor<4x128x8xf8E8M0FNU>)
// CHECK-SAME: checkpoint(%{{.*}} : tensor<7x2x128x128xf32>)
// CHECK-SAME: quant = #moe.mx<f8E4M3FN, block = 32, rule = floor_alt>
// CHECK-SAME: -> tensor<256x256xf32>
func.func @prequantized(%x: tensor<256x256xbf16>, %dy: tensor<256x256xbf16>,
    %aff: tensor<1024xf32>, %wgu: tensor<4x256x2x128xf8E4M3FN>,
    %sgu: tensor<4x256x2x4xf8E8M0FNU>, %wd: tensor<4x128x256xf8E4M3FN>,
    %sd: tensor<4x128x8xf8E8M0FNU>, %tok: tensor<896xi32>,
    %blk: tensor<7xi32>, %ckpt: tensor<7x2x128x128xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<256x256xbf16>) dy(%dy : tensor<256x256xbf16>)
      affinities(%aff : tensor<1024xf32>)
      gate_up(%wgu : tensor<4x256x2x128xf8E4M3FN>
              scales %sgu : tensor<4x256x2x4xf8E8M0FNU>)
      down(%wd : tensor<4x128x256xf8E4M3FN>
           scales %sd : tensor<4x128x8xf8E8M0FNU>)
      routing(%tok : tensor<896xi32>, %blk : tensor<7xi32>)
      checkpoint(%ckpt : tensor<7x2x128x128xf32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = floor_alt>}
      -> tensor<256x256xf32>, tensor<1024xf32>,
         tensor<4x256x2x128xf32>, tensor<4x128x256xf32>
  return
}

// Single-expert dense mode with bf16 operands (quant none) and B = 1024:
// T = 1000 tokens fill N = 1 block.
// CHECK-LABEL: func.func @dense_unquantized
// CHECK: quant = #moe.mx<none, block = 32, rule = rceil>
// CHECK-SAME: single_expert_dense
func.func @dense_unquantized(%x: tensor<1000x64xbf16>,
    %dy: tensor<1000x64xbf16>, %aff: tensor<1000xf32>,
    %wgu: tensor<1x64x2x32xbf16>, %wd: tensor<1x32x64xbf16>,
    %tok: tensor<1024xi32>, %blk: tensor<1xi32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<1000x64xbf16>) dy(%dy : tensor<1000x64xbf16>)
      affinities(%aff : tensor<1000xf32>)
      gate_up(%wgu : tensor<1x64x2x32xbf16>) down(%wd : tensor<1x32x64xbf16>)
      routing(%tok : tensor<1024xi32>, %blk : tensor<1xi32>)
      {block_size = 1024 : i64, top_k = 1 : i64, single_expert_dense,
       quant = #moe.mx<none, block = 32, rule = rceil>}
      -> tensor<1000x64xbf16>, tensor<1000xf32>,
         tensor<1x64x2x32xf32>, tensor<1x32x64xf32>
  return
}

// Fewer routed pairs than experts: T*K = 2 < E-1 = 7, so the ceil term is
// 0 and N = E-1 = 7 (at most 2 of them used).
// CHECK-LABEL: func.func @more_experts_than_pairs
// CHECK: routing(%{{.*}} : tensor<1792xi32>, %{{.*}} : tensor<7xi32>)
func.func @more_experts_than_pairs(%x: tensor<2x32xbf16>,
    %dy: tensor<2x32xbf16>, %aff: tensor<16xf32>,
    %wgu: tensor<8x32x2x32xbf16>, %wd: tensor<8x32x32xbf16>,
    %tok: tensor<1792xi32>, %blk: tensor<7xi32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<2x32xbf16>) dy(%dy : tensor<2x32xbf16>)
      affinities(%aff : tensor<16xf32>)
      gate_up(%wgu : tensor<8x32x2x32xbf16>) down(%wd : tensor<8x32x32xbf16>)
      routing(%tok : tensor<1792xi32>, %blk : tensor<7xi32>)
      {block_size = 256 : i64, top_k = 1 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<2x32xbf16>, tensor<16xf32>,
         tensor<8x32x2x32xf32>, tensor<8x32x32xf32>
  return
}

// CHECK-LABEL: func.func @route
// CHECK: moe.route %{{.*}}, %{{.*}} {block_size = 128 : i64, num_experts = 4 : i64}
// CHECK-SAME: : tensor<256x2xi32>, tensor<256x2xf32> -> tensor<896xi32>, tensor<7xi32>, tensor<1024xf32>
func.func @route(%idx: tensor<256x2xi32>, %scores: tensor<256x2xf32>) {
  %tok, %blk, %aff = moe.route %idx, %scores
      {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<256x2xi32>, tensor<256x2xf32>
      -> tensor<896xi32>, tensor<7xi32>, tensor<1024xf32>
  return
}

// T*K = 2, E = 200: the real ceiling of a negative numerator,
// ceil((2 - 199) / 128) = -1, so N = 198 (not 199).
// CHECK-LABEL: func.func @negative_ceiling
// CHECK: routing(%{{.*}} : tensor<25344xi32>, %{{.*}} : tensor<198xi32>)
func.func @negative_ceiling(%x: tensor<2x32xbf16>, %dy: tensor<2x32xbf16>,
    %aff: tensor<400xf32>, %wgu: tensor<200x32x2x32xbf16>,
    %wd: tensor<200x32x32xbf16>, %tok: tensor<25344xi32>,
    %blk: tensor<198xi32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<2x32xbf16>) dy(%dy : tensor<2x32xbf16>)
      affinities(%aff : tensor<400xf32>)
      gate_up(%wgu : tensor<200x32x2x32xbf16>)
      down(%wd : tensor<200x32x32xbf16>)
      routing(%tok : tensor<25344xi32>, %blk : tensor<198xi32>)
      {block_size = 128 : i64, top_k = 1 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<2x32xbf16>, tensor<400xf32>,
         tensor<200x32x2x32xf32>, tensor<200x32x32xf32>
  return
}
