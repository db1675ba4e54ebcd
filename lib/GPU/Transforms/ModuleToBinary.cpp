//===- ModuleToBinary.cpp - gpu.modules to gpu.binary ops in parallel -----===//
//
// Upstream gpu-module-to-binary serializes the modules of the input one
// after another. A module's serialization (translation to LLVM IR, the
// NVPTX back end, ptxas in its own process) touches only that module and
// state of its own, so the modules are serialized here at the same time on
// the context's thread pool; the IR is changed afterwards, on this thread,
// in the modules' order.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Threading.h"

#include "llvm/ADT/StringSwitch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUMODULETOBINARY
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

namespace {

struct MoeGPUModuleToBinaryPass
    : moe::impl::MoeGPUModuleToBinaryBase<MoeGPUModuleToBinaryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<gpu::CompilationTarget> target =
        llvm::StringSwitch<std::optional<gpu::CompilationTarget>>(format)
            .Cases({"offloading", "llvm"}, gpu::CompilationTarget::Offload)
            .Cases({"assembly", "isa"}, gpu::CompilationTarget::Assembly)
            .Cases({"binary", "bin"}, gpu::CompilationTarget::Binary)
            .Cases({"fatbinary", "fatbin"}, gpu::CompilationTarget::Fatbin)
            .Default(std::nullopt);
    if (!target) {
      module.emitError() << "moe-gpu-module-to-binary: unknown format '"
                         << format
                         << "' (expected isa, bin, fatbin or llvm)";
      return signalPassFailure();
    }

    SmallVector<gpu::GPUModuleOp> kernels(module.getOps<gpu::GPUModuleOp>());
    for (gpu::GPUModuleOp kernel : kernels)
      // The op's verifier makes `targets` a non-empty array of targets
      // when present.
      if (!kernel.getTargetsAttr()) {
        kernel.emitError() << "moe-gpu-module-to-binary: the module has no "
                              "target attribute to serialize it";
        return signalPassFailure();
      }

    // Built before the threads start, then only read by them.
    SymbolTable symbols(module);
    gpu::TargetOptions options(toolkit, /*librariesToLink=*/{}, cmdOptions,
                          /*elfSection=*/{}, *target,
                          [&]() -> SymbolTable * { return &symbols; });

    // The largest modules first: a GEMM with its epilogue takes ptxas ten
    // times as long as an operand kernel, and started last it would finish
    // alone on one core.
    SmallVector<std::pair<int64_t, size_t>> bySize;
    for (auto [i, kernel] : llvm::enumerate(kernels)) {
      int64_t ops = 0;
      kernel.walk([&](Operation *) { ++ops; });
      bySize.push_back({-ops, i});
    }
    llvm::sort(bySize);

    // objects[i][j]: module i serialized by its target j.
    std::vector<SmallVector<SmallVector<char, 0>>> objects(kernels.size());
    LogicalResult serialized = failableParallelForEach(
        &getContext(), bySize,
        [&](std::pair<int64_t, size_t> item) -> LogicalResult {
          size_t i = item.second;
          gpu::GPUModuleOp kernel = kernels[i];
          for (Attribute attr : kernel.getTargetsAttr()) {
            std::optional<SmallVector<char, 0>> object =
                cast<gpu::TargetAttrInterface>(attr).serializeToObject(
                    kernel, options);
            if (!object)
              return kernel.emitError()
                     << "moe-gpu-module-to-binary: " << attr
                     << " could not serialize the module";
            objects[i].push_back(std::move(*object));
          }
          return success();
        });
    if (failed(serialized))
      return signalPassFailure();

    // Objects first, then the IR: a failure leaves every module in place.
    SmallVector<SmallVector<Attribute>> binaries(kernels.size());
    for (auto [i, kernel] : llvm::enumerate(kernels))
      for (auto [attr, object] :
           llvm::zip_equal(kernel.getTargetsAttr(), objects[i])) {
        Attribute binary = cast<gpu::TargetAttrInterface>(attr).createObject(
            kernel, object, options);
        if (!binary) {
          kernel.emitError() << "moe-gpu-module-to-binary: " << attr
                             << " could not make an object of the module";
          return signalPassFailure();
        }
        binaries[i].push_back(binary);
      }
    OpBuilder b(&getContext());
    for (auto [i, kernel] : llvm::enumerate(kernels)) {
      b.setInsertionPointAfter(kernel);
      gpu::BinaryOp::create(b, kernel.getLoc(), kernel.getName(),
                            kernel.getOffloadingHandlerAttr(),
                            b.getArrayAttr(binaries[i]));
      kernel->erase();
    }
  }
};

} // namespace
