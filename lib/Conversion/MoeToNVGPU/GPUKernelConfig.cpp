//===- GPUKernelConfig.cpp - choose the kernel of every GPU GEMM ----------===//
//
// The config-selection step of the GPU lowering (IREE's idea): the kernel
// choices of each GEMM are made here and recorded on it, so that a test
// checks the choice without the kernel and sets a choice to check the
// kernel built from it:
//
//   %r = moe.block_matmul ... {block_size = 128 : i64}
//     ->
//   %r = moe.block_matmul ... {block_size = 128 : i64,
//          moe.gemm_config = #moe.gemm_config<mma = bf16_operands, ...>}
//
// The choice itself is selectGemmConfig (GemmConfig.h), which
// convert-moe-to-nvgpu also makes for a GEMM left without an attribute.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"

#include "moe/Conversion/MoeToNVGPU/GemmConfig.h"
#include "moe/Conversion/MoeToNVGPU/MXGemm.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUKERNELCONFIG
#include "moe/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Sets `moe.gemm_config` on every GPU GEMM that has none.
struct MoeGPUKernelConfigPass
    : moe::impl::MoeGPUKernelConfigBase<MoeGPUKernelConfigPass> {
  using MoeGPUKernelConfigBase::MoeGPUKernelConfigBase;

  friend KernelChoices moe::kernelChoicesOf<kernel_choice_passes::Config>(
      const MoeGPUKernelConfigPass &pass);

  void runOnOperation() override {
    ModuleOp module = getOperation();
    KernelChoices choices =
        kernelChoicesOf<kernel_choice_passes::Config>(*this);
    FailureOr<GemmTargetChoice> choice =
        resolveGemmTarget(module, chip, mmaPath);
    if (failed(choice))
      return signalPassFailure();
    WalkResult walk = module.walk([&](Operation *op) {
      if (!isGPUGemm(op) || op->hasAttr(kGemmConfigAttrName))
        return WalkResult::advance();
      GemmConfigAttr config =
          selectGemmConfig(op, choice->target, choice->preferred, choices);
      if (!config) {
        op->emitOpError() << noKernelMessage(choice->target);
        return WalkResult::interrupt();
      }
      op->setAttr(kGemmConfigAttrName, config);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
