//===- MoeGpuProto.cpp - prototype passes for the device-resident GPU path ===//
//
// An mlir-opt pass plugin (libMLIR.so of LLVM 22) with the passes of the
// device-resident prototype that the project does not have yet (the
// reductions-innermost, loop-shape and device-buffers steps are the
// project's moe-gpu-* passes, run by moe-opt). Prototype only: it runs on
// the example's IR.
//
//   moe-proto-gpu-slot-ops         moe.affinity_grad / moe.scatter_add_rows
//                                  (unregistered, generic form) -> a
//                                  race-free, deterministic form: one
//                                  parallel scatter of unique (t, e) pairs
//                                  on a buffer, then gathers (linalg)
// (gpu-async-region on public functions only is the project's
// moe-gpu-async-region now.)
//
//===----------------------------------------------------------------------===//
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Tools/Plugins/PassPlugin.h"

using namespace mlir;

namespace {

using utils::IteratorType;

Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

AffineMap dims(MLIRContext *ctx, unsigned n, ArrayRef<unsigned> r) {
  SmallVector<AffineExpr> e;
  for (unsigned d : r)
    e.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(n, 0, e, ctx);
}

/// An inherent attribute of an unregistered op (stored as properties).
Attribute prop(Operation *op, StringRef name) {
  if (auto dict = dyn_cast_or_null<DictionaryAttr>(
          op->getPropertiesAsAttribute()))
    if (Attribute a = dict.get(name))
      return a;
  return op->getAttr(name);
}

int64_t intProp(Operation *op, StringRef name) {
  auto a = dyn_cast_or_null<IntegerAttr>(prop(op, name));
  return a ? a.getInt() : -1;
}

/// tensor.empty filled with `value`.
Value filledTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                   TypedAttr value) {
  Value empty = tensor::EmptyOp::create(b, loc, shape, value.getType());
  Value v = arith::ConstantOp::create(b, loc, value);
  return linalg::FillOp::create(b, loc, v, empty).getResult(0);
}

/// A fresh buffer of `type` filled with `value`, to be returned to the
/// tensor world by bufferization.to_tensor restrict writable.
Value filledBuffer(OpBuilder &b, Location loc, MemRefType type,
                   TypedAttr value) {
  Value buf = memref::AllocOp::create(b, loc, type);
  Value v = arith::ConstantOp::create(b, loc, value);
  linalg::FillOp::create(b, loc, v, buf);
  return buf;
}

Value readOnlyBuffer(OpBuilder &b, Location loc, Value tensor) {
  auto t = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(t.getShape(), t.getElementType()), tensor,
      /*read_only=*/true);
}

Value backToTensor(OpBuilder &b, Location loc, Value buffer) {
  auto m = cast<MemRefType>(buffer.getType());
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(m.getShape(), m.getElementType()), buffer,
      /*restrict=*/true, /*writable=*/true);
}

/// scf.parallel over the slots s in [0, S): for each routed slot (token
/// t >= 0) calls body(s, t, e) with e = block_to_expert[s / B]. Routing
/// contract: every (t, e) pair is held by at most one slot, so writes keyed
/// by (t, e) never collide.
void forEachRoutedSlotParallel(
    OpBuilder &b, Location loc, Value tokB, Value blkB, int64_t S, int64_t B,
    function_ref<void(OpBuilder &, Location, Value, Value, Value)> body) {
  scf::ParallelOp::create(
      b, loc, ValueRange{cIndex(b, loc, 0)}, ValueRange{cIndex(b, loc, S)},
      ValueRange{cIndex(b, loc, 1)},
      [&](OpBuilder &nb, Location l, ValueRange ivs) {
        Value s = ivs[0];
        Value tok = memref::LoadOp::create(nb, l, tokB, s);
        Value zero = arith::ConstantIntOp::create(nb, l, nb.getI32Type(), 0);
        Value valid = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sge,
                                            tok, zero);
        scf::IfOp::create(nb, l, valid, [&](OpBuilder &tb, Location tl) {
          Value t = arith::IndexCastOp::create(tb, tl, tb.getIndexType(), tok);
          Value n = arith::DivUIOp::create(tb, tl, s, cIndex(tb, tl, B));
          Value e = arith::IndexCastOp::create(
              tb, tl, tb.getIndexType(), memref::LoadOp::create(tb, tl, blkB, n));
          body(tb, tl, s, t, e);
          scf::YieldOp::create(tb, tl);
        });
      });
}

/// The (block_to_expert, B, E) of the routing that uses `tokens`, from an
/// op of the function that carries them (prototype: moe.scatter_add_rows
/// has no such operands; the project would add them).
struct Routing {
  Value blk;
  int64_t B = -1, E = -1;
};
Routing findRouting(Operation *user, Value tokens) {
  Routing r;
  auto func = user->getParentOfType<func::FuncOp>();
  func.walk([&](Operation *op) {
    StringRef name = op->getName().getStringRef();
    int blkIndex = name == "moe.affinity_grad"     ? 3
                   : name == "moe.slot_affinities" ? 2
                                                   : -1;
    if (blkIndex < 0 || op->getNumOperands() <= (unsigned)blkIndex ||
        op->getOperand(blkIndex - 1) != tokens)
      return;
    r.blk = op->getOperand(blkIndex);
    r.B = intProp(op, "block_size");
    r.E = intProp(op, "num_experts");
  });
  return r;
}

struct SlotOpsPass
    : PassWrapper<SlotOpsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SlotOpsPass)
  StringRef getArgument() const final { return "moe-proto-gpu-slot-ops"; }
  StringRef getDescription() const final {
    return "Rewrite moe.affinity_grad / moe.scatter_add_rows (generic form) "
           "into a parallel, deterministic form";
  }
  void getDependentDialects(DialectRegistry &r) const override {
    r.insert<arith::ArithDialect, bufferization::BufferizationDialect,
             linalg::LinalgDialect, memref::MemRefDialect, scf::SCFDialect,
             tensor::TensorDialect>();
  }

  /// result[t*E + e] = <dA[s], h[s]> for the slot s of (t, e); 0 elsewhere.
  LogicalResult rewriteAffinityGrad(Operation *op) {
    if (op->getNumOperands() != 4)
      return op->emitError("prototype: the bias form is not handled");
    OpBuilder b(op);
    Location loc = op->getLoc();
    MLIRContext *ctx = b.getContext();
    Value dA = op->getOperand(0), h = op->getOperand(1),
          tok = op->getOperand(2), blk = op->getOperand(3);
    int64_t S = cast<RankedTensorType>(dA.getType()).getDimSize(0);
    int64_t B = intProp(op, "block_size"), E = intProp(op, "num_experts");
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    Type f32 = b.getF32Type();
    // Same body as the host lowering: out + dA * h, i ascending.
    Value sums =
        linalg::GenericOp::create(
            b, loc, TypeRange{RankedTensorType::get({S}, f32)},
            ValueRange{dA, h},
            ValueRange{filledTensor(b, loc, {S}, b.getF32FloatAttr(0))},
            ArrayRef<AffineMap>{dims(ctx, 2, {0, 1}), dims(ctx, 2, {0, 1}),
                                dims(ctx, 2, {0})},
            ArrayRef<IteratorType>{IteratorType::parallel,
                                   IteratorType::reduction},
            [](OpBuilder &nb, Location l, ValueRange a) {
              Value p = arith::MulFOp::create(nb, l, a[0], a[1]);
              linalg::YieldOp::create(nb, l,
                                      ValueRange{arith::AddFOp::create(
                                          nb, l, a[2], p)});
            })
            .getResult(0);
    Value out = filledBuffer(
        b, loc, MemRefType::get(resultType.getShape(), f32),
        b.getF32FloatAttr(0));
    Value sumsB = readOnlyBuffer(b, loc, sums);
    Value tokB = readOnlyBuffer(b, loc, tok);
    Value blkB = readOnlyBuffer(b, loc, blk);
    forEachRoutedSlotParallel(
        b, loc, tokB, blkB, S, B,
        [&](OpBuilder &nb, Location l, Value s, Value t, Value e) {
          Value idx = arith::AddIOp::create(
              nb, l, arith::MulIOp::create(nb, l, t, cIndex(nb, l, E)), e);
          Value v = memref::LoadOp::create(nb, l, sumsB, s);
          memref::StoreOp::create(nb, l, v, out, idx);
        });
    op->getResult(0).replaceAllUsesWith(backToTensor(b, loc, out));
    op->erase();
    return success();
  }

  /// dx[t, :] = sum over the experts e ascending (= slots ascending) of
  /// contributions[slot(t, e), :]: an inverse map slot(t, e) built by one
  /// parallel scatter, then one gather-sum per (t, h) in a fixed order.
  LogicalResult rewriteScatterAddRows(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    MLIRContext *ctx = b.getContext();
    Value c = op->getOperand(0), tok = op->getOperand(1);
    Routing routing = findRouting(op, tok);
    if (!routing.blk || routing.B <= 0 || routing.E <= 0)
      return op->emitError("prototype: no routing (block_to_expert, E) found "
                           "for this token map");
    Attribute acc = prop(op, "dx_accumulate");
    std::string accText;
    if (acc)
      llvm::raw_string_ostream(accText) << acc;
    bool roundEachAdd = StringRef(accText).contains("bf16");
    int64_t S = cast<RankedTensorType>(c.getType()).getDimSize(0);
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    int64_t T = resultType.getDimSize(0), H = resultType.getDimSize(1);
    int64_t E = routing.E;
    Type f32 = b.getF32Type(), i32 = b.getI32Type();

    Value inv = filledBuffer(b, loc, MemRefType::get({T, E}, i32),
                             b.getI32IntegerAttr(-1));
    Value tokB = readOnlyBuffer(b, loc, tok);
    Value blkB = readOnlyBuffer(b, loc, routing.blk);
    forEachRoutedSlotParallel(
        b, loc, tokB, blkB, S, routing.B,
        [&](OpBuilder &nb, Location l, Value s, Value t, Value e) {
          Value s32 = arith::IndexCastOp::create(nb, l, nb.getI32Type(), s);
          memref::StoreOp::create(nb, l, s32, inv, ValueRange{t, e});
        });
    Value invT = backToTensor(b, loc, inv);

    // Loops (t, h, e), e reducing: acc = valid ? acc + c[s, h] : acc.
    Value sum =
        linalg::GenericOp::create(
            b, loc, TypeRange{RankedTensorType::get({T, H}, f32)},
            ValueRange{invT},
            ValueRange{filledTensor(b, loc, {T, H}, b.getF32FloatAttr(0))},
            ArrayRef<AffineMap>{dims(ctx, 3, {0, 2}), dims(ctx, 3, {0, 1})},
            ArrayRef<IteratorType>{IteratorType::parallel,
                                   IteratorType::parallel,
                                   IteratorType::reduction},
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value zero = arith::ConstantIntOp::create(nb, l, i32, 0);
              Value valid = arith::CmpIOp::create(
                  nb, l, arith::CmpIPredicate::sge, a[0], zero);
              Value safe = arith::SelectOp::create(nb, l, valid, a[0], zero);
              Value s = arith::IndexCastOp::create(nb, l, nb.getIndexType(),
                                                   safe);
              Value hIdx = linalg::IndexOp::create(nb, l, 1);
              Value v =
                  tensor::ExtractOp::create(nb, l, c, ValueRange{s, hIdx});
              Value next = arith::AddFOp::create(nb, l, a[1], v);
              if (roundEachAdd)
                next = arith::ExtFOp::create(
                    nb, l, f32,
                    arith::TruncFOp::create(nb, l, nb.getBF16Type(), next)
                        .getResult());
              linalg::YieldOp::create(
                  nb, l,
                  ValueRange{arith::SelectOp::create(nb, l, valid, next, a[1])});
            })
            .getResult(0);
    Value result = sum;
    Type elementType = resultType.getElementType();
    if (!elementType.isF32()) {
      result =
          linalg::GenericOp::create(
              b, loc, TypeRange{resultType}, ValueRange{sum},
              ValueRange{tensor::EmptyOp::create(b, loc, resultType.getShape(),
                                                 elementType)},
              ArrayRef<AffineMap>{dims(ctx, 2, {0, 1}), dims(ctx, 2, {0, 1})},
              ArrayRef<IteratorType>{IteratorType::parallel,
                                     IteratorType::parallel},
              [&](OpBuilder &nb, Location l, ValueRange a) {
                linalg::YieldOp::create(
                    nb, l,
                    ValueRange{
                        arith::TruncFOp::create(nb, l, elementType, a[0])});
              })
              .getResult(0);
    }
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
    return success();
  }

  void runOnOperation() override {
    SmallVector<Operation *> affinity, scatter;
    getOperation().walk([&](Operation *op) {
      StringRef name = op->getName().getStringRef();
      if (name == "moe.affinity_grad")
        affinity.push_back(op);
      else if (name == "moe.scatter_add_rows")
        scatter.push_back(op);
      else if (name == "moe.expert_sum")
        op->emitWarning("prototype: moe.expert_sum left to the host form");
    });
    // scatter_add_rows first: it reads the routing off affinity_grad.
    for (Operation *op : scatter)
      if (failed(rewriteScatterAddRows(op)))
        return signalPassFailure();
    for (Operation *op : affinity)
      if (failed(rewriteAffinityGrad(op)))
        return signalPassFailure();
  }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "MoeGpuProto", "0.1", []() {
            PassRegistration<SlotOpsPass>();
          }};
}
