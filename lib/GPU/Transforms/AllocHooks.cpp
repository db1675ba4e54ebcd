//===- AllocHooks.cpp - host allocations through the JIT's hooks ----------===//
//
// Renames the external malloc / aligned_alloc / free of a lowered module to
// the _mlir_memref_to_llvm_* names (Passes.td says why). Renaming the
// declaration renames every call, since calls name their callee by symbol.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEALLOCHOOKS
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

namespace {

struct MoeAllocHooksPass : moe::impl::MoeAllocHooksBase<MoeAllocHooksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    static constexpr std::pair<StringLiteral, StringLiteral> kHooks[] = {
        {"malloc", "_mlir_memref_to_llvm_alloc"},
        {"aligned_alloc", "_mlir_memref_to_llvm_aligned_alloc"},
        {"free", "_mlir_memref_to_llvm_free"},
    };
    for (auto [libc, hook] : kHooks) {
      auto func = symbols.lookup<LLVM::LLVMFuncOp>(libc);
      if (!func)
        continue;
      if (!func.isExternal()) {
        func.emitError() << "moe-alloc-hooks: the module defines '" << libc
                         << "' itself; its calls cannot be routed to '"
                         << hook << "'";
        return signalPassFailure();
      }
      if (symbols.lookup(hook)) {
        // Both spellings declared (finalize-memref-to-llvm's generic
        // functions and gpu-to-llvm's libc ones): one declaration stays.
        if (failed(SymbolTable::replaceAllSymbolUses(
                func, StringAttr::get(&getContext(), hook), module)))
          return signalPassFailure();
        symbols.erase(func);
        continue;
      }
      if (failed(symbols.rename(func, hook)))
        return signalPassFailure();
    }
  }
};

} // namespace
