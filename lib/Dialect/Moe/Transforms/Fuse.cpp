//===- Fuse.cpp - kernel regions around the GEMMs of the backward ---------===//
//
// moe-fuse groups each GEMM of the decomposed backward (moe.block_matmul,
// moe.expert_matmul) with the work one GPU kernel does around it, in a
// moe.fused region whose `phase` names the GEMM:
//
//   prologue  producers of the GEMM's activation operands, computed while
//             loading them: row gathers, slot affinities, row scalings, MX
//             quantization or bf16 rounding of activations, the unpacked
//             checkpoint, elementwise arith on them (masks), constants.
//             They are cloned into every region that needs them
//             (dy's gather feeds P1 and P4); an original goes once dead.
//   GEMM
//   epilogue  consumers of the result, computed before storing it. P1: the
//             activation backward, the affinity gradient, both MX copies of
//             [dg|du] (along 2I for P2, along slots for P3), the P4 operand
//             derived from h (a*h or h, with its MX copy) and the dbgu sum.
//             P2: the dx scatter-add. Every phase: reshapes and roundings of
//             what it stores. P4 also computes dbd = sum of a*dy, a
//             reduction over the rows it streams anyway.
//
// Weights (block_matmul's rhs with its scales and bias, affinity_grad's down
// bias) enter a region as they are: quantizing a weight is a step of its own
// whose result a runtime can cache across training steps.
//
// A region replaces its GEMM in place, so its inputs must dominate the GEMM:
// an epilogue op is taken in only if everything it reads from outside does
// (or is a prologue op that can be cloned); otherwise it stays outside,
// which is just as correct. Regions are formed in program order, so P1's
// epilogue has taken the quantizations of [dg|du] before P2 and P3 look for
// operand producers. GEMMs already inside a moe.fused are left alone, which
// makes the pass idempotent.
//
//===----------------------------------------------------------------------===//
#include "moe/Dialect/Moe/IR/MoeOps.h"
#include "moe/Dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSE
#include "moe/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

/// Whether `operand` is one of the operands in `range`.
static bool isOneOf(OpOperand &operand, MutableOperandRange range) {
  return llvm::any_of(range, [&](OpOperand &o) { return &o == &operand; });
}

/// Operands that carry weights. A region takes them as they come, never
/// their producers: weight quantization stays a separate, cacheable step.
static bool isWeightOperand(OpOperand &operand) {
  Operation *owner = operand.getOwner();
  if (auto matmul = dyn_cast<BlockMatmulOp>(owner))
    return isOneOf(operand, matmul.getRhsMutable()) ||
           isOneOf(operand, matmul.getRhsScalesMutable()) ||
           isOneOf(operand, matmul.getBiasMutable());
  if (auto grad = dyn_cast<AffinityGradOp>(owner))
    return isOneOf(operand, grad.getDownBiasMutable());
  return false;
}

/// A float conversion of a tensor: the bf16 rounding that replaces MX
/// quantization with quant none, or the rounding of a stored result.
static bool isTensorCast(Operation *op) {
  return isa<arith::TruncFOp, arith::ExtFOp>(op) &&
         isa<RankedTensorType>(op->getResult(0).getType());
}

/// Ops a kernel recomputes while loading an activation operand. Besides the
/// slot-space producers these are constants and elementwise arith on tensors
/// (the bf16 rounding of quant none, masks over slots).
static bool isPrologueOp(Operation *op) {
  if (isa<GatherRowsOp, SlotAffinitiesOp, ScaleRowsOp, UnpackCheckpointOp,
          MXQuantizeOp>(op) ||
      op->hasTrait<OpTrait::ConstantLike>())
    return true;
  return isa<arith::ArithDialect>(op->getDialect()) &&
         op->hasTrait<OpTrait::Elementwise>() && isPure(op) &&
         llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>);
}

/// Consumers of its GEMM's result (directly or through other epilogue ops)
/// that the kernel of `phase` computes before storing.
static bool isEpilogueOp(Phase phase, Operation *op) {
  if (isTensorCast(op) ||
      isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op))
    return true;
  switch (phase) {
  case Phase::p1:
    return isa<GatedActBwdOp, AffinityGradOp, MXQuantizeOp, ScaleRowsOp,
               ExpertSumOp>(op);
  case Phase::p2:
    return isa<ScatterAddRowsOp>(op);
  case Phase::recompute:
  case Phase::p3:
  case Phase::p4:
    return false;
  }
  llvm_unreachable("unknown phase");
}

/// Whether `value`, seen through quantization and rounding, is h or a row
/// scaling: P4's operands (a*h or h, dy or a*dy); P3's (x, [dg|du]) are
/// neither.
static bool isP4Operand(Value value) {
  Operation *def = value.getDefiningOp();
  while (def && (isa<MXQuantizeOp>(def) || isTensorCast(def))) {
    value = def->getOperand(0);
    def = value.getDefiningOp();
  }
  if (!def)
    return false;
  if (isa<ScaleRowsOp>(def))
    return true;
  auto act = dyn_cast<GatedActBwdOp>(def);
  return act && value == act.getH();
}

/// The phase of a GEMM, read from its neighbourhood: the recomputation is
/// the only block_matmul contracting Wgu over H (transpose_rhs), P1 the one
/// whose result is dA, P2 any other; an expert_matmul is P4 if it
/// multiplies h or a scaled operand, P3 otherwise.
static Phase classify(Operation *gemm) {
  if (auto matmul = dyn_cast<BlockMatmulOp>(gemm)) {
    if (matmul.getTransposeRhs())
      return Phase::recompute;
    for (OpOperand &use : matmul.getResult().getUses()) {
      auto act = dyn_cast<GatedActBwdOp>(use.getOwner());
      auto grad = dyn_cast<AffinityGradOp>(use.getOwner());
      if ((act && &use == &act.getDActMutable()) ||
          (grad && &use == &grad.getDActMutable()))
        return Phase::p1;
    }
    return Phase::p2;
  }
  auto matmul = cast<ExpertMatmulOp>(gemm);
  return isP4Operand(matmul.getLhs()) || isP4Operand(matmul.getRhs())
             ? Phase::p4
             : Phase::p3;
}

namespace {

/// The kernel region of one GEMM: which ops it moves in (the GEMM and its
/// epilogue, `members`, in program order), which producers it clones, and
/// the rewrite that puts them into a moe.fused where the GEMM was.
class KernelRegion {
public:
  KernelRegion(Operation *gemm, Phase phase, DominanceInfo &dominance)
      : gemm(gemm), phase(phase), dominance(dominance) {}

  /// Chooses the members: the GEMM, then every later op of its block that
  /// is an epilogue op of the phase, reads a member, and can get all its
  /// operands inside the region. P4 also takes an expert_sum of an operand
  /// it can clone (dbd).
  void selectMembers() {
    members.insert(gemm);
    for (Operation &op : llvm::make_range(std::next(gemm->getIterator()),
                                          gemm->getBlock()->end())) {
      bool readsMember = llvm::any_of(
          op.getOperands(), [&](Value v) { return isMemberResult(v); });
      auto sum = dyn_cast<ExpertSumOp>(&op);
      bool sideReduction =
          phase == Phase::p4 && sum && !readsMember && canClone(sum.getInput());
      if (((isEpilogueOp(phase, &op) && readsMember) || sideReduction) &&
          llvm::all_of(op.getOpOperands(),
                       [&](OpOperand &o) { return isAvailable(o); }))
        members.insert(&op);
    }
  }

  /// Builds the moe.fused in place of the GEMM, redirects outside uses of
  /// the members to its results, erases the members and the originals of
  /// cloned producers that no longer have uses.
  void rewrite() {
    auto body = std::make_unique<Block>();
    // The block has no parent region yet, so the context comes from the GEMM.
    OpBuilder builder(gemm->getContext());
    builder.setInsertionPointToEnd(body.get());
    IRMapping mapping;
    for (Operation *op : members) {
      for (OpOperand &operand : op->getOpOperands())
        materialize(operand.get(), !isWeightOperand(operand), *body, builder,
                    mapping);
      builder.clone(*op, mapping);
    }

    SmallVector<Value> outputs;
    for (Operation *op : members)
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !members.contains(user);
            }))
          outputs.push_back(result);
    SmallVector<Value> yielded = llvm::map_to_vector(
        outputs, [&](Value v) { return mapping.lookup(v); });
    YieldOp::create(builder, gemm->getLoc(), yielded);

    OpBuilder outer(gemm);
    auto fused = FusedOp::create(outer, gemm->getLoc(),
                                 ValueRange(outputs).getTypes(), inputs, phase);
    Block &dst = fused.getBody().front();
    for (auto [from, to] :
         llvm::zip_equal(body->getArguments(), dst.getArguments()))
      from.replaceAllUsesWith(to);
    dst.getOperations().splice(dst.end(), body->getOperations());

    for (auto [output, result] : llvm::zip_equal(outputs, fused.getResults()))
      output.replaceUsesWithIf(result, [&](OpOperand &use) {
        return !members.contains(use.getOwner());
      });
    for (Operation *op : llvm::reverse(members))
      op->erase();
    for (Operation *op : llvm::reverse(cloned))
      if (op->use_empty())
        op->erase();
  }

private:
  bool isMemberResult(Value value) const {
    Operation *def = value.getDefiningOp();
    return def && members.contains(def);
  }

  /// Whether the region can compute `value` itself by cloning a chain of
  /// prologue ops whose other inputs dominate the GEMM.
  bool canClone(Value value) const {
    Operation *def = value.getDefiningOp();
    if (!def || members.contains(def) || !isPrologueOp(def))
      return false;
    return llvm::all_of(def->getOperands(), [&](Value v) {
      return isMemberResult(v) || canClone(v) ||
             dominance.properlyDominates(v, gemm);
    });
  }

  /// Whether a member's operand can be had inside the region: computed by a
  /// member, cloned (not for weights), or passed in from above the GEMM.
  bool isAvailable(OpOperand &operand) const {
    Value value = operand.get();
    return isMemberResult(value) ||
           (!isWeightOperand(operand) && canClone(value)) ||
           dominance.properlyDominates(value, gemm);
  }

  /// Gives `value` a definition inside the region: a clone of its prologue
  /// chain, or a new block argument (a region input). Members' results are
  /// mapped as the members are cloned, before any later member reads them.
  Value materialize(Value value, bool allowClone, Block &body,
                    OpBuilder &builder, IRMapping &mapping) {
    if (Value mapped = mapping.lookupOrNull(value))
      return mapped;
    if (allowClone && canClone(value)) {
      Operation *def = value.getDefiningOp();
      for (Value operand : def->getOperands())
        materialize(operand, /*allowClone=*/true, body, builder, mapping);
      builder.clone(*def, mapping);
      cloned.insert(def);
      return mapping.lookup(value);
    }
    inputs.push_back(value);
    BlockArgument arg = body.addArgument(value.getType(), value.getLoc());
    mapping.map(value, arg);
    return arg;
  }

  Operation *gemm;
  Phase phase;
  DominanceInfo &dominance;
  llvm::SetVector<Operation *> members;
  /// Originals of the producers cloned into the region, operands first.
  llvm::SetVector<Operation *> cloned;
  /// The values passed in, in order of first use.
  SmallVector<Value> inputs;
};

/// Forms one moe.fused per GEMM not already inside one, in program order.
struct MoeFusePass : mlir::moe::impl::MoeFuseBase<MoeFusePass> {
  void runOnOperation() override {
    // Phases are read before any region exists: P4's h is inside P1's region
    // afterwards.
    SmallVector<std::pair<Operation *, Phase>> gemms;
    getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<FusedOp>(op))
        return WalkResult::skip();
      if (isa<BlockMatmulOp, ExpertMatmulOp>(op))
        gemms.emplace_back(op, classify(op));
      return WalkResult::advance();
    });
    for (auto [gemm, phase] : gemms) {
      DominanceInfo dominance(getOperation());
      KernelRegion region(gemm, phase, dominance);
      region.selectMembers();
      region.rewrite();
    }
  }
};

} // namespace
