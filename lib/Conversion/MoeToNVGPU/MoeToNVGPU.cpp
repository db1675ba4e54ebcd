//===- MoeToNVGPU.cpp - moe phase-level ops to NVIDIA GPU kernels ---------===//
//
// The GPU lowering of the decomposed moe IR for one NVIDIA chip (option
// `chip`, described by TargetInfo). Each MX block GEMM becomes a kernel and
// a call, on buffers, of a host function declared with the kernel's launch
// record; moe-lower-gpu-launches gives that function its body (device
// buffers, copies, TMA descriptors, gpu.launch_func) once buffer
// deallocation has run, which cannot handle gpu host ops. Everything else
// stays for the host lowering:
//
//   %r = moe.block_matmul lhs(f8E4M3FN scales E8M0) rhs(f8E4M3FN scales E8M0)
//     -> gpu.module @moe_kernels {
//          gpu.func @mx_block_matmul_<i>   (MXGemmSm90.h: TMA + mbarrier
//        }                                  ring, fp8 wgmma, per-32-block
//                                           fp32 promotion)
//        func.func private @mx_block_matmul_<i>_launch(memref lhs, lhs
//            scales, rhs, rhs scales, block_to_expert, memref result)
//            attributes {moe.gpu_launch = {kernel, grid, block,
//              dynamic_shared_memory, tensor_map_args, tensor_map_types,
//              pointer_args}}
//        %b<j> = bufferization.to_buffer %operand<j> read_only
//        %out = memref.alloc
//        func.call @mx_block_matmul_<i>_launch(%b0, ..., %b4, %out)
//        %r = bufferization.to_tensor %out restrict writable
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"

#include "moe/Conversion/MoeToNVGPU/MXGemmSm90.h"
#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
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
constexpr StringLiteral kGPULaunchAttr = "moe.gpu_launch";

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

/// Declares the host function that runs `launch` (its body comes from
/// moe-lower-gpu-launches, after buffer deallocation) and replaces `op` by
/// a call to it on buffers of its operands, the result written into a new
/// buffer.
void replaceWithLaunch(OpBuilder &b, BlockMatmulOp op,
                       const MXGemmLaunch &launch) {
  MLIRContext *ctx = b.getContext();
  Location loc = op.getLoc();
  auto memRefOf = [](Type type) {
    auto shaped = cast<ShapedType>(type);
    return MemRefType::get(shaped.getShape(), shaped.getElementType());
  };
  Value operands[] = {op.getLhs(), op.getLhsScales(), op.getRhs(),
                      op.getRhsScales(), op.getBlockToExpert()};
  SmallVector<Type> argTypes;
  for (Value operand : operands)
    argTypes.push_back(memRefOf(operand.getType()));
  MemRefType resultType = memRefOf(op.getType());
  argTypes.push_back(resultType);

  gpu::GPUFuncOp kernel = launch.kernel;
  func::FuncOp host;
  {
    OpBuilder::InsertionGuard guard(b);
    // Before the kernel module, so the host functions stay together.
    b.setInsertionPoint(kernel->getParentOfType<gpu::GPUModuleOp>());
    host = func::FuncOp::create(
        b, loc, kernel.getName().str() + "_launch",
        FunctionType::get(ctx, argTypes, {}));
    host.setPrivate();
    // Kernel arguments: tmapA (lhs codes), tmapB (rhs codes), then the
    // global pointers sa, sb, c, blockToExpert.
    NamedAttribute fields[] = {
        b.getNamedAttr("kernel",
                       SymbolRefAttr::get(
                           kernel->getParentOfType<gpu::GPUModuleOp>()
                               .getNameAttr(),
                           {FlatSymbolRefAttr::get(kernel)})),
        b.getNamedAttr("grid", b.getDenseI64ArrayAttr(launch.grid)),
        b.getNamedAttr("block", b.getDenseI64ArrayAttr(launch.block)),
        b.getNamedAttr("dynamic_shared_memory",
                       b.getI64IntegerAttr(launch.dynamicSharedMemory)),
        b.getNamedAttr("tensor_map_args", b.getDenseI64ArrayAttr({0, 2})),
        b.getNamedAttr("tensor_map_types",
                       b.getTypeArrayAttr({launch.tensorMapA,
                                           launch.tensorMapB})),
        b.getNamedAttr("pointer_args", b.getDenseI64ArrayAttr({1, 3, 5, 4}))};
    host->setAttr(kGPULaunchAttr, b.getDictionaryAttr(fields));
  }

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(op);
  SmallVector<Value> args;
  for (Value operand : operands)
    args.push_back(bufferization::ToBufferOp::create(
        b, loc, memRefOf(operand.getType()), operand, /*read_only=*/true));
  Value result = memref::AllocOp::create(b, loc, resultType);
  args.push_back(result);
  func::CallOp::create(b, loc, host, args);
  Value tensor = bufferization::ToTensorOp::create(
      b, loc, op.getType(), result, /*restrict=*/true, /*writable=*/true);
  op.replaceAllUsesWith(tensor);
  op.erase();
}

/// Emits the kernels of the module's MX block GEMMs for one chip and
/// replaces each GEMM by the host code that launches its kernel.
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
      replaceWithLaunch(b, op, launch);
    }
  }
};

} // namespace
