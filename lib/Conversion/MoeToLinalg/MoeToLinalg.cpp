//===- MoeToLinalg.cpp - moe phase-level ops to linalg on tensors ---------===//
//
// The host (reference) lowering of the decomposed moe IR. `moe.fused`
// regions are inlined (their order of execution is their meaning), then every
// slot-space op becomes destination-passing code on tensors that one-shot
// bufferization takes to loops:
//
//   moe.gather_rows / slot_affinities  linalg.generic, tensor.extract of the
//                                       token id (padding -> 0)
//   moe.unpack_checkpoint               linalg.generic transpose + collapse
//   moe.mx_quantize   expand_shape [.., D/32, 32, ..]
//                       -> generic amax (reduction over the 32)
//                       -> generic scale byte -> generic encode -> collapse
//   moe.mx_dequantize expand_shape -> generic decode * 2^(s-127) -> collapse
//   moe.block_matmul  operands to f32 (the weight as [E, K, Nout]), then
//                     scf.for over the N blocks: e = block_to_expert[n],
//                       rows [nB, nB+B) = generic lhs_blk . rhs[e] (+ bias[e])
//   moe.expert_matmul operands to f32, then scf.for over the N blocks:
//                       out[e] += generic lhs_blk^T . rhs_blk
//   moe.gated_act_bwd linalg.generic on the gate and up halves
//   moe.affinity_grad generic lane sums of each row (32 lanes), generic
//                     sum of the lanes, scf.for scattering to t*E + e
//   moe.scale_rows    linalg.generic
//   moe.scatter_add_rows scf.for over slots in ascending order, row adds
//   moe.expert_sum    scf.for over blocks, generic column sums
//
// With parallel-slot-ops (the GPU pipeline) the last three avoid loops
// that carry a tensor, which no GPU mapping covers: the slot scatters
// become one scf.parallel storing into a fresh buffer by (token, expert),
// the sums linalg reductions in the host's order (same bits).
//
// Every number is computed by the builders of MXBuilders.h, the definition
// the GPU lowering shares. Products and sums are f32, without contraction;
// every sum runs in ascending index order (the loop order only puts the
// contiguous dimension innermost), except the affinity gradient's, which
// runs in 32 interleaved lanes (docs/numerics.md). Tensor arguments of
// functions are marked read only for bufferization (option
// read-only-inputs).
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/Passes.h"

#include "moe/Dialect/Moe/IR/MoeOps.h"
#include "moe/Dialect/Moe/Utils/MXBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

#include <numeric>

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETOLINALG
#include "moe/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

using utils::IteratorType;

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

Value indexConstant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value zeroOf(OpBuilder &b, Location loc, Type type) {
  return arith::ConstantOp::create(b, loc,
                                   cast<TypedAttr>(b.getZeroAttr(type)));
}

Value emptyTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                  Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

/// A tensor of zeros: tensor.empty filled by linalg.fill.
Value zeroTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                 Type elementType) {
  Value empty = emptyTensor(b, loc, shape, elementType);
  return linalg::FillOp::create(b, loc, zeroOf(b, loc, elementType), empty)
      .getResult(0);
}

/// `tensor[indices]` for an i32 tensor, as an index.
Value extractIndex(OpBuilder &b, Location loc, Value tensor,
                   ValueRange indices) {
  Value v = tensor::ExtractOp::create(b, loc, tensor, indices);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

/// Widens bf16 to f32; f32 passes through.
Value toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

Value addF(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y);
}

Value mulF(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y);
}

/// The map (d0, ..., d{numDims-1}) -> (d{results[0]}, ...).
AffineMap dimsMap(MLIRContext *ctx, unsigned numDims,
                  ArrayRef<unsigned> results) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : results)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(numDims, 0, exprs, ctx);
}

SmallVector<IteratorType> parallel(unsigned n) {
  return SmallVector<IteratorType>(n, IteratorType::parallel);
}

/// Iterators with the last `numReductions` loops reducing.
SmallVector<IteratorType> withReductions(unsigned numParallel,
                                         unsigned numReductions) {
  SmallVector<IteratorType> iterators = parallel(numParallel);
  iterators.append(numReductions, IteratorType::reduction);
  return iterators;
}

using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// Generic body: the single input widened to f32.
Value widenedInput(OpBuilder &b, Location loc, ValueRange args) {
  return toF32(b, loc, args[0]);
}

/// Generic body of a product summed into the output: out + lhs * rhs for the
/// operands (lhs, rhs, out).
Value multiplyAccumulate(OpBuilder &b, Location loc, ValueRange args) {
  return addF(b, loc, args[2], mulF(b, loc, args[0], args[1]));
}

/// A linalg.generic with one output whose body yields `body(args)`.
Value buildGeneric(OpBuilder &b, Location loc, ValueRange inputs, Value init,
                   ArrayRef<AffineMap> maps, ArrayRef<IteratorType> iterators,
                   BodyFn body) {
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
      iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return generic.getResult(0);
}

/// An elementwise linalg.generic over same-shaped inputs producing a fresh
/// tensor of `elementType`.
Value mapElementwise(OpBuilder &b, Location loc, ValueRange inputs,
                     Type elementType, BodyFn body) {
  RankedTensorType type = tensorType(inputs.front());
  unsigned rank = type.getRank();
  Value init = emptyTensor(b, loc, type.getShape(), elementType);
  SmallVector<AffineMap> maps(
      inputs.size() + 1,
      AffineMap::getMultiDimIdentityMap(rank, b.getContext()));
  return buildGeneric(b, loc, inputs, init, maps, parallel(rank), body);
}

/// A [size0, ...] slice at `offsets` with unit strides; dimensions of size 1
/// listed in `dropDims` are dropped from the result type.
Value extractSlice(OpBuilder &b, Location loc, Value source,
                   ArrayRef<OpFoldResult> offsets, ArrayRef<int64_t> sizes,
                   ArrayRef<unsigned> dropDims = {}) {
  SmallVector<int64_t> resultShape;
  for (auto [d, size] : llvm::enumerate(sizes))
    if (!llvm::is_contained(dropDims, d))
      resultShape.push_back(size);
  auto resultType =
      RankedTensorType::get(resultShape, tensorType(source).getElementType());
  SmallVector<OpFoldResult> sizeAttrs =
      getAsIndexOpFoldResult(b.getContext(), sizes);
  SmallVector<OpFoldResult> strides(sizes.size(), b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, resultType, source, offsets,
                                        sizeAttrs, strides);
}

/// Inserts `source` into `dest` at `offsets` with `sizes` (unit strides).
Value insertSlice(OpBuilder &b, Location loc, Value source, Value dest,
                  ArrayRef<OpFoldResult> offsets, ArrayRef<int64_t> sizes) {
  SmallVector<OpFoldResult> sizeAttrs =
      getAsIndexOpFoldResult(b.getContext(), sizes);
  SmallVector<OpFoldResult> strides(sizes.size(), b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(b, loc, source, dest, offsets, sizeAttrs,
                                       strides);
}

/// Rows [row, row + numRows) of the matrix `source`.
Value rowBlock(OpBuilder &b, Location loc, Value source, Value row,
               int64_t numRows) {
  return extractSlice(b, loc, source, {row, b.getIndexAttr(0)},
                      {numRows, tensorType(source).getDimSize(1)});
}

/// `dest` with its slice dest[index] (the leading dimension dropped)
/// replaced by `update(slice)`.
Value updateSlice(OpBuilder &b, Location loc, Value dest, Value index,
                  function_ref<Value(Value slice)> update) {
  SmallVector<int64_t> sizes(tensorType(dest).getShape());
  sizes[0] = 1;
  SmallVector<OpFoldResult> offsets(sizes.size(), b.getIndexAttr(0));
  offsets[0] = index;
  Value slice = extractSlice(b, loc, dest, offsets, sizes, {0});
  return insertSlice(b, loc, update(slice), dest, offsets, sizes);
}

//===----------------------------------------------------------------------===//
// MX block views
//===----------------------------------------------------------------------===//

/// A tensor's shape with `axis` split into [size / 32, 32], the space in
/// which MX blocks are a single loop.
struct BlockView {
  SmallVector<int64_t> expanded;
  SmallVector<ReassociationIndices> reassociation;
  unsigned rank;     ///< rank of the expanded shape
  unsigned blockDim; ///< the loop over the 32 elements of a block

  BlockView(ArrayRef<int64_t> shape, int64_t axis) {
    for (auto [d, size] : llvm::enumerate(shape)) {
      if (static_cast<int64_t>(d) == axis) {
        reassociation.push_back({static_cast<int64_t>(expanded.size()),
                                 static_cast<int64_t>(expanded.size()) + 1});
        expanded.push_back(size / 32);
        expanded.push_back(32);
      } else {
        reassociation.push_back({static_cast<int64_t>(expanded.size())});
        expanded.push_back(size);
      }
    }
    rank = expanded.size();
    blockDim = axis + 1;
  }

  Value expand(OpBuilder &b, Location loc, Value value) const {
    auto type =
        RankedTensorType::get(expanded, tensorType(value).getElementType());
    return tensor::ExpandShapeOp::create(b, loc, type, value, reassociation);
  }
  Value collapse(OpBuilder &b, Location loc, Value value,
                 RankedTensorType type) const {
    return tensor::CollapseShapeOp::create(b, loc, type, value, reassociation);
  }
  AffineMap identity(MLIRContext *ctx) const {
    return AffineMap::getMultiDimIdentityMap(rank, ctx);
  }
  /// The map from a block's element to its scale (the block loop dropped).
  AffineMap scaleMap(MLIRContext *ctx) const {
    SmallVector<unsigned> dims;
    for (unsigned d = 0; d < rank; ++d)
      if (d != blockDim)
        dims.push_back(d);
    return dimsMap(ctx, rank, dims);
  }
  /// Parallel loops except the one over a block's elements.
  SmallVector<IteratorType> blockReduction() const {
    SmallVector<IteratorType> iterators = parallel(rank);
    iterators[blockDim] = IteratorType::reduction;
    return iterators;
  }
};

Value bitcastTo(OpBuilder &b, Location loc, Type type, Value v) {
  return arith::BitcastOp::create(b, loc, type, v);
}

/// MX-quantizes `input` along `axis`: returns (codes, scales).
std::pair<Value, Value> lowerQuantize(OpBuilder &b, Location loc, Value input,
                                      int64_t axis, MXQuantAttr quant) {
  MLIRContext *ctx = b.getContext();
  RankedTensorType inputType = tensorType(input);
  BlockView view(inputType.getShape(), axis);
  SmallVector<int64_t> scaleShape(inputType.getShape());
  scaleShape[axis] /= 32;
  MXElement element = quant.getElement();
  ScaleRule rule = quant.getRule();
  Type codeType = getMXElementType(ctx, element);
  Type scaleType = b.getType<Float8E8M0FNUType>();

  Value x = view.expand(b, loc, input);
  Value amax = buildGeneric(
      b, loc, x, zeroTensor(b, loc, scaleShape, b.getF32Type()),
      {view.identity(ctx), view.scaleMap(ctx)}, view.blockReduction(),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        return buildAmaxStep(nb, nloc, args[1], toF32(nb, nloc, args[0]));
      });
  Value scales =
      mapElementwise(b, loc, amax, scaleType,
                     [&](OpBuilder &nb, Location nloc, ValueRange args) {
                       Value byte =
                           buildScaleByte(nb, nloc, args[0], element, rule);
                       return bitcastTo(nb, nloc, scaleType, byte);
                     });
  Value codes = buildGeneric(
      b, loc, {x, scales}, emptyTensor(b, loc, view.expanded, codeType),
      {view.identity(ctx), view.scaleMap(ctx), view.identity(ctx)},
      parallel(view.rank), [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value byte = bitcastTo(nb, nloc, nb.getI8Type(), args[1]);
        Value code =
            buildEncodeFP8(nb, nloc, toF32(nb, nloc, args[0]), byte, element);
        return bitcastTo(nb, nloc, codeType, code);
      });
  auto codesType = RankedTensorType::get(inputType.getShape(), codeType);
  return {view.collapse(b, loc, codes, codesType), scales};
}

/// The exact f32 values of MX `codes` with `scales` along `axis`.
Value lowerDequantize(OpBuilder &b, Location loc, Value codes, Value scales,
                      int64_t axis) {
  MLIRContext *ctx = b.getContext();
  RankedTensorType codesType = tensorType(codes);
  BlockView view(codesType.getShape(), axis);
  MXElement element = getMXElement(codesType.getElementType());
  Value values = buildGeneric(
      b, loc, {view.expand(b, loc, codes), scales},
      emptyTensor(b, loc, view.expanded, b.getF32Type()),
      {view.identity(ctx), view.scaleMap(ctx), view.identity(ctx)},
      parallel(view.rank), [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value code = bitcastTo(nb, nloc, nb.getI8Type(), args[0]);
        Value byte = bitcastTo(nb, nloc, nb.getI8Type(), args[1]);
        return buildDequantize(nb, nloc, code, byte, element);
      });
  return view.collapse(
      b, loc, values,
      RankedTensorType::get(codesType.getShape(), b.getF32Type()));
}

/// A GEMM operand as f32: MX codes dequantized along `axis`, bf16 widened.
Value operandToF32(OpBuilder &b, Location loc, Value operand, Value scales,
                   int64_t axis) {
  if (scales)
    return lowerDequantize(b, loc, operand, scales, axis);
  return mapElementwise(b, loc, operand, b.getF32Type(), widenedInput);
}

/// Emits `for i in [0, count)` with one tensor carried through, and
/// `body(i, carried)` returning its next value.
Value forEachIndex(
    OpBuilder &b, Location loc, int64_t count, Value init,
    function_ref<Value(OpBuilder &, Location, Value i, Value carried)> body) {
  auto loop = scf::ForOp::create(
      b, loc, indexConstant(b, loc, 0), indexConstant(b, loc, count),
      indexConstant(b, loc, 1), ValueRange{init},
      [&](OpBuilder &nb, Location nloc, Value i, ValueRange iterArgs) {
        scf::YieldOp::create(nb, nloc, body(nb, nloc, i, iterArgs[0]));
      });
  return loop.getResult(0);
}

/// Emits `for n in [0, numBlocks)` with one tensor carried through, and
/// `body(n, e, carried)` returning its next value, where e is the expert of
/// block n.
Value forEachBlock(
    OpBuilder &b, Location loc, Value blockToExpert, Value init,
    function_ref<Value(OpBuilder &, Location, Value n, Value e, Value carried)>
        body) {
  int64_t numBlocks = tensorType(blockToExpert).getDimSize(0);
  return forEachIndex(
      b, loc, numBlocks, init,
      [&](OpBuilder &nb, Location nloc, Value n, Value carried) {
        Value e = extractIndex(nb, nloc, blockToExpert, n);
        return body(nb, nloc, n, e, carried);
      });
}

/// index `n * blockSize`.
Value blockStart(OpBuilder &b, Location loc, Value n, int64_t blockSize) {
  return arith::MulIOp::create(b, loc, n, indexConstant(b, loc, blockSize));
}

/// out[e] += (a reduction over the rows of block n) for the blocks n in
/// ascending order, e = block_to_expert[n], with `out` an f32 zero tensor of
/// `shape` ([E, ...]). Per block, one linalg.generic (`maps`, `iterators`,
/// `body`) reads rows [nB, nB + B) of every matrix in `inputs` and has
/// out[e] as its init.
Value accumulatePerExpert(OpBuilder &b, Location loc, Value blockToExpert,
                          int64_t blockSize, ValueRange inputs,
                          ArrayRef<int64_t> shape, ArrayRef<AffineMap> maps,
                          ArrayRef<IteratorType> iterators, BodyFn body) {
  return forEachBlock(
      b, loc, blockToExpert, zeroTensor(b, loc, shape, b.getF32Type()),
      [&](OpBuilder &nb, Location l, Value n, Value e, Value acc) {
        Value row = blockStart(nb, l, n, blockSize);
        SmallVector<Value> blocks;
        for (Value input : inputs)
          blocks.push_back(rowBlock(nb, l, input, row, blockSize));
        return updateSlice(nb, l, acc, e, [&](Value expertAcc) {
          return buildGeneric(nb, l, blocks, expertAcc, maps, iterators, body);
        });
      });
}

/// The expert of slot `s`: block_to_expert[s / B] as an index.
Value expertOfSlot(OpBuilder &b, Location loc, Value blockToExpert, Value s,
                   int64_t blockSize) {
  Value n = arith::DivUIOp::create(b, loc, s, indexConstant(b, loc, blockSize));
  return extractIndex(b, loc, blockToExpert, n);
}

/// The index t * E + e in [T * E] affinities of slot `s` holding token `t`,
/// e = block_to_expert[s / B].
Value slotAffinityIndex(OpBuilder &b, Location loc, Value blockToExpert,
                        int64_t blockSize, int64_t numExperts, Value s,
                        Value t) {
  Value e = expertOfSlot(b, loc, blockToExpert, s, blockSize);
  Value base =
      arith::MulIOp::create(b, loc, t, indexConstant(b, loc, numExperts));
  return arith::AddIOp::create(b, loc, base, e);
}

/// `token >= 0` for an i32 token id.
Value isToken(OpBuilder &b, Location loc, Value token) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, token,
                               zeroOf(b, loc, token.getType()));
}

/// `read(t)` for an i32 token id t, zero for padding. Padding reads token 0,
/// whose value is discarded, so that no read is out of bounds.
Value readOfToken(OpBuilder &b, Location loc, Value token,
                  function_ref<Value(Value t)> read) {
  Value valid = isToken(b, loc, token);
  Value safe = arith::SelectOp::create(b, loc, valid, token,
                                       zeroOf(b, loc, token.getType()));
  Value v = read(arith::IndexCastOp::create(b, loc, b.getIndexType(), safe));
  return arith::SelectOp::create(b, loc, valid, v, zeroOf(b, loc, v.getType()));
}

/// Emits `for s in [0, S)` over the slots in ascending order with one
/// tensor carried through; for the slots holding a token t (not padding) it
/// becomes `body(s, t, carried)`, the others leave it unchanged.
Value forEachRoutedSlot(
    OpBuilder &b, Location loc, Value tokens, Value init,
    function_ref<Value(OpBuilder &, Location, Value s, Value t, Value carried)>
        body) {
  int64_t numSlots = tensorType(tokens).getDimSize(0);
  return forEachIndex(
      b, loc, numSlots, init,
      [&](OpBuilder &nb, Location nloc, Value s, Value carried) {
        Value token = tensor::ExtractOp::create(nb, nloc, tokens, s);
        auto ifOp = scf::IfOp::create(
            nb, nloc, isToken(nb, nloc, token),
            [&](OpBuilder &tb, Location tloc) {
              Value t = arith::IndexCastOp::create(tb, tloc, tb.getIndexType(),
                                                   token);
              scf::YieldOp::create(tb, tloc, body(tb, tloc, s, t, carried));
            },
            [&](OpBuilder &eb, Location eloc) {
              scf::YieldOp::create(eb, eloc, carried);
            });
        return ifOp.getResult(0);
      });
}

/// A fresh buffer of `type` with every element `value`.
Value filledBuffer(OpBuilder &b, Location loc, MemRefType type,
                   TypedAttr value) {
  Value buffer = memref::AllocOp::create(b, loc, type);
  Value fill = arith::ConstantOp::create(b, loc, value);
  linalg::FillOp::create(b, loc, ValueRange{fill}, ValueRange{buffer});
  return buffer;
}

/// The tensor `tensor` as a read-only buffer.
Value readOnlyBuffer(OpBuilder &b, Location loc, Value tensor) {
  RankedTensorType type = tensorType(tensor);
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), tensor,
      /*readOnly=*/true);
}

/// A buffer written by `forEachRoutedSlotInParallel` back in the tensor
/// world: restrict, since the buffer is fresh and nothing else uses it.
Value bufferAsTensor(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
      buffer, /*restrict=*/true, /*writable=*/true);
}

/// Emits one scf.parallel over the slots s; for the slots holding a token
/// t in [0, numTokens) with e = block_to_expert[s / B] in [0, numExperts)
/// it runs `body(s, t, e)`. A token holds at most one slot per expert (SPEC
/// section 4), so stores keyed by (t, e) never collide and need no atomics:
/// this is the form of the slot scatters that maps to GPU threads. Ids out
/// of range break the layout contract; they are skipped rather than let
/// a store land in another token's row.
void forEachRoutedSlotInParallel(
    OpBuilder &b, Location loc, Value tokens, Value blockToExpert,
    int64_t blockSize, int64_t numTokens, int64_t numExperts,
    function_ref<void(OpBuilder &, Location, Value s, Value t, Value e)>
        body) {
  Value tokenBuffer = readOnlyBuffer(b, loc, tokens);
  Value blockBuffer = readOnlyBuffer(b, loc, blockToExpert);
  int64_t numSlots = tensorType(tokens).getDimSize(0);
  scf::ParallelOp::create(
      b, loc, ValueRange{indexConstant(b, loc, 0)},
      ValueRange{indexConstant(b, loc, numSlots)},
      ValueRange{indexConstant(b, loc, 1)},
      [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
        Value s = ivs[0];
        Value token = memref::LoadOp::create(nb, nloc, tokenBuffer, s);
        scf::IfOp::create(
            nb, nloc, isToken(nb, nloc, token),
            [&](OpBuilder &tb, Location tloc) {
              Value t = arith::IndexCastOp::create(tb, tloc,
                                                   tb.getIndexType(), token);
              Value n = arith::DivUIOp::create(
                  tb, tloc, s, indexConstant(tb, tloc, blockSize));
              Value e = arith::IndexCastOp::create(
                  tb, tloc, tb.getIndexType(),
                  memref::LoadOp::create(tb, tloc, blockBuffer, n));
              auto below = [&](Value v, int64_t bound) {
                return arith::CmpIOp::create(
                    tb, tloc, arith::CmpIPredicate::ult, v,
                    indexConstant(tb, tloc, bound));
              };
              Value inRange = arith::AndIOp::create(
                  tb, tloc, below(t, numTokens), below(e, numExperts));
              scf::IfOp::create(tb, tloc, inRange,
                                [&](OpBuilder &ib, Location iloc) {
                                  body(ib, iloc, s, t, e);
                                  scf::YieldOp::create(ib, iloc);
                                });
              scf::YieldOp::create(tb, tloc);
            });
      });
}

/// For every token t, one scf.parallel iteration lists the slots set in
/// column t of `slotOf` ([E, T], -1: none) in ascending expert order into
/// row t of `slotList` ([T, K], filled with -1 beforehand), so that a sum
/// over a token's slots runs over K entries instead of E. A token with more
/// than K slots breaks the layout contract; its slots past the K-th are
/// dropped rather than stored outside its row.
void listSlotsPerToken(OpBuilder &b, Location loc, Value slotOf,
                       Value slotList) {
  ArrayRef<int64_t> listShape = cast<MemRefType>(slotList.getType()).getShape();
  int64_t numExperts = cast<MemRefType>(slotOf.getType()).getDimSize(0);
  int64_t numTokens = listShape[0], maxSlots = listShape[1];
  scf::ParallelOp::create(
      b, loc, ValueRange{indexConstant(b, loc, 0)},
      ValueRange{indexConstant(b, loc, numTokens)},
      ValueRange{indexConstant(b, loc, 1)},
      [&](OpBuilder &pb, Location ploc, ValueRange ivs) {
        Value t = ivs[0];
        scf::ForOp::create(
            pb, ploc, indexConstant(pb, ploc, 0),
            indexConstant(pb, ploc, numExperts), indexConstant(pb, ploc, 1),
            ValueRange{indexConstant(pb, ploc, 0)},
            [&](OpBuilder &fb, Location floc, Value e, ValueRange counts) {
              Value count = counts[0];
              Value slot =
                  memref::LoadOp::create(fb, floc, slotOf, ValueRange{e, t});
              Value room = arith::CmpIOp::create(
                  fb, floc, arith::CmpIPredicate::ult, count,
                  indexConstant(fb, floc, maxSlots));
              auto append = scf::IfOp::create(
                  fb, floc,
                  arith::AndIOp::create(fb, floc, isToken(fb, floc, slot),
                                        room),
                  [&](OpBuilder &tb, Location tloc) {
                    memref::StoreOp::create(tb, tloc, slot, slotList,
                                            ValueRange{t, count});
                    scf::YieldOp::create(
                        tb, tloc,
                        ValueRange{arith::AddIOp::create(
                            tb, tloc, count, indexConstant(tb, tloc, 1))});
                  },
                  [&](OpBuilder &eb, Location eloc) {
                    scf::YieldOp::create(eb, eloc, count);
                  });
              scf::YieldOp::create(fb, floc, append.getResult(0));
            });
      });
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// The pattern of a slot op that has two forms: loops over the slots in
/// ascending order (the host form), or parallel scatters keyed by (token,
/// expert) followed by sums in a fixed order (`parallelSlotOps`, the form
/// the GPU mapping covers). Both give the same bits.
template <typename Op>
struct SlotOpLowering : OpConversionPattern<Op> {
  SlotOpLowering(MLIRContext *ctx, bool parallelSlotOps)
      : OpConversionPattern<Op>(ctx), parallelSlotOps(parallelSlotOps) {}

protected:
  bool parallelSlotOps;
};

/// moe.gather_rows: one generic over [S, M] reading the source row of each
/// slot's token; padding slots read nothing and give zeros.
struct GatherRowsLowering : OpConversionPattern<GatherRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherRowsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    RankedTensorType resultType = op.getResult().getType();
    Value source = adaptor.getSource();
    Value result = buildGeneric(
        rewriter, loc, adaptor.getTokenPositionToId(),
        emptyTensor(rewriter, loc, resultType.getShape(),
                    resultType.getElementType()),
        {dimsMap(ctx, 2, {0}), dimsMap(ctx, 2, {0, 1})}, parallel(2),
        [&](OpBuilder &b, Location l, ValueRange args) {
          return readOfToken(b, l, args[0], [&](Value row) -> Value {
            Value col = linalg::IndexOp::create(b, l, 1);
            return tensor::ExtractOp::create(b, l, source,
                                             ValueRange{row, col});
          });
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.slot_affinities: affinities[t * E + block_to_expert[s / B]] per slot.
struct SlotAffinitiesLowering : OpConversionPattern<SlotAffinitiesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SlotAffinitiesOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    int64_t S = op.getResult().getType().getDimSize(0);
    int64_t B = op.getBlockSize(), E = op.getNumExperts();
    Value affinities = adaptor.getAffinities();
    Value blockToExpert = adaptor.getBlockToExpert();
    Value result = buildGeneric(
        rewriter, loc, adaptor.getTokenPositionToId(),
        emptyTensor(rewriter, loc, {S}, rewriter.getF32Type()),
        {dimsMap(ctx, 1, {0}), dimsMap(ctx, 1, {0})}, parallel(1),
        [&](OpBuilder &b, Location l, ValueRange args) {
          return readOfToken(b, l, args[0], [&](Value t) -> Value {
            Value s = linalg::IndexOp::create(b, l, 0);
            Value index = slotAffinityIndex(b, l, blockToExpert, B, E, s, t);
            return tensor::ExtractOp::create(b, l, affinities, index);
          });
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.unpack_checkpoint: [N, 2, I, B] transposed to [N, B, 2, I] (widened
/// to f32), then collapsed to slot rows [N*B, 2I].
struct UnpackCheckpointLowering : OpConversionPattern<UnpackCheckpointOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(UnpackCheckpointOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    ArrayRef<int64_t> c = op.getCheckpoint().getType().getShape();
    SmallVector<int64_t> permuted = {c[0], c[3], c[1], c[2]};
    Value rows = buildGeneric(
        rewriter, loc, adaptor.getCheckpoint(),
        emptyTensor(rewriter, loc, permuted, rewriter.getF32Type()),
        {dimsMap(ctx, 4, {0, 2, 3, 1}), dimsMap(ctx, 4, {0, 1, 2, 3})},
        parallel(4), widenedInput);
    SmallVector<ReassociationIndices> reassociation = {{0, 1}, {2, 3}};
    rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(
        op, op.getResult().getType(), rows, reassociation);
    return success();
  }
};

/// moe.mx_quantize: amax per block, scale byte, codes (lowerQuantize).
struct MXQuantizeLowering : OpConversionPattern<MXQuantizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MXQuantizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto [codes, scales] = lowerQuantize(
        rewriter, op.getLoc(), adaptor.getInput(), op.getAxis(), op.getQuant());
    rewriter.replaceOp(op, {codes, scales});
    return success();
  }
};

/// moe.mx_dequantize: code * 2^(scale - 127) per element (lowerDequantize).
struct MXDequantizeLowering : OpConversionPattern<MXDequantizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MXDequantizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, lowerDequantize(rewriter, op.getLoc(),
                                           adaptor.getCodes(),
                                           adaptor.getScales(), op.getAxis()));
    return success();
  }
};

/// moe.block_matmul: f32 operands, then per block n the rows
/// [nB, nB + B) = lhs_blk . rhs[e]^T (+ bias[e]) with e = block_to_expert[n].
struct BlockMatmulLowering : OpConversionPattern<BlockMatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BlockMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    bool transposed = op.getTransposeRhs();
    int64_t B = op.getBlockSize();
    int64_t K = op.getLhs().getType().getDimSize(1);
    int64_t E = op.getRhs().getType().getDimSize(0);
    int64_t Nout = op.getResult().getType().getDimSize(1);
    Type f32 = rewriter.getF32Type();

    Value lhs = operandToF32(rewriter, loc, adaptor.getLhs(),
                             adaptor.getLhsScales(), 1);
    Value rhs = operandToF32(rewriter, loc, adaptor.getRhs(),
                             adaptor.getRhsScales(), transposed ? 1 : 2);
    // The weight as [E, K, Nout], so that the innermost loop below runs
    // along contiguous rows of the weight and of the result.
    if (!transposed) {
      Value init = emptyTensor(rewriter, loc, {E, K, Nout}, f32);
      rhs = linalg::TransposeOp::create(rewriter, loc, rhs, init,
                                        ArrayRef<int64_t>{0, 2, 1})
                .getResult()[0];
    }
    Value bias = adaptor.getBias();
    // Loops (b, k, j): out[b, j] += lhs[b, k] * rhs[k, j]. Each sum still
    // runs over k in ascending order.
    SmallVector<AffineMap> maps = {dimsMap(ctx, 3, {0, 1}),
                                   dimsMap(ctx, 3, {1, 2}),
                                   dimsMap(ctx, 3, {0, 2})};
    Value init =
        emptyTensor(rewriter, loc, op.getResult().getType().getShape(), f32);
    Value result = forEachBlock(
        rewriter, loc, adaptor.getBlockToExpert(), init,
        [&](OpBuilder &b, Location l, Value n, Value e, Value acc) {
          Value row = blockStart(b, l, n, B);
          Value lhsBlock = rowBlock(b, l, lhs, row, B);
          Value rhsExpert =
              extractSlice(b, l, rhs, {e, b.getIndexAttr(0), b.getIndexAttr(0)},
                           {1, K, Nout}, {0});
          // The block's rows of the result are the accumulator, so the
          // GEMM writes in place.
          Value rows = rowBlock(b, l, acc, row, B);
          Value init = linalg::FillOp::create(b, l, zeroOf(b, l, f32), rows)
                           .getResult(0);
          Value product =
              buildGeneric(b, l, {lhsBlock, rhsExpert}, init, maps,
                           {IteratorType::parallel, IteratorType::reduction,
                            IteratorType::parallel},
                           multiplyAccumulate);
          if (bias) {
            // The bias is added in f32 after the sum.
            Value biasRow = extractSlice(b, l, bias, {e, b.getIndexAttr(0)},
                                         {1, Nout}, {0});
            product = buildGeneric(
                b, l, biasRow, product,
                {dimsMap(ctx, 2, {1}), dimsMap(ctx, 2, {0, 1})}, parallel(2),
                [](OpBuilder &nb, Location nl, ValueRange args) {
                  return addF(nb, nl, args[1], toF32(nb, nl, args[0]));
                });
          }
          return insertSlice(b, l, product, acc, {row, b.getIndexAttr(0)},
                             {B, Nout});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.expert_matmul: f32 operands, then per block n of expert e
/// out[e] += lhs_blk^T . rhs_blk, blocks in ascending order.
struct ExpertMatmulLowering : OpConversionPattern<ExpertMatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ExpertMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    Value lhs = operandToF32(rewriter, loc, adaptor.getLhs(),
                             adaptor.getLhsScales(), 0);
    Value rhs = operandToF32(rewriter, loc, adaptor.getRhs(),
                             adaptor.getRhsScales(), 0);
    // Loops (b, m, j): out[m, j] += lhs[b, m] * rhs[b, j], the slot loop
    // outermost so that the inner loop runs along contiguous rows; each sum
    // still runs over the slots in ascending order.
    Value result = accumulatePerExpert(
        rewriter, loc, adaptor.getBlockToExpert(), op.getBlockSize(),
        {lhs, rhs}, op.getResult().getType().getShape(),
        {dimsMap(ctx, 3, {0, 1}), dimsMap(ctx, 3, {0, 2}),
         dimsMap(ctx, 3, {1, 2})},
        {IteratorType::reduction, IteratorType::parallel,
         IteratorType::parallel},
        multiplyAccumulate);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.gated_act_bwd: one generic over [S, I] reading the gate and up
/// halves; the element computation is buildGatedActBwd.
struct GatedActBwdLowering : OpConversionPattern<GatedActBwdOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatedActBwdOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    ArrayRef<int64_t> shape = op.getDAct().getType().getShape();
    int64_t S = shape[0], I = shape[1];
    Type f32 = rewriter.getF32Type();
    OpFoldResult zero = rewriter.getIndexAttr(0);
    Value gateUp = adaptor.getGateUp();
    Value gate = extractSlice(rewriter, loc, gateUp, {zero, zero}, {S, I});
    Value up = extractSlice(rewriter, loc, gateUp,
                            {zero, rewriter.getIndexAttr(I)}, {S, I});

    AffineMap id = dimsMap(ctx, 2, {0, 1});
    SmallVector<Value> inits(3);
    for (Value &init : inits)
      init = emptyTensor(rewriter, loc, {S, I}, f32);
    Activation activation = op.getActivation();
    ClampAttr clamp = op.getClampAttr();
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange(ValueRange(inits)),
        ValueRange{gate, up, adaptor.getDAct(), adaptor.getSlotAffinities()},
        inits, {id, id, id, dimsMap(ctx, 2, {0}), id, id, id}, parallel(2),
        [&](OpBuilder &b, Location l, ValueRange args) {
          GatedActGrads grads = buildGatedActBwd(
              b, l, activation, clamp, args[0], args[1], args[2], args[3]);
          linalg::YieldOp::create(b, l,
                                  ValueRange{grads.dGate, grads.dUp, grads.h});
        });
    // [dg | du] as [S, 2, I] (k = 0 gate, 1 up), collapsed to [S, 2I]: a
    // contiguous write instead of two strided copies.
    Value dg = generic.getResult(0), du = generic.getResult(1);
    Value stacked = buildGeneric(
        rewriter, loc, {dg, du}, emptyTensor(rewriter, loc, {S, 2, I}, f32),
        {dimsMap(ctx, 3, {0, 2}), dimsMap(ctx, 3, {0, 2}),
         dimsMap(ctx, 3, {0, 1, 2})},
        parallel(3), [](OpBuilder &b, Location l, ValueRange args) {
          Value k = linalg::IndexOp::create(b, l, 1);
          Value isGate = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                               k, indexConstant(b, l, 0));
          return arith::SelectOp::create(b, l, isGate, args[0], args[1]);
        });
    SmallVector<ReassociationIndices> reassociation = {{0}, {1, 2}};
    Value dGateUp = tensor::CollapseShapeOp::create(
        rewriter, loc, op.getDGateUp().getType(), stacked, reassociation);
    rewriter.replaceOp(op, {dGateUp, generic.getResult(2)});
    return success();
  }
};

/// [S, D] as [S, D / lanes, lanes]: element (s, j, l) is (s, j * lanes + l).
Value splitLanes(OpBuilder &b, Location loc, Value rows, int64_t lanes) {
  RankedTensorType type = tensorType(rows);
  int64_t S = type.getDimSize(0), D = type.getDimSize(1);
  auto split =
      RankedTensorType::get({S, D / lanes, lanes}, type.getElementType());
  SmallVector<ReassociationIndices> reassociation = {{0}, {1, 2}};
  return tensor::ExpandShapeOp::create(b, loc, split, rows, reassociation);
}

/// moe.affinity_grad: per-slot sums <dA, h> (+ <dy, bd[e]>) in f32, then a
/// loop over the slots writing each routed slot's sum to t * E + e (the
/// parallel form: one scf.parallel doing the same stores, which never
/// collide). Each slot's sum is split into W = 32 lane sums, lane l over
/// the elements l, l + W, ..., added up in lane order afterwards
/// (docs/numerics.md): on the GPU, one thread per (slot, lane) makes a
/// warp read 32 consecutive elements of one row per step, where one
/// thread per slot walking its row would read 32 rows. Both forms share
/// these sums, so the host and the GPU give the same bits.
struct AffinityGradLowering : SlotOpLowering<AffinityGradOp> {
  using SlotOpLowering::SlotOpLowering;
  LogicalResult
  matchAndRewrite(AffinityGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    int64_t S = op.getDAct().getType().getDimSize(0);
    int64_t B = op.getBlockSize(), E = op.getNumExperts();
    Type f32 = rewriter.getF32Type();
    Value blockToExpert = adaptor.getBlockToExpert();

    // The lane count divides the lengths of both sums: 32 whenever I (and
    // H with the bias) are multiples of 32, as every layer's are.
    Value bias = adaptor.getDownBias();
    int64_t lanes = std::gcd<int64_t>(32, op.getDAct().getType().getDimSize(1));
    if (bias)
      lanes = std::gcd<int64_t>(lanes, tensorType(bias).getDimSize(1));
    // Loops (s, l, j), j reducing: lane[s, l] += dA[s, jW + l] * h[s, jW + l]
    // (without h: += dA[s, jW + l], the partial sums of a fused epilogue).
    AffineMap rowMap = dimsMap(ctx, 3, {0, 2, 1});
    AffineMap laneMap = dimsMap(ctx, 3, {0, 1});
    // The accumulator first: argument evaluation order is unspecified, and
    // the op order must not depend on the compiler.
    Value laneZero = zeroTensor(rewriter, loc, {S, lanes}, f32);
    Value laneSums =
        adaptor.getH()
            ? buildGeneric(
                  rewriter, loc,
                  {splitLanes(rewriter, loc, adaptor.getDAct(), lanes),
                   splitLanes(rewriter, loc, adaptor.getH(), lanes)},
                  laneZero, {rowMap, rowMap, laneMap}, withReductions(2, 1),
                  multiplyAccumulate)
            : buildGeneric(
                  rewriter, loc,
                  splitLanes(rewriter, loc, adaptor.getDAct(), lanes),
                  laneZero, {rowMap, laneMap}, withReductions(2, 1),
                  [](OpBuilder &b, Location l, ValueRange args) {
                    return addF(b, l, args[1], args[0]);
                  });
    if (bias) {
      // Loops (s, l, j), j reducing: lane[s, l] += dy[s, jW + l] *
      // bd[block_to_expert[s / B], jW + l].
      laneSums = buildGeneric(
          rewriter, loc, splitLanes(rewriter, loc, adaptor.getDyRows(), lanes),
          laneSums, {rowMap, laneMap}, withReductions(2, 1),
          [&](OpBuilder &b, Location l, ValueRange args) {
            Value s = linalg::IndexOp::create(b, l, 0);
            Value lane = linalg::IndexOp::create(b, l, 1);
            Value j = linalg::IndexOp::create(b, l, 2);
            Value column = arith::AddIOp::create(
                b, l,
                arith::MulIOp::create(b, l, j, indexConstant(b, l, lanes)),
                lane);
            Value e = expertOfSlot(b, l, blockToExpert, s, B);
            Value bd =
                tensor::ExtractOp::create(b, l, bias, ValueRange{e, column});
            Value product = mulF(b, l, toF32(b, l, args[0]), toF32(b, l, bd));
            return addF(b, l, args[1], product);
          });
    }
    // Loops (s, l), l reducing: sum[s] += lane[s, l].
    Value sums = buildGeneric(
        rewriter, loc, laneSums, zeroTensor(rewriter, loc, {S}, f32),
        {dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0})}, withReductions(1, 1),
        [](OpBuilder &b, Location l, ValueRange args) {
          return addF(b, l, args[1], args[0]);
        });

    int64_t TE = op.getResult().getType().getDimSize(0);
    if (parallelSlotOps) {
      Value out = filledBuffer(rewriter, loc, MemRefType::get({TE}, f32),
                               rewriter.getF32FloatAttr(0));
      Value sumBuffer = readOnlyBuffer(rewriter, loc, sums);
      forEachRoutedSlotInParallel(
          rewriter, loc, adaptor.getTokenPositionToId(), blockToExpert, B,
          TE / E, E,
          [&](OpBuilder &b, Location l, Value s, Value t, Value e) {
            Value index = arith::AddIOp::create(
                b, l, arith::MulIOp::create(b, l, t, indexConstant(b, l, E)),
                e);
            Value v = memref::LoadOp::create(b, l, sumBuffer, s);
            memref::StoreOp::create(b, l, v, out, index);
          });
      rewriter.replaceOp(op, bufferAsTensor(rewriter, loc, out));
      return success();
    }
    Value result = forEachRoutedSlot(
        rewriter, loc, adaptor.getTokenPositionToId(),
        zeroTensor(rewriter, loc, {TE}, f32),
        [&](OpBuilder &b, Location l, Value s, Value t, Value acc) {
          Value index = slotAffinityIndex(b, l, blockToExpert, B, E, s, t);
          Value v = tensor::ExtractOp::create(b, l, sums, s);
          return tensor::InsertOp::create(b, l, v, acc, index).getResult();
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.scale_rows: f32(input[s, m]) * scale[s].
struct ScaleRowsLowering : OpConversionPattern<ScaleRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ScaleRowsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    Value result = buildGeneric(
        rewriter, loc, {adaptor.getInput(), adaptor.getScale()},
        emptyTensor(rewriter, loc, op.getResult().getType().getShape(),
                    rewriter.getF32Type()),
        {dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0}),
         dimsMap(ctx, 2, {0, 1})},
        parallel(2), [](OpBuilder &b, Location l, ValueRange args) {
          return mulF(b, l, args[1], toF32(b, l, args[0]));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.scatter_add_rows: an f32 accumulator [T, H]; the slots in ascending
/// order add their row to their token's row (rounded to bf16 after every
/// add with dx_accumulate = bf16); the result is the accumulator rounded
/// once to the result type. The parallel form first records the slot of
/// every (token, expert) pair in slot[E, T] (-1: none), lists each token's
/// slots in ascending expert order, which is the slot order, in
/// list[T, top_k] (-1 past the last), then sums per (t, h) over that list.
struct ScatterAddRowsLowering : SlotOpLowering<ScatterAddRowsOp> {
  using SlotOpLowering::SlotOpLowering;
  LogicalResult
  matchAndRewrite(ScatterAddRowsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    RankedTensorType resultType = op.getResult().getType();
    int64_t T = resultType.getDimSize(0), H = resultType.getDimSize(1);
    int64_t E = op.getNumExperts();
    Type f32 = rewriter.getF32Type();
    bool roundEachAdd = op.getDxAccumulate() == DxAccumulate::bf16;
    Value contributions = adaptor.getContributions();
    auto accumulate = [&](OpBuilder &b, Location l, Value acc, Value v) {
      Value sum = addF(b, l, acc, v);
      if (!roundEachAdd)
        return sum;
      return toF32(b, l, arith::TruncFOp::create(b, l, b.getBF16Type(), sum));
    };

    Value result;
    if (parallelSlotOps) {
      Type i32 = rewriter.getI32Type();
      // Expert-major: the slots of a block (one expert, ascending tokens)
      // store close together, and the listing below, one token per
      // thread, reads a row per step.
      Value slotOf = filledBuffer(rewriter, loc, MemRefType::get({E, T}, i32),
                                  rewriter.getI32IntegerAttr(-1));
      forEachRoutedSlotInParallel(
          rewriter, loc, adaptor.getTokenPositionToId(),
          adaptor.getBlockToExpert(), op.getBlockSize(), T, E,
          [&](OpBuilder &b, Location l, Value s, Value t, Value e) {
            Value slot = arith::IndexCastOp::create(b, l, i32, s);
            memref::StoreOp::create(b, l, slot, slotOf, ValueRange{e, t});
          });
      int64_t K = op.getTopK();
      Value slotList = filledBuffer(rewriter, loc, MemRefType::get({T, K}, i32),
                                    rewriter.getI32IntegerAttr(-1));
      listSlotsPerToken(rewriter, loc, slotOf, slotList);
      // Loops (t, h), each element summing its top_k listed slots in k
      // order from zero: acc += contributions[list[t, k], h], narrowed to
      // the result's type at the end. The sum stays in a register (an
      // scf.for inside the body, not a reduction dimension whose
      // accumulator is the output in memory): on the GPU a store of the
      // accumulator between the loads made them wait for each other, one
      // at a time, at half the memory bandwidth.
      Type elementType = resultType.getElementType();
      Value init = emptyTensor(rewriter, loc, {T, H}, elementType);
      Value list = bufferAsTensor(rewriter, loc, slotList);
      result = buildGeneric(
          rewriter, loc, ValueRange{}, init, {dimsMap(ctx, 2, {0, 1})},
          parallel(2), [&](OpBuilder &b, Location l, ValueRange) -> Value {
            Value t = linalg::IndexOp::create(b, l, 0);
            Value h = linalg::IndexOp::create(b, l, 1);
            Value sum = forEachIndex(
                b, l, K, zeroOf(b, l, f32),
                [&](OpBuilder &nb, Location nl, Value k, Value acc) {
                  Value slot = tensor::ExtractOp::create(nb, nl, list,
                                                         ValueRange{t, k});
                  Value routed = isToken(nb, nl, slot);
                  Value v = readOfToken(nb, nl, slot, [&](Value s) {
                    return tensor::ExtractOp::create(nb, nl, contributions,
                                                     ValueRange{s, h})
                        .getResult();
                  });
                  return arith::SelectOp::create(
                             nb, nl, routed, accumulate(nb, nl, acc, v), acc)
                      .getResult();
                });
            if (elementType.isF32())
              return sum;
            return arith::TruncFOp::create(b, l, elementType, sum);
          });
      rewriter.replaceOp(op, result);
      return success();
    } else {
      AffineMap id = dimsMap(ctx, 1, {0});
      result = forEachRoutedSlot(
          rewriter, loc, adaptor.getTokenPositionToId(),
          zeroTensor(rewriter, loc, resultType.getShape(), f32),
          [&](OpBuilder &b, Location l, Value s, Value t, Value acc) {
            return updateSlice(b, l, acc, t, [&](Value accRow) {
              Value row = extractSlice(b, l, contributions,
                                       {s, b.getIndexAttr(0)}, {1, H}, {0});
              return buildGeneric(
                  b, l, row, accRow, {id, id}, parallel(1),
                  [&](OpBuilder &nb, Location nl, ValueRange args) {
                    return accumulate(nb, nl, args[1], args[0]);
                  });
            });
          });
    }
    Type elementType = resultType.getElementType();
    if (!elementType.isF32())
      result = mapElementwise(
          rewriter, loc, result, elementType,
          [&](OpBuilder &b, Location l, ValueRange args) -> Value {
            return arith::TruncFOp::create(b, l, elementType, args[0]);
          });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.expert_sum: per block n of expert e, out[e] += column sums of the
/// block's rows, blocks in ascending order.
struct ExpertSumLowering : SlotOpLowering<ExpertSumOp> {
  using SlotOpLowering::SlotOpLowering;
  LogicalResult
  matchAndRewrite(ExpertSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    auto add = [](OpBuilder &b, Location l, ValueRange args) {
      return addF(b, l, args[1], args[0]);
    };
    if (parallelSlotOps) {
      // Loops (e, m, s), s reducing: out[e, m] += rows[s, m] for the slots
      // of expert e, in ascending order as on the host. It reads every
      // slot for every expert (E times the host's reads), which only the
      // bias gradients pay.
      Value blockToExpert = adaptor.getBlockToExpert();
      int64_t B = op.getBlockSize();
      Value result = buildGeneric(
          rewriter, loc, adaptor.getInput(),
          zeroTensor(rewriter, loc, op.getResult().getType().getShape(),
                     rewriter.getF32Type()),
          {dimsMap(ctx, 3, {2, 1}), dimsMap(ctx, 3, {0, 1})},
          withReductions(2, 1),
          [&](OpBuilder &b, Location l, ValueRange args) {
            Value e = linalg::IndexOp::create(b, l, 0);
            Value s = linalg::IndexOp::create(b, l, 2);
            Value mine = arith::CmpIOp::create(
                b, l, arith::CmpIPredicate::eq,
                expertOfSlot(b, l, blockToExpert, s, B), e);
            return arith::SelectOp::create(b, l, mine, add(b, l, args), args[1])
                .getResult();
          });
      rewriter.replaceOp(op, result);
      return success();
    }
    // Loops (b, m): out[m] += rows[b, m], rows in ascending order.
    Value result = accumulatePerExpert(
        rewriter, loc, adaptor.getBlockToExpert(), op.getBlockSize(),
        adaptor.getInput(), op.getResult().getType().getShape(),
        {dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {1})},
        {IteratorType::reduction, IteratorType::parallel}, add);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Lowers the moe phase-level ops of the operation it runs on to linalg,
/// tensor, scf, arith and math (see the file header), and marks function
/// inputs read only for bufferization.
struct ConvertMoeToLinalgPass
    : moe::impl::ConvertMoeToLinalgBase<ConvertMoeToLinalgPass> {
  using ConvertMoeToLinalgBase::ConvertMoeToLinalgBase;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // The ops no pattern lowers, named with what to do instead, before the
    // conversion's generic "failed to legalize".
    WalkResult unsupported = getOperation()->walk([](Operation *op) {
      if (isa<RouteOp>(op)) {
        op->emitError()
            << "convert-moe-to-linalg: moe.route has no lowering; build the "
               "routing on the host (moe::jit::buildRouting, "
               "moe_mlir.build_routing, `moe-ref route`) and pass it to "
               "moe.blockwise_bwd";
        return WalkResult::interrupt();
      }
      if (isa<BlockwiseBwdOp>(op)) {
        op->emitError() << "convert-moe-to-linalg: moe.blockwise_bwd must be "
                           "decomposed first (run moe-decompose-bwd, as the "
                           "pipelines do)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (unsupported.wasInterrupted())
      return signalPassFailure();
    IRRewriter rewriter(ctx);
    SmallVector<FusedOp> fused;
    getOperation()->walk([&](FusedOp op) { fused.push_back(op); });
    for (FusedOp op : fused)
      op.inlineBody(rewriter);

    RewritePatternSet patterns(ctx);
    patterns.add<GatherRowsLowering, SlotAffinitiesLowering,
                 UnpackCheckpointLowering, MXQuantizeLowering,
                 MXDequantizeLowering, BlockMatmulLowering,
                 ExpertMatmulLowering, GatedActBwdLowering,
                 ScaleRowsLowering>(ctx);
    patterns.add<AffinityGradLowering, ScatterAddRowsLowering,
                 ExpertSumLowering>(ctx, parallelSlotOps);
    ConversionTarget target(*ctx);
    // moe.blockwise_bwd and moe.route are not lowered here (rejected
    // above).
    target.addIllegalDialect<MoeDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns)))) {
      signalPassFailure();
      return;
    }

    if (!readOnlyInputs)
      return;
    // The calling convention of the host pipeline: inputs are read only.
    // (Declarations take no such attribute: the bufferization rejects it.)
    getOperation()->walk([&](func::FuncOp func) {
      if (func.isExternal())
        return;
      for (auto [index, type] : llvm::enumerate(func.getArgumentTypes()))
        if (isa<TensorType>(type))
          func.setArgAttr(
              index, bufferization::BufferizationDialect::kWritableAttrName,
              BoolAttr::get(ctx, false));
    });
  }
};

} // namespace
