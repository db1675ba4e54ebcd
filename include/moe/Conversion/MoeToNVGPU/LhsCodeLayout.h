//===- LhsCodeLayout.h - lhs FP8 codes in wgmma A-fragment order -*- C++ -*-===//
//
// The layout of a GEMM lhs that the sm_90a kernels read as FP8 codes and
// decode into the registers of a register-A wgmma (#moe.gemm_config
// lhs_codes): the operand kernel writes each row's codes K tile by K tile
// of kLhsCodeTileK columns, and within a K tile column c at byte
// lhsCodeByte(c). The order is the one of wgmma's A fragment (bf16,
// m64nNk16, per warp the rows of mma.m16n8k16; CUTLASS's SM90 GMMA
// ALayout_64x16): lane 4 g + q of a warp holds, in k16 step j, the columns
// 16 j + 2 q, 16 j + 2 q + 1 (register 0 of row g, 1 of row g + 8) and
// 16 j + 2 q + 8, 16 j + 2 q + 9 (registers 2 and 3). Those four codes sit
// at bytes 16 q + 4 j .. 16 q + 4 j + 3, so one 16-byte load of bytes
// 16 q .. 16 q + 15 of a row gives a lane its codes of all four k16 steps.
// The permutation stays inside a K tile: the MMAs multiply the same values
// in the same order as from bf16 operands, so the results are the same
// bits.
//
// One function serves the operand kernel (IR values), the GEMM consumers
// and the unit test that holds it to the fragment layout
// (unittests/Conversion/KernelIndexingTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_LHSCODELAYOUT_H
#define MOE_CONVERSION_MOETONVGPU_LHSCODELAYOUT_H

#include <cstdint>

namespace mlir::moe {

/// Columns of one K tile of lhs codes: the tile K of the bf16-operands
/// GEMM kernels.
constexpr int64_t kLhsCodeTileK = 64;

/// The byte of a K tile that holds column `c` (0 .. 63) of its row:
/// 16 q + 4 j + t for c = 16 j + h, q = (h % 8) / 2, t = 2 (h / 8) + h % 2.
/// `o` is an integer-ops object (IntOps, or KernelEmitter's IROps): the
/// same arithmetic for integers and for IR values.
template <typename Ops, typename V>
V lhsCodeByte(Ops o, V c) {
  V j = o.div(c, 16);
  V h = o.rem(c, 16);
  V q = o.div(o.rem(h, 8), 2);
  V t = o.add(o.mul(o.div(h, 8), 2), o.rem(h, 2));
  return o.add(o.add(o.mul(q, 16), o.mul(j, 4)), t);
}

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_LHSCODELAYOUT_H
