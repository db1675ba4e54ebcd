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
// Loops that carry reductions (init values) are left as they are.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPULOOPSHAPE
#include "moe/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

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
      std::vector<unsigned> all(loop.getNumLoops());
      std::iota(all.begin(), all.end(), 0u);
      rewriter.setInsertionPoint(loop);
      collapseParallelLoops(rewriter, loop, {all});
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
