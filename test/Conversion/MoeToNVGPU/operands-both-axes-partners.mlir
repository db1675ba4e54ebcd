// RUN: moe-opt %s -split-input-file --convert-moe-to-nvgpu="operands-both-axes=true" | FileCheck %s

// operands-both-axes pairs two roundings of the same values only when one
// GEMM takes them along the columns and the other along the rows in place.
// Here gathered rows x feed a block GEMM along 256 columns and an expert
// GEMM along the slots, which reads its lhs M-major (lhs_m_major, the
// default configuration): one kernel writes both roundings.

// CHECK-LABEL: func.func @paired(
// CHECK:         call @mx_operand_0_launch(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<48x256xbf16>, memref<128xi32>, memref<128x256xbf16>, memref<128x256xbf16>)
// CHECK-NOT:     memref<48x256xbf16>, memref<128xi32>
// CHECK:         call @block_matmul_
// CHECK:         call @expert_matmul_
#mx = #moe.mx<f8E4M3FN, block = 32, rule = rceil>
func.func @paired(%x: tensor<48x256xbf16>, %tok: tensor<128xi32>,
                  %w: tensor<1x128x256xbf16>, %b: tensor<128x128xbf16>,
                  %blk: tensor<1xi32>)
    -> (tensor<128x128xf32>, tensor<1x256x128xf32>) {
  %rows = moe.gather_rows %x[%tok]
      : tensor<48x256xbf16>, tensor<128xi32> -> tensor<128x256xbf16>
  %q, %s = moe.mx_quantize %rows {axis = 1 : i64, quant = #mx}
      : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w {axis = 2 : i64, quant = #mx}
      : tensor<1x128x256xbf16> -> tensor<1x128x256xf8E4M3FN>, tensor<1x128x8xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%q : tensor<128x256xf8E4M3FN> scales %s : tensor<128x8xf8E8M0FNU>)
      rhs(%wq : tensor<1x128x256xf8E4M3FN> scales %ws : tensor<1x128x8xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<128x128xf32>
  %tq, %ts = moe.mx_quantize %rows {axis = 0 : i64, quant = #mx}
      : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<4x256xf8E8M0FNU>
  %bq, %bs = moe.mx_quantize %b {axis = 0 : i64, quant = #mx}
      : tensor<128x128xbf16> -> tensor<128x128xf8E4M3FN>, tensor<4x128xf8E8M0FNU>
  %e = moe.expert_matmul
      lhs(%tq : tensor<128x256xf8E4M3FN> scales %ts : tensor<4x256xf8E8M0FNU>)
      rhs(%bq : tensor<128x128xf8E4M3FN> scales %bs : tensor<4x128xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<1x256x128xf32>
  return %r, %e : tensor<128x128xf32>, tensor<1x256x128xf32>
}

// -----

// The same GEMMs with the expert GEMM's lhs read K-major (a configuration
// without lhs_m_major): its rounding along the slots is written transposed,
// so nothing pairs, and x has two kernels, one per rounding.

// CHECK-LABEL: func.func @unpaired(
// CHECK:         call @mx_operand_0_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<48x256xbf16>, memref<128xi32>, memref<128x256xbf16>)
// CHECK:         call @block_matmul_
// CHECK:         call @mx_operand_{{[0-9]+}}_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<48x256xbf16>, memref<128xi32>, memref<256x128xbf16>)
// CHECK:         call @expert_matmul_
// Different quantizations do not pair either.
// CHECK-LABEL: func.func @other_rule(
// CHECK:         call @mx_operand_{{[0-9]+}}_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<48x256xbf16>, memref<128xi32>, memref<128x256xbf16>)
// CHECK:         call @mx_operand_{{[0-9]+}}_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<48x256xbf16>, memref<128xi32>, memref<128x256xbf16>)
#mx = #moe.mx<f8E4M3FN, block = 32, rule = rceil>
#floor = #moe.mx<f8E4M3FN, block = 32, rule = floor>
func.func @unpaired(%x: tensor<48x256xbf16>, %tok: tensor<128xi32>,
                    %w: tensor<1x128x256xbf16>, %b: tensor<128x128xbf16>,
                    %blk: tensor<1xi32>)
    -> (tensor<128x128xf32>, tensor<1x256x128xf32>) {
  %rows = moe.gather_rows %x[%tok]
      : tensor<48x256xbf16>, tensor<128xi32> -> tensor<128x256xbf16>
  %q, %s = moe.mx_quantize %rows {axis = 1 : i64, quant = #mx}
      : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w {axis = 2 : i64, quant = #mx}
      : tensor<1x128x256xbf16> -> tensor<1x128x256xf8E4M3FN>, tensor<1x128x8xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%q : tensor<128x256xf8E4M3FN> scales %s : tensor<128x8xf8E8M0FNU>)
      rhs(%wq : tensor<1x128x256xf8E4M3FN> scales %ws : tensor<1x128x8xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<128x128xf32>
  %tq, %ts = moe.mx_quantize %rows {axis = 0 : i64, quant = #mx}
      : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<4x256xf8E8M0FNU>
  %bq, %bs = moe.mx_quantize %b {axis = 0 : i64, quant = #mx}
      : tensor<128x128xbf16> -> tensor<128x128xf8E4M3FN>, tensor<4x128xf8E8M0FNU>
  %e = moe.expert_matmul
      lhs(%tq : tensor<128x256xf8E4M3FN> scales %ts : tensor<4x256xf8E8M0FNU>)
      rhs(%bq : tensor<128x128xf8E4M3FN> scales %bs : tensor<4x128xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64,
        moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true>}
      -> tensor<1x256x128xf32>
  return %r, %e : tensor<128x128xf32>, tensor<1x256x128xf32>
}

func.func @other_rule(%x: tensor<48x256xbf16>, %tok: tensor<128xi32>,
                      %w: tensor<1x128x256xbf16>, %b: tensor<128x128xbf16>,
                      %blk: tensor<1xi32>)
    -> (tensor<128x128xf32>, tensor<1x256x128xf32>) {
  %rows = moe.gather_rows %x[%tok]
      : tensor<48x256xbf16>, tensor<128xi32> -> tensor<128x256xbf16>
  %q, %s = moe.mx_quantize %rows {axis = 1 : i64, quant = #mx}
      : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w {axis = 2 : i64, quant = #mx}
      : tensor<1x128x256xbf16> -> tensor<1x128x256xf8E4M3FN>, tensor<1x128x8xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%q : tensor<128x256xf8E4M3FN> scales %s : tensor<128x8xf8E8M0FNU>)
      rhs(%wq : tensor<1x128x256xf8E4M3FN> scales %ws : tensor<1x128x8xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<128x128xf32>
  %tq, %ts = moe.mx_quantize %rows {axis = 0 : i64, quant = #floor}
      : tensor<128x256xbf16> -> tensor<128x256xf8E4M3FN>, tensor<4x256xf8E8M0FNU>
  %bq, %bs = moe.mx_quantize %b {axis = 0 : i64, quant = #mx}
      : tensor<128x128xbf16> -> tensor<128x128xf8E4M3FN>, tensor<4x128xf8E8M0FNU>
  %e = moe.expert_matmul
      lhs(%tq : tensor<128x256xf8E4M3FN> scales %ts : tensor<4x256xf8E8M0FNU>)
      rhs(%bq : tensor<128x128xf8E4M3FN> scales %bs : tensor<4x128xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<1x256x128xf32>
  return %r, %e : tensor<128x128xf32>, tensor<1x256x128xf32>
}
