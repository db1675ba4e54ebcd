//===- GPUReductionsInnermost.cpp - reduction loops last in linalg.generic -===//
//
// Interchanges the loops of every linalg.generic so that its parallel loops
// come first and its reduction loops last, each group in its original
// order. convert-linalg-to-parallel-loops then gives one scf.parallel over
// all parallel dimensions with the reductions as scf.for loops inside,
// which gpu-map-parallel-loops maps to threads that each reduce
// sequentially, in the host lowering's order (the GPU results stay
// bit-identical). A reduction that is not innermost would leave a nested
// scf.parallel inside each thread instead.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUREDUCTIONSINNERMOST
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

struct MoeGPUReductionsInnermostPass
    : moe::impl::MoeGPUReductionsInnermostBase<
          MoeGPUReductionsInnermostPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) { generics.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : generics) {
      SmallVector<unsigned> order, reductions;
      for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
        (linalg::isReductionIterator(type) ? reductions : order).push_back(i);
      order.append(reductions);
      if (llvm::equal(order, llvm::seq<unsigned>(0, order.size())))
        continue;
      rewriter.setInsertionPoint(op);
      // A permutation of the op's own loops is always accepted.
      FailureOr<linalg::GenericOp> moved =
          linalg::interchangeGenericOp(rewriter, op, order);
      assert(succeeded(moved) && "interchange by a permutation");
      (void)moved;
    }
  }
};

} // namespace
