//===- FreeAfterLastUse.cpp - each buffer freed after its last use --------===//
//
// The ownership-based buffer deallocation puts every memref.dealloc of a
// block at its end. For each unconditional dealloc of a memref.alloc of the
// same block, this pass collects the values derived from the buffer (every
// result of every op that uses it or a value derived from it, transitively:
// views, casts, extracted pointers and what is computed from them) and
// moves the dealloc right after the last op of the block that uses any of
// them (an op with a use in its regions counts as that op). Conservative:
// a derived value that is not really an alias only keeps the buffer longer.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFREEAFTERLASTUSE
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

namespace {

/// The last op of `block` that uses `root` or a value derived from it,
/// other than `dealloc`; null if none.
Operation *lastUse(Value root, Block &block, Operation *dealloc) {
  SmallVector<Value> work = {root};
  DenseSet<Value> seen = {root};
  Operation *last = nullptr;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (user == dealloc)
        continue;
      Operation *inBlock = block.findAncestorOpInBlock(*user);
      if (inBlock && (!last || last->isBeforeInBlock(inBlock)))
        last = inBlock;
      for (Value result : user->getResults())
        if (seen.insert(result).second)
          work.push_back(result);
      // Values an op yields out of its regions are derived too.
      if (inBlock && inBlock != user)
        for (Value result : inBlock->getResults())
          if (seen.insert(result).second)
            work.push_back(result);
    }
  }
  return last;
}

struct MoeFreeAfterLastUsePass
    : moe::impl::MoeFreeAfterLastUseBase<MoeFreeAfterLastUsePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    for (Block &block : func.getBody()) {
      SmallVector<memref::DeallocOp> deallocs;
      for (Operation &op : block)
        if (auto dealloc = dyn_cast<memref::DeallocOp>(op))
          deallocs.push_back(dealloc);
      for (memref::DeallocOp dealloc : deallocs) {
        auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
        if (!alloc || alloc->getBlock() != &block)
          continue;
        Operation *last = lastUse(alloc.getResult(), block, dealloc);
        if (last && last->isBeforeInBlock(dealloc))
          dealloc->moveAfter(last);
      }
    }
  }
};

} // namespace
