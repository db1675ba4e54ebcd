//===- MoeToNVGPU.cpp - moe phase-level ops to NVIDIA GPU kernels ---------===//
//
// The GPU lowering of the decomposed moe IR for one NVIDIA chip (option
// `chip`, described by TargetInfo). Each GEMM (moe.block_matmul,
// moe.expert_matmul) becomes kernels and calls, on buffers, of host
// functions declared with each kernel's #moe.gpu_launch record;
// moe-lower-gpu-launches gives them their bodies (device buffers, copies,
// TMA descriptors, gpu.launch_func) once buffer deallocation has run, which
// cannot handle gpu host ops. The GEMM's #moe.gemm_config (from
// moe-gpu-kernel-config, or chosen here the same way) says which path:
//
//   bf16_operands (default):
//     %r = moe.block_matmul lhs(%q scales %s) rhs(...)   %q, %s = mx_quantize %x
//       -> call @mx_operand_<i>_launch(%x [, ids], %xb)  gpu.func @mx_operand_<i>
//          (MXOperandKernel.h: %x rounded to its MX values, bf16, K innermost;
//           gathered rows read through their ids; codes dequantized)
//          call @mx_operand_<j>_launch(...)            the rhs alike
//          call @block_matmul_<k>_launch(%xb, %wb, %blk [, %bias], %out)
//          gpu.func @block_matmul_<k>                  (MXGemmSm90.h: TMA ring
//                                                       of bf16 tiles, wgmma)
//   fp8 / bf16 (MX codes of one type on both sides, no bias):
//     the codes and scales go to the kernel, which decodes them; it reads
//     both operands with K contiguous, so a transpose_rhs weight and the
//     slot-major operands of expert_matmul are transposed first
//     (linalg.transpose of codes and scales).
//
// Every call is on buffers of its operands (bufferization.to_buffer) and a
// new result buffer (memref.alloc), returned as a tensor.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"

#include "moe/Conversion/MoeToNVGPU/ActBwdKernel.h"
#include "moe/Conversion/MoeToNVGPU/GemmConfig.h"
#include "moe/Conversion/MoeToNVGPU/MXGemm.h"
#include "moe/Conversion/MoeToNVGPU/MXOperandKernel.h"
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
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETONVGPU
#include "moe/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

/// The token ids of a block_matmul or expert_matmul (or null).
static Value tokensOf(Operation *op) {
  if (auto gemm = dyn_cast<BlockMatmulOp>(op))
    return gemm.getTokenPositionToId();
  return cast<ExpertMatmulOp>(op).getTokenPositionToId();
}

namespace {

constexpr StringLiteral kKernelModule = "moe_kernels";

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

/// A launch of a kernel built for one op: what the host function's
/// #moe.gpu_launch record holds, with the kernel itself.
struct LaunchRecord {
  gpu::GPUFuncOp kernel;
  std::array<int64_t, 3> grid;
  std::array<int64_t, 3> block;
  int64_t dynamicSharedMemory = 0;
  /// Host-function arguments that become TMA descriptors, then those passed
  /// as global pointers, in the kernel's argument order.
  SmallVector<TensorMapArg> tensorMaps;
  SmallVector<int64_t> pointerArgs;
  /// Zeroed i32 words the launch passes last (a persistent GEMM's tile
  /// counter).
  int64_t counters = 0;
};

/// The host arguments of a GEMM launch, each a role of the kernel's
/// arguments (mxGemmKernelArgs): the operands in the order they are added,
/// then the results, which emitLaunch appends.
struct GemmHostArgs {
  SmallVector<Value> operands;
  DenseMap<MXGemmArg, int64_t> index;
  int64_t results = 0;

  /// `value` (none when null) as the next operand.
  void add(MXGemmArg role, Value value) {
    if (!value)
      return;
    index[role] = operands.size();
    operands.push_back(value);
  }
  /// The next result, once every operand is added.
  void addResult(MXGemmArg role) {
    index[role] = operands.size() + results++;
  }
  /// The launch record of `launch`: each kernel argument the host argument
  /// of its role, as a TMA descriptor or a global pointer; the tile counter
  /// is the launch's own zeroed word.
  LaunchRecord record(const MXGemmLaunch &launch) const {
    LaunchRecord record = {launch.kernel, launch.grid, launch.block,
                           launch.dynamicSharedMemory, {}, {},
                           launch.counters};
    for (const MXGemmKernelArg &arg : launch.args) {
      if (arg.role == MXGemmArg::TileCounter)
        continue;
      assert(index.contains(arg.role) &&
             "a kernel argument without a host argument");
      int64_t at = index.lookup(arg.role);
      if (arg.tensorMap)
        record.tensorMaps.push_back({at, launch.tensorMapOf(arg.role)});
      else
        record.pointerArgs.push_back(at);
    }
    return record;
  }
};

/// Declares the host function that runs `record` (its body comes from
/// moe-lower-gpu-launches, after buffer deallocation) and calls it on
/// buffers of `operands`, each result written into a new buffer of its
/// `resultTypes` entry; returns the results as tensors.
SmallVector<Value> emitLaunch(OpBuilder &b, Location loc,
                              const LaunchRecord &record, ValueRange operands,
                              TypeRange resultTypes) {
  MLIRContext *ctx = b.getContext();
  auto memRefOf = [](Type type) {
    auto shaped = cast<ShapedType>(type);
    return MemRefType::get(shaped.getShape(), shaped.getElementType());
  };
  SmallVector<Type> argTypes;
  for (Value operand : operands)
    argTypes.push_back(memRefOf(operand.getType()));
  for (Type type : resultTypes)
    argTypes.push_back(memRefOf(type));

  gpu::GPUFuncOp kernel = record.kernel;
  auto module = kernel->getParentOfType<gpu::GPUModuleOp>();
  func::FuncOp host;
  {
    OpBuilder::InsertionGuard guard(b);
    // Before the kernel module, so the host functions stay together.
    b.setInsertionPoint(module);
    host = func::FuncOp::create(b, loc, kernel.getName().str() + "_launch",
                                FunctionType::get(ctx, argTypes, {}));
    host.setPrivate();
    host->setAttr(kGPULaunchAttrName,
                  GPULaunchAttr::get(
                      ctx,
                      SymbolRefAttr::get(module.getNameAttr(),
                                         {FlatSymbolRefAttr::get(kernel)}),
                      record.grid, record.block, record.dynamicSharedMemory,
                      record.tensorMaps, record.pointerArgs,
                      static_cast<int64_t>(resultTypes.size()),
                      record.counters));
  }

  SmallVector<Value> args;
  for (Value operand : operands)
    args.push_back(bufferization::ToBufferOp::create(
        b, loc, memRefOf(operand.getType()), operand, /*read_only=*/true));
  SmallVector<Value> buffers;
  for (Type type : resultTypes)
    buffers.push_back(
        memref::AllocOp::create(b, loc, cast<MemRefType>(memRefOf(type))));
  args.append(buffers);
  func::CallOp::create(b, loc, host, args);
  SmallVector<Value> results;
  for (auto [type, buffer] : llvm::zip_equal(resultTypes, buffers))
    results.push_back(bufferization::ToTensorOp::create(
        b, loc, type, buffer, /*restrict=*/true, /*writable=*/true));
  return results;
}

/// The checkpoint behind a P1 epilogue's gate_up, when the region computes
/// it as moe.scale_rows(moe.unpack_checkpoint(ckpt), uitofp(ids >= 0))
/// (the padded slots' rows zeroed) for the activation backward alone: the
/// kernel can read the bf16 checkpoint and the token ids instead.
struct CheckpointGateUp {
  Value checkpoint, tokenIds;
  SmallVector<Operation *, 4> chain;
};
std::optional<CheckpointGateUp>
matchCheckpointGateUp(GatedActBwdOp act, const KernelGroup &group,
                      int64_t blockSize) {
  auto scaled = act.getGateUp().getDefiningOp<ScaleRowsOp>();
  if (!scaled || !scaled->hasOneUse() || !group.contains(scaled))
    return std::nullopt;
  auto unpack = scaled.getInput().getDefiningOp<UnpackCheckpointOp>();
  auto toFloat = scaled.getScale().getDefiningOp<arith::UIToFPOp>();
  if (!unpack || !toFloat || !unpack->hasOneUse() || !toFloat->hasOneUse() ||
      !group.contains(unpack) || !group.contains(toFloat))
    return std::nullopt;
  auto compare = toFloat.getIn().getDefiningOp<arith::CmpIOp>();
  // The kernel reads the ids as i32 (token_position_to_id).
  if (!compare || !compare->hasOneUse() || !group.contains(compare) ||
      compare.getPredicate() != arith::CmpIPredicate::sge ||
      !matchPattern(compare.getRhs(), m_Zero()) ||
      !getElementTypeOrSelf(compare.getLhs().getType()).isInteger(32))
    return std::nullopt;
  auto ckptType = cast<RankedTensorType>(unpack.getCheckpoint().getType());
  if (!ckptType.getElementType().isBF16() || ckptType.getRank() != 4 ||
      ckptType.getDimSize(3) != blockSize)
    return std::nullopt;
  return CheckpointGateUp{unpack.getCheckpoint(),
                          compare.getLhs(),
                          {scaled, toFloat, compare, unpack}};
}

/// Replaces the affinity gradient `grad` (<dA, h> per slot) by one over the
/// per-tile partial sums `partials` that a kernel computed.
void replaceByPartialSums(OpBuilder &b, AffinityGradOp grad, Value partials) {
  b.setInsertionPoint(grad);
  Value da = AffinityGradOp::create(
      b, grad.getLoc(), grad.getResult().getType(), partials, /*h=*/Value(),
      grad.getTokenPositionToId(), grad.getBlockToExpert(), grad.getDyRows(),
      grad.getDownBias(), grad.getBlockSizeAttr(), grad.getNumExpertsAttr());
  grad.getResult().replaceAllUsesWith(da);
  grad->erase();
}

/// Builds the kernels of the module's GPU GEMMs and the host code that
/// launches them.
class GemmLowering {
public:
  /// How a Bf16Operands GEMM asks prepareOperand for an operand: the GEMM,
  /// the contraction axis and whether it wants it transposed.
  struct OperandRequest {
    Operation *gemm;
    int64_t kAxis;
    bool transpose;
    /// A lhs_codes GEMM's lhs: FP8 codes in A-fragment order and their
    /// scale bytes (MXOperandProblem::fragmentOrder), not bf16 values.
    bool codes = false;
    /// A lhs_gather GEMM's lhs: the rounding of the token rows it gathers
    /// (T rows, no ids), which the GEMM reads through its token ids.
    bool tokenRows = false;
  };
  /// The mx_quantize ops of P1's [dg | du] (`act`'s) whose codes and scales
  /// only one Bf16Operands GEMM of the block reads, as the epilogue can
  /// write them: along N (the GEMM's operand K-major as stored) and along M
  /// in place; `keepF32` when something else reads [dg | du].
  struct DGateUpRoundings {
    MXQuantizeOp alongN, alongM;
    OperandRequest requestN, requestM;
    bool keepF32 = false;
  };

  GemmLowering(OpBuilder &b, gpu::GPUModuleOp kernels, const TargetInfo &target,
               const DenseMap<Operation *, GemmConfigAttr> &configs,
               const KernelChoices &choices)
      : b(b), kernels(kernels), target(target), configs(configs),
        choices(choices) {}

  /// A fresh kernel name `prefix`<n>.
  std::string freshName(StringRef prefix) {
    std::string name;
    do
      name = (prefix + Twine(next++)).str();
    while (SymbolTable::lookupSymbolIn(kernels, name));
    return name;
  }

  /// `op` on the MX path of `config`: codes and scales, K-major.
  LogicalResult lowerMXCodes(Operation *op, GemmConfigAttr config);
  /// `op` (a P1 GEMM) and the activation-backward epilogue `epi` of its
  /// region as one kernel on the operands `lhs` and `rhs` (with the rhs's
  /// scales `rhsScales` for rhs_codes).
  LogicalResult lowerGatedActEpilogue(
      Operation *op, const MXGemmProblem &problem, const MXGemmConfig &cfg,
      Value lhs, Value rhs, Value rhsScales, Value lhsScales, Value blocks,
      GatedActEpilogue epi,
      const std::optional<CheckpointGateUp> &checkpoint,
      const DGateUpRoundings &roundings);
  /// P1's activation backward `epi` (its GEMM `gemm`, of `problem`, lowered
  /// to a plain kernel that stores dA) as the kernel of ActBwdKernel.h,
  /// which also writes the MX roundings of [dg | du] and of P4's operand
  /// that the GEMMs of the block read. Leaves the ops to the elementwise
  /// lowering where that kernel does not fit.
  LogicalResult lowerActBwdOperands(Operation *gemm,
                                    const MXGemmProblem &problem,
                                    GatedActEpilogue epi,
                                    const KernelGroup &group);
  /// `op` on the Bf16Operands path, with the kernel of `config`; with the
  /// ops of its moe.fused region (`group`, may be null), the kernel also
  /// computes the epilogue it finds there.
  LogicalResult lowerBf16Operands(Operation *op, GemmConfigAttr config,
                                  const KernelGroup *group);

  /// Tensors that stood in for P1's f32 [dg | du] where only its MX
  /// roundings, which the epilogue wrote, are read: dead once the GEMMs
  /// that read those are lowered.
  SmallVector<Operation *> placeholders;

private:
  /// The GEMM operand `data` (with `scales` for codes) as the Bf16Operands
  /// kernels read it: bf16, its contraction axis `kAxis` innermost. Reuses
  /// the operand already made for the same value, scales and axis.
  FailureOr<Value> prepareOperand(Operation *op, Value data, Value scales,
                                  int64_t kAxis, bool transpose = true);
  /// The lhs `codes` (with `scales`, quantized along K, its last axis) of
  /// a lhs_codes block GEMM as the kernel reads them: FP8 codes in
  /// A-fragment order and their E8M0 scale bytes in the TMA layout
  /// (MXOperandProblem::codesOut), from an operand kernel that rounds the
  /// mx_quantize's input (and, with operandsBothAxes, also its rounding along
  /// the rows for another GEMM).
  FailureOr<std::pair<Value, Value>> prepareLhsCodes(Operation *op,
                                                     Value codes,
                                                     Value scales);
  /// prepareOperand and prepareLhsCodes: the operand of `request` (its
  /// codes' scale bytes in `codeScales` for a codes request).
  FailureOr<Value> prepare(Value data, Value scales,
                           const OperandRequest &request, Value &codeScales);
  /// The rhs `codes` (with `scales`, quantized along K, its last axis) of
  /// a rhs_codes GEMM as the kernel reads them: FP8 codes and E8M0 scales,
  /// K contiguous. Codes an mx_quantize makes come from an operand kernel
  /// that writes codes (so its bf16 values are never written); other codes
  /// (pre-quantized weights) are read as they are.
  FailureOr<std::pair<Value, Value>> prepareRhsCodes(Operation *op,
                                                     Value codes,
                                                     Value scales);

  /// The request of a Bf16Operands GEMM for the operand that the codes
  /// `codes` give it, or none when no such GEMM reads them.
  std::optional<OperandRequest> requestOf(Value codes);
  /// The mx_quantize ops of P1's [dg | du] that its epilogue can write
  /// (DGateUpRoundings).
  DGateUpRoundings matchDGateUpRoundings(GatedActBwdOp act,
                                         const MXGemmProblem &problem,
                                         Block *block);

  /// With operandsBothAxes: the other request of the values `quantize` rounds,
  /// when one of the two is along the columns and the other along the rows in
  /// place (`self` is this one's): an mx_quantize of the same values (or of
  /// rows gathered from the same source through the same ids) along the
  /// other axis, with the same quantization, read by a GEMM of the same
  /// block.
  std::optional<std::pair<MXQuantizeOp, OperandRequest>>
  bothAxesPartner(MXQuantizeOp quantize, const OperandRequest &self);

  OpBuilder &b;
  gpu::GPUModuleOp kernels;
  const TargetInfo &target;
  const DenseMap<Operation *, GemmConfigAttr> &configs;
  /// The pass's kernel choices (KernelChoices.def): those of the operand
  /// kernels and of P1's epilogue are read here, the GEMMs' are in configs.
  KernelChoices choices;
  unsigned next = 0;
  /// Operands made, by (data, scales, K axis, transposed or 2 for codes);
  /// the scale bytes of codes by their codes.
  DenseMap<std::tuple<Value, Value, int64_t, int64_t>, Value> prepared;
  DenseMap<Value, Value> preparedScales;
  DenseMap<std::pair<Value, Value>, std::pair<Value, Value>> preparedCodes;
};

LogicalResult GemmLowering::lowerMXCodes(Operation *op, GemmConfigAttr config) {
  MXMmaPath path = config.getMma();
  if (!isMXCodesGemm(op))
    return op->emitOpError()
           << "the " << stringifyMmaPathOption(path)
           << " MMA path takes codes of one FP8 type on both sides and no "
              "bias";
  MXGemmProblem problem = getMXGemmProblem(op, path);
  MXGemmConfig cfg = getMXGemmConfig(config, target);
  if (failed(checkMXGemm(problem, cfg, target,
                             [&] { return op->emitOpError(); })))
    return failure();
  b.setInsertionPoint(op);
  Location loc = op->getLoc();
  SmallVector<Value> operands;
  StringRef prefix;
  if (auto gemm = dyn_cast<BlockMatmulOp>(op)) {
    Value rhsCodes = gemm.getRhs(), rhsScales = gemm.getRhsScales();
    if (gemm.getTransposeRhs()) {
      rhsCodes = transpose(b, loc, rhsCodes, {0, 2, 1});
      rhsScales = transpose(b, loc, rhsScales, {0, 2, 1});
    }
    operands = {gemm.getLhs(), gemm.getLhsScales(), rhsCodes, rhsScales,
                gemm.getBlockToExpert()};
    prefix = "mx_block_matmul_";
  } else {
    auto expert = cast<ExpertMatmulOp>(op);
    operands = {transpose(b, loc, expert.getLhs(), {1, 0}),
                transpose(b, loc, expert.getLhsScales(), {1, 0}),
                transpose(b, loc, expert.getRhs(), {1, 0}),
                transpose(b, loc, expert.getRhsScales(), {1, 0}),
                expert.getBlockToExpert()};
    prefix = "mx_expert_matmul_";
  }
  MXGemmLaunch launch =
      buildMXGemmKernel(b, loc, kernels, freshName(prefix), problem, cfg,
                        target);
  // Host arguments: lhs codes, lhs scales, rhs codes, rhs scales,
  // block_to_expert, then the result.
  GemmHostArgs host;
  const MXGemmArg roles[] = {MXGemmArg::Lhs, MXGemmArg::LhsScales,
                             MXGemmArg::Rhs, MXGemmArg::RhsScales,
                             MXGemmArg::BlockToExpert};
  for (auto [role, value] : llvm::zip_equal(roles, operands))
    host.add(role, value);
  host.addResult(MXGemmArg::Result);
  LaunchRecord record = host.record(launch);
  Value result =
      emitLaunch(b, loc, record, operands, op->getResult(0).getType())[0];
  op->getResult(0).replaceAllUsesWith(result);
  op->erase();
  return success();
}

std::optional<GemmLowering::OperandRequest>
GemmLowering::requestOf(Value codes) {
  for (Operation *user : codes.getUsers()) {
    GemmConfigAttr config = configs.lookup(user);
    if (!config || config.getMma() != MXMmaPath::Bf16Operands)
      continue;
    // The calls lowerBf16Operands makes.
    if (auto gemm = dyn_cast<BlockMatmulOp>(user)) {
      // (swap_operands: the slot rows are the kernel's rhs, from the token
      // rows with rhs_gather; it rounds the raw weight itself.)
      if (gemm.getLhs() == codes)
        return OperandRequest{user, 1, true, config.getLhsCodes(),
                              config.getLhsGather() || config.getRhsGather()};
      // (A rhs_codes kernel reads its rhs as codes, not as bf16 values.)
      if (gemm.getRhs() == codes && !config.getRhsCodes() &&
          !config.getSwapOperands())
        return OperandRequest{user, gemm.getTransposeRhs() ? 1 : 2,
                              !config.getRhsNMajor()};
    } else if (auto gemm = dyn_cast<ExpertMatmulOp>(user)) {
      // (round_lhs / round_rhs: the kernel rounds that operand itself;
      // swap_operands: the op's lhs is the kernel's rhs and its rhs the
      // kernel's lhs.)
      bool swap = config.getSwapOperands();
      bool kernelLhs = swap ? gemm.getRhs() == codes : gemm.getLhs() == codes;
      bool kernelRhs = swap ? gemm.getLhs() == codes : gemm.getRhs() == codes;
      if (kernelLhs && !config.getRoundLhs())
        return OperandRequest{user, 0, !config.getLhsMMajor()};
      if (kernelRhs && !config.getRoundRhs())
        return OperandRequest{user, 0, !config.getRhsNMajor()};
    }
  }
  return std::nullopt;
}

std::optional<std::pair<MXQuantizeOp, GemmLowering::OperandRequest>>
GemmLowering::bothAxesPartner(MXQuantizeOp quantize,
                              const OperandRequest &self) {
  auto type = cast<RankedTensorType>(quantize.getInput().getType());
  int64_t rank = type.getRank();
  auto inPlaceAlongRows = [&](const OperandRequest &r) {
    return r.kAxis == rank - 2 && !r.transpose;
  };
  bool selfAlongCols = self.kAxis == rank - 1;
  if (!selfAlongCols && !inPlaceAlongRows(self))
    return std::nullopt;
  // The values, and the gathers that read the same rows.
  SmallVector<Value> inputs = {quantize.getInput()};
  if (auto gather = quantize.getInput().getDefiningOp<GatherRowsOp>())
    for (Operation *user : gather.getSource().getUsers())
      if (auto other = dyn_cast<GatherRowsOp>(user);
          other && other != gather &&
          other.getSource() == gather.getSource() &&
          other.getTokenPositionToId() == gather.getTokenPositionToId() &&
          other.getType() == gather.getType())
        inputs.push_back(other.getResult());
  for (Value input : inputs)
    for (Operation *user : input.getUsers()) {
      auto other = dyn_cast<MXQuantizeOp>(user);
      if (!other || other == quantize ||
          other.getQuant() != quantize.getQuant())
        continue;
      std::optional<OperandRequest> request = requestOf(other.getCodes());
      // (A lhs_gather GEMM reads the token rows, not the gathered copy.)
      if (!request || request->tokenRows ||
          request->gemm->getBlock() != self.gemm->getBlock())
        continue;
      bool match = selfAlongCols ? inPlaceAlongRows(*request)
                                 : request->kAxis == rank - 1;
      if (match)
        return std::make_pair(other, *request);
    }
  return std::nullopt;
}

GemmLowering::DGateUpRoundings
GemmLowering::matchDGateUpRoundings(GatedActBwdOp act,
                                    const MXGemmProblem &problem,
                                    Block *block) {
  DGateUpRoundings found;
  Value dGateUp = act.getDGateUp();
  for (Operation *user : dGateUp.getUsers()) {
    auto quantize = dyn_cast<MXQuantizeOp>(user);
    std::optional<OperandRequest> request;
    if (quantize && quantize.getQuant().isQuantized() &&
        quantize.getCodes().hasOneUse() && quantize.getScales().hasOneUse() &&
        *quantize.getCodes().getUsers().begin() ==
            *quantize.getScales().getUsers().begin())
      request = requestOf(quantize.getCodes());
    // (A lhs_codes GEMM reads codes in A-fragment order, which the
    // epilogue does not write.)
    if (!request || request->gemm->getBlock() != block || request->codes) {
      found.keepF32 = true;
      continue;
    }
    // Along N: 32-column blocks inside dg or du (N a multiple of 32), in
    // the layout [dg | du] has. Along M: 32-slot blocks, read in place.
    int64_t axis = quantize.getAxis();
    if (axis == 1 && request->kAxis == 1 && !found.alongN &&
        problem.n % 32 == 0) {
      found.alongN = quantize;
      found.requestN = *request;
    } else if (axis == 0 && request->kAxis == 0 && !request->transpose &&
               !found.alongM && problem.m % 32 == 0) {
      found.alongM = quantize;
      found.requestM = *request;
    } else {
      found.keepF32 = true;
    }
  }
  return found;
}

/// The `prepared` key of an operand request.
static std::tuple<Value, Value, int64_t, int64_t>
preparedKey(Value data, Value scales,
            const GemmLowering::OperandRequest &request) {
  return std::make_tuple(data, scales, request.kAxis,
                         request.tokenRows ? 3
                         : request.codes   ? 2
                                           : int64_t(request.transpose));
}

FailureOr<Value> GemmLowering::prepareOperand(Operation *op, Value data,
                                              Value scales, int64_t kAxis,
                                              bool transpose) {
  Value unused;
  return prepare(data, scales, {op, kAxis, transpose}, unused);
}

FailureOr<std::pair<Value, Value>>
GemmLowering::prepareLhsCodes(Operation *op, Value codes, Value scales) {
  auto type = cast<RankedTensorType>(codes.getType());
  auto quantize = codes.getDefiningOp<MXQuantizeOp>();
  if (!scales || !quantize || quantize.getScales() != scales ||
      static_cast<int64_t>(quantize.getAxis()) != type.getRank() - 1)
    return op->emitOpError()
           << "lhs_codes needs a lhs that an mx_quantize along its last axis "
              "makes";
  Value codeScales;
  FailureOr<Value> made = prepare(
      codes, scales, {op, type.getRank() - 1, true, /*codes=*/true},
      codeScales);
  if (failed(made))
    return failure();
  return std::make_pair(*made, codeScales);
}

FailureOr<Value> GemmLowering::prepare(Value data, Value scales,
                                       const OperandRequest &request,
                                       Value &codeScales) {
  Operation *op = request.gemm;
  int64_t kAxis = request.kAxis;
  bool transpose = request.transpose;
  // GEMMs of one block share operands.
  auto key = preparedKey(data, scales, request);
  if (Value done = prepared.lookup(key))
    if (done.getParentBlock() == op->getBlock()) {
      codeScales = preparedScales.lookup(done);
      return done;
    }
  auto type = cast<RankedTensorType>(data.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> shape(type.getShape());
  MXOperandProblem problem;
  problem.batch = rank == 3 ? shape[0] : 1;
  problem.rows = shape[rank - 2];
  problem.cols = shape[rank - 1];
  problem.alongRows = kAxis == rank - 2;
  problem.transposeOut = transpose;
  problem.inPlaceTiles = choices.inPlaceTiles;
  problem.sourceType = type.getElementType();
  Value source = data;
  MXQuantizeOp quantize;
  if (scales) {
    // Codes an mx_quantize made along this axis: round its input instead,
    // so the codes are never written.
    quantize = data.getDefiningOp<MXQuantizeOp>();
    if (quantize && quantize.getScales() == scales &&
        static_cast<int64_t>(quantize.getAxis()) == kAxis) {
      source = quantize.getInput();
      problem.sourceType = quantize.getInput().getType().getElementType();
      problem.quant = quantize.getQuant();
      scales = Value();
    } else {
      quantize = MXQuantizeOp();
    }
  } else if (problem.sourceType.isBF16() &&
             (!problem.alongRows || !transpose)) {
    // bf16 values in the layout the kernel reads already.
    prepared[key] = data;
    return data;
  }
  // Rows gathered from token rows: the kernel reads them through the ids;
  // for a lhs_gather GEMM it rounds the token rows themselves, which the
  // GEMM gathers.
  Value ids;
  if (auto gather = source.getDefiningOp<GatherRowsOp>(); gather && !scales) {
    source = gather.getSource();
    if (request.tokenRows) {
      problem.rows = shape[rank - 2] = gather.getSource().getType().getDimSize(0);
    } else {
      ids = gather.getTokenPositionToId();
      problem.sourceRows = gather.getSource().getType().getDimSize(0);
    }
  } else if (request.tokenRows) {
    return op->emitOpError()
           << "lhs_gather needs a lhs that an mx_quantize along its last axis "
              "makes of gathered rows";
  }
  // Both roundings of the values in one kernel, when another GEMM of the
  // block takes them along the other axis in place.
  std::optional<std::pair<MXQuantizeOp, OperandRequest>> partner;
  if (choices.operandsBothAxes && quantize && !request.tokenRows &&
      canRoundBothAxes(problem)) {
    partner = bothAxesPartner(quantize, request);
    problem.bothAxes = partner.has_value();
  }
  // The rounding along the columns as lhs codes, for this request or the
  // partner's.
  bool codesAlongCols = request.codes || (partner && partner->second.codes);
  if (codesAlongCols && !quantize)
    return op->emitOpError()
           << "lhs_codes needs a lhs that an mx_quantize along its last axis "
              "makes";
  problem.codesOut = problem.fragmentOrder = codesAlongCols;
  if (failed(checkMXOperandKernel(problem, [&] { return op->emitOpError(); })))
    return failure();

  b.setInsertionPoint(op);
  MXOperandLaunch launch = buildMXOperandKernel(
      b, op->getLoc(), kernels, freshName("mx_operand_"), problem, target);
  SmallVector<Value> operands = {source};
  LaunchRecord record{launch.kernel, launch.grid, launch.block, 0, {}, {0, 1}};
  if (scales || ids) {
    operands.push_back(scales ? scales : ids);
    record.pointerArgs = {0, 1, 2};
  }
  SmallVector<int64_t> outShape(shape);
  if (problem.alongRows && transpose && !problem.bothAxes)
    std::swap(outShape[rank - 2], outShape[rank - 1]);
  auto outType = RankedTensorType::get(outShape, b.getBF16Type());
  // Outputs: along the columns (bf16 values or codes), then along the
  // rows in place (bothAxes), then the codes' scale bytes.
  SmallVector<Type> resultTypes = {outType};
  if (codesAlongCols)
    resultTypes[0] = RankedTensorType::get(
        shape, getElementTypeOrSelf(quantize.getCodes().getType()));
  if (partner)
    resultTypes.push_back(outType);
  if (codesAlongCols)
    resultTypes.push_back(RankedTensorType::get(
        codesOutScaleShape(problem),
        getElementTypeOrSelf(quantize.getScales().getType())));
  for (size_t i = 1; i < resultTypes.size(); ++i)
    record.pointerArgs.push_back(record.pointerArgs.back() + 1);
  SmallVector<Value> results =
      emitLaunch(b, op->getLoc(), record, operands, resultTypes);
  if (codesAlongCols)
    preparedScales[results[0]] = results.back();
  if (!partner) {
    prepared[key] = results[0];
    codeScales = preparedScales.lookup(results[0]);
    return results[0];
  }
  bool selfAlongCols = kAxis == rank - 1;
  auto [other, otherRequest] = *partner;
  prepared[key] = results[selfAlongCols ? 0 : 1];
  prepared[preparedKey(other.getCodes(), other.getScales(), otherRequest)] =
      results[selfAlongCols ? 1 : 0];
  codeScales = preparedScales.lookup(prepared[key]);
  return prepared[key];
}

FailureOr<std::pair<Value, Value>>
GemmLowering::prepareRhsCodes(Operation *op, Value codes, Value scales) {
  auto key = std::make_pair(codes, scales);
  if (auto it = preparedCodes.find(key); it != preparedCodes.end())
    if (it->second.first.getParentBlock() == op->getBlock())
      return it->second;
  auto type = cast<RankedTensorType>(codes.getType());
  int64_t rank = type.getRank();
  // (Codes given as they are, pre-quantized weights, have their scales in
  // the op's layout, not the one the kernel loads by TMA.)
  auto quantize = codes.getDefiningOp<MXQuantizeOp>();
  if (!scales || !quantize || quantize.getScales() != scales ||
      static_cast<int64_t>(quantize.getAxis()) != rank - 1)
    return op->emitOpError()
           << "rhs_codes needs an rhs that an mx_quantize along its last "
              "axis makes";
  ArrayRef<int64_t> shape = type.getShape();
  Value source = quantize.getInput();
  MXOperandProblem problem;
  problem.batch = rank == 3 ? shape[0] : 1;
  problem.rows = shape[rank - 2];
  problem.cols = shape[rank - 1];
  problem.alongRows = false;
  problem.sourceType = cast<ShapedType>(source.getType()).getElementType();
  problem.quant = quantize.getQuant();
  problem.codesOut = true;
  if (failed(checkMXOperandKernel(problem, [&] { return op->emitOpError(); })))
    return failure();
  b.setInsertionPoint(op);
  MXOperandLaunch launch = buildMXOperandKernel(
      b, op->getLoc(), kernels, freshName("mx_operand_"), problem, target);
  LaunchRecord record{launch.kernel, launch.grid, launch.block, 0, {},
                      {0, 1, 2}};
  auto scalesType = RankedTensorType::get(
      codesOutScaleShape(problem),
      cast<ShapedType>(scales.getType()).getElementType());
  SmallVector<Value> results = emitLaunch(b, op->getLoc(), record,
                                          ValueRange{source},
                                          {codes.getType(), scalesType});
  preparedCodes[key] = {results[0], results[1]};
  return preparedCodes[key];
}

LogicalResult GemmLowering::lowerBf16Operands(Operation *op,
                                              GemmConfigAttr config,
                                              const KernelGroup *group) {
  Location loc = op->getLoc();
  MXGemmProblem problem = getMXGemmProblem(op, MXMmaPath::Bf16Operands,
                                           config.getSwapOperands());
  MXGemmConfig cfg = getMXGemmConfig(config, target);
  std::optional<GatedActEpilogue> epi;
  std::optional<CheckpointGateUp> checkpoint;
  DGateUpRoundings roundings;
  // Without the activation epilogue, P1's activation backward becomes the
  // operand kernel of the GEMMs after it (actOperands).
  std::optional<GatedActEpilogue> actOperands;
  if (auto gemm = dyn_cast<BlockMatmulOp>(op); gemm && group) {
    if (choices.activationEpilogue)
      epi = matchGatedActEpilogue(gemm, *group);
    else
      actOperands = matchGatedActEpilogue(gemm, *group);
  }
  if (epi) {
    MXGemmEpilogue &e = problem.epilogue;
    e.kind = MXGemmEpilogue::Kind::GatedActBwd;
    e.activation = epi->act.getActivation();
    e.clamp = epi->act.getClampAttr();
    e.writeScaledH = bool(epi->scaled);
    e.writePartials = bool(epi->grad);
    // h itself only when something else reads it.
    for (Operation *user : epi->act.getH().getUsers())
      if (user != epi->scaled && user != epi->grad)
        e.writeH = true;
    if (choices.checkpointEpilogue)
      checkpoint = matchCheckpointGateUp(epi->act, *group, problem.blockSize);
    e.gateUpCheckpoint = checkpoint.has_value();
    // The epilogue rounds 32 columns (four column pairs of each lane) at a
    // time; not beside a ping-pong warpgroup's second accumulator (528
    // bytes spilled at I = 128, ptxas -v), where [dg | du] stays f32 for
    // the operand kernel.
    if (choices.dGateUpEpilogue && cfg.mmaN % 32 == 0 && !cfg.pingpong) {
      roundings = matchDGateUpRoundings(epi->act, problem, op->getBlock());
      if (roundings.alongN)
        e.dGateUpAlongN = roundings.alongN.getQuant();
      if (roundings.alongM)
        e.dGateUpAlongM = roundings.alongM.getQuant();
      e.writeDGateUp =
          roundings.keepF32 || (!e.dGateUpAlongN && !e.dGateUpAlongM);
    }
  }
  FailureOr<Value> lhs, rhs;
  Value bias, blocks, rhsScales, lhsScales;
  StringRef prefix;
  if (auto gemm = dyn_cast<BlockMatmulOp>(op); gemm && cfg.swapOperands) {
    // swap_operands: the kernel's lhs is the raw bf16 weight, which its
    // consumers round along K; its rhs the slot rows (rhs_gather: the
    // rounding of the token rows, gathered by the GEMM).
    MXQuantizeOp weight = weightRoundedQuantize(gemm);
    if (!weight)
      return op->emitOpError()
             << "swap_operands needs a rhs that an mx_quantize along K "
                "makes of a bf16 weight";
    if (cfg.rhsGather && !gatheredLhsQuantize(gemm))
      return op->emitOpError()
             << "rhs_gather needs a lhs that an mx_quantize along its last "
                "axis makes of gathered rows";
    lhs = throughFusedRegions(weight.getInput());
    Value unused;
    rhs = cfg.rhsGather
              ? prepare(gemm.getLhs(), gemm.getLhsScales(),
                        {op, 1, true, /*codes=*/false, /*tokenRows=*/true},
                        unused)
              : prepareOperand(op, gemm.getLhs(), gemm.getLhsScales(), 1);
    if (failed(rhs))
      return failure();
    bias = gemm.getBias();
    blocks = gemm.getBlockToExpert();
    prefix = "block_matmul_";
  } else if (auto gemm = dyn_cast<BlockMatmulOp>(op)) {
    // lhs_codes: the lhs as FP8 codes in A-fragment order with their scale
    // bytes.
    if (cfg.lhsCodes) {
      auto codes = prepareLhsCodes(op, gemm.getLhs(), gemm.getLhsScales());
      if (failed(codes))
        return failure();
      std::tie(lhs, lhsScales) = *codes;
    } else if (cfg.lhsGather) {
      // lhs_gather: the rounding of the token rows, gathered by the GEMM.
      Value unused;
      lhs = prepare(gemm.getLhs(), gemm.getLhsScales(),
                    {op, 1, true, /*codes=*/false, /*tokenRows=*/true},
                    unused);
    } else {
      lhs = prepareOperand(op, gemm.getLhs(), gemm.getLhsScales(), 1);
    }
    if (failed(lhs))
      return failure();
    // rhs_n_major: the kernel reads a transpose_rhs weight [E, K, N] as it
    // is stored; rhs_codes: a weight [E, N, K] as codes.
    if (cfg.rhsCodes && gemm.getTransposeRhs())
      return op->emitOpError()
             << "rhs_codes needs an rhs stored with K contiguous";
    if (cfg.rhsCodes) {
      auto codes = prepareRhsCodes(op, gemm.getRhs(), gemm.getRhsScales());
      if (failed(codes))
        return failure();
      std::tie(rhs, rhsScales) = *codes;
    } else {
      rhs = prepareOperand(op, gemm.getRhs(), gemm.getRhsScales(),
                           gemm.getTransposeRhs() ? 1 : 2,
                           /*transpose=*/!cfg.rhsNMajor);
    }
    bias = gemm.getBias();
    blocks = gemm.getBlockToExpert();
    prefix = "block_matmul_";
  } else {
    // lhs_m_major / rhs_n_major: the kernel reads the slot-major operands
    // as stored, so their operand kernels round along the slots in place.
    auto expert = cast<ExpertMatmulOp>(op);
    if (cfg.rhsCodes)
      return op->emitOpError()
             << "rhs_codes needs an rhs stored with K contiguous";
    if (cfg.lhsCodes)
      return op->emitOpError() << "lhs_codes needs a block GEMM";
    // round_lhs / round_rhs: the token rows the operand gathers, which
    // the kernel rounds along the slots itself. swap_operands: the
    // kernel's lhs is the op's rhs and its rhs the op's lhs.
    auto operand = [&](bool isRhs, bool rounds) -> FailureOr<Value> {
      bool opRhs = isRhs != cfg.swapOperands;
      Value data = opRhs ? expert.getRhs() : expert.getLhs();
      Value scales = opRhs ? expert.getRhsScales() : expert.getLhsScales();
      if (!rounds)
        return prepareOperand(op, data, scales, 0,
                              /*transpose=*/isRhs ? !cfg.rhsNMajor
                                                  : !cfg.lhsMMajor);
      MXQuantizeOp quantize = slotRoundedQuantize(expert, opRhs);
      if (!quantize)
        return op->emitOpError()
               << (isRhs ? "round_rhs needs an rhs" : "round_lhs needs a lhs")
               << " that an mx_quantize along the slots makes of bf16 rows "
                  "gathered through the GEMM's token ids";
      return throughFusedRegions(quantize.getInput())
          .getDefiningOp<GatherRowsOp>()
          .getSource();
    };
    lhs = operand(/*isRhs=*/false, cfg.roundLhs);
    if (failed(lhs))
      return failure();
    rhs = operand(/*isRhs=*/true, cfg.roundRhs);
    blocks = expert.getBlockToExpert();
    prefix = "expert_matmul_";
  }
  if (failed(rhs))
    return failure();
  if (failed(checkMXGemm(problem, cfg, target,
                             [&] { return op->emitOpError(); })))
    return failure();
  b.setInsertionPoint(op);
  if (epi)
    return lowerGatedActEpilogue(op, problem, cfg, *lhs, *rhs, rhsScales,
                                 lhsScales, blocks, *epi, checkpoint,
                                 roundings);
  MXGemmLaunch launch =
      buildMXGemmKernel(b, loc, kernels, freshName(prefix), problem, cfg,
                        target);
  // Host arguments: lhs, rhs, block_to_expert (, bias) (, token ids)
  // (, rhs scales) (, lhs scales), result.
  GemmHostArgs host;
  host.add(MXGemmArg::Lhs, *lhs);
  host.add(MXGemmArg::Rhs, *rhs);
  host.add(MXGemmArg::BlockToExpert, blocks);
  host.add(MXGemmArg::Bias, bias);
  host.add(MXGemmArg::Tokens, problem.skipPadding ? tokensOf(op) : Value());
  host.add(MXGemmArg::RhsScales, rhsScales);
  host.add(MXGemmArg::LhsScales, lhsScales);
  host.addResult(MXGemmArg::Result);
  LaunchRecord record = host.record(launch);
  ValueRange operands = host.operands;
  Value result =
      emitLaunch(b, loc, record, operands, op->getResult(0).getType())[0];
  op->getResult(0).replaceAllUsesWith(result);
  // (The activation backward's problem is the op's, not its transposed
  // product's.)
  if (actOperands && failed(lowerActBwdOperands(
                         op, getMXGemmProblem(op, MXMmaPath::Bf16Operands),
                         *actOperands, *group)))
    return failure();
  op->erase();
  return success();
}

LogicalResult GemmLowering::lowerActBwdOperands(Operation *gemm,
                                                const MXGemmProblem &gp,
                                                GatedActEpilogue epi,
                                                const KernelGroup &group) {
  GatedActBwdOp act = epi.act;
  Block *block = gemm->getBlock();
  MXActBwdProblem p;
  p.slots = gp.m;
  p.n = gp.n;
  p.activation = act.getActivation();
  p.clamp = act.getClampAttr();
  std::optional<CheckpointGateUp> checkpoint;
  if (choices.checkpointEpilogue)
    checkpoint = matchCheckpointGateUp(act, group, gp.blockSize);
  p.checkpoint = checkpoint.has_value();
  p.blockSize = gp.blockSize;
  p.tileColumns =
      choices.actBwdNarrow ? kActBwdNarrowTileColumns : kActBwdTileColumns;
  DGateUpRoundings roundings = matchDGateUpRoundings(act, gp, block);
  if (roundings.alongN)
    p.dGateUpAlongCols = roundings.alongN.getQuant();
  if (roundings.alongM)
    p.dGateUpAlongRows = roundings.alongM.getQuant();
  p.writeDGateUp = roundings.keepF32 || (!roundings.alongN && !roundings.alongM);
  // P4's operand: a * h (or h, affinity on H) MX-rounded along the slots,
  // read in place by a GEMM of the block.
  p.scaleRows = bool(epi.scaled);
  Value rowsValue = epi.scaled ? epi.scaled.getResult() : act.getH();
  MXQuantizeOp rowsQuantize;
  OperandRequest rowsRequest{nullptr, 0, false};
  for (Operation *user : rowsValue.getUsers()) {
    auto quantize = dyn_cast<MXQuantizeOp>(user);
    if (!quantize || rowsQuantize || quantize.getAxis() != 0 ||
        !quantize.getQuant().isQuantized() || gp.m % 32 ||
        !quantize.getCodes().hasOneUse())
      continue;
    std::optional<OperandRequest> request = requestOf(quantize.getCodes());
    if (request && request->gemm->getBlock() == block && request->kAxis == 0 &&
        !request->transpose && !request->codes) {
      rowsQuantize = quantize;
      rowsRequest = *request;
    }
  }
  if (rowsQuantize)
    p.rowsOperandAlongRows = rowsQuantize.getQuant();
  // f32 h and a * h for their other readers (the affinity gradient takes
  // the partial sums instead).
  for (Operation *user : act.getH().getUsers())
    if (user != epi.scaled && user != epi.grad && user != rowsQuantize)
      p.writeH = true;
  if (epi.scaled)
    for (Operation *user : epi.scaled->getUsers())
      if (user != rowsQuantize)
        p.writeScaledH = true;
  p.writePartials = bool(epi.grad);
  // What the kernel does not fit stays for the elementwise lowering.
  if (!fitsMXActBwdKernel(p))
    return success();

  // The launch goes where the activation backward was: its operands are
  // defined there.
  Location loc = act.getLoc();
  b.setInsertionPoint(act);
  MXActBwdLaunch launch = buildMXActBwdKernel(
      b, loc, kernels, freshName("act_bwd_operands_"), p);
  SmallVector<Value> operands = {
      act.getDAct(), checkpoint ? checkpoint->checkpoint : act.getGateUp(),
      act.getSlotAffinities()};
  if (checkpoint)
    operands.push_back(checkpoint->tokenIds);
  auto dGateUpType = cast<RankedTensorType>(act.getDGateUp().getType());
  auto hType = cast<RankedTensorType>(act.getH().getType());
  auto bf16Like = [&](RankedTensorType type) {
    return RankedTensorType::get(type.getShape(), b.getBF16Type());
  };
  SmallVector<Type> resultTypes;
  if (p.dGateUpAlongCols)
    resultTypes.push_back(bf16Like(dGateUpType));
  if (p.dGateUpAlongRows)
    resultTypes.push_back(bf16Like(dGateUpType));
  if (p.rowsOperandAlongRows)
    resultTypes.push_back(bf16Like(hType));
  if (p.writeDGateUp)
    resultTypes.push_back(dGateUpType);
  if (p.writeH)
    resultTypes.push_back(hType);
  if (p.writeScaledH)
    resultTypes.push_back(cast<RankedTensorType>(epi.scaled.getType()));
  if (p.writePartials)
    resultTypes.push_back(
        RankedTensorType::get(actBwdPartialsShape(p), b.getF32Type()));
  LaunchRecord record{launch.kernel, launch.grid, launch.block,
                      launch.dynamicSharedMemory, {}, {}};
  for (int64_t i = 0, e = operands.size() + resultTypes.size(); i < e; ++i)
    record.pointerArgs.push_back(i);
  SmallVector<Value> results =
      emitLaunch(b, loc, record, operands, resultTypes);
  unsigned next = 0;
  // The GEMMs that read the roundings take the kernel's values; a stand-in
  // takes the place of what only those read.
  auto provide = [&](MXQuantizeOp quantize, const OperandRequest &request) {
    prepared[std::make_tuple(quantize.getCodes(), quantize.getScales(),
                             request.kAxis, int64_t(request.transpose))] =
        results[next++];
  };
  auto standIn = [&](Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    Value empty = tensor::EmptyOp::create(b, loc, type.getShape(),
                                          type.getElementType());
    placeholders.push_back(empty.getDefiningOp());
    return empty;
  };
  if (p.dGateUpAlongCols)
    provide(roundings.alongN, roundings.requestN);
  if (p.dGateUpAlongRows)
    provide(roundings.alongM, roundings.requestM);
  if (p.rowsOperandAlongRows)
    provide(rowsQuantize, rowsRequest);
  act.getDGateUp().replaceAllUsesWith(
      p.writeDGateUp ? results[next++] : standIn(act.getDGateUp()));
  Value h = p.writeH ? results[next++] : Value();
  Value scaled = p.writeScaledH ? results[next++] : Value();
  if (epi.grad) {
    replaceByPartialSums(b, epi.grad, results[next++]);
  }
  b.setInsertionPoint(act);
  if (epi.scaled) {
    epi.scaled.getResult().replaceAllUsesWith(
        scaled ? scaled : standIn(epi.scaled.getResult()));
    epi.scaled->erase();
  }
  if (!act.getH().use_empty())
    act.getH().replaceAllUsesWith(h ? h : standIn(act.getH()));
  act->erase();
  if (checkpoint)
    for (Operation *dead : checkpoint->chain)
      dead->erase();
  return success();
}

LogicalResult GemmLowering::lowerGatedActEpilogue(
    Operation *op, const MXGemmProblem &problem, const MXGemmConfig &cfg,
    Value lhs, Value rhs, Value rhsScales, Value lhsScales, Value blocks,
    GatedActEpilogue epi, const std::optional<CheckpointGateUp> &checkpoint,
    const DGateUpRoundings &roundings) {
  // The launch goes where the activation backward was: its operands (the
  // slot affinities come after the GEMM in the region) are defined there.
  Location loc = epi.act.getLoc();
  b.setInsertionPoint(epi.act);
  MXGemmLaunch launch = buildMXGemmKernel(
      b, loc, kernels, freshName("block_matmul_act_"), problem, cfg, target);
  // Host arguments: lhs, rhs, block_to_expert, gate_up (or the
  // checkpoint), affinities (, token ids) (, token ids of skipPadding)
  // (, rhs scales) (, lhs scales), then the results: [dg | du] as f32
  // and / or its MX values along N and along M (at least one), (, h)
  // (, a * h) (, partials), in mxGemmKernelArgs's order of them.
  GemmHostArgs host;
  host.add(MXGemmArg::Lhs, lhs);
  host.add(MXGemmArg::Rhs, rhs);
  host.add(MXGemmArg::BlockToExpert, blocks);
  host.add(MXGemmArg::GateUp,
           checkpoint ? checkpoint->checkpoint : epi.act.getGateUp());
  host.add(MXGemmArg::Affinities, epi.act.getSlotAffinities());
  host.add(MXGemmArg::CheckpointTokenIds,
           checkpoint ? checkpoint->tokenIds : Value());
  host.add(MXGemmArg::Tokens, problem.skipPadding ? tokensOf(op) : Value());
  host.add(MXGemmArg::RhsScales, rhsScales);
  host.add(MXGemmArg::LhsScales, lhsScales);
  for (const MXGemmKernelArg &arg : launch.args)
    if (llvm::is_contained({MXGemmArg::DGateUp, MXGemmArg::DGateUpAlongN,
                            MXGemmArg::DGateUpAlongM, MXGemmArg::H,
                            MXGemmArg::ScaledH, MXGemmArg::Partials},
                           arg.role))
      host.addResult(arg.role);
  LaunchRecord record = host.record(launch);
  ValueRange operands = host.operands;
  const MXGemmEpilogue &e = problem.epilogue;
  auto dGateUpType = cast<RankedTensorType>(epi.act.getDGateUp().getType());
  auto roundedType =
      RankedTensorType::get(dGateUpType.getShape(), b.getBF16Type());
  SmallVector<Type> resultTypes;
  if (e.writeDGateUp)
    resultTypes.push_back(dGateUpType);
  if (e.dGateUpAlongN)
    resultTypes.push_back(roundedType);
  if (e.dGateUpAlongM)
    resultTypes.push_back(roundedType);
  auto hType = cast<RankedTensorType>(epi.act.getH().getType());
  if (e.writeH)
    resultTypes.push_back(hType);
  if (e.writeScaledH)
    resultTypes.push_back(hType);
  if (e.writePartials)
    resultTypes.push_back(RankedTensorType::get(
        {problem.m, (problem.n + cfg.tileN - 1) / cfg.tileN},
        b.getF32Type()));
  SmallVector<Value> results =
      emitLaunch(b, loc, record, operands, resultTypes);
  unsigned next = 0;
  Value dGateUp;
  if (e.writeDGateUp) {
    dGateUp = results[next++];
  } else {
    // Only the roundings below read [dg | du]; their mx_quantize ops go
    // once their GEMMs are lowered, and this stand-in with them.
    dGateUp = tensor::EmptyOp::create(b, loc, dGateUpType.getShape(),
                                      dGateUpType.getElementType());
    placeholders.push_back(dGateUp.getDefiningOp());
  }
  epi.act.getDGateUp().replaceAllUsesWith(dGateUp);
  // The GEMMs that read the roundings take the epilogue's values.
  auto provide = [&](MXQuantizeOp quantize, const OperandRequest &request) {
    prepared[std::make_tuple(quantize.getCodes(), quantize.getScales(),
                             request.kAxis, int64_t(request.transpose))] =
        results[next++];
  };
  if (e.dGateUpAlongN)
    provide(roundings.alongN, roundings.requestN);
  if (e.dGateUpAlongM)
    provide(roundings.alongM, roundings.requestM);
  if (e.writeH)
    epi.act.getH().replaceAllUsesWith(results[next++]);
  if (e.writeScaledH) {
    epi.scaled.getResult().replaceAllUsesWith(results[next++]);
    epi.scaled->erase();
  }
  if (e.writePartials) {
    replaceByPartialSums(b, epi.grad, results[next++]);
  }
  epi.act->erase();
  // The unpacked, masked checkpoint had no other reader.
  if (checkpoint)
    for (Operation *dead : checkpoint->chain)
      dead->erase();
  op->erase();
  return success();
}

/// Emits the kernels of the module's GEMMs for one chip and replaces each
/// GEMM by the host code that launches its kernels.
struct ConvertMoeToNVGPUPass
    : moe::impl::ConvertMoeToNVGPUBase<ConvertMoeToNVGPUPass> {
  using ConvertMoeToNVGPUBase::ConvertMoeToNVGPUBase;

  friend KernelChoices moe::kernelChoicesOf<kernel_choice_passes::Convert>(
      const ConvertMoeToNVGPUPass &pass);

  void runOnOperation() override {
    ModuleOp module = getOperation();
    KernelChoices choices =
        kernelChoicesOf<kernel_choice_passes::Convert>(*this);
    FailureOr<GemmTargetChoice> choice =
        resolveGemmTarget(module, chip, mmaPath);
    if (failed(choice))
      return signalPassFailure();

    // Each moe.fused region is a kernel unit: inline it and remember its
    // ops, so that its GEMM's kernel computes the epilogue it finds there.
    // What no kernel computes stays for the host lowering.
    SmallVector<FusedOp> regions;
    module.walk([&](FusedOp op) { regions.push_back(op); });
    std::vector<KernelGroup> groups(regions.size());
    DenseMap<Operation *, const KernelGroup *> groupOf;
    IRRewriter rewriter(&getContext());
    for (auto [region, group] : llvm::zip_equal(regions, groups)) {
      for (Operation *op : region.inlineBody(rewriter)) {
        group.insert(op);
        groupOf[op] = &group;
      }
    }

    SmallVector<Operation *> gemms;
    module.walk([&](Operation *op) {
      if (isGPUGemm(op))
        gemms.push_back(op);
    });
    if (gemms.empty())
      return;

    // The configuration moe-gpu-kernel-config recorded (or a test set),
    // else the one it would record.
    DenseMap<Operation *, GemmConfigAttr> configs;
    for (Operation *op : gemms) {
      GemmConfigAttr config;
      if (Attribute attr = op->getAttr(kGemmConfigAttrName)) {
        config = dyn_cast<GemmConfigAttr>(attr);
        if (!config) {
          op->emitOpError() << "'" << kGemmConfigAttrName
                            << "' must be a #moe.gemm_config, got " << attr;
          return signalPassFailure();
        }
      } else {
        config = selectGemmConfig(op, choice->target, choice->preferred,
                                  choices, groupOf.lookup(op));
        if (!config) {
          op->emitOpError() << noKernelMessage(choice->target);
          return signalPassFailure();
        }
      }
      configs[op] = config;
    }
    OpBuilder b(&getContext());
    GemmLowering lowering(b, getOrCreateKernelModule(b, module), choice->target,
                          configs, choices);
    for (Operation *op : gemms) {
      GemmConfigAttr config = configs.lookup(op);
      if (failed(config.getMma() == MXMmaPath::Bf16Operands
                     ? lowering.lowerBf16Operands(op, config, groupOf.lookup(op))
                     : lowering.lowerMXCodes(op, config)))
        return signalPassFailure();
    }
    // The quantizations and gathers whose results only the GEMMs read are
    // computed by the operand kernels now (quantizations first: they read
    // the gathers).
    SmallVector<MXQuantizeOp> quantizations;
    module.walk([&](MXQuantizeOp op) { quantizations.push_back(op); });
    for (MXQuantizeOp op : quantizations)
      if (op->use_empty())
        op->erase();
    SmallVector<GatherRowsOp> gathers;
    module.walk([&](GatherRowsOp op) { gathers.push_back(op); });
    for (GatherRowsOp op : gathers)
      if (op->use_empty())
        op->erase();
    for (Operation *op : lowering.placeholders) {
      if (!op->use_empty()) {
        op->emitOpError() << "stands in for [dg | du], which is still read";
        return signalPassFailure();
      }
      op->erase();
    }
  }
};

} // namespace

/// Whether `data` (with `scales`) is an operand the GPU kernels take: FP8
/// codes with scales, or bf16 values without.
static bool isGPUOperand(Value data, Value scales) {
  Type type = cast<ShapedType>(data.getType()).getElementType();
  return scales ? isMXCodeType(type) : type.isBF16();
}

bool mlir::moe::isGPUGemm(Operation *op) {
  if (auto block = dyn_cast<BlockMatmulOp>(op))
    return isGPUOperand(block.getLhs(), block.getLhsScales()) &&
           isGPUOperand(block.getRhs(), block.getRhsScales());
  if (auto expert = dyn_cast<ExpertMatmulOp>(op))
    return isGPUOperand(expert.getLhs(), expert.getLhsScales()) &&
           isGPUOperand(expert.getRhs(), expert.getRhsScales());
  return false;
}

bool mlir::moe::isMXCodesGemm(Operation *op) {
  if (auto block = dyn_cast<BlockMatmulOp>(op))
    return mxElementType(block) && !block.getBias();
  if (auto expert = dyn_cast<ExpertMatmulOp>(op))
    return bool(mxElementType(expert));
  return false;
}

Value mlir::moe::throughFusedRegions(Value v) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (auto fused = dyn_cast<FusedOp>(arg.getOwner()->getParentOp())) {
        v = fused.getInputs()[arg.getArgNumber()];
        continue;
      }
    if (auto result = dyn_cast<OpResult>(v))
      if (auto fused = dyn_cast<FusedOp>(result.getOwner())) {
        v = fused.getBody().front().getTerminator()->getOperand(
            result.getResultNumber());
        continue;
      }
    return v;
  }
}

MXQuantizeOp mlir::moe::gatheredLhsQuantize(BlockMatmulOp gemm) {
  auto quantize =
      throughFusedRegions(gemm.getLhs()).getDefiningOp<MXQuantizeOp>();
  if (!quantize || !gemm.getLhsScales() ||
      quantize.getScales() != throughFusedRegions(gemm.getLhsScales()) ||
      static_cast<int64_t>(quantize.getAxis()) != 1 ||
      !throughFusedRegions(quantize.getInput()).getDefiningOp<GatherRowsOp>())
    return MXQuantizeOp();
  return quantize;
}

MXQuantizeOp mlir::moe::weightRoundedQuantize(BlockMatmulOp gemm) {
  auto quantize =
      throughFusedRegions(gemm.getRhs()).getDefiningOp<MXQuantizeOp>();
  int64_t kAxis = gemm.getTransposeRhs() ? 1 : 2;
  if (!quantize || !gemm.getRhsScales() ||
      quantize.getScales() != throughFusedRegions(gemm.getRhsScales()) ||
      static_cast<int64_t>(quantize.getAxis()) != kAxis ||
      !quantize.getQuant().isQuantized() ||
      !cast<ShapedType>(quantize.getInput().getType())
           .getElementType()
           .isBF16())
    return MXQuantizeOp();
  return quantize;
}

MXQuantizeOp mlir::moe::slotRoundedQuantize(ExpertMatmulOp gemm, bool rhs) {
  Value codes = rhs ? gemm.getRhs() : gemm.getLhs();
  Value scales = rhs ? gemm.getRhsScales() : gemm.getLhsScales();
  auto quantize = throughFusedRegions(codes).getDefiningOp<MXQuantizeOp>();
  if (!quantize || !scales ||
      quantize.getScales() != throughFusedRegions(scales) ||
      quantize.getAxis() != 0 || !quantize.getQuant().isQuantized())
    return MXQuantizeOp();
  auto gather =
      throughFusedRegions(quantize.getInput()).getDefiningOp<GatherRowsOp>();
  if (!gather || !gemm.getTokenPositionToId() ||
      throughFusedRegions(gather.getTokenPositionToId()) !=
          throughFusedRegions(gemm.getTokenPositionToId()) ||
      !gather.getSource().getType().getElementType().isBF16())
    return MXQuantizeOp();
  return quantize;
}

MXGemmProblem mlir::moe::getMXGemmProblem(Operation *op, MXMmaPath path,
                                          bool swapOperands) {
  // The Bf16Operands kernels read bf16 values, whatever the operands were,
  // except codes that a rhs_codes or lhs_codes kernel decodes itself.
  auto codeType = [](Value operand) -> Type {
    Type type = cast<ShapedType>(operand.getType()).getElementType();
    return isMXCodeType(type) ? type : Type();
  };
  // The bf16-operands kernels skip padding when they get the token ids.
  bool skipPadding = path == MXMmaPath::Bf16Operands && tokensOf(op);
  if (auto gemm = dyn_cast<BlockMatmulOp>(op)) {
    ArrayRef<int64_t> rhs = gemm.getRhs().getType().getShape();
    bool transposed = gemm.getTransposeRhs();
    Type biasType;
    if (Value bias = gemm.getBias())
      biasType = cast<ShapedType>(bias.getType()).getElementType();
    MXGemmProblem problem = {MXGemmKind::Block,
            gemm.getLhs().getType().getDimSize(0),
            transposed ? rhs[2] : rhs[1],
            transposed ? rhs[1] : rhs[2],
            rhs[0],
            static_cast<int64_t>(gemm.getBlockSize()),
            gemm.getBlockToExpert().getType().getDimSize(0),
            path == MXMmaPath::Bf16Operands ? codeType(gemm.getRhs())
                                            : mxElementType(gemm),
            path,
            biasType};
    problem.skipPadding = skipPadding;
    if (path == MXMmaPath::Bf16Operands)
      problem.lhsElementType = codeType(gemm.getLhs());
    if (MXQuantizeOp quantize = gatheredLhsQuantize(gemm))
      problem.lhsGatherRows =
          cast<ShapedType>(throughFusedRegions(quantize.getInput())
                               .getDefiningOp<GatherRowsOp>()
                               .getSource()
                               .getType())
              .getDimSize(0);
    if (swapOperands) {
      // The weight rows of the tile's expert times the slot rows: the
      // weight is the kernel's lhs, rounded along K by its consumers.
      std::swap(problem.m, problem.n);
      std::swap(problem.lhsGatherRows, problem.rhsGatherRows);
      std::swap(problem.elementType, problem.lhsElementType);
      if (MXQuantizeOp quantize = weightRoundedQuantize(gemm))
        problem.roundLhs = quantize.getQuant();
      problem.transposedResult = true;
    }
    return problem;
  }
  auto expert = cast<ExpertMatmulOp>(op);
  ArrayRef<int64_t> result = expert.getType().getShape();
  MXGemmProblem problem = {MXGemmKind::Expert,
          result[1],
          result[2],
          expert.getLhs().getType().getDimSize(0),
          result[0],
          static_cast<int64_t>(expert.getBlockSize()),
          expert.getBlockToExpert().getType().getDimSize(0),
          path == MXMmaPath::Bf16Operands ? codeType(expert.getRhs())
                                          : mxElementType(expert),
          path,
          Type()};
  problem.skipPadding = skipPadding;
  for (bool rhs : {false, true})
    if (MXQuantizeOp quantize = slotRoundedQuantize(expert, rhs))
      (rhs ? problem.roundRhs : problem.roundLhs) = quantize.getQuant();
  if (swapOperands) {
    std::swap(problem.m, problem.n);
    std::swap(problem.roundLhs, problem.roundRhs);
    problem.lhsElementType = problem.elementType;
    problem.elementType = path == MXMmaPath::Bf16Operands
                              ? codeType(expert.getLhs())
                              : mxElementType(expert);
    problem.transposedResult = true;
  }
  return problem;
}
