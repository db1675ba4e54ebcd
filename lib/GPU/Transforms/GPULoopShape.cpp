//===- GPULoopShape.cpp - scf.parallel nests shaped for GPU blocks ---------===//
//
// Gives every outermost scf.parallel (not inside another one or a
// gpu.launch) the shape gpu-map-parallel-loops turns into a sensible
// launch: all its dimensions collapsed into one (consecutive iterations,
// hence consecutive threads, touch consecutive innermost elements), then
// tiled by `block`: an outer loop over blocks (the grid) and an inner one
// over the threads of a block.
//
//   scf.parallel (%i, %j) = (0, 0) to (64, 96) step (1, 1)
//     ->
//   scf.parallel (%b) = (0) to (6144) step (256)          grid
//     scf.parallel (%t) = (0) to (256) step (1)           threads
//       scf.if (%b + %t < 6144) { %i, %j from %b + %t; body }
//
// With constant bounds (every loop of the pipeline) the indices are
// recovered with unsigned 32-bit division and remainder when the loop has
// fewer than 2^31 iterations, with 64-bit ones otherwise.
//
// Loops that carry reductions (init values) are left as they are.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPULOOPSHAPE
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Collapses the dimensions of `loop` (constant bounds and steps) into one
/// loop over their product, the last dimension fastest. The original
/// induction variables are recovered by unsigned division and remainder,
/// in i32 when the product fits: 64-bit division by a constant costs a GPU
/// several times the 32-bit one, and an elementwise kernel does one per
/// dimension per element. Returns false (nothing changed) when a bound or
/// step is not a constant.
bool collapseLoop(RewriterBase &rewriter, scf::ParallelOp loop) {
  SmallVector<int64_t> lbs, steps, trips;
  for (auto [lbValue, ubValue, stepValue] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> lb = getConstantIntValue(lbValue);
    std::optional<int64_t> ub = getConstantIntValue(ubValue);
    std::optional<int64_t> step = getConstantIntValue(stepValue);
    if (!lb || !ub || !step || *step <= 0 || *ub < *lb)
      return false;
    lbs.push_back(*lb);
    steps.push_back(*step);
    trips.push_back((*ub - *lb + *step - 1) / *step);
  }
  int64_t total = 1;
  for (int64_t trip : trips)
    total *= trip;
  Location loc = loop.getLoc();
  rewriter.setInsertionPoint(loop);
  auto index = [&](OpBuilder &b, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  auto collapsed = scf::ParallelOp::create(
      rewriter, loc, ValueRange{index(rewriter, 0)},
      ValueRange{index(rewriter, total)}, ValueRange{index(rewriter, 1)});
  Block *body = collapsed.getBody();
  rewriter.setInsertionPointToStart(body);
  bool narrow = total <= std::numeric_limits<int32_t>::max();
  Type intType = narrow ? rewriter.getI32Type() : rewriter.getI64Type();
  Value rest = arith::IndexCastUIOp::create(rewriter, loc, intType,
                                            collapsed.getInductionVars()[0]);
  SmallVector<Value> ivs(trips.size());
  for (size_t d = trips.size(); d-- > 0;) {
    Value position = rest;
    if (d > 0) {
      Value size =
          arith::ConstantIntOp::create(rewriter, loc, intType, trips[d]);
      position = arith::RemUIOp::create(rewriter, loc, rest, size);
      rest = arith::DivUIOp::create(rewriter, loc, rest, size);
    }
    Value iv = arith::IndexCastUIOp::create(rewriter, loc,
                                            rewriter.getIndexType(), position);
    if (steps[d] != 1)
      iv = arith::MulIOp::create(rewriter, loc, iv, index(rewriter, steps[d]));
    if (lbs[d] != 0)
      iv = arith::AddIOp::create(rewriter, loc, iv, index(rewriter, lbs[d]));
    ivs[d] = iv;
  }
  // Move the body over, minus its terminator (the new loop has its own).
  Block *old = loop.getBody();
  rewriter.eraseOp(old->getTerminator());
  rewriter.inlineBlockBefore(old, body->getTerminator(), ivs);
  rewriter.eraseOp(loop);
  return true;
}

/// The outermost scf.parallel loops of `func` without reductions.
SmallVector<scf::ParallelOp> outermostLoops(func::FuncOp func) {
  SmallVector<scf::ParallelOp> loops;
  func.walk([&](scf::ParallelOp loop) {
    if (loop.getInitVals().empty() &&
        !loop->getParentOfType<scf::ParallelOp>() &&
        !loop->getParentOfType<gpu::LaunchOp>())
      loops.push_back(loop);
  });
  return loops;
}

struct MoeGPULoopShapePass
    : moe::impl::MoeGPULoopShapeBase<MoeGPULoopShapePass> {
  using MoeGPULoopShapeBase::MoeGPULoopShapeBase;

  void runOnOperation() override {
    int64_t threads = block;
    if (threads < 32 || threads > 1024 || threads % 32) {
      getOperation().emitError()
          << "moe-gpu-loop-shape: block " << threads
          << " is not a multiple of 32 in [32, 1024]";
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp loop : outermostLoops(getOperation())) {
      if (loop.getNumLoops() < 2)
        continue;
      if (!collapseLoop(rewriter, loop)) {
        std::vector<unsigned> all(loop.getNumLoops());
        std::iota(all.begin(), all.end(), 0u);
        rewriter.setInsertionPoint(loop);
        collapseParallelLoops(rewriter, loop, {all});
      }
    }
    for (scf::ParallelOp loop : outermostLoops(getOperation())) {
      // A short loop gets one block of just enough warps.
      int64_t tile = threads;
      std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()[0]);
      std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound()[0]);
      std::optional<int64_t> step = getConstantIntValue(loop.getStep()[0]);
      if (lb && ub && step && *step > 0) {
        int64_t trips = (*ub - *lb + *step - 1) / *step;
        tile = std::min<int64_t>(tile, std::max<int64_t>(32, (trips + 31) /
                                                                 32 * 32));
      }
      scf::tileParallelLoop(loop, {tile}, /*noMinMaxBounds=*/true);
    }
  }
};

} // namespace
