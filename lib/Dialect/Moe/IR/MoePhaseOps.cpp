//===- MoePhaseOps.cpp - phase-level ops of the moe dialect -------------===//
//
// Verifiers of the slot-space ops that moe-decompose-bwd produces and of the
// kernel regions moe-fuse forms. Shapes are checked against each other
// (S = N*B, the scale shapes of MX operands, the GEMM dimensions) so that a
// lowering may index without bounds checks of its own.
//
//===----------------------------------------------------------------------===//
#include "moe/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::moe;

/// Formats a shape as "[4, 128, 256]" for messages.
static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string str;
  llvm::raw_string_ostream os(str);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return str;
}

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

bool mlir::moe::isMXElementType(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(type);
}

/// What element types an operand may have.
enum class Elem { F32, BF16OrF32, I32, Operand, Scale };

static bool matches(Elem kind, Type type) {
  switch (kind) {
  case Elem::F32:
    return type.isF32();
  case Elem::BF16OrF32:
    return type.isBF16() || type.isF32();
  case Elem::I32:
    return type.isSignlessInteger(32);
  case Elem::Operand:
    return type.isBF16() || isMXElementType(type);
  case Elem::Scale:
    return isa<Float8E8M0FNUType>(type);
  }
  llvm_unreachable("unknown element kind");
}

static StringRef describe(Elem kind) {
  switch (kind) {
  case Elem::F32:
    return "an f32";
  case Elem::BF16OrF32:
    return "a bf16 or f32";
  case Elem::I32:
    return "an i32";
  case Elem::Operand:
    return "a bf16 or f8E4M3FN/f8E5M2";
  case Elem::Scale:
    return "an f8E8M0FNU";
  }
  llvm_unreachable("unknown element kind");
}

/// Checks that `value` has `shape` and an element type of `kind`; emits
/// "<name> must be <kind> tensor <shapeName> = [..], got <type>".
static LogicalResult expectTensor(Operation *op, Value value, StringRef name,
                                  StringRef shapeName,
                                  ArrayRef<int64_t> shape, Elem kind) {
  RankedTensorType type = tensorType(value);
  if (type.getShape() == shape && matches(kind, type.getElementType()))
    return success();
  return op->emitOpError() << name << " must be " << describe(kind)
                           << " tensor " << shapeName << " = "
                           << shapeStr(shape) << ", got " << type;
}

/// Checks a rank before dimensions are read from a tensor, and that no
/// dimension is 0: no layer has an empty tensor, and the lowerings' index
/// arithmetic assumes none (an empty H made tensor.extract_slice fail with
/// "offset 1 is out-of-bounds", found by moe-ir-fuzzer's corpus).
static LogicalResult expectRank(Operation *op, Value value, StringRef name,
                                int64_t rank, StringRef shapeName) {
  RankedTensorType type = tensorType(value);
  if (type.getRank() != rank || !type.hasStaticShape())
    return op->emitOpError() << name << " must be a static " << rank
                             << "-D tensor " << shapeName << ", got "
                             << value.getType();
  if (llvm::is_contained(type.getShape(), 0))
    return op->emitOpError() << name << " must not be empty (a dimension "
                             << "is 0), got " << value.getType();
  return success();
}

/// The slot count S = N*B of a layout, checked against block_to_expert.
static FailureOr<int64_t> slotsOf(Operation *op, Value blockToExpert,
                                  int64_t blockSize) {
  if (failed(expectRank(op, blockToExpert, "block_to_expert", 1, "[N]")))
    return failure();
  if (!tensorType(blockToExpert).getElementType().isSignlessInteger(32))
    return op->emitOpError("block_to_expert must be an i32 tensor, got ")
           << blockToExpert.getType();
  if (blockSize < 1 || blockSize % 32 != 0)
    return op->emitOpError("block_size must be a positive multiple of 32, "
                           "got ")
           << blockSize;
  return tensorType(blockToExpert).getDimSize(0) * blockSize;
}

/// MX operands come with scales and bf16 operands without; returns whether
/// `value` is MX-quantized.
static FailureOr<bool> checkQuantPair(Operation *op, Value value,
                                      Value scales, StringRef name) {
  Type elem = tensorType(value).getElementType();
  if (!matches(Elem::Operand, elem))
    return op->emitOpError() << name
                             << " must have element type bf16, f8E4M3FN or "
                                "f8E5M2, got "
                             << elem;
  bool quantized = isMXElementType(elem);
  if (quantized && !scales)
    return op->emitOpError() << "MX-quantized " << name
                             << " requires its scales";
  if (!quantized && scales)
    return op->emitOpError() << "bf16 " << name << " takes no scales";
  return quantized;
}

/// The shape of the scales of an operand of `shape` quantized along `axis`.
static SmallVector<int64_t> scaleShapeOf(ArrayRef<int64_t> shape,
                                         int64_t axis) {
  SmallVector<int64_t> result(shape);
  result[axis] /= 32;
  return result;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult GatherRowsOp::verify() {
  if (failed(expectRank(*this, getSource(), "source", 2, "[T, M]")) ||
      failed(expectRank(*this, getTokenPositionToId(), "token_position_to_id",
                        1, "[S]")))
    return failure();
  RankedTensorType source = getSource().getType();
  int64_t S = getTokenPositionToId().getType().getDimSize(0);
  if (!getTokenPositionToId().getType().getElementType().isSignlessInteger(32))
    return emitOpError("token_position_to_id must be an i32 tensor, got ")
           << getTokenPositionToId().getType();
  RankedTensorType result = getResult().getType();
  SmallVector<int64_t> shape = {S, source.getDimSize(1)};
  if (result.getShape() != ArrayRef<int64_t>(shape) ||
      result.getElementType() != source.getElementType())
    return emitOpError("result must be [S, M] = ")
           << shapeStr(shape) << " of the source's element type "
           << source.getElementType() << ", got " << result;
  return success();
}

LogicalResult SlotAffinitiesOp::verify() {
  FailureOr<int64_t> S = slotsOf(*this, getBlockToExpert(), getBlockSize());
  if (failed(S) ||
      failed(expectRank(*this, getAffinities(), "affinities", 1, "[T*E]")))
    return failure();
  int64_t E = getNumExperts();
  int64_t TE = getAffinities().getType().getDimSize(0);
  if (E < 1)
    return emitOpError("num_experts must be positive, got ") << E;
  if (TE % E != 0)
    return emitOpError("affinities size ")
           << TE << " must be a multiple of num_experts = " << E;
  if (failed(expectTensor(*this, getAffinities(), "affinities", "[T*E]", {TE},
                          Elem::F32)) ||
      failed(expectTensor(*this, getTokenPositionToId(),
                          "token_position_to_id", "[S]", {*S}, Elem::I32)) ||
      failed(expectTensor(*this, getResult(), "result", "[S]", {*S},
                          Elem::F32)))
    return failure();
  return success();
}

LogicalResult UnpackCheckpointOp::verify() {
  if (failed(expectRank(*this, getCheckpoint(), "checkpoint", 4,
                        "[N, 2, I, B]")))
    return failure();
  ArrayRef<int64_t> c = getCheckpoint().getType().getShape();
  if (failed(expectTensor(*this, getCheckpoint(), "checkpoint",
                          "[N, 2, I, B]", {c[0], 2, c[2], c[3]},
                          Elem::BF16OrF32)))
    return failure();
  return expectTensor(*this, getResult(), "result", "[N*B, 2I]",
                      {c[0] * c[3], 2 * c[2]}, Elem::F32);
}

//===----------------------------------------------------------------------===//
// MX quantization
//===----------------------------------------------------------------------===//

/// Checks that `axis` is a dimension of `shape` whose size is a multiple of
/// the 32-element MX block.
static LogicalResult checkAxis(Operation *op, ArrayRef<int64_t> shape,
                               int64_t axis) {
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return op->emitOpError("axis ")
           << axis << " is out of range for rank " << shape.size();
  if (shape[axis] % 32 != 0)
    return op->emitOpError("dimension ")
           << axis << " (" << shape[axis]
           << ") must be a multiple of the MX block size 32";
  return success();
}

LogicalResult MXQuantizeOp::verify() {
  RankedTensorType input = getInput().getType();
  if (!input.hasStaticShape() ||
      !matches(Elem::BF16OrF32, input.getElementType()))
    return emitOpError("input must be a static bf16 or f32 tensor, got ")
           << input;
  if (failed(checkAxis(*this, input.getShape(), getAxis())))
    return failure();
  MXQuantAttr quant = getQuant();
  if (!quant.isQuantized())
    return emitOpError("needs an MX element type, but quant is none");
  Type elem = quant.getElement() == MXElement::f8E4M3FN
                  ? Type(Float8E4M3FNType::get(getContext()))
                  : Type(Float8E5M2Type::get(getContext()));
  RankedTensorType codes = getCodes().getType();
  if (codes.getShape() != input.getShape() || codes.getElementType() != elem)
    return emitOpError("codes must have the input's shape ")
           << shapeStr(input.getShape()) << " and element type " << elem
           << ", got " << codes;
  return expectTensor(*this, getScales(), "scales", "(input, axis / 32)",
                      scaleShapeOf(input.getShape(), getAxis()), Elem::Scale);
}

LogicalResult MXDequantizeOp::verify() {
  RankedTensorType codes = getCodes().getType();
  if (!codes.hasStaticShape() || !isMXElementType(codes.getElementType()))
    return emitOpError("codes must be a static f8E4M3FN or f8E5M2 tensor, "
                       "got ")
           << codes;
  if (failed(checkAxis(*this, codes.getShape(), getAxis())) ||
      failed(expectTensor(*this, getScales(), "scales", "(codes, axis / 32)",
                          scaleShapeOf(codes.getShape(), getAxis()),
                          Elem::Scale)))
    return failure();
  return expectTensor(*this, getResult(), "result", "(codes)",
                      codes.getShape(), Elem::F32);
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

LogicalResult BlockMatmulOp::verify() {
  FailureOr<int64_t> S = slotsOf(*this, getBlockToExpert(), getBlockSize());
  if (failed(S) || failed(expectRank(*this, getLhs(), "lhs", 2, "[S, K]")) ||
      failed(expectRank(*this, getRhs(), "rhs", 3,
                        getTransposeRhs() ? "[E, K, Nout]" : "[E, Nout, K]")))
    return failure();
  FailureOr<bool> lhsQuant =
      checkQuantPair(*this, getLhs(), getLhsScales(), "lhs");
  FailureOr<bool> rhsQuant =
      checkQuantPair(*this, getRhs(), getRhsScales(), "rhs");
  if (failed(lhsQuant) || failed(rhsQuant))
    return failure();
  int64_t K = getLhs().getType().getDimSize(1);
  ArrayRef<int64_t> rhs = getRhs().getType().getShape();
  int64_t E = rhs[0];
  int64_t rhsK = getTransposeRhs() ? rhs[1] : rhs[2];
  int64_t N = getTransposeRhs() ? rhs[2] : rhs[1];
  if (getLhs().getType().getDimSize(0) != *S)
    return emitOpError("lhs must have S = N*B = ")
           << *S << " rows, got " << getLhs().getType();
  if (rhsK != K)
    return emitOpError("rhs contraction size ")
           << rhsK << " must equal lhs's K = " << K;
  if (*lhsQuant && failed(expectTensor(*this, getLhsScales(), "lhs_scales",
                                       "[S, K/32]", {*S, K / 32},
                                       Elem::Scale)))
    return failure();
  if (*rhsQuant) {
    SmallVector<int64_t> shape = scaleShapeOf(rhs, getTransposeRhs() ? 1 : 2);
    if (failed(expectTensor(*this, getRhsScales(), "rhs_scales",
                            getTransposeRhs() ? "[E, K/32, Nout]"
                                              : "[E, Nout, K/32]",
                            shape, Elem::Scale)))
      return failure();
  }
  if ((*lhsQuant || *rhsQuant) && K % 32 != 0)
    return emitOpError("MX operands need K to be a multiple of 32, got ")
           << K;
  if (getBias() && failed(expectTensor(*this, getBias(), "bias", "[E, Nout]",
                                       {E, N}, Elem::BF16OrF32)))
    return failure();
  if (getTokenPositionToId() &&
      failed(expectTensor(*this, getTokenPositionToId(),
                          "token_position_to_id", "[S]", {*S}, Elem::I32)))
    return failure();
  return expectTensor(*this, getResult(), "result", "[S, Nout]", {*S, N},
                      Elem::F32);
}

LogicalResult ExpertMatmulOp::verify() {
  FailureOr<int64_t> S = slotsOf(*this, getBlockToExpert(), getBlockSize());
  if (failed(S) || failed(expectRank(*this, getLhs(), "lhs", 2, "[S, M]")) ||
      failed(expectRank(*this, getRhs(), "rhs", 2, "[S, Nout]")) ||
      failed(expectRank(*this, getResult(), "result", 3, "[E, M, Nout]")))
    return failure();
  FailureOr<bool> lhsQuant =
      checkQuantPair(*this, getLhs(), getLhsScales(), "lhs");
  FailureOr<bool> rhsQuant =
      checkQuantPair(*this, getRhs(), getRhsScales(), "rhs");
  if (failed(lhsQuant) || failed(rhsQuant))
    return failure();
  int64_t M = getLhs().getType().getDimSize(1);
  int64_t N = getRhs().getType().getDimSize(1);
  if (getLhs().getType().getDimSize(0) != *S ||
      getRhs().getType().getDimSize(0) != *S)
    return emitOpError("lhs and rhs must have S = N*B = ")
           << *S << " rows, got " << getLhs().getType() << " and "
           << getRhs().getType();
  if (*lhsQuant && failed(expectTensor(*this, getLhsScales(), "lhs_scales",
                                       "[S/32, M]", {*S / 32, M},
                                       Elem::Scale)))
    return failure();
  if (*rhsQuant && failed(expectTensor(*this, getRhsScales(), "rhs_scales",
                                       "[S/32, Nout]", {*S / 32, N},
                                       Elem::Scale)))
    return failure();
  if (getTokenPositionToId() &&
      failed(expectTensor(*this, getTokenPositionToId(),
                          "token_position_to_id", "[S]", {*S}, Elem::I32)))
    return failure();
  int64_t E = getResult().getType().getDimSize(0);
  return expectTensor(*this, getResult(), "result", "[E, M, Nout]",
                      {E, M, N}, Elem::F32);
}

//===----------------------------------------------------------------------===//
// Elementwise and reductions
//===----------------------------------------------------------------------===//

LogicalResult GatedActBwdOp::verify() {
  if (failed(expectRank(*this, getDAct(), "d_act", 2, "[S, I]")))
    return failure();
  int64_t S = getDAct().getType().getDimSize(0);
  int64_t I = getDAct().getType().getDimSize(1);
  if (failed(expectTensor(*this, getDAct(), "d_act", "[S, I]", {S, I},
                          Elem::F32)) ||
      failed(expectTensor(*this, getGateUp(), "gate_up", "[S, 2I]",
                          {S, 2 * I}, Elem::F32)) ||
      failed(expectTensor(*this, getSlotAffinities(), "slot_affinities",
                          "[S]", {S}, Elem::F32)) ||
      failed(expectTensor(*this, getDGateUp(), "d_gate_up", "[S, 2I]",
                          {S, 2 * I}, Elem::F32)))
    return failure();
  return expectTensor(*this, getH(), "h", "[S, I]", {S, I}, Elem::F32);
}

LogicalResult AffinityGradOp::verify() {
  FailureOr<int64_t> S = slotsOf(*this, getBlockToExpert(), getBlockSize());
  if (failed(S) || failed(expectRank(*this, getDAct(), "d_act", 2, "[S, I]")))
    return failure();
  int64_t I = getDAct().getType().getDimSize(1);
  if (failed(expectTensor(*this, getDAct(), "d_act", "[S, I]", {*S, I},
                          Elem::F32)) ||
      (getH() &&
       failed(expectTensor(*this, getH(), "h", "[S, I]", {*S, I},
                           Elem::F32))) ||
      failed(expectTensor(*this, getTokenPositionToId(),
                          "token_position_to_id", "[S]", {*S}, Elem::I32)) ||
      failed(expectRank(*this, getResult(), "result", 1, "[T*E]")))
    return failure();
  if (bool(getDyRows()) != bool(getDownBias()))
    return emitOpError("dy_rows and down_bias go together");
  int64_t E = getNumExperts();
  int64_t TE = getResult().getType().getDimSize(0);
  if (E < 1)
    return emitOpError("num_experts must be positive, got ") << E;
  if (TE % E != 0)
    return emitOpError("result size ")
           << TE << " must be a multiple of num_experts = " << E;
  if (getDownBias()) {
    if (failed(expectRank(*this, getDownBias(), "down_bias", 2, "[E, H]")))
      return failure();
    int64_t H = getDownBias().getType().getDimSize(1);
    if (failed(expectTensor(*this, getDownBias(), "down_bias", "[E, H]",
                            {E, H}, Elem::BF16OrF32)) ||
        failed(expectTensor(*this, getDyRows(), "dy_rows", "[S, H]", {*S, H},
                            Elem::BF16OrF32)))
      return failure();
  }
  return expectTensor(*this, getResult(), "result", "[T*E]", {TE}, Elem::F32);
}

LogicalResult ScaleRowsOp::verify() {
  if (failed(expectRank(*this, getInput(), "input", 2, "[S, M]")))
    return failure();
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  if (failed(expectTensor(*this, getInput(), "input", "[S, M]", shape,
                          Elem::BF16OrF32)) ||
      failed(expectTensor(*this, getScale(), "scale", "[S]", {shape[0]},
                          Elem::F32)))
    return failure();
  return expectTensor(*this, getResult(), "result", "[S, M]", shape,
                      Elem::F32);
}

LogicalResult ScatterAddRowsOp::verify() {
  FailureOr<int64_t> S = slotsOf(*this, getBlockToExpert(), getBlockSize());
  if (failed(S) ||
      failed(expectRank(*this, getContributions(), "contributions", 2,
                        "[S, H]")) ||
      failed(expectRank(*this, getResult(), "result", 2, "[T, H]")))
    return failure();
  int64_t H = getContributions().getType().getDimSize(1);
  int64_t T = getResult().getType().getDimSize(0);
  if (failed(expectTensor(*this, getContributions(), "contributions",
                          "[S, H]", {*S, H}, Elem::F32)) ||
      failed(expectTensor(*this, getTokenPositionToId(),
                          "token_position_to_id", "[S]", {*S}, Elem::I32)) ||
      failed(expectTensor(*this, getResult(), "result", "[T, H]", {T, H},
                          Elem::BF16OrF32)))
    return failure();
  // The I64Attr getters return the value unsigned: compare it signed.
  int64_t E = getNumExperts();
  if (E < 1)
    return emitOpError("num_experts must be positive, got ") << E;
  int64_t K = getTopK();
  if (K < 1 || K > E)
    return emitOpError("top_k must be in [1, num_experts] = [1, ")
           << E << "], got " << K;
  if (getDxAccumulate() == DxAccumulate::bf16 &&
      !getResult().getType().getElementType().isBF16())
    return emitOpError("dx_accumulate = bf16 requires a bf16 result, got ")
           << getResult().getType();
  return success();
}

LogicalResult ExpertSumOp::verify() {
  FailureOr<int64_t> S = slotsOf(*this, getBlockToExpert(), getBlockSize());
  if (failed(S) || failed(expectRank(*this, getInput(), "input", 2, "[S, M]")) ||
      failed(expectRank(*this, getResult(), "result", 2, "[E, M]")))
    return failure();
  int64_t M = getInput().getType().getDimSize(1);
  if (failed(expectTensor(*this, getInput(), "input", "[S, M]", {*S, M},
                          Elem::F32)))
    return failure();
  return expectTensor(*this, getResult(), "result", "[E, M]",
                      {getResult().getType().getDimSize(0), M}, Elem::F32);
}

//===----------------------------------------------------------------------===//
// FusedOp
//===----------------------------------------------------------------------===//

void FusedOp::build(OpBuilder &builder, OperationState &state,
                    TypeRange resultTypes, ValueRange inputs, Phase phase) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  state.addAttribute(getPhaseAttrName(state.name),
                     PhaseAttr::get(builder.getContext(), phase));
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), input.getLoc());
}

SmallVector<Operation *> FusedOp::inlineBody(RewriterBase &rewriter) {
  Block &body = getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  SmallVector<Value> results(yield.getValues());
  rewriter.inlineBlockBefore(&body, *this, getInputs());
  rewriter.eraseOp(yield);
  rewriter.replaceOp(*this, results);
  return ops;
}

LogicalResult FusedOp::verify() {
  // The region has its one block (ODS checks that first), but its
  // implicit-terminator trait is checked only after this: the terminator
  // may be anything.
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("region arguments must have the types of the inputs");
  auto yield = body.empty() ? YieldOp() : dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError("region must end with moe.yield");
  if (yield.getValues().getTypes() != getResults().getTypes())
    return emitOpError("moe.yield operand types must match the results");
  return success();
}
