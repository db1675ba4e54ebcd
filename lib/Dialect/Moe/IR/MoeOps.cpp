//===- MoeOps.cpp - ops of the moe dialect ------------------------------===//
//
// The verifiers of moe.blockwise_bwd and moe.route: every relation of the
// tensor contract (SPEC section 4) and every attribute constraint, each with
// its own message, so that bad IR is rejected where it is written rather
// than miscompiled later.
//
//===----------------------------------------------------------------------===//
#include "moe/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cstdint>
#include <limits>

using namespace mlir;
using namespace mlir::moe;

int64_t mlir::moe::computeNumBlocks(int64_t T, int64_t K, int64_t E,
                                    int64_t B) {
  // Every expert but the last may waste up to B-1 slots in its final
  // block. The ceiling is the real one, also for a negative numerator
  // (fewer routed pairs than E-1): ceil(-r / B) = -floor(r / B).
  int64_t rest = T * K - (E - 1);
  int64_t ceilTerm = rest >= 0 ? (rest + B - 1) / B : -((-rest) / B);
  return std::max<int64_t>(ceilTerm + E - 1, 1);
}

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

/// Formats a shape as "[4, 128, 256]" for messages.
static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string str;
  llvm::raw_string_ostream os(str);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return str;
}

static bool isBF16OrF32(Type type) { return type.isBF16() || type.isF32(); }

static bool isFP8Weight(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(type);
}

static bool hasShape(Value value, ArrayRef<int64_t> shape) {
  return cast<RankedTensorType>(value.getType()).getShape() == shape;
}

static Type elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

static LogicalResult verifyBlockSize(Operation *op, int64_t blockSize) {
  if (llvm::is_contained({128, 256, 512, 1024}, blockSize))
    return success();
  return op->emitOpError("block_size must be one of 128, 256, 512, 1024, got ")
         << blockSize;
}

/// The three tensors of the routing layout, shared by both ops.
static LogicalResult verifyRoutingLayout(Operation *op, Value tokenPositions,
                                         Value blockToExpert, Value affinities,
                                         int64_t T, int64_t K, int64_t E,
                                         int64_t B) {
  int64_t numBlocks = computeNumBlocks(T, K, E, B);
  if (!hasShape(blockToExpert, {numBlocks}) ||
      !elementTypeOf(blockToExpert).isInteger(32))
    return op->emitOpError("block_to_expert must be a 1-D i32 tensor of N = ")
           << numBlocks << " blocks (N = ceil((T*K - (E-1)) / B) + E - 1 for T = "
           << T << ", K = " << K << ", E = " << E << ", B = " << B
           << "), got " << blockToExpert.getType();
  if (!hasShape(tokenPositions, {numBlocks * B}) ||
      !elementTypeOf(tokenPositions).isInteger(32))
    return op->emitOpError(
               "token_position_to_id must be a 1-D i32 tensor of N*B = ")
           << numBlocks * B << " slots, got " << tokenPositions.getType();
  if (!hasShape(affinities, {T * E}) || !elementTypeOf(affinities).isF32())
    return op->emitOpError(
               "expert_affinities_masked must be a 1-D f32 tensor of T*E = ")
           << T * E << " elements, got " << affinities.getType();
  return success();
}

static LogicalResult verifyStaticShapes(Operation *op) {
  for (Type type :
       llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (!cast<RankedTensorType>(type).hasStaticShape())
      return op->emitOpError("requires static shapes, got ") << type;
  return success();
}

//===----------------------------------------------------------------------===//
// BlockwiseBwdOp
//===----------------------------------------------------------------------===//

int64_t BlockwiseBwdOp::getNumTokens() {
  return getHiddenStates().getType().getDimSize(0);
}
int64_t BlockwiseBwdOp::getHiddenSize() {
  return getHiddenStates().getType().getDimSize(1);
}
int64_t BlockwiseBwdOp::getIntermediateSize() {
  return getGateUpWeight().getType().getDimSize(3);
}
int64_t BlockwiseBwdOp::getNumExperts() {
  return getGateUpWeight().getType().getDimSize(0);
}
int64_t BlockwiseBwdOp::getNumBlocks() {
  return getBlockToExpert().getType().getDimSize(0);
}

/// Checks a weight's quantization: a pre-quantized (fp8) weight needs MX
/// quantization of the same element type and scales of `scaleShape`; a bf16
/// weight takes no scales.
static LogicalResult verifyWeightQuant(BlockwiseBwdOp op, StringRef name,
                                       Value weight, Value scales,
                                       ArrayRef<int64_t> scaleShape,
                                       StringRef scaleShapeName) {
  Type elemType = elementTypeOf(weight);
  MXQuantAttr quant = op.getQuant();
  if (!isFP8Weight(elemType)) {
    if (scales)
      return op.emitOpError() << name << "_scales given but " << name
                              << "_weight is bf16, not pre-quantized";
    return success();
  }
  if (!quant.isQuantized())
    return op.emitOpError() << "pre-quantized " << name << "_weight ("
                            << elemType
                            << ") needs MX quantization, but quant is none";
  bool sameElement =
      (quant.getElement() == MXElement::f8E4M3FN) ==
      isa<Float8E4M3FNType>(elemType);
  if (!sameElement)
    return op.emitOpError()
           << name << "_weight element type " << elemType
           << " does not match the quant element "
           << stringifyMXElement(quant.getElement());
  if (!scales)
    return op.emitOpError() << "pre-quantized " << name << "_weight requires "
                            << name << "_scales";
  if (!hasShape(scales, scaleShape) ||
      !isa<Float8E8M0FNUType>(elementTypeOf(scales)))
    return op.emitOpError() << name << "_scales must be a f8E8M0FNU tensor "
                            << scaleShapeName << " = " << shapeStr(scaleShape)
                            << ", got " << scales.getType();
  return success();
}

/// The largest tensor the compiler handles, in bytes: 2^40 (1 TiB), far
/// above any layer a GPU holds, and small enough that every index and byte
/// offset the lowerings compute fits int64.
static constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;

/// Error unless the tensor `name` of shape `shape` (named by `dims`) with
/// `elementBytes`-byte elements fits kMaxTensorBytes; its size is computed
/// without overflow.
static LogicalResult verifyTensorBytes(Operation *op, StringRef name,
                                       StringRef dims,
                                       ArrayRef<int64_t> shape,
                                       int64_t elementBytes) {
  int64_t bytes = elementBytes;
  bool overflow = false;
  for (int64_t d : shape)
    overflow = overflow || llvm::MulOverflow(bytes, d, bytes);
  if (!overflow && bytes <= kMaxTensorBytes)
    return success();
  InFlightDiagnostic diag = op->emitOpError()
                            << name << " " << dims << " = " << shapeStr(shape);
  if (overflow)
    return diag << " overflows a 64-bit size";
  return diag << " needs " << bytes << " bytes, more than the 2^40 a tensor "
                                       "may have";
}

LogicalResult BlockwiseBwdOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyStaticShapes(op)))
    return failure();

  // Tokens and hidden size, from the activations.
  RankedTensorType xType = getHiddenStates().getType();
  if (xType.getRank() != 2 || !xType.getElementType().isBF16())
    return emitOpError("hidden_states must be a 2-D bf16 tensor [T, H], got ")
           << xType;
  int64_t T = xType.getDimSize(0), H = xType.getDimSize(1);
  if (T < 1)
    return emitOpError("hidden_states must hold at least one token, got ")
           << xType;
  // token_position_to_id names tokens by i32.
  if (T > std::numeric_limits<int32_t>::max())
    return emitOpError("hidden_states holds T = ")
           << T << " tokens, more than the i32 ids of token_position_to_id "
                   "can name (2^31 - 1)";
  if (H < 1 || H % 32 != 0)
    return emitOpError("H (hidden size) must be a positive multiple of 32, "
                       "got ")
           << H;
  if (getOutputGrad().getType() != xType)
    return emitOpError("output_grad must have the type of hidden_states, ")
           << xType << ", got " << getOutputGrad().getType();

  // Experts and intermediate size, from the weights.
  RankedTensorType wguType = getGateUpWeight().getType();
  if (wguType.getRank() != 4)
    return emitOpError("gate_up_weight must be a 4-D tensor [E, H, 2, I], "
                       "got ")
           << wguType;
  if (!wguType.getElementType().isBF16() &&
      !isFP8Weight(wguType.getElementType()))
    return emitOpError("gate_up_weight element type must be bf16, f8E4M3FN "
                       "or f8E5M2, got ")
           << wguType.getElementType();
  int64_t E = wguType.getDimSize(0), I = wguType.getDimSize(3);
  if (E < 1)
    return emitOpError("gate_up_weight must hold at least one expert, got ")
           << wguType;
  if (wguType.getDimSize(1) != H)
    return emitOpError("gate_up_weight dim 1 must equal H = ")
           << H << ", got " << wguType.getDimSize(1);
  if (wguType.getDimSize(2) != 2)
    return emitOpError("gate_up_weight dim 2 must be 2 (gate, up), got ")
           << wguType.getDimSize(2);
  if (I < 1 || I % 32 != 0)
    return emitOpError("I (intermediate size) must be a positive multiple of "
                       "32, got ")
           << I;
  // Sizes every lowering can index (the weight gradients may be f32).
  if (failed(verifyTensorBytes(op, "hidden_states", "[T, H]", {T, H}, 4)) ||
      failed(verifyTensorBytes(op, "gate_up_weight", "[E, H, 2, I]",
                               {E, H, 2, I}, 4)) ||
      failed(verifyTensorBytes(op, "affinities", "[T, E]", {T, E}, 4)))
    return failure();
  RankedTensorType wdType = getDownWeight().getType();
  if (wdType.getShape() != ArrayRef<int64_t>{E, I, H})
    return emitOpError("down_weight must be a tensor [E, I, H] = ")
           << shapeStr({E, I, H}) << ", got " << wdType;
  if (!wdType.getElementType().isBF16() &&
      !isFP8Weight(wdType.getElementType()))
    return emitOpError("down_weight element type must be bf16, f8E4M3FN or "
                       "f8E5M2, got ")
           << wdType.getElementType();

  // Attributes.
  int64_t B = getBlockSize();
  if (failed(verifyBlockSize(op, B)))
    return failure();
  int64_t K = getTopK();
  if (K < 1 || K > E)
    return emitOpError("top_k must be in [1, E] = [1, ")
           << E << "], got " << K;
  if (getSingleExpertDense() && (E != 1 || K != 1))
    return emitOpError("single_expert_dense requires E = 1 and top_k = 1, "
                       "got E = ")
           << E << ", top_k = " << K;

  // Routing layout.
  if (failed(verifyRoutingLayout(op, getTokenPositionToId(),
                                 getBlockToExpert(),
                                 getExpertAffinitiesMasked(), T, K, E, B)))
    return failure();
  int64_t N = computeNumBlocks(T, K, E, B);
  // The slot rows of the phases: f32 [N*B, H] (dx partials) and [N*B, 2I].
  if (failed(verifyTensorBytes(op, "the slot rows", "[N*B, max(H, 2I)]",
                               {N, B, std::max(H, 2 * I)}, 4)))
    return failure();

  // Pre-quantized weights: scales run along the axis each weight's phase
  // contracts (2I for gate/up in P2, H for down in P1).
  if (failed(verifyWeightQuant(*this, "gate_up", getGateUpWeight(),
                               getGateUpScales(), {E, H, 2, I / 32},
                               "[E, H, 2, I/32]")) ||
      failed(verifyWeightQuant(*this, "down", getDownWeight(), getDownScales(),
                               {E, I, H / 32}, "[E, I, H/32]")))
    return failure();
  if (isFP8Weight(wguType.getElementType()) && !getGateUpCheckpoint())
    return emitOpError("pre-quantized gate_up_weight requires "
                       "gate_up_checkpoint: recomputing g and u contracts "
                       "over H, but its scales run along 2I");
  if (Value checkpoint = getGateUpCheckpoint())
    if (!hasShape(checkpoint, {N, 2, I, B}) ||
        !isBF16OrF32(elementTypeOf(checkpoint)))
      return emitOpError("gate_up_checkpoint must be a bf16 or f32 tensor "
                         "[N, 2, I, B] = ")
             << shapeStr({N, 2, I, B}) << ", got " << checkpoint.getType();

  // Biases.
  bool hasBiasOperands = getGateUpBias() || getDownBias();
  if (getBias() && !(getGateUpBias() && getDownBias()))
    return emitOpError("bias requires the gate_up_bias and down_bias "
                       "operands");
  if (!getBias() && hasBiasOperands)
    return emitOpError("gate_up_bias and down_bias require the bias "
                       "attribute");
  if (getBias()) {
    if (!hasShape(getGateUpBias(), {E, 2, I}) ||
        !isBF16OrF32(elementTypeOf(getGateUpBias())))
      return emitOpError("gate_up_bias must be a bf16 or f32 tensor "
                         "[E, 2, I] = ")
             << shapeStr({E, 2, I}) << ", got " << getGateUpBias().getType();
    if (!hasShape(getDownBias(), {E, H}) ||
        !isBF16OrF32(elementTypeOf(getDownBias())))
      return emitOpError("down_bias must be a bf16 or f32 tensor [E, H] = ")
             << shapeStr({E, H}) << ", got " << getDownBias().getType();
  }

  // Results.
  Value dx = getHiddenStatesGrad();
  if (!hasShape(dx, {T, H}) || !isBF16OrF32(elementTypeOf(dx)))
    return emitOpError("hidden_states_grad must be a bf16 or f32 tensor "
                       "[T, H] = ")
           << shapeStr({T, H}) << ", got " << dx.getType();
  if (getDxAccumulate() == DxAccumulate::bf16 && !elementTypeOf(dx).isBF16())
    return emitOpError("dx_accumulate = bf16 requires a bf16 "
                       "hidden_states_grad, got ")
           << dx.getType();
  if (!hasShape(getAffinitiesGrad(), {T * E}) ||
      !elementTypeOf(getAffinitiesGrad()).isF32())
    return emitOpError("affinities_grad must be a 1-D f32 tensor of T*E = ")
           << T * E << " elements, got " << getAffinitiesGrad().getType();
  if (!hasShape(getGateUpWeightGrad(), {E, H, 2, I}) ||
      !isBF16OrF32(elementTypeOf(getGateUpWeightGrad())))
    return emitOpError("gate_up_weight_grad must be an f32 or bf16 tensor "
                       "[E, H, 2, I] = ")
           << shapeStr({E, H, 2, I}) << ", got "
           << getGateUpWeightGrad().getType();
  if (!hasShape(getDownWeightGrad(), {E, I, H}) ||
      !isBF16OrF32(elementTypeOf(getDownWeightGrad())))
    return emitOpError("down_weight_grad must be an f32 or bf16 tensor "
                       "[E, I, H] = ")
           << shapeStr({E, I, H}) << ", got " << getDownWeightGrad().getType();
  bool hasBiasGrads = getGateUpBiasGrad() || getDownBiasGrad();
  if (getBias() && !(getGateUpBiasGrad() && getDownBiasGrad()))
    return emitOpError("bias requires the gate_up_bias_grad and "
                       "down_bias_grad results");
  if (!getBias() && hasBiasGrads)
    return emitOpError("gate_up_bias_grad and down_bias_grad require the "
                       "bias attribute");
  if (getBias()) {
    if (!hasShape(getGateUpBiasGrad(), {E, 2, I}) ||
        !elementTypeOf(getGateUpBiasGrad()).isF32())
      return emitOpError("gate_up_bias_grad must be an f32 tensor "
                         "[E, 2, I] = ")
             << shapeStr({E, 2, I}) << ", got "
             << getGateUpBiasGrad().getType();
    if (!hasShape(getDownBiasGrad(), {E, H}) ||
        !elementTypeOf(getDownBiasGrad()).isF32())
      return emitOpError("down_bias_grad must be an f32 tensor [E, H] = ")
             << shapeStr({E, H}) << ", got " << getDownBiasGrad().getType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// RouteOp
//===----------------------------------------------------------------------===//

LogicalResult RouteOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyStaticShapes(op)))
    return failure();
  RankedTensorType idxType = getTopkIndices().getType();
  if (idxType.getRank() != 2 || !idxType.getElementType().isInteger(32))
    return emitOpError("topk_indices must be a 2-D i32 tensor [T, K], got ")
           << idxType;
  int64_t T = idxType.getDimSize(0), K = idxType.getDimSize(1);
  if (T < 1)
    return emitOpError("topk_indices must hold at least one token, got ")
           << idxType;
  if (!hasShape(getTopkScores(), idxType.getShape()) ||
      !elementTypeOf(getTopkScores()).isF32())
    return emitOpError("topk_scores must be an f32 tensor of the shape of "
                       "topk_indices, ")
           << shapeStr(idxType.getShape()) << ", got "
           << getTopkScores().getType();
  int64_t E = getNumExperts();
  if (E < 1)
    return emitOpError("num_experts must be positive, got ") << E;
  if (K < 1 || K > E)
    return emitOpError("K (topk_indices dim 1) must be in [1, num_experts] "
                       "= [1, ")
           << E << "], got " << K;
  int64_t B = getBlockSize();
  if (failed(verifyBlockSize(op, B)))
    return failure();
  return verifyRoutingLayout(op, getTokenPositionToId(), getBlockToExpert(),
                             getExpertAffinitiesMasked(), T, K, E, B);
}

#define GET_OP_CLASSES
#include "moe/Dialect/Moe/IR/MoeOps.cpp.inc"
