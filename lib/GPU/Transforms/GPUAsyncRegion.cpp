//===- GPUAsyncRegion.cpp - a public function's gpu host ops on one stream ===//
//
// The device-resident pipeline makes the gpu host ops of the public entry
// function asynchronous on one stream. By default with upstream
// gpu-async-region, on public functions with a body only: the kernel
// launch functions of moe-lower-gpu-launches (host arguments) chain their
// own stream's tokens, and the pass would add a second dependency to their
// gpu.launch_func, which gpu-to-llvm cannot lower (it takes one). The
// upstream pass makes a stream per region between host synchronizations,
// and synchronizes before every op with side effects and at the return.
//
// With caller-stream the function works on the stream of its caller
// instead, and leaves the synchronization to it:
//
//   func.func @f(%a: memref<...>, ...) {
//     %b = gpu.alloc () ...
//     gpu.launch_func @k::@k ... args(%a, %b)
//     gpu.dealloc %b ...
//     return
//   }
//     ->
//   func.func @f(%a: memref<...>, ..., %stream: !llvm.ptr) {
//     %t0 = builtin.unrealized_conversion_cast %stream
//             : !llvm.ptr to !gpu.async.token
//     %b, %t1 = gpu.alloc async [%t0] () ...
//     %t2 = gpu.launch_func async [%t1] @k::@k ... args(%a, %b)
//     %t3 = gpu.dealloc async [%t2] %b ...
//     return
//   }
//
// gpu-to-llvm lowers a token to the stream it is ordered on, so the cast
// folds away (reconcile-unrealized-casts) and every mgpu* call gets the
// caller's stream. No gpu.wait is left: a token that is not the result of
// a stream creation would lower to event calls.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "mlir/Dialect/Async/IR/Async.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUASYNCREGION
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

namespace {

/// Makes `op` asynchronous after `token` and returns its token: a clone
/// with a token result replaces it.
Value makeAsync(OpBuilder &b, gpu::AsyncOpInterface asyncOp, Value token) {
  Operation *op = asyncOp;
  asyncOp.addAsyncDependency(token);
  SmallVector<Type> resultTypes(op->getResultTypes());
  resultTypes.push_back(token.getType());
  b.setInsertionPoint(op);
  Operation *async = Operation::create(
      op->getLoc(), op->getName(), resultTypes, op->getOperands(),
      op->getDiscardableAttrDictionary(), op->getPropertiesStorage(),
      op->getSuccessors(), /*numRegions=*/0);
  b.insert(async);
  op->replaceAllUsesWith(async->getResults().drop_back());
  op->erase();
  return async->getResults().back();
}

/// Queues the gpu host ops of `func` on the stream of a new trailing
/// argument, in program order; see the file comment.
LogicalResult queueOnCallerStream(func::FuncOp func) {
  Block &entry = func.getBody().front();
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("has more than one block; moe-gpu-async-region "
                            "expects structured control flow");
  // Everything is checked before the function changes.
  SmallVector<gpu::AsyncOpInterface> queued;
  WalkResult checked = func.walk([&](Operation *op) {
    if (isa<gpu::LaunchOp>(op)) {
      op->emitOpError("must be outlined (gpu-kernel-outlining) before "
                      "moe-gpu-async-region");
      return WalkResult::interrupt();
    }
    if (isa<func::CallOp, func::CallIndirectOp>(op)) {
      op->emitOpError("is a call, which may touch device memory on the host; "
                      "moe-gpu-async-region cannot order it on the caller's "
                      "stream");
      return WalkResult::interrupt();
    }
    if (isa<gpu::WaitOp>(op)) {
      op->emitOpError("synchronizes; with caller-stream the caller does");
      return WalkResult::interrupt();
    }
    auto asyncOp = dyn_cast<gpu::AsyncOpInterface>(op);
    if (!asyncOp)
      return WalkResult::advance();
    if (op->getBlock() != &entry) {
      op->emitOpError("is in a nested region; moe-gpu-async-region queues "
                      "gpu ops of the function's top level only");
      return WalkResult::interrupt();
    }
    if (asyncOp.getAsyncToken() || !asyncOp.getAsyncDependencies().empty()) {
      op->emitOpError("is asynchronous already");
      return WalkResult::interrupt();
    }
    queued.push_back(asyncOp);
    return WalkResult::advance();
  });
  if (checked.wasInterrupted())
    return failure();

  MLIRContext *ctx = func.getContext();
  auto streamType = LLVM::LLVMPointerType::get(ctx);
  unsigned index = func.getNumArguments();
  if (failed(func.insertArgument(index, streamType, DictionaryAttr(),
                                 func.getLoc())))
    return failure();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(&entry);
  Value token = UnrealizedConversionCastOp::create(
                    b, func.getLoc(), gpu::AsyncTokenType::get(ctx),
                    entry.getArgument(index))
                    .getResult(0);
  for (gpu::AsyncOpInterface asyncOp : queued)
    token = makeAsync(b, asyncOp, token);
  return success();
}

struct MoeGPUAsyncRegionPass
    : moe::impl::MoeGPUAsyncRegionBase<MoeGPUAsyncRegionPass> {
  using MoeGPUAsyncRegionBase::MoeGPUAsyncRegionBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func.isPrivate())
      return;
    if (callerStream) {
      if (failed(queueOnCallerStream(func)))
        signalPassFailure();
      return;
    }
    OpPassManager pm(func::FuncOp::getOperationName());
    pm.addPass(createGpuAsyncRegionPass());
    if (failed(runPipeline(pm, func)))
      signalPassFailure();
  }
};

} // namespace
