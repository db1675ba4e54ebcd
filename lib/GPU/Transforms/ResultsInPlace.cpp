//===- ResultsInPlace.cpp - results computed in their out-parameters ------===//
//
// buffer-results-to-out-params leaves
//
//   %a = memref.alloc() : memref<4x256x256xf32>
//   call @expert_matmul_11_launch(..., %a)
//   %v = memref.expand_shape %a [[0], [1], [2, 3]] ...
//   memref.copy %v, %out : memref<4x256x2x128xf32> to memref<4x256x2x128xf32>
//   memref.dealloc %a
//
// and this pass makes it
//
//   %a = memref.collapse_shape %out [[0], [1], [2, 3]]   (at the entry)
//   call @expert_matmul_11_launch(..., %a)
//
// when %out is used by the copy alone (an out-parameter nothing else reads
// or writes) and %a (or its view) is used after the copy by its dealloc
// alone: the values the copy would have moved are the ones the buffer
// holds at the copy, and nothing reads the buffer afterwards.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOERESULTSINPLACE
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

namespace {

/// Whether every use of `value` other than `except` is a memref.dealloc
/// that comes after `copy` in its block, collected in `deallocs`; false
/// for a use before the copy other than `except` that is not allowed.
bool onlyDeallocatedAfter(Value value, Operation *copy, Operation *except,
                          SmallVectorImpl<Operation *> &deallocs) {
  for (Operation *user : value.getUsers()) {
    if (user == except || user == copy)
      continue;
    Operation *inBlock = copy->getBlock()->findAncestorOpInBlock(*user);
    if (!inBlock)
      return false;
    if (copy->isBeforeInBlock(inBlock) || inBlock == copy) {
      if (!isa<memref::DeallocOp>(user))
        return false;
      deallocs.push_back(user);
    }
  }
  return true;
}

struct MoeResultsInPlacePass
    : moe::impl::MoeResultsInPlaceBase<MoeResultsInPlacePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &entry = func.getBody().front();
    SmallVector<memref::CopyOp> copies;
    for (Operation &op : entry)
      if (auto copy = dyn_cast<memref::CopyOp>(op))
        copies.push_back(copy);
    IRRewriter rewriter(&getContext());
    for (memref::CopyOp copy : copies) {
      auto out = dyn_cast<BlockArgument>(copy.getTarget());
      if (!out || out.getOwner() != &entry || !out.hasOneUse() ||
          copy.getSource().getType() != out.getType())
        continue;
      // The source: an allocation of this block, or a reshape of one.
      Value source = copy.getSource();
      Operation *reshape = source.getDefiningOp();
      memref::AllocOp alloc = dyn_cast_or_null<memref::AllocOp>(reshape);
      if (alloc) {
        reshape = nullptr;
      } else if (isa_and_nonnull<memref::ExpandShapeOp,
                                 memref::CollapseShapeOp>(reshape)) {
        alloc = reshape->getOperand(0).getDefiningOp<memref::AllocOp>();
      } else {
        continue;
      }
      if (!alloc || alloc->getBlock() != &entry ||
          !alloc.getDynamicSizes().empty() ||
          !alloc.getType().getLayout().isIdentity())
        continue;
      SmallVector<Operation *> deallocs;
      if (!onlyDeallocatedAfter(alloc.getResult(), copy, reshape, deallocs) ||
          (reshape &&
           !onlyDeallocatedAfter(source, copy, nullptr, deallocs)))
        continue;

      // The buffer as a view of the out-parameter, before its first use.
      rewriter.setInsertionPoint(alloc);
      Value view = out;
      if (auto expand = dyn_cast_or_null<memref::ExpandShapeOp>(reshape)) {
        view = memref::CollapseShapeOp::create(
            rewriter, alloc.getLoc(), out,
            expand.getReassociationIndices());
      } else if (auto collapse =
                     dyn_cast_or_null<memref::CollapseShapeOp>(reshape)) {
        auto type = cast<MemRefType>(alloc.getType());
        view = memref::ExpandShapeOp::create(
            rewriter, alloc.getLoc(), type.getShape(), out,
            collapse.getReassociationIndices());
      }
      if (view.getType() != alloc.getType()) {
        // A layout the reshape cannot give back: leave the copy.
        if (view != out)
          rewriter.eraseOp(view.getDefiningOp());
        continue;
      }
      for (Operation *dealloc : deallocs)
        rewriter.eraseOp(dealloc);
      rewriter.eraseOp(copy);
      rewriter.replaceAllUsesWith(alloc.getResult(), view);
      rewriter.eraseOp(alloc);
      if (reshape && reshape->use_empty())
        rewriter.eraseOp(reshape);
    }
  }
};

} // namespace
