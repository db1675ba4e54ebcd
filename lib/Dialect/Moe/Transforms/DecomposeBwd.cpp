//===- DecomposeBwd.cpp - moe.blockwise_bwd into phase-level ops ----------===//
//
// The moe-decompose-bwd pass. It rewrites the composite backward op into the
// slot-space ops of MoePhaseOps.td and fixes the numerics of R_mx
// (docs/numerics.md) in the IR: every GEMM operand's MX quantization is an
// explicit moe.mx_quantize along the axis its GEMM contracts (SPEC section
// 5), so later passes only group (moe-fuse) and lower these ops.
//
//   x, dy [T,H] ---gather_rows(tok)---> x_rows, dy_rows [S,H]       S = N*B
//   affinities [T*E] ---slot_affinities---> a [S]
//   Wgu [E,H,2,I] ---collapse_shape---> Wgu' [E,H,2I]
//
//   g|u  checkpoint [N,2,I,B] ---unpack_checkpoint---------------+
//        or Q(x_rows,1), Q(Wgu',1) (, bgu as [E,2I])             |
//           ---block_matmul{transpose_rhs}-----------------------+--> gu
//        gu * [tok >= 0] ---scale_rows---> gu [S,2I]  (checkpoint or bias)
//
//   P1   Q(dy_rows,1), Q(Wd,2) ---block_matmul---> dA [S,I]
//        gu, dA, a ---gated_act_bwd{activation, clamp}---> dgu [S,2I], h [S,I]
//        dA, h (, dy_rows, bd) ---affinity_grad---> da [T*E]
//   P2   Q(dgu,1), Q(Wgu',2) ---block_matmul---> c [S,H]
//        c ---scatter_add_rows{dx_accumulate}---> dx [T,H]
//   P3   Q(x_rows,0), Q(dgu,0) ---expert_matmul---> [E,H,2I]
//        ---expand_shape (, truncf)---> dWgu [E,H,2,I]
//   P4   on_i: Q(a*h,0), Q(dy_rows,0)  ---expert_matmul (, truncf)--->
//        on_h: Q(h,0),   Q(a*dy_rows,0)                       dWd [E,I,H]
//   bias dgu ---expert_sum---> [E,2I] ---expand_shape---> dbgu [E,2,I]
//        a*dy_rows ---expert_sum---> dbd [E,H]
//
//   Q(v, axis): moe.mx_quantize of v along axis (codes and E8M0 scales);
//   with quant = none, v as bf16 (arith.truncf of an f32 tensor).
//   Pre-quantized weights enter P1 and P2 as their codes and scales.
//   Every GEMM takes tok as well: its padding rows are zeros, so a lowering
//   may skip the blocks that hold only padding (the spare blocks of the
//   worst-case layout, SPEC section 4).
//
//===----------------------------------------------------------------------===//

#include "moe/Dialect/Moe/Transforms/Decompose.h"

#include "moe/Dialect/Moe/IR/MoeOps.h"
#include "moe/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEDECOMPOSEBWD
#include "moe/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// A GEMM operand as the moe GEMM ops take it: bf16 data without scales, or
/// MX codes with their E8M0 scales.
struct GemmOperand {
  Value data;
  Value scales;
};

/// Builds the decomposition of one moe.blockwise_bwd in front of it.
class BwdDecomposition {
public:
  BwdDecomposition(PatternRewriter &rewriter, BlockwiseBwdOp op)
      : rewriter(rewriter), op(op), loc(op.getLoc()), quant(op.getQuant()),
        tok(op.getTokenPositionToId()), blk(op.getBlockToExpert()),
        blockSize(op.getBlockSizeAttr()),
        S(op.getTokenPositionToId().getType().getDimSize(0)),
        H(op.getHiddenSize()), I(op.getIntermediateSize()),
        E(op.getNumExperts()) {}

  /// Emits the phase-level ops; returns the replacements of the op's
  /// results, in order.
  SmallVector<Value> build();

private:
  RankedTensorType f32Tensor(ArrayRef<int64_t> shape);
  GemmOperand quantize(Value value, int64_t axis);
  Value mergeGateUp(Value value);
  Value splitGateUp(Value value);
  Value roundTo(Value value, Type resultType);
  Value gateUp(Value xRows, Value gateUpWeight);
  Value zeroPaddingRows(Value gu);

  PatternRewriter &rewriter;
  BlockwiseBwdOp op;
  Location loc;
  MXQuantAttr quant;
  Value tok, blk;
  IntegerAttr blockSize;
  int64_t S, H, I, E;
  /// The bf16 copy of each f32 operand under quant = none: Q(v, axis) is
  /// bf16(v) for every axis, so dgu (P2 and P3) is rounded once.
  llvm::DenseMap<Value, Value> bf16Copies;
};

} // namespace

RankedTensorType BwdDecomposition::f32Tensor(ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, rewriter.getF32Type());
}

/// Q(value, axis) of docs/numerics.md as GEMM operand: MX codes and scales
/// in 32-element blocks along `axis`, or the bf16 value when quant is none.
GemmOperand BwdDecomposition::quantize(Value value, int64_t axis) {
  auto type = cast<RankedTensorType>(value.getType());
  if (!quant.isQuantized()) {
    if (type.getElementType().isBF16())
      return {value, Value()};
    Value &copy = bf16Copies[value];
    if (!copy)
      copy = arith::TruncFOp::create(rewriter, loc,
                                     type.clone(rewriter.getBF16Type()), value);
    return {copy, Value()};
  }
  Type codeType = quant.getElement() == MXElement::f8E4M3FN
                      ? Type(rewriter.getType<Float8E4M3FNType>())
                      : Type(rewriter.getType<Float8E5M2Type>());
  SmallVector<int64_t> scaleShape(type.getShape());
  scaleShape[axis] /= quant.getBlockSize();
  auto quantized = MXQuantizeOp::create(
      rewriter, loc, type.clone(codeType),
      RankedTensorType::get(scaleShape, rewriter.getType<Float8E8M0FNUType>()),
      value, axis, quant);
  return {quantized.getCodes(), quantized.getScales()};
}

/// [..., 2, X] -> [..., 2X]: the gate and up halves as one row of 2I
/// (weights, their scales, the gate/up bias), the layout of g|u rows.
Value BwdDecomposition::mergeGateUp(Value value) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0; d < rank - 2; ++d)
    groups.push_back({d});
  groups.push_back({rank - 2, rank - 1});
  return tensor::CollapseShapeOp::create(rewriter, loc, value, groups);
}

/// [..., 2I] -> [..., 2, I]: the inverse of mergeGateUp, for the gradients
/// of the gate/up weight and bias.
Value BwdDecomposition::splitGateUp(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t rank = type.getRank();
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0; d < rank - 1; ++d)
    groups.push_back({d});
  groups.push_back({rank - 1, rank});
  SmallVector<int64_t> shape(type.getShape().drop_back());
  shape.append({2, type.getShape().back() / 2});
  return tensor::ExpandShapeOp::create(rewriter, loc, type.clone(shape), value,
                                       groups);
}

/// Weight gradients are f32 GEMM results; a bf16 result rounds them once,
/// at the end (docs/numerics.md, outputs).
Value BwdDecomposition::roundTo(Value value, Type resultType) {
  if (value.getType() == resultType)
    return value;
  return arith::TruncFOp::create(rewriter, loc, resultType, value);
}

/// g|u [S, 2I] in f32: the checkpoint's rows, or the forward's own MX GEMM
/// (x rows and Wgu quantized along H, the axis it contracts) plus the
/// gate/up bias.
Value BwdDecomposition::gateUp(Value xRows, Value gateUpWeight) {
  if (Value checkpoint = op.getGateUpCheckpoint())
    return zeroPaddingRows(UnpackCheckpointOp::create(
        rewriter, loc, f32Tensor({S, 2 * I}), checkpoint));
  GemmOperand lhs = quantize(xRows, 1);
  GemmOperand rhs = quantize(gateUpWeight, 1);
  Value bias = op.getBias() ? mergeGateUp(op.getGateUpBias()) : Value();
  Value gu = BlockMatmulOp::create(
      rewriter, loc, f32Tensor({S, 2 * I}), lhs.data, lhs.scales, rhs.data,
      rhs.scales, blk, tok, bias, blockSize, rewriter.getUnitAttr());
  return bias ? zeroPaddingRows(gu) : gu;
}

/// A padding slot is a zero row of every operand (docs/numerics.md). The
/// checkpoint's padding entries are unspecified and the recomputation adds
/// the bias to the zero rows of padding slots, so their g|u would give a
/// non-zero h, which with the affinity on H enters P4's slot-axis MX blocks.
/// Multiplying each row by [tok >= 0] (1 or 0) zeroes exactly those rows;
/// a finite value times 1 is exact.
Value BwdDecomposition::zeroPaddingRows(Value gu) {
  auto tokType = cast<RankedTensorType>(tok.getType());
  Value zero =
      arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(tokType));
  Value holdsToken = arith::CmpIOp::create(
      rewriter, loc, arith::CmpIPredicate::sge, tok, zero);
  Value valid = arith::UIToFPOp::create(
      rewriter, loc, f32Tensor(tokType.getShape()), holdsToken);
  return ScaleRowsOp::create(rewriter, loc, gu.getType(), gu, valid);
}

SmallVector<Value> BwdDecomposition::build() {
  Type bf16 = rewriter.getBF16Type();
  Value xRows =
      GatherRowsOp::create(rewriter, loc, RankedTensorType::get({S, H}, bf16),
                           op.getHiddenStates(), tok);
  Value dyRows =
      GatherRowsOp::create(rewriter, loc, RankedTensorType::get({S, H}, bf16),
                           op.getOutputGrad(), tok);
  Value a = SlotAffinitiesOp::create(rewriter, loc, f32Tensor({S}),
                                     op.getExpertAffinitiesMasked(), tok, blk,
                                     blockSize, rewriter.getI64IntegerAttr(E));
  // Wgu as [E, H, 2I]: the recomputation contracts its H, P2 its 2I.
  Value gateUpWeight = mergeGateUp(op.getGateUpWeight());
  Value gu = gateUp(xRows, gateUpWeight);

  // P1: dA = dy . Wd^T contracts over H.
  GemmOperand dyAlongH = quantize(dyRows, 1);
  GemmOperand down = op.getDownScales()
                         ? GemmOperand{op.getDownWeight(), op.getDownScales()}
                         : quantize(op.getDownWeight(), 2);
  Value dA = BlockMatmulOp::create(
      rewriter, loc, f32Tensor({S, I}), dyAlongH.data, dyAlongH.scales,
      down.data, down.scales, blk, tok, /*bias=*/Value(), blockSize);
  auto act = GatedActBwdOp::create(rewriter, loc, f32Tensor({S, 2 * I}),
                                   f32Tensor({S, I}), gu, dA, a,
                                   op.getActivationAttr(), op.getClampAttr());
  Value dgu = act.getDGateUp(), h = act.getH();
  Value downBias = op.getBias() ? op.getDownBias() : Value();
  Value da = AffinityGradOp::create(
      rewriter, loc, op.getAffinitiesGrad().getType(), dA, h, tok, blk,
      downBias ? dyRows : Value(), downBias, blockSize,
      rewriter.getI64IntegerAttr(E));

  // P2: the dx contributions [dg|du] . Wgu^T contract over 2I.
  GemmOperand dguAlong2I = quantize(dgu, 1);
  GemmOperand gateUpAlong2I =
      op.getGateUpScales()
          ? GemmOperand{gateUpWeight, mergeGateUp(op.getGateUpScales())}
          : quantize(gateUpWeight, 2);
  Value contributions = BlockMatmulOp::create(
      rewriter, loc, f32Tensor({S, H}), dguAlong2I.data, dguAlong2I.scales,
      gateUpAlong2I.data, gateUpAlong2I.scales, blk, tok, /*bias=*/Value(),
      blockSize);
  Value dx = ScatterAddRowsOp::create(
      rewriter, loc, op.getHiddenStatesGrad().getType(), contributions, tok,
      blk, blockSize, rewriter.getI64IntegerAttr(E), op.getTopKAttr(),
      op.getDxAccumulateAttr());

  // P3: dWgu = x^T [dg|du] contracts over the slots.
  GemmOperand xAlongSlots = quantize(xRows, 0);
  GemmOperand dguAlongSlots = quantize(dgu, 0);
  Value dWgu = ExpertMatmulOp::create(rewriter, loc, f32Tensor({E, H, 2 * I}),
                                      xAlongSlots.data, xAlongSlots.scales,
                                      dguAlongSlots.data, dguAlongSlots.scales,
                                      blk, tok, blockSize);
  dWgu = roundTo(splitGateUp(dWgu), op.getGateUpWeightGrad().getType());

  // P4: dWd contracts over the slots; the affinity scales h (on I) or dy
  // (on H). a * dy is also the operand of the down-bias gradient.
  Value scaledDy;
  auto getScaledDy = [&] {
    if (!scaledDy)
      scaledDy =
          ScaleRowsOp::create(rewriter, loc, f32Tensor({S, H}), dyRows, a);
    return scaledDy;
  };
  Value p4Lhs = h, p4Rhs = dyRows;
  if (op.getAffinity() == Affinity::on_i)
    p4Lhs = ScaleRowsOp::create(rewriter, loc, f32Tensor({S, I}), h, a);
  else
    p4Rhs = getScaledDy();
  GemmOperand lhs = quantize(p4Lhs, 0);
  GemmOperand rhs = quantize(p4Rhs, 0);
  Value dWd =
      ExpertMatmulOp::create(rewriter, loc, f32Tensor({E, I, H}), lhs.data,
                             lhs.scales, rhs.data, rhs.scales, blk, tok,
                             blockSize);
  dWd = roundTo(dWd, op.getDownWeightGrad().getType());

  SmallVector<Value> results = {dx, da, dWgu, dWd};
  if (op.getBias()) {
    Value dbgu = ExpertSumOp::create(rewriter, loc, f32Tensor({E, 2 * I}), dgu,
                                     blk, blockSize);
    results.push_back(splitGateUp(dbgu));
    results.push_back(ExpertSumOp::create(rewriter, loc, f32Tensor({E, H}),
                                          getScaledDy(), blk, blockSize));
  }
  return results;
}

namespace {

/// Rewrites a moe.blockwise_bwd into its phase-level decomposition; every
/// verified op matches.
struct DecomposeBlockwiseBwd : OpRewritePattern<BlockwiseBwdOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(BlockwiseBwdOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, BwdDecomposition(rewriter, op).build());
    return success();
  }
};

/// The moe-decompose-bwd pass. The rewrite is one-shot (its output holds no
/// moe.blockwise_bwd), so a single walk applies it and leaves all other IR
/// as it was: no folding, no dead-code removal.
struct MoeDecomposeBwdPass
    : mlir::moe::impl::MoeDecomposeBwdBase<MoeDecomposeBwdPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposeBwdPatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace

void mlir::moe::populateDecomposeBwdPatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeBlockwiseBwd>(patterns.getContext());
}
