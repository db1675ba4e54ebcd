//===- GPUAsyncRegion.cpp - gpu-async-region on public functions ----------===//
//
// The device-resident pipeline makes the gpu host ops of the public entry
// function asynchronous on one stream with upstream gpu-async-region, but
// must keep it out of the kernel launch functions of moe-lower-gpu-launches:
// those already chain their own stream's tokens, and the pass would add a
// second dependency to their gpu.launch_func, which gpu-to-llvm cannot
// lower (it takes one). This pass runs the upstream one on public functions
// with a body only.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"

#include "mlir/Dialect/Async/IR/Async.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUASYNCREGION
#include "moe/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

namespace {

struct MoeGPUAsyncRegionPass
    : moe::impl::MoeGPUAsyncRegionBase<MoeGPUAsyncRegionPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func.isPrivate())
      return;
    OpPassManager pm(func::FuncOp::getOperationName());
    pm.addPass(createGpuAsyncRegionPass());
    if (failed(runPipeline(pm, func)))
      signalPassFailure();
  }
};

} // namespace
