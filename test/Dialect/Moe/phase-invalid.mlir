// RUN: moe-opt %s -split-input-file -verify-diagnostics
// One case per verifier message of the phase-level ops (MoePhaseOps.cpp):
// the slot-space data movement, MX quantization, GEMM, elementwise and
// reduction ops, and the moe.fused kernel region. Each case starts from a
// valid op (T = 16, E = 2, B = 32, N = 2, so S = 64; K = M = H = I = 32,
// and 96 for the widths that must be told apart from them: the GEMMs' Nout
// and the H of affinity_grad's bias term) and breaks one relation. The
// messages of the shared helpers (rank, tensor type, slot count, MX
// operand/scale pairing, MX axis) are tested at every call site.

//===----------------------------------------------------------------------===//
// moe.gather_rows
//===----------------------------------------------------------------------===//

func.func @f(%src: tensor<512xbf16>, %tok: tensor<64xi32>) {
  // expected-error @+1 {{'moe.gather_rows' op source must be a static 2-D tensor [T, M], got 'tensor<512xbf16>'}}
  %r = moe.gather_rows %src[%tok]
      : tensor<512xbf16>, tensor<64xi32> -> tensor<64x32xbf16>
  return
}

// -----

func.func @f(%src: tensor<16x32xbf16>, %tok: tensor<?xi32>) {
  // expected-error @+1 {{'moe.gather_rows' op token_position_to_id must be a static 1-D tensor [S], got 'tensor<?xi32>'}}
  %r = moe.gather_rows %src[%tok]
      : tensor<16x32xbf16>, tensor<?xi32> -> tensor<64x32xbf16>
  return
}

// -----

func.func @f(%src: tensor<16x32xbf16>, %tok: tensor<64xi64>) {
  // expected-error @+1 {{'moe.gather_rows' op token_position_to_id must be an i32 tensor, got 'tensor<64xi64>'}}
  %r = moe.gather_rows %src[%tok]
      : tensor<16x32xbf16>, tensor<64xi64> -> tensor<64x32xbf16>
  return
}

// -----

func.func @f(%src: tensor<16x32xbf16>, %tok: tensor<64xi32>) {
  // expected-error @+1 {{'moe.gather_rows' op result must be [S, M] = [64, 32] of the source's element type 'bf16', got 'tensor<64x32xf32>'}}
  %r = moe.gather_rows %src[%tok]
      : tensor<16x32xbf16>, tensor<64xi32> -> tensor<64x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.slot_affinities
//===----------------------------------------------------------------------===//

func.func @f(%aff: tensor<32xf32>, %tok: tensor<64xi32>, %blk: tensor<2x1xi32>) {
  // expected-error @+1 {{'moe.slot_affinities' op block_to_expert must be a static 1-D tensor [N], got 'tensor<2x1xi32>'}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<32xf32>, tensor<64xi32>, tensor<2x1xi32> -> tensor<64xf32>
  return
}

// -----

func.func @f(%aff: tensor<32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi64>) {
  // expected-error @+1 {{'moe.slot_affinities' op block_to_expert must be an i32 tensor, got 'tensor<2xi64>'}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<32xf32>, tensor<64xi32>, tensor<2xi64> -> tensor<64xf32>
  return
}

// -----

func.func @f(%aff: tensor<32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.slot_affinities' op block_size must be a positive multiple of 32, got 48}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 48 : i64, num_experts = 2 : i64}
      : tensor<32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<64xf32>
  return
}

// -----

func.func @f(%aff: tensor<16x2xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.slot_affinities' op affinities must be a static 1-D tensor [T*E], got 'tensor<16x2xf32>'}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<16x2xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<64xf32>
  return
}

// -----

func.func @f(%aff: tensor<32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.slot_affinities' op num_experts must be positive, got 0}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 0 : i64}
      : tensor<32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<64xf32>
  return
}

// -----

func.func @f(%aff: tensor<32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.slot_affinities' op affinities size 32 must be a multiple of num_experts = 3}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 3 : i64}
      : tensor<32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<64xf32>
  return
}

// -----

func.func @f(%aff: tensor<32xbf16>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.slot_affinities' op affinities must be an f32 tensor [T*E] = [32], got 'tensor<32xbf16>'}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<32xbf16>, tensor<64xi32>, tensor<2xi32> -> tensor<64xf32>
  return
}

// -----

func.func @f(%aff: tensor<32xf32>, %tok: tensor<96xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.slot_affinities' op token_position_to_id must be an i32 tensor [S] = [64], got 'tensor<96xi32>'}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<32xf32>, tensor<96xi32>, tensor<2xi32> -> tensor<64xf32>
  return
}

// -----

func.func @f(%aff: tensor<32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.slot_affinities' op result must be an f32 tensor [S] = [64], got 'tensor<64xbf16>'}}
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.unpack_checkpoint
//===----------------------------------------------------------------------===//

func.func @f(%ckpt: tensor<2x64x32xbf16>) {
  // expected-error @+1 {{'moe.unpack_checkpoint' op checkpoint must be a static 4-D tensor [N, 2, I, B], got 'tensor<2x64x32xbf16>'}}
  %gu = moe.unpack_checkpoint %ckpt : tensor<2x64x32xbf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%ckpt: tensor<2x3x32x32xbf16>) {
  // expected-error @+1 {{'moe.unpack_checkpoint' op checkpoint must be a bf16 or f32 tensor [N, 2, I, B] = [2, 2, 32, 32], got 'tensor<2x3x32x32xbf16>'}}
  %gu = moe.unpack_checkpoint %ckpt : tensor<2x3x32x32xbf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%ckpt: tensor<2x2x32x32xbf16>) {
  // expected-error @+1 {{'moe.unpack_checkpoint' op result must be an f32 tensor [N*B, 2I] = [64, 64], got 'tensor<64x32xf32>'}}
  %gu = moe.unpack_checkpoint %ckpt : tensor<2x2x32x32xbf16> -> tensor<64x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.mx_quantize
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<64x32xf16>) {
  // expected-error @+1 {{'moe.mx_quantize' op input must be a static bf16 or f32 tensor, got 'tensor<64x32xf16>'}}
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<64x32xf16> -> tensor<64x32xf8E4M3FN>, tensor<64x1xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>) {
  // expected-error @+1 {{'moe.mx_quantize' op axis 2 is out of range for rank 2}}
  %q, %s = moe.mx_quantize %x
      {axis = 2 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<64x32xbf16> -> tensor<64x32xf8E4M3FN>, tensor<64x1xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<64x48xbf16>) {
  // expected-error @+1 {{'moe.mx_quantize' op dimension 1 (48) must be a multiple of the MX block size 32}}
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<64x48xbf16> -> tensor<64x48xf8E4M3FN>, tensor<64x1xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>) {
  // expected-error @+1 {{'moe.mx_quantize' op needs an MX element type, but quant is none}}
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<none, block = 32, rule = rceil>}
      : tensor<64x32xbf16> -> tensor<64x32xf8E4M3FN>, tensor<64x1xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>) {
  // expected-error @+1 {{'moe.mx_quantize' op codes must have the input's shape [64, 32] and element type 'f8E4M3FN', got 'tensor<64x32xf8E5M2>'}}
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<64x32xbf16> -> tensor<64x32xf8E5M2>, tensor<64x1xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<64x32xf32>) {
  // expected-error @+1 {{'moe.mx_quantize' op scales must be an f8E8M0FNU tensor (input, axis / 32) = [64, 1], got 'tensor<2x32xf8E8M0FNU>'}}
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      : tensor<64x32xf32> -> tensor<64x32xf8E5M2>, tensor<2x32xf8E8M0FNU>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.mx_dequantize
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<64x32xbf16>, %s: tensor<64x1xf8E8M0FNU>) {
  // expected-error @+1 {{'moe.mx_dequantize' op codes must be a static f8E4M3FN or f8E5M2 tensor, got 'tensor<64x32xbf16>'}}
  %v = moe.mx_dequantize %q, %s {axis = 1 : i64}
      : tensor<64x32xbf16>, tensor<64x1xf8E8M0FNU> -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%q: tensor<64x32xf8E4M3FN>, %s: tensor<64x1xf8E8M0FNU>) {
  // expected-error @+1 {{'moe.mx_dequantize' op axis -1 is out of range for rank 2}}
  %v = moe.mx_dequantize %q, %s {axis = -1 : i64}
      : tensor<64x32xf8E4M3FN>, tensor<64x1xf8E8M0FNU> -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%q: tensor<48x32xf8E4M3FN>, %s: tensor<1x32xf8E8M0FNU>) {
  // expected-error @+1 {{'moe.mx_dequantize' op dimension 0 (48) must be a multiple of the MX block size 32}}
  %v = moe.mx_dequantize %q, %s {axis = 0 : i64}
      : tensor<48x32xf8E4M3FN>, tensor<1x32xf8E8M0FNU> -> tensor<48x32xf32>
  return
}

// -----

func.func @f(%q: tensor<64x32xf8E4M3FN>, %s: tensor<64x1xf32>) {
  // expected-error @+1 {{'moe.mx_dequantize' op scales must be an f8E8M0FNU tensor (codes, axis / 32) = [64, 1], got 'tensor<64x1xf32>'}}
  %v = moe.mx_dequantize %q, %s {axis = 1 : i64}
      : tensor<64x32xf8E4M3FN>, tensor<64x1xf32> -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%q: tensor<64x32xf8E5M2>, %s: tensor<64x1xf8E8M0FNU>) {
  // expected-error @+1 {{'moe.mx_dequantize' op result must be an f32 tensor (codes) = [64, 32], got 'tensor<64x32xbf16>'}}
  %v = moe.mx_dequantize %q, %s {axis = 1 : i64}
      : tensor<64x32xf8E5M2>, tensor<64x1xf8E8M0FNU> -> tensor<64x32xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.block_matmul
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x32xbf16>, %blk: tensor<?xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op block_to_expert must be a static 1-D tensor [N], got 'tensor<?xi32>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<?xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xf32>) {
  // expected-error @+1 {{'moe.block_matmul' op block_to_expert must be an i32 tensor, got 'tensor<2xf32>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xf32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op block_size must be a positive multiple of 32, got 0}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 0 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32x1xbf16>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op lhs must be a static 2-D tensor [S, K], got 'tensor<64x32x1xbf16>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32x1xbf16>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<192x32xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op rhs must be a static 3-D tensor [E, Nout, K], got 'tensor<192x32xbf16>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<192x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x32x?xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op rhs must be a static 3-D tensor [E, K, Nout], got 'tensor<2x32x?xbf16>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x32x?xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64, transpose_rhs} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xf32>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op lhs must have element type bf16, f8E4M3FN or f8E5M2, got 'f32'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xf32>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x32xf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op rhs must have element type bf16, f8E4M3FN or f8E5M2, got 'f16'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x32xf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xf8E4M3FN>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op MX-quantized lhs requires its scales}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xf8E4M3FN>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x32xf8E5M2>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op MX-quantized rhs requires its scales}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x32xf8E5M2>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %xs: tensor<64x1xf8E8M0FNU>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op bf16 lhs takes no scales}}
  %r = moe.block_matmul
      lhs(%x : tensor<64x32xbf16> scales %xs : tensor<64x1xf8E8M0FNU>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x32xbf16>, %ws: tensor<2x96x1xf8E8M0FNU>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op bf16 rhs takes no scales}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x32xbf16> scales %ws : tensor<2x96x1xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<96x32xbf16>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op lhs must have S = N*B = 64 rows, got 'tensor<96x32xbf16>'}}
  %r = moe.block_matmul lhs(%x : tensor<96x32xbf16>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xi32>, %tok: tensor<96xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op token_position_to_id must be an i32 tensor [S] = [64], got 'tensor<96xi32>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xi32>)
      tokens(%tok : tensor<96xi32>) {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x64xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op rhs contraction size 64 must equal lhs's K = 32}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x64xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%xq: tensor<64x32xf8E4M3FN>, %xs: tensor<64x2xf8E8M0FNU>, %wq: tensor<2x96x32xf8E4M3FN>, %ws: tensor<2x96x1xf8E8M0FNU>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op lhs_scales must be an f8E8M0FNU tensor [S, K/32] = [64, 1], got 'tensor<64x2xf8E8M0FNU>'}}
  %r = moe.block_matmul
      lhs(%xq : tensor<64x32xf8E4M3FN> scales %xs : tensor<64x2xf8E8M0FNU>)
      rhs(%wq : tensor<2x96x32xf8E4M3FN> scales %ws : tensor<2x96x1xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%xq: tensor<64x32xf8E4M3FN>, %xs: tensor<64x1xf8E8M0FNU>, %wq: tensor<2x96x32xf8E4M3FN>, %ws: tensor<2x1x96xf8E8M0FNU>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op rhs_scales must be an f8E8M0FNU tensor [E, Nout, K/32] = [2, 96, 1], got 'tensor<2x1x96xf8E8M0FNU>'}}
  %r = moe.block_matmul
      lhs(%xq : tensor<64x32xf8E4M3FN> scales %xs : tensor<64x1xf8E8M0FNU>)
      rhs(%wq : tensor<2x96x32xf8E4M3FN> scales %ws : tensor<2x1x96xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %wq: tensor<2x32x96xf8E4M3FN>, %ws: tensor<2x96x1xf8E8M0FNU>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op rhs_scales must be an f8E8M0FNU tensor [E, K/32, Nout] = [2, 1, 96], got 'tensor<2x96x1xf8E8M0FNU>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%wq : tensor<2x32x96xf8E4M3FN> scales %ws : tensor<2x96x1xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 32 : i64, transpose_rhs}
      -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%xq: tensor<64x48xf8E4M3FN>, %xs: tensor<64x1xf8E8M0FNU>, %w: tensor<2x96x48xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op MX operands need K to be a multiple of 32, got 48}}
  %r = moe.block_matmul
      lhs(%xq : tensor<64x48xf8E4M3FN> scales %xs : tensor<64x1xf8E8M0FNU>)
      rhs(%w : tensor<2x96x48xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x32x96xbf16>, %b: tensor<2x32xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op bias must be a bf16 or f32 tensor [E, Nout] = [2, 96], got 'tensor<2x32xf32>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x32x96xbf16>) experts(%blk : tensor<2xi32>)
      bias(%b : tensor<2x32xf32>) {block_size = 32 : i64, transpose_rhs}
      -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %w: tensor<2x96x32xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.block_matmul' op result must be an f32 tensor [S, Nout] = [64, 96], got 'tensor<64x96xbf16>'}}
  %r = moe.block_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%w : tensor<2x96x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.expert_matmul
//===----------------------------------------------------------------------===//

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xbf16>, %blk: tensor<2xi32>, %tok: tensor<64xf32>) {
  // expected-error @+1 {{'moe.expert_matmul' op token_position_to_id must be an i32 tensor [S] = [64], got 'tensor<64xf32>'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xi32>)
      tokens(%tok : tensor<64xf32>) {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xbf16>, %blk: tensor<1x2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op block_to_expert must be a static 1-D tensor [N], got 'tensor<1x2xi32>'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<1x2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xbf16>, %blk: tensor<2xindex>) {
  // expected-error @+1 {{'moe.expert_matmul' op block_to_expert must be an i32 tensor, got 'tensor<2xindex>'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xindex>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op block_size must be a positive multiple of 32, got -32}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = -32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<2048xbf16>, %y: tensor<64x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op lhs must be a static 2-D tensor [S, M], got 'tensor<2048xbf16>'}}
  %r = moe.expert_matmul lhs(%x : tensor<2048xbf16>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<?x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op rhs must be a static 2-D tensor [S, Nout], got 'tensor<?x96xbf16>'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<?x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op result must be a static 3-D tensor [E, M, Nout], got 'tensor<64x96xf32>'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xi8>, %y: tensor<64x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op lhs must have element type bf16, f8E4M3FN or f8E5M2, got 'i8'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xi8>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op rhs must have element type bf16, f8E4M3FN or f8E5M2, got 'f32'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xf32>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xf8E5M2>, %y: tensor<64x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op MX-quantized lhs requires its scales}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xf8E5M2>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xf8E4M3FN>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op MX-quantized rhs requires its scales}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xf8E4M3FN>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %xs: tensor<2x32xf8E8M0FNU>, %y: tensor<64x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op bf16 lhs takes no scales}}
  %r = moe.expert_matmul
      lhs(%x : tensor<64x32xbf16> scales %xs : tensor<2x32xf8E8M0FNU>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xbf16>, %ys: tensor<2x96xf8E8M0FNU>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op bf16 rhs takes no scales}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xbf16> scales %ys : tensor<2x96xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<96x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op lhs and rhs must have S = N*B = 64 rows, got 'tensor<64x32xbf16>' and 'tensor<96x96xbf16>'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<96x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%xq: tensor<64x32xf8E4M3FN>, %xs: tensor<64x1xf8E8M0FNU>, %yq: tensor<64x96xf8E4M3FN>, %ys: tensor<2x96xf8E8M0FNU>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op lhs_scales must be an f8E8M0FNU tensor [S/32, M] = [2, 32], got 'tensor<64x1xf8E8M0FNU>'}}
  %r = moe.expert_matmul
      lhs(%xq : tensor<64x32xf8E4M3FN> scales %xs : tensor<64x1xf8E8M0FNU>)
      rhs(%yq : tensor<64x96xf8E4M3FN> scales %ys : tensor<2x96xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%xq: tensor<64x32xf8E4M3FN>, %xs: tensor<2x32xf8E8M0FNU>, %yq: tensor<64x96xf8E4M3FN>, %ys: tensor<2x96xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op rhs_scales must be an f8E8M0FNU tensor [S/32, Nout] = [2, 96], got 'tensor<2x96xf32>'}}
  %r = moe.expert_matmul
      lhs(%xq : tensor<64x32xf8E4M3FN> scales %xs : tensor<2x32xf8E8M0FNU>)
      rhs(%yq : tensor<64x96xf8E4M3FN> scales %ys : tensor<2x96xf32>)
      experts(%blk : tensor<2xi32>) {block_size = 32 : i64} -> tensor<2x32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %y: tensor<64x96xbf16>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_matmul' op result must be an f32 tensor [E, M, Nout] = [2, 32, 96], got 'tensor<2x96x32xf32>'}}
  %r = moe.expert_matmul lhs(%x : tensor<64x32xbf16>)
      rhs(%y : tensor<64x96xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<2x96x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.gated_act_bwd
//===----------------------------------------------------------------------===//

func.func @f(%gu: tensor<64x64xf32>, %dA: tensor<2048xf32>, %a: tensor<64xf32>) {
  // expected-error @+1 {{'moe.gated_act_bwd' op d_act must be a static 2-D tensor [S, I], got 'tensor<2048xf32>'}}
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<64x64xf32>, tensor<2048xf32>, tensor<64xf32>
      -> tensor<64x64xf32>, tensor<64x32xf32>
  return
}

// -----

func.func @f(%gu: tensor<64x64xf32>, %dA: tensor<64x32xbf16>, %a: tensor<64xf32>) {
  // expected-error @+1 {{'moe.gated_act_bwd' op d_act must be an f32 tensor [S, I] = [64, 32], got 'tensor<64x32xbf16>'}}
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<64x64xf32>, tensor<64x32xbf16>, tensor<64xf32>
      -> tensor<64x64xf32>, tensor<64x32xf32>
  return
}

// -----

func.func @f(%gu: tensor<64x32xf32>, %dA: tensor<64x32xf32>, %a: tensor<64xf32>) {
  // expected-error @+1 {{'moe.gated_act_bwd' op gate_up must be an f32 tensor [S, 2I] = [64, 64], got 'tensor<64x32xf32>'}}
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32>
      -> tensor<64x64xf32>, tensor<64x32xf32>
  return
}

// -----

func.func @f(%gu: tensor<64x64xf32>, %dA: tensor<64x32xf32>, %a: tensor<32xf32>) {
  // expected-error @+1 {{'moe.gated_act_bwd' op slot_affinities must be an f32 tensor [S] = [64], got 'tensor<32xf32>'}}
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<64x64xf32>, tensor<64x32xf32>, tensor<32xf32>
      -> tensor<64x64xf32>, tensor<64x32xf32>
  return
}

// -----

func.func @f(%gu: tensor<64x64xf32>, %dA: tensor<64x32xf32>, %a: tensor<64xf32>) {
  // expected-error @+1 {{'moe.gated_act_bwd' op d_gate_up must be an f32 tensor [S, 2I] = [64, 64], got 'tensor<64x64xbf16>'}}
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<64x64xf32>, tensor<64x32xf32>, tensor<64xf32>
      -> tensor<64x64xbf16>, tensor<64x32xf32>
  return
}

// -----

func.func @f(%gu: tensor<64x64xf32>, %dA: tensor<64x32xf32>, %a: tensor<64xf32>) {
  // expected-error @+1 {{'moe.gated_act_bwd' op h must be an f32 tensor [S, I] = [64, 32], got 'tensor<64x64xf32>'}}
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<64x64xf32>, tensor<64x32xf32>, tensor<64xf32>
      -> tensor<64x64xf32>, tensor<64x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.affinity_grad
//===----------------------------------------------------------------------===//

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2x?xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op block_to_expert must be a static 1-D tensor [N], got 'tensor<2x?xi32>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2x?xi32>
      -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi16>) {
  // expected-error @+1 {{'moe.affinity_grad' op block_to_expert must be an i32 tensor, got 'tensor<2xi16>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi16>
      -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op block_size must be a positive multiple of 32, got 16}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 16 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>
      -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32x1xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op d_act must be a static 2-D tensor [S, I], got 'tensor<64x32x1xf32>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32x1xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>
      -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<96x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op d_act must be an f32 tensor [S, I] = [64, 32], got 'tensor<96x32xf32>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<96x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>
      -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xbf16>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op h must be an f32 tensor [S, I] = [64, 32], got 'tensor<64x32xbf16>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xbf16>, tensor<64xi32>, tensor<2xi32>
      -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op token_position_to_id must be an i32 tensor [S] = [64], got 'tensor<64xf32>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xf32>, tensor<2xi32>
      -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op result must be a static 1-D tensor [T*E], got 'tensor<16x2xf32>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>
      -> tensor<16x2xf32>
  return
}

// -----

// The custom syntax takes dy_rows and down_bias together; the generic form
// can give one alone.
func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>, %rows: tensor<64x96xbf16>) {
  // expected-error @+1 {{'moe.affinity_grad' op dy_rows and down_bias go together}}
  %da = "moe.affinity_grad"(%dA, %h, %tok, %blk, %rows)
      <{block_size = 32 : i64, num_experts = 2 : i64,
        operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0>}>
      : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>,
         tensor<64x96xbf16>) -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op num_experts must be positive, got -2}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = -2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>
      -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op result size 33 must be a multiple of num_experts = 2}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>
      -> tensor<33xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>, %rows: tensor<64x96xbf16>, %bd: tensor<192xf32>) {
  // expected-error @+1 {{'moe.affinity_grad' op down_bias must be a static 2-D tensor [E, H], got 'tensor<192xf32>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk bias(%rows, %bd)
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>,
        tensor<64x96xbf16>, tensor<192xf32> -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>, %rows: tensor<64x96xbf16>, %bd: tensor<2x96xf16>) {
  // expected-error @+1 {{'moe.affinity_grad' op down_bias must be a bf16 or f32 tensor [E, H] = [2, 96], got 'tensor<2x96xf16>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk bias(%rows, %bd)
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>,
        tensor<64x96xbf16>, tensor<2x96xf16> -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>, %rows: tensor<64x32xbf16>, %bd: tensor<2x96xf32>) {
  // expected-error @+1 {{'moe.affinity_grad' op dy_rows must be a bf16 or f32 tensor [S, H] = [64, 96], got 'tensor<64x32xbf16>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk bias(%rows, %bd)
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>,
        tensor<64x32xbf16>, tensor<2x96xf32> -> tensor<32xf32>
  return
}

// -----

func.func @f(%dA: tensor<64x32xf32>, %h: tensor<64x32xf32>, %tok: tensor<64xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.affinity_grad' op result must be an f32 tensor [T*E] = [32], got 'tensor<32xbf16>'}}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x32xf32> dot tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32>
      -> tensor<32xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.scale_rows
//===----------------------------------------------------------------------===//

func.func @f(%h: tensor<2048xf32>, %a: tensor<64xf32>) {
  // expected-error @+1 {{'moe.scale_rows' op input must be a static 2-D tensor [S, M], got 'tensor<2048xf32>'}}
  %r = moe.scale_rows %h, %a
      : tensor<2048xf32>, tensor<64xf32> -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%h: tensor<64x32xf16>, %a: tensor<64xf32>) {
  // expected-error @+1 {{'moe.scale_rows' op input must be a bf16 or f32 tensor [S, M] = [64, 32], got 'tensor<64x32xf16>'}}
  %r = moe.scale_rows %h, %a
      : tensor<64x32xf16>, tensor<64xf32> -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%h: tensor<64x32xbf16>, %a: tensor<32xf32>) {
  // expected-error @+1 {{'moe.scale_rows' op scale must be an f32 tensor [S] = [64], got 'tensor<32xf32>'}}
  %r = moe.scale_rows %h, %a
      : tensor<64x32xbf16>, tensor<32xf32> -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%h: tensor<64x32xbf16>, %a: tensor<64xf32>) {
  // expected-error @+1 {{'moe.scale_rows' op result must be an f32 tensor [S, M] = [64, 32], got 'tensor<64x32xbf16>'}}
  %r = moe.scale_rows %h, %a
      : tensor<64x32xbf16>, tensor<64xf32> -> tensor<64x32xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.scatter_add_rows
//===----------------------------------------------------------------------===//

func.func @f(%c: tensor<64x32x1xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op contributions must be a static 2-D tensor [S, H], got 'tensor<64x32x1xf32>'}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x32x1xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xbf16>
  return
}

// -----

// An empty dimension (the message of expectRank, which every op calls
// before reading dimensions; H = 0 reached the lowering, which failed on
// an internal tensor.extract_slice).
func.func @f(%c: tensor<64x0xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op contributions must not be empty (a dimension is 0), got 'tensor<64x0xf32>'}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x0xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x0xbf16>
  return
}

// -----

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op result must be a static 2-D tensor [T, H], got 'tensor<?x32xbf16>'}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<?x32xbf16>
  return
}

// -----

func.func @f(%c: tensor<64x32xbf16>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op contributions must be an f32 tensor [S, H] = [64, 32], got 'tensor<64x32xbf16>'}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x32xbf16>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xbf16>
  return
}

// -----

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<32xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op token_position_to_id must be an i32 tensor [S] = [64], got 'tensor<32xi32>'}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x32xf32>, tensor<32xi32>, tensor<2xi32> -> tensor<16x32xbf16>
  return
}

// -----

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op result must be a bf16 or f32 tensor [T, H] = [16, 32], got 'tensor<16x64xbf16>'}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x64xbf16>
  return
}

// -----

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op num_experts must be positive, got 0}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 0 : i64, top_k = 1 : i64}
      : tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xbf16>
  return
}

// -----

// A negative count is rejected as such (the attribute's getter is unsigned).
func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op num_experts must be positive, got -2}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = -2 : i64, top_k = 1 : i64}
      : tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xbf16>
  return
}

// -----

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op top_k must be in [1, num_experts] = [1, 4], got 0}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 0 : i64}
      : tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xbf16>
  return
}

// -----

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op top_k must be in [1, num_experts] = [1, 4], got 5}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 5 : i64}
      : tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xbf16>
  return
}

// -----

func.func @f(%c: tensor<96x32xf32>, %tok: tensor<96xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op contributions must be an f32 tensor [S, H] = [64, 32], got 'tensor<96x32xf32>'}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<96x32xf32>, tensor<96xi32>, tensor<2xi32> -> tensor<16x32xbf16>
  return
}

// -----

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>,
             %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.scatter_add_rows' op dx_accumulate = bf16 requires a bf16 result, got 'tensor<16x32xf32>'}}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, dx_accumulate = #moe.dx_accumulate<bf16>, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.expert_sum
//===----------------------------------------------------------------------===//

func.func @f(%dgu: tensor<64x32xf32>, %blk: tensor<i32>) {
  // expected-error @+1 {{'moe.expert_sum' op block_to_expert must be a static 1-D tensor [N], got 'tensor<i32>'}}
  %s = moe.expert_sum %dgu, %blk {block_size = 32 : i64}
      : tensor<64x32xf32>, tensor<i32> -> tensor<2x32xf32>
  return
}

// -----

func.func @f(%dgu: tensor<64x32xf32>, %blk: tensor<2xui32>) {
  // expected-error @+1 {{'moe.expert_sum' op block_to_expert must be an i32 tensor, got 'tensor<2xui32>'}}
  %s = moe.expert_sum %dgu, %blk {block_size = 32 : i64}
      : tensor<64x32xf32>, tensor<2xui32> -> tensor<2x32xf32>
  return
}

// -----

func.func @f(%dgu: tensor<64x32xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_sum' op block_size must be a positive multiple of 32, got 40}}
  %s = moe.expert_sum %dgu, %blk {block_size = 40 : i64}
      : tensor<64x32xf32>, tensor<2xi32> -> tensor<2x32xf32>
  return
}

// -----

func.func @f(%dgu: tensor<2048xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_sum' op input must be a static 2-D tensor [S, M], got 'tensor<2048xf32>'}}
  %s = moe.expert_sum %dgu, %blk {block_size = 32 : i64}
      : tensor<2048xf32>, tensor<2xi32> -> tensor<2x32xf32>
  return
}

// -----

func.func @f(%dgu: tensor<64x32xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_sum' op result must be a static 2-D tensor [E, M], got 'tensor<64xf32>'}}
  %s = moe.expert_sum %dgu, %blk {block_size = 32 : i64}
      : tensor<64x32xf32>, tensor<2xi32> -> tensor<64xf32>
  return
}

// -----

func.func @f(%dgu: tensor<96x32xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_sum' op input must be an f32 tensor [S, M] = [64, 32], got 'tensor<96x32xf32>'}}
  %s = moe.expert_sum %dgu, %blk {block_size = 32 : i64}
      : tensor<96x32xf32>, tensor<2xi32> -> tensor<2x32xf32>
  return
}

// -----

func.func @f(%dgu: tensor<64x32xf32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.expert_sum' op result must be an f32 tensor [E, M] = [2, 32], got 'tensor<2x64xf32>'}}
  %s = moe.expert_sum %dgu, %blk {block_size = 32 : i64}
      : tensor<64x32xf32>, tensor<2xi32> -> tensor<2x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.fused and moe.yield
//===----------------------------------------------------------------------===//

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{'moe.fused' op region arguments must have the types of the inputs}}
  %dx = moe.fused phase(#moe.phase<p2>) ins(%c, %tok
      : tensor<64x32xf32>, tensor<64xi32>) {
  ^bb0(%a: tensor<64x32xbf16>, %b: tensor<64xi32>):
    %n = arith.constant dense<0> : tensor<2xi32>
    %s = moe.scatter_add_rows %a[%b], %n
        {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
        : tensor<64x32xbf16>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xbf16>
    moe.yield %s : tensor<16x32xbf16>
  } -> tensor<16x32xbf16>
  return %dx : tensor<16x32xbf16>
}

// -----

// No block (generic form; the custom form always has one): ODS's region
// constraint, before the verifier.
func.func @f() {
  // expected-error @+1 {{'moe.fused' op region #0 ('body') failed to verify constraint: region with 1 blocks}}
  "moe.fused"() ({
  }) {phase = #moe.phase<p4>} : () -> ()
  return
}

// -----

// Another terminator (found by moe-ir-fuzzer: the verifier runs before the
// region's implicit-terminator trait, and assumed moe.yield).
func.func @f(%h: tensor<64x16xf32>, %a: tensor<64xf32>) -> tensor<64x16xf32> {
  // expected-error @+1 {{'moe.fused' op region must end with moe.yield}}
  %r = moe.fused phase(#moe.phase<p4>) ins(%h, %a : tensor<64x16xf32>, tensor<64xf32>) {
  ^bb0(%h0: tensor<64x16xf32>, %a0: tensor<64xf32>):
    %s = moe.scale_rows %h0, %a0
        : tensor<64x16xf32>, tensor<64xf32> -> tensor<64x16xf32>
    scf.yield %s : tensor<64x16xf32>
  } -> tensor<64x16xf32>
  return %r : tensor<64x16xf32>
}

// -----

func.func @f(%c: tensor<64x32xf32>, %tok: tensor<64xi32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{'moe.fused' op moe.yield operand types must match the results}}
  %dx = moe.fused phase(#moe.phase<p2>) ins(%c, %tok
      : tensor<64x32xf32>, tensor<64xi32>) {
  ^bb0(%a: tensor<64x32xf32>, %b: tensor<64xi32>):
    %n = arith.constant dense<0> : tensor<2xi32>
    %s = moe.scatter_add_rows %a[%b], %n
        {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
        : tensor<64x32xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<16x32xf32>
    moe.yield %s : tensor<16x32xf32>
  } -> tensor<16x32xbf16>
  return %dx : tensor<16x32xbf16>
}

// -----

// moe.yield has no verifier of its own; its HasParent trait is its only
// check.
func.func @f(%c: tensor<64x32xf32>) {
  // expected-error @+1 {{'moe.yield' op expects parent op 'moe.fused'}}
  moe.yield %c : tensor<64x32xf32>
}
