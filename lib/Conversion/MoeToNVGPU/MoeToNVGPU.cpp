//===- MoeToNVGPU.cpp - moe phase-level ops to NVIDIA GPU kernels ---------===//
//
// The GPU lowering of the decomposed moe IR for one NVIDIA chip (option
// `chip`, described by TargetInfo). Each MX GEMM (moe.block_matmul,
// moe.expert_matmul) becomes a kernel and a call, on buffers, of a host
// function declared with the kernel's launch record; moe-lower-gpu-launches
// gives that function its body (device buffers, copies, TMA descriptors,
// gpu.launch_func) once buffer deallocation has run, which cannot handle
// gpu host ops. Everything else stays for the host lowering:
//
//   %r = moe.block_matmul lhs(f8 scales E8M0) rhs(f8 scales E8M0)
//     -> gpu.module @moe_kernels {
//          gpu.func @mx_block_matmul_<i>   (MXGemmSm90.h: TMA + mbarrier
//        }                                  ring, exact MX on wgmma)
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
// The kernels read both operands with K contiguous, so a transpose_rhs
// weight ([E, K, N]) and the slot-major operands of expert_matmul ([S, M])
// are transposed first, codes and scales alike.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"

#include "moe/Conversion/MoeToNVGPU/MXGemmSm90.h"
#include "moe/Conversion/MoeToNVGPU/TargetInfo.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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

/// The code type of an MX GEMM the kernels implement (codes with scales
/// on both sides, f8E4M3FN or f8E5M2 alike), or null.
template <typename GemmOp>
Type mxElementType(GemmOp op) {
  Type lhs = op.getLhs().getType().getElementType();
  Type rhs = op.getRhs().getType().getElementType();
  if (!op.getLhsScales() || !op.getRhsScales() || lhs != rhs ||
      !isa<Float8E4M3FNType, Float8E5M2Type>(lhs))
    return Type();
  return lhs;
}

/// `value` with its dimensions permuted (linalg.transpose into a new
/// tensor).
Value transpose(OpBuilder &b, Location loc, Value value,
                ArrayRef<int64_t> permutation) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape;
  for (int64_t d : permutation)
    shape.push_back(type.getDimSize(d));
  Value init =
      tensor::EmptyOp::create(b, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(b, loc, value, init, permutation)
      .getResult()[0];
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
/// a call to it on buffers of `operands` (lhs codes and scales, rhs codes
/// and scales, block_to_expert, all K-major), the result written into a
/// new buffer.
void replaceWithLaunch(OpBuilder &b, Operation *op, ValueRange operands,
                       const MXGemmLaunch &launch) {
  MLIRContext *ctx = b.getContext();
  Location loc = op->getLoc();
  auto memRefOf = [](Type type) {
    auto shaped = cast<ShapedType>(type);
    return MemRefType::get(shaped.getShape(), shaped.getElementType());
  };
  SmallVector<Type> argTypes;
  for (Value operand : operands)
    argTypes.push_back(memRefOf(operand.getType()));
  Type tensorType = op->getResult(0).getType();
  MemRefType resultType = memRefOf(tensorType);
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
      b, loc, tensorType, result, /*restrict=*/true, /*writable=*/true);
  op->getResult(0).replaceAllUsesWith(tensor);
  op->erase();
}

/// Emits the kernels of the module's MX GEMMs for one chip and replaces
/// each GEMM by the host code that launches its kernel.
struct ConvertMoeToNVGPUPass
    : moe::impl::ConvertMoeToNVGPUBase<ConvertMoeToNVGPUPass> {
  using ConvertMoeToNVGPUBase::ConvertMoeToNVGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<TargetInfo> target =
        TargetInfo::get(chip, [&] { return module.emitError(); });
    if (failed(target))
      return signalPassFailure();
    MXMmaPath preferred = target->getMXMmaPath();
    if (!mmaPath.empty()) {
      std::optional<MXMmaPath> parsed = parseMXMmaPath(mmaPath);
      if (!parsed) {
        module.emitError() << "unknown MMA path '" << mmaPath
                           << "' (expected fp8 or bf16)";
        return signalPassFailure();
      }
      preferred = *parsed;
    }

    SmallVector<Operation *> gemms;
    module.walk([&](Operation *op) {
      if (isGPUGemm(op))
        gemms.push_back(op);
    });
    if (gemms.empty())
      return;

    OpBuilder b(&getContext());
    gpu::GPUModuleOp kernels = getOrCreateKernelModule(b, module);
    unsigned next = 0;
    for (Operation *op : gemms) {
      b.setInsertionPoint(op);
      Location loc = op->getLoc();
      MXGemmProblem problem;
      SmallVector<Value> operands;
      StringRef prefix;
      if (auto gemm = dyn_cast<BlockMatmulOp>(op)) {
        ArrayRef<int64_t> rhs = gemm.getRhs().getType().getShape();
        bool transposed = gemm.getTransposeRhs();
        problem = {MXGemmKind::Block,
                   gemm.getLhs().getType().getDimSize(0),
                   transposed ? rhs[2] : rhs[1],
                   transposed ? rhs[1] : rhs[2],
                   rhs[0],
                   static_cast<int64_t>(gemm.getBlockSize()),
                   gemm.getBlockToExpert().getType().getDimSize(0),
                   mxElementType(gemm),
                   preferred};
        Value rhsCodes = gemm.getRhs(), rhsScales = gemm.getRhsScales();
        if (transposed) {
          rhsCodes = transpose(b, loc, rhsCodes, {0, 2, 1});
          rhsScales = transpose(b, loc, rhsScales, {0, 2, 1});
        }
        operands = {gemm.getLhs(), gemm.getLhsScales(), rhsCodes, rhsScales,
                    gemm.getBlockToExpert()};
        prefix = "mx_block_matmul_";
      } else {
        auto expert = cast<ExpertMatmulOp>(op);
        ArrayRef<int64_t> result = expert.getType().getShape();
        problem = {MXGemmKind::Expert,
                   result[1],
                   result[2],
                   expert.getLhs().getType().getDimSize(0),
                   result[0],
                   static_cast<int64_t>(expert.getBlockSize()),
                   expert.getBlockToExpert().getType().getDimSize(0),
                   mxElementType(expert),
                   preferred};
        operands = {transpose(b, loc, expert.getLhs(), {1, 0}),
                    transpose(b, loc, expert.getLhsScales(), {1, 0}),
                    transpose(b, loc, expert.getRhs(), {1, 0}),
                    transpose(b, loc, expert.getRhsScales(), {1, 0}),
                    expert.getBlockToExpert()};
        prefix = "mx_expert_matmul_";
      }
      // The fp8 path covers e4m3 block GEMMs of whole tiles; the others
      // dequantize to bf16.
      if (problem.path == MXMmaPath::Fp8WgmmaPromote &&
          !fitsMXGemmSm90(problem, *target))
        problem.path = MXMmaPath::Bf16Dequant;
      if (failed(checkMXGemmSm90(problem, *target,
                                 [&] { return op->emitOpError(); })))
        return signalPassFailure();

      std::string name;
      do
        name = (prefix + Twine(next++)).str();
      while (SymbolTable::lookupSymbolIn(kernels, name));
      MXGemmLaunch launch =
          buildMXGemmSm90Kernel(b, loc, kernels, name, problem, *target);
      replaceWithLaunch(b, op, operands, launch);
    }
  }
};

} // namespace

bool mlir::moe::isGPUGemm(Operation *op) {
  if (auto block = dyn_cast<BlockMatmulOp>(op))
    return mxElementType(block) && !block.getBias();
  if (auto expert = dyn_cast<ExpertMatmulOp>(op))
    return bool(mxElementType(expert));
  return false;
}
