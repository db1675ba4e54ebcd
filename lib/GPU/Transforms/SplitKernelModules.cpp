//===- SplitKernelModules.cpp - one gpu.module per kernel -----------------===//
//
// A gpu.module is the unit of the NVPTX back end and of ptxas: the eleven
// kernels convert-moe-to-nvgpu puts in @moe_kernels compile on one core
// (moe-gpu-module-to-binary runs modules, not kernels, in parallel). Each
// kernel gets a module of its own here, with a copy of everything else the
// module holds, and the launches are pointed at it.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUSPLITKERNELMODULES
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

struct MoeGPUSplitKernelModulesPass
    : moe::impl::MoeGPUSplitKernelModulesBase<MoeGPUSplitKernelModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    // @module::@kernel -> @module_kernel::@kernel.
    DenseMap<SymbolRefAttr, SymbolRefAttr> moved;
    for (gpu::GPUModuleOp kernels :
         llvm::to_vector(module.getOps<gpu::GPUModuleOp>())) {
      SmallVector<gpu::GPUFuncOp> funcs;
      for (auto func : kernels.getOps<gpu::GPUFuncOp>())
        if (func.isKernel())
          funcs.push_back(func);
      if (funcs.size() < 2)
        continue;
      OpBuilder b(kernels);
      for (gpu::GPUFuncOp func : funcs) {
        // The module's attributes (targets, ...), its symbols but the other
        // kernels: cloning the whole module and erasing would copy every
        // kernel once per kernel.
        auto copy = cast<gpu::GPUModuleOp>(b.cloneWithoutRegions(*kernels));
        Block &body = copy.getBodyRegion().emplaceBlock();
        OpBuilder inside = OpBuilder::atBlockEnd(&body);
        for (Operation &op : kernels.getBody()->getOperations()) {
          auto other = dyn_cast<gpu::GPUFuncOp>(op);
          if (!other || !other.isKernel() || other == func)
            inside.clone(op);
        }
        copy.setName((kernels.getName() + "_" + func.getName()).str());
        // Renames the copy if a symbol of that name exists already.
        symbols.insert(copy);
        auto leaf = FlatSymbolRefAttr::get(func.getNameAttr());
        moved[SymbolRefAttr::get(kernels.getNameAttr(), {leaf})] =
            SymbolRefAttr::get(copy.getNameAttr(), {leaf});
      }
      symbols.erase(kernels);
    }
    if (moved.empty())
      return;

    // The references a kernel has at this point of the pipelines: the
    // launch records of convert-moe-to-nvgpu, and launches.
    module.walk([&](Operation *op) {
      if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
        if (SymbolRefAttr to = moved.lookup(launch.getKernel()))
          launch.setKernelAttr(to);
        return;
      }
      auto record = op->getAttrOfType<GPULaunchAttr>(kGPULaunchAttrName);
      if (!record)
        return;
      if (SymbolRefAttr to = moved.lookup(record.getKernel()))
        op->setAttr(kGPULaunchAttrName,
                    GPULaunchAttr::get(
                        op->getContext(), to, record.getGrid(),
                        record.getBlock(), record.getDynamicSharedMemory(),
                        record.getTensorMaps(), record.getPointers(),
                        record.getResults(), record.getCounters()));
    });
  }
};

} // namespace
