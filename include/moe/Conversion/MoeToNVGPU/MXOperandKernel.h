//===- MXOperandKernel.h - GEMM operands as exact bf16 values ---*- C++ -*-===//
//
// Builds the memory-bound kernels that turn a GEMM operand into what the
// Bf16Operands GEMM kernels stream with TMA: bf16 values, K contiguous.
//
//   values  [batch, rows, cols] bf16 or f32, MX-quantized along `cols` or
//           `rows` in blocks of 32 (the GEMM's contraction axis) and
//           dequantized again: the exact values the MX GEMM multiplies,
//           which bf16 holds exactly (docs/numerics.md). Without a
//           quantization the values are only rounded to bf16.
//   codes   [batch, rows, cols] FP8 codes with their E8M0 scales (weights
//           quantized by the caller): dequantized.
//
//   out     bf16 [batch, rows, cols] (along cols) or [batch, cols, rows]
//           (or, codesOut, quantized values along cols: their FP8 codes
//           [batch, rows, cols] and E8M0 scales [batch, rows, cols / 32])
//           (along rows: written transposed, so K is contiguous; or as
//           [batch, rows, cols] for a GEMM that reads it N-major)
//
// Values may be the rows of a moe.gather_rows: row r is then read from
// source[ids[r]] (a token's row of x or dy), zeros where ids[r] is padding
// (-1), so the gathered copy is never written.
//
// One thread handles one 32-element block along cols, or two neighbouring
// columns of a 32-row block along rows (so a warp reads 128 contiguous
// bytes of each row and writes 64 contiguous bytes per column). The block
// scale comes from the shared MX builders (amax, scale rule, E8M0 decode);
// the elements round with the hardware conversion cvt.rn.satfinite to
// e4m3x2 / e5m2x2, which is round-to-nearest-even with saturation to the
// largest finite value, the rounding of buildEncodeFP8, and convert back
// exactly through f16x2.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_MXOPERANDKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_MXOPERANDKERNEL_H

#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <array>

namespace mlir::moe {

/// The static problem of one operand kernel.
struct MXOperandProblem {
  int64_t batch;
  int64_t rows;
  int64_t cols;
  /// The contraction (quantization) axis: rows (the output is transposed)
  /// or cols.
  bool alongRows;
  /// bf16 or f32 values, or FP8 codes (f8E4M3FN / f8E5M2) that come with
  /// E8M0 scales [batch, rows, cols / 32] (along cols) or [batch, rows / 32,
  /// cols] (along rows).
  Type sourceType;
  /// The quantization of values (none or null: round to bf16 only). Unused
  /// for codes.
  MXQuantAttr quant;
  /// Along rows: write the output transposed ([batch, cols, rows], K
  /// contiguous), or in the source's layout (for a GEMM that reads the
  /// operand N-major).
  bool transposeOut = true;
  /// Values only, batch 1: the rows come from a source of `sourceRows` rows
  /// through i32 row ids (negative or out of range: a zero row); 0 when the
  /// source is read as it is.
  int64_t sourceRows = 0;
  /// Quantized values only: one read of the source gives both roundings a
  /// pair of GEMMs takes, the one along cols ([batch, rows, cols], K
  /// contiguous) and the one along rows in the source's layout (for a GEMM
  /// that reads it M- or N-major); `alongRows` and `transposeOut` are then
  /// unused. Needs cols a multiple of 256 and rows of 32.
  bool bothAxes = false;
  /// Quantized values along cols, batch * rows a multiple of 8: write the
  /// FP8 codes [batch, rows, cols] and their E8M0 scale bytes instead of
  /// the bf16 values (for a GEMM that decodes the operand itself,
  /// #moe.gemm_config rhs_codes or lhs_codes): half the bytes. With
  /// bothAxes, the rounding along cols is the one written as codes. The
  /// scale bytes are laid out for that GEMM's TMA: K tile by K tile of
  /// kCodesScaleTileK columns, the two bytes of each of the batch * rows
  /// rows, [ceil(cols / 64), batch * rows, 2] (a last half K tile's second
  /// byte is 127), which is [ceil(cols / 64) * batch * rows / 8, 16].
  bool codesOut = false;
  /// codesOut, cols a multiple of 64: the codes of each K tile of a row in
  /// wgmma A-fragment order (lhsCodeByte, LhsCodeLayout.h) instead of
  /// column order, for a GEMM that decodes its lhs into registers
  /// (lhs_codes).
  bool fragmentOrder = false;
  /// Values along rows written in place, cols a multiple of 8: through the
  /// shared-memory tile of the transposed form (16-byte row loads, a column
  /// a thread) instead of a column pair a thread (kernel choice
  /// in-place-tiles).
  bool inPlaceTiles = false;
};

/// The K tile of the scale layout of MXOperandProblem::codesOut: the tile K
/// of the bf16-operands GEMM kernels (one 128-byte swizzle panel of bf16).
constexpr int64_t kCodesScaleTileK = 64;

/// The shape [K tiles * rows / 8, 16] of the scale bytes that an operand
/// kernel with codesOut writes for `problem`.
std::array<int64_t, 2> codesOutScaleShape(const struct MXOperandProblem &problem);

/// What the host needs to launch a built operand kernel. Kernel ABI, in
/// order: (!llvm.ptr<1> source[, !llvm.ptr<1> scales | ids],
/// !llvm.ptr<1> out[, !llvm.ptr<1> outAlongRows][, !llvm.ptr<1>
/// outScales]), scales for codes, ids for gathered rows, the second output
/// for `bothAxes` (the first is then the rounding along cols) and the
/// scale bytes for `codesOut` (the first output is then the codes).
struct MXOperandLaunch {
  gpu::GPUFuncOp kernel;
  std::array<int64_t, 3> grid;
  std::array<int64_t, 3> block;
};

/// Whether `sourceType` is an FP8 code type the kernels dequantize.
bool isMXCodeType(Type sourceType);

/// Whether one kernel can write both roundings of `problem` (bothAxes):
/// quantized values, columns a multiple of 256 and rows of 32.
bool canRoundBothAxes(const MXOperandProblem &problem);

/// Whether an operand kernel can compute `problem`; explains why not
/// through `emitError`.
LogicalResult checkMXOperandKernel(const MXOperandProblem &problem,
                                   function_ref<InFlightDiagnostic()> emitError);

/// Builds the kernel `name` for `problem` at the end of `module`. The
/// problem must pass checkMXOperandKernel.
MXOperandLaunch buildMXOperandKernel(OpBuilder &builder, Location loc,
                                     gpu::GPUModuleOp module, StringRef name,
                                     const MXOperandProblem &problem,
                                     const TargetInfo &target);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_MXOPERANDKERNEL_H
