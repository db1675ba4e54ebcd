//===- MoeToNVGPU.cpp - moe phase-level ops to NVIDIA GPU kernels ---------===//
//
// The GPU lowering of the decomposed moe IR for one NVIDIA chip (option
// `chip`, described by TargetInfo). So far it emits the kernels; the host
// side that launches them comes next:
//
//   moe.block_matmul lhs(f8E4M3FN scales E8M0) rhs(f8E4M3FN scales E8M0)
//     -> gpu.module @moe_kernels {
//          gpu.func @mx_block_matmul_<i>   (MXGemmSm90.h: TMA + mbarrier
//                                           ring, fp8 wgmma, per-32-block
//                                           fp32 promotion)
//        }
//        + moe.gpu_launch = {kernel, grid, block, dynamic_shared_memory}
//          on the op
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"

#include "moe/Conversion/MoeToNVGPU/MXGemmSm90.h"
#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETONVGPU
#include "moe/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

constexpr StringLiteral kKernelModule = "moe_kernels";

/// Whether `op` is the MX block GEMM the kernels implement: e4m3 codes with
/// scales on both sides, the weight [E, Nout, K], no bias.
bool isMXBlockMatmul(BlockMatmulOp op) {
  auto isE4M3 = [](Value v) {
    return isa<Float8E4M3FNType>(
        cast<RankedTensorType>(v.getType()).getElementType());
  };
  return op.getLhsScales() && op.getRhsScales() && isE4M3(op.getLhs()) &&
         isE4M3(op.getRhs()) && !op.getBias() && !op.getTransposeRhs();
}

/// The kernel module of `module`, created at its end when missing.
gpu::GPUModuleOp getOrCreateKernelModule(OpBuilder &b, ModuleOp module) {
  if (auto existing = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModule))
    return existing;
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  b.getUnitAttr());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModule);
}

/// Emits the kernels of the module's moe ops for one chip.
struct ConvertMoeToNVGPUPass
    : moe::impl::ConvertMoeToNVGPUBase<ConvertMoeToNVGPUPass> {
  using ConvertMoeToNVGPUBase::ConvertMoeToNVGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<TargetInfo> target =
        TargetInfo::get(chip, [&] { return module.emitError(); });
    if (failed(target))
      return signalPassFailure();

    SmallVector<BlockMatmulOp> gemms;
    module.walk([&](BlockMatmulOp op) {
      if (isMXBlockMatmul(op))
        gemms.push_back(op);
    });
    if (gemms.empty())
      return;

    OpBuilder b(&getContext());
    gpu::GPUModuleOp kernels = getOrCreateKernelModule(b, module);
    unsigned next = 0;
    for (BlockMatmulOp op : gemms) {
      ArrayRef<int64_t> rhs = op.getRhs().getType().getShape();
      MXGemmProblem problem{op.getLhs().getType().getDimSize(0), rhs[1],
                            rhs[2], rhs[0],
                            static_cast<int64_t>(op.getBlockSize())};
      if (failed(checkMXGemmSm90(problem, *target,
                                 [&] { return op.emitOpError(); })))
        return signalPassFailure();

      std::string name;
      do
        name = "mx_block_matmul_" + std::to_string(next++);
      while (SymbolTable::lookupSymbolIn(kernels, name));
      MXGemmLaunch launch = buildMXGemmSm90Kernel(b, op.getLoc(), kernels,
                                                  name, problem, *target);

      NamedAttribute fields[] = {
          b.getNamedAttr("kernel",
                         SymbolRefAttr::get(
                             kernels.getNameAttr(),
                             {FlatSymbolRefAttr::get(launch.kernel)})),
          b.getNamedAttr("grid", b.getDenseI64ArrayAttr(launch.grid)),
          b.getNamedAttr("block", b.getDenseI64ArrayAttr(launch.block)),
          b.getNamedAttr("dynamic_shared_memory",
                         b.getI64IntegerAttr(launch.dynamicSharedMemory))};
      op->setAttr("moe.gpu_launch", b.getDictionaryAttr(fields));
    }
  }
};

} // namespace
