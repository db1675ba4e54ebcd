//===- ActBwdKernel.h - P1's activation backward as P2-P4's operands -*- C++ -*-===//
//
// Builds the memory-bound kernel that computes P1's activation backward
// from the dA a plain P1 GEMM stores, and writes what the GEMMs after it
// read: [dg | du] MX-rounded along its columns (P2's lhs, contracting over
// 2I) and along its rows (P3's rhs, over the slots), a * h (or h) rounded
// along the rows (P4's lhs), the per-tile sums of <dA, h> that the
// affinity gradient adds up, and the f32 values that anything else reads.
// Measured on the H200 against P1's activation epilogue: the epilogue made
// P1 3.78 ms against 2.22 ms without it at reference shape 1, for work that
// this pass does beside the two operand kernels it replaces
// (docs/results/2026-12-03-act-bwd-operands.md).
//
//   per CTA: 32 slots x 256 columns of dA (256 threads; or 128 and 128,
//   act-bwd-narrow: half the shared memory, twice the CTAs an SM)
//   [checkpoint: thread c loads column c's 32 g and u of the bf16
//    checkpoint, times the slots' masks, into shared memory]
//   warp w, rows w + 8 k; lane l, columns 8 l .. 8 l + 7 (rows w + 4 k,
//   columns 4 l .. 4 l + 3 of 128):
//     dA, g, u (16-byte loads), a -> buildGatedActBwd (the host lowering's
//     f32 math) -> dg, du, h, a * h
//     dg, du rounded along the columns: the amax of the block's 4 lanes
//       (two xor shuffles; 8 lanes, three), 16-byte (8-byte) bf16 stores
//       (MXRounding)
//     <dA, h> over the lane's columns, then the warp's 32 lanes (xor
//       shuffles, the same order on every run): one partial per row
//     dg, du, a * h into shared-memory tiles
//   thread c: column c's 32 values of each tile rounded along the rows,
//     stored in place (a warp writes 64 contiguous bytes per row)
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_ACTBWDKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_ACTBWDKERNEL_H

#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"
#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <array>

namespace mlir::moe {

/// Columns of dA one CTA takes (one per thread): by default, and with
/// act-bwd-narrow.
constexpr int64_t kActBwdTileColumns = 256;
constexpr int64_t kActBwdNarrowTileColumns = 128;

/// The static problem of one activation-backward kernel.
struct MXActBwdProblem {
  /// Slots (rows of dA), a multiple of 32, and I (its columns), a multiple
  /// of 32.
  int64_t slots;
  int64_t n;
  Activation activation = Activation::swiglu;
  /// The clamp limits of g and u, or null.
  ClampAttr clamp;
  /// gate_up is the bf16 checkpoint [numBlocks, 2, n, blockSize] (g =
  /// ckpt[s / B, 0, j, s % B] times the slot's mask, 1 for a token and 0
  /// for padding, from the slots' token ids) instead of f32 rows [slots,
  /// 2n].
  bool checkpoint = false;
  int64_t blockSize = 0;
  /// The MX quantizations of the rounded outputs (null: not written):
  /// [dg | du] along its columns ([slots, 2n], 32-column blocks inside dg
  /// or du) and along its rows in place, and the rows' operand of P4
  /// (a * h, or h without `scaleRows`) along its rows in place ([slots, n]).
  MXQuantAttr dGateUpAlongCols, dGateUpAlongRows, rowsOperandAlongRows;
  /// P4's operand is a * h (moe.scale_rows by the slot affinities), else h.
  bool scaleRows = true;
  /// f32 outputs for other readers: [dg | du], h, a * h; and the sums of
  /// <dA, h> over each tile of each row [slots, ceil(n / tileColumns)].
  bool writeDGateUp = false, writeH = false, writeScaledH = false,
       writePartials = false;
  /// Columns of dA a CTA takes, one thread each: kActBwdTileColumns or
  /// kActBwdNarrowTileColumns.
  int64_t tileColumns = kActBwdTileColumns;

  int64_t outputs() const {
    return bool(dGateUpAlongCols) + bool(dGateUpAlongRows) +
           bool(rowsOperandAlongRows) + writeDGateUp + writeH + writeScaledH +
           writePartials;
  }
};

/// The shape [slots, ceil(n / tileColumns)] of the partial sums.
std::array<int64_t, 2> actBwdPartialsShape(const MXActBwdProblem &problem);

/// Whether the kernel can compute `problem` (convert-moe-to-nvgpu leaves
/// the activation backward to the elementwise lowering where it cannot).
bool fitsMXActBwdKernel(const MXActBwdProblem &problem);

/// What the host needs to launch a built kernel. Kernel ABI, in order:
/// (!llvm.ptr<1> dA, gateUp, affinities[, tokenIds], then the outputs that
/// the problem writes in this order: [dg | du] along the columns, along
/// the rows, the rows' operand along the rows, f32 [dg | du], h, a * h,
/// partials). dA, affinities and the f32 outputs are f32, the rounded ones
/// bf16, gateUp f32 rows or the bf16 checkpoint, tokenIds i32.
struct MXActBwdLaunch {
  gpu::GPUFuncOp kernel;
  std::array<int64_t, 3> grid;
  std::array<int64_t, 3> block;
  /// Bytes of dynamic shared memory: one f32 tile of 32 x (tileColumns +
  /// 4) words per value rounded along the rows, and two for the
  /// checkpoint's g and u.
  int64_t dynamicSharedMemory;
};

/// Builds the kernel `name` for `problem` at the end of `module`. The
/// problem must fit (fitsMXActBwdKernel).
MXActBwdLaunch buildMXActBwdKernel(OpBuilder &builder, Location loc,
                                   gpu::GPUModuleOp module, StringRef name,
                                   const MXActBwdProblem &problem);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_ACTBWDKERNEL_H
