//===- MXOperandKernel.cpp - GEMM operands as exact bf16 values -----------===//
//
// The kernels of MXOperandKernel.h. Along cols (row r, elements
// 32 j .. 32 j + 31, contiguous), values: a lane quad per block, so that a
// warp's loads and stores are 512 contiguous bytes each. Lane 4 q + l:
//
//   one 16-byte load of elements 8 l .. 8 l + 7 (two for f32)
//   amax, then over the quad by two xor shuffles
//     -> scale byte -> 2^(127 - byte), 2^(byte - 127)   (MXBuilders)
//   per pair: cvt.rn.satfinite.e4m3x2.f32(x * 2^(127-byte))  -> codes
//             cvt.rn.f16x2.e4m3x2 -> f32 * 2^(byte - 127) -> bf16
//   one 16-byte store
//
// (A thread per block, 64 bytes each, left every load instruction of a warp
// spread over 2 KB: 2.9 TB/s on the H200 against 3.9 for the quad form of
// the tiled kernels.) Codes: a thread per block, 2 x 16-byte loads and
// the scale byte, 4 x 16-byte stores.
//
// and along rows, written transposed (the output's rows are the columns),
// or in place for a GEMM that reads the operand M- or N-major:
//
//   values: a block per 32-row group and 256-column tile; warp w reads rows
//           w + 8 i with 16-byte loads into an f32 shared-memory tile, then
//           thread c rounds column c (32 conflict-free shared loads) and
//           stores it as 4 x 16 bytes of output row c, or in place as 32
//           2-byte stores (a warp's 32 columns: 64 contiguous bytes a row;
//           in-place-tiles)
//   codes, columns not a multiple of 8, or in place by default: a thread
//           per column pair, 32 loads of one pair, each column rounded on
//           its own, 2 x 4 16-byte stores transposed or 32 4-byte stores in
//           place
//
// (In place, a thread per column pair holds its 64 values: 110 registers, 2
// CTAs an SM; the slot roundings of x and dy at shape 1 moved 72% of the
// H200's DRAM rate, against 82% for the streaming kernels. The tile takes
// 48 registers.)
//
// Both roundings at once (bothAxes, for a value two GEMMs take along
// different axes): the tile form's loads, and with them each lane rounds its
// 8 values of a row in the 32-column block of its lane quad (the amax over
// the quad by two xor shuffles) and stores them as 16 bytes of the output
// along cols; after the barrier each thread rounds its column of the tile
// and stores it in place (the output along rows, in the source's layout).
//
// Gathered rows (moe.gather_rows folded in) read row ids first and load row
// ids[r] of the source, zeros for padding.
//
// The products x * 2^(127 - byte) and code * 2^(byte - 127) are single IEEE
// fp32 multiplies by powers of two, as in buildEncodeFP8 and
// buildDequantize, and the NVPTX lowering flushes no subnormal, so the
// codes are those of the host lowering and the values exact. A block
// holding NaN or Inf has scale byte 0xFF, whose decoded factor is NaN: all
// its values come out NaN, as dequantizing its NaN codes gives.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/MXOperandKernel.h"

#include "KernelArith.h"
#include "moe/Conversion/MoeToNVGPU/LhsCodeLayout.h"

#include "moe/Conversion/MoeToNVGPU/MXRounding.h"
#include "moe/Dialect/Moe/Utils/MXBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::moe;

bool moe::isMXCodeType(Type sourceType) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(sourceType);
}

namespace {

/// Elements of one MX block.
constexpr int64_t kBlock = 32;
/// Elements of a block that one lane of the quad form holds (16 bytes of
/// bf16).
constexpr int64_t kLaneElements = 8;
/// Columns of the tile of the transposed values form (one per thread).
constexpr int64_t kTileColumns = 256;
/// f32 words per row of that tile in shared memory: a multiple of 4 (16-byte
/// stores) whose remainder mod 32 banks, 4, spreads a thread's 32-row column
/// reads and a row's 16-byte stores over the banks.
constexpr int64_t kTileStride = kTileColumns + 4;

/// Emits the body of one operand kernel.
class OperandEmitter : KernelArith {
public:
  OperandEmitter(OpBuilder &b, Location loc, const MXOperandProblem &p)
      : KernelArith(b, loc), p(p), i8T(b.getI8Type()), i32T(b.getI32Type()),
        i64T(b.getI64Type()), f32T(b.getF32Type()),
        bf16T(b.getBF16Type()),
        gptrT(LLVM::LLVMPointerType::get(b.getContext(), 1)),
        codes(isMXCodeType(p.sourceType)),
        quantized(!codes && p.quant && p.quant.isQuantized()),
        gathered(p.sourceRows > 0) {}

  /// Whether values go through a shared-memory tile: along rows written
  /// transposed (or in place, with inPlaceTiles), values whose rows split
  /// into 16-byte chunks; and both roundings at once.
  bool tiled() const {
    return p.bothAxes || (p.alongRows && !codes && p.cols % 8 == 0 &&
                          (p.transposeOut || p.inPlaceTiles));
  }

  /// Whether lane quads share the blocks along cols (values, not codes).
  bool quads() const { return !p.alongRows && !codes; }

  /// The number of threads with work (tiled: of blocks).
  int64_t workItems() const {
    if (tiled())
      return p.batch * (p.rows / kBlock) * llvm::divideCeil(p.cols, kTileColumns);
    if (quads())
      return p.batch * p.rows * (p.cols / kLaneElements);
    return p.alongRows ? p.batch * (p.rows / kBlock) * (p.cols / 2)
                       : p.batch * p.rows * (p.cols / kBlock);
  }

  /// The f32 tile of the tiled form: 32 rows of kTileStride words.
  static MemRefType tileType(MLIRContext *ctx) {
    return MemRefType::get(
        {kBlock * kTileStride}, Float32Type::get(ctx),
        MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(ctx,
                                   gpu::GPUDialect::getWorkgroupAddressSpace()));
  }

  void emit(gpu::GPUFuncOp func, int64_t threads);

private:
  /// `base` + `bytes` as a global pointer.
  Value byteAddress(Value base, Value bytes) {
    return LLVM::GEPOp::create(b, loc, gptrT, i8T, base, ValueRange{bytes});
  }
  Value load(Type type, Value base, Value bytes, unsigned alignment) {
    return LLVM::LoadOp::create(b, loc, type, byteAddress(base, bytes),
                                alignment, /*isVolatile=*/false,
                                /*isNonTemporal=*/false,
                                /*isInvariant=*/true);
  }
  void store(Value value, Value base, Value bytes, unsigned alignment) {
    LLVM::StoreOp::create(b, loc, value, byteAddress(base, bytes), alignment);
  }
  Value element(Value vector, int64_t i) {
    return LLVM::ExtractElementOp::create(
        b, loc, vector, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(i)));
  }

  /// The source row of output row `row` (i64): itself, or for gathered rows
  /// its id (0 for padding) and whether it is a real row.
  std::pair<Value, Value> sourceRow(Value row);
  /// `count` contiguous source elements at byte offset `bytes`, as f32
  /// values or as i8 codes; zeros unless `valid` (when given).
  void loadContiguous(Value bytes, int64_t count, Value valid,
                      SmallVectorImpl<Value> &out);
  /// One element pair at byte offset `bytes`; zeros unless `valid`.
  std::pair<Value, Value> loadPair(Value bytes, Value valid);
  /// `x`, or zero where `valid` is false.
  Value zeroUnless(Value valid, Value x) {
    if (!valid)
      return x;
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(x.getType()));
    return arith::SelectOp::create(b, loc, valid, x, zero);
  }

  /// The bf16 values of one block: `xs` holds 32 f32 values (or i8 codes
  /// with their scale byte `codeScale`).
  SmallVector<Value> roundBlock(ArrayRef<Value> xs, Value codeScale);
  /// The bf16 values of `xs` (f32 values or i8 codes, an even count) of a
  /// block with scale byte `scaleByte`.
  SmallVector<Value> roundWithScale(ArrayRef<Value> xs, Value scaleByte);
  /// The 8 values `xs` that this lane loaded of a row, rounded in the
  /// 32-column block of the lane and its three neighbours (the amax over
  /// the four lanes by two xor shuffles, so every lane of the warp takes
  /// part), stored at element `at` of `dest` where `inside` holds (always
  /// when null). Unquantized values are only narrowed to bf16.
  void storeRowRounded(ArrayRef<Value> xs, Value dest, Value at,
                       Value inside = Value());
  /// The A-fragment order (LhsCodeLayout.h) of the 8 codes `codes` of
  /// columns c .. c + 7 (c = `at` % cols, a multiple of 8) of a row, which
  /// this lane holds while the neighbouring lane (lane ^ 1) holds the other
  /// 8 columns of their 16-column k16 step: one xor shuffle gives each
  /// lane two of the four 4-byte words of the step's columns, `words`,
  /// and their byte offsets in the output, `offsets`. Every lane of the
  /// warp takes part.
  void fragmentOrderWords(Value codes, Value at, Value words[2],
                          Value offsets[2]);
  /// Stores 32 bf16 values contiguously at byte offset `bytes` of out.
  void storeBlock(ArrayRef<Value> values, Value bytes);
  /// The tiled form: the block's 32 x 256 tile is read by rows (16-byte
  /// loads) into shared memory, then each thread rounds one column and
  /// writes it as a row of the output (transposed) or in place.
  void emitTiled(gpu::GPUFuncOp func, int64_t threads);

  const MXOperandProblem &p;
  Type i8T, i32T, i64T, f32T, bf16T, gptrT;
  bool codes, quantized, gathered;
  Value source, scales, ids, out, outRows, outScales;
};

} // namespace

std::pair<Value, Value> OperandEmitter::sourceRow(Value row) {
  if (!gathered)
    return {row, Value()};
  Value id = arith::ExtSIOp::create(
      b, loc, i64T,
      load(i32T, ids, mul(row, 4), 4));
  // Unsigned: negative ids (padding) are out of range too.
  Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, id,
                                      i64(p.sourceRows));
  return {arith::SelectOp::create(b, loc, valid, id, i64(0)), valid};
}

void OperandEmitter::loadContiguous(Value bytes, int64_t count, Value valid,
                                    SmallVectorImpl<Value> &out) {
  Type type = p.sourceType;
  int64_t width = codes ? 1 : type.getIntOrFloatBitWidth() / 8;
  int64_t perLoad = 16 / width;
  auto vecT = VectorType::get({perLoad}, codes ? i8T : type);
  for (int64_t i = 0; i < count; i += perLoad) {
    Value v = load(vecT, source, add(bytes, i * width), 16);
    for (int64_t j = 0; j < perLoad; ++j) {
      Value x = element(v, j);
      if (!codes && type != f32T)
        x = arith::ExtFOp::create(b, loc, f32T, x);
      out.push_back(zeroUnless(valid, x));
    }
  }
}

std::pair<Value, Value> OperandEmitter::loadPair(Value bytes, Value valid) {
  int64_t width = codes ? 1 : p.sourceType.getIntOrFloatBitWidth() / 8;
  auto vecT = VectorType::get({2}, codes ? i8T : p.sourceType);
  Value v = load(vecT, source, bytes, 2 * width);
  Value x0 = element(v, 0), x1 = element(v, 1);
  if (!codes && p.sourceType != f32T) {
    x0 = arith::ExtFOp::create(b, loc, f32T, x0);
    x1 = arith::ExtFOp::create(b, loc, f32T, x1);
  }
  return {zeroUnless(valid, x0), zeroUnless(valid, x1)};
}

SmallVector<Value> OperandEmitter::roundBlock(ArrayRef<Value> xs,
                                              Value codeScale) {
  SmallVector<Value> values;
  if (!codes && !quantized) {
    for (Value x : xs)
      values.push_back(arith::TruncFOp::create(b, loc, bf16T, x));
    return values;
  }
  Value scaleByte = codeScale;
  if (!codes) {
    Value amax = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    for (Value x : xs)
      amax = buildAmaxStep(b, loc, amax, x);
    scaleByte = buildScaleByte(b, loc, amax, p.quant.getElement(),
                               p.quant.getRule());
  }
  return roundWithScale(xs, scaleByte);
}

SmallVector<Value> OperandEmitter::roundWithScale(ArrayRef<Value> xs,
                                                  Value scaleByte) {
  SmallVector<Value> values;
  MLIRContext *ctx = b.getContext();
  Type codeType = codes ? p.sourceType
                        : getMXElementType(ctx, p.quant.getElement());
  Value inverse;
  if (!codes)
    inverse = buildInverseScale(b, loc, scaleByte);
  // NaN for 0xFF: every value of a NaN/Inf block comes out NaN.
  Value factor = buildDecodeE8M0(b, loc, scaleByte);
  for (size_t i = 0; i < xs.size(); i += 2) {
    std::pair<Value, Value> pair;
    if (codes) {
      Value v = LLVM::UndefOp::create(b, loc, VectorType::get({2}, i8T));
      for (int64_t j = 0; j < 2; ++j)
        v = LLVM::InsertElementOp::create(
            b, loc, v, xs[i + j],
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
      pair = buildDecodePairToBf16(b, loc, v, factor, factor, codeType);
    } else {
      pair = buildRoundPairToBf16(b, loc, xs[i], xs[i + 1], inverse, inverse,
                                  factor, factor, codeType);
    }
    values.push_back(pair.first);
    values.push_back(pair.second);
  }
  return values;
}

void OperandEmitter::storeRowRounded(ArrayRef<Value> xs, Value dest,
                                     Value at, Value inside) {
  SmallVector<Value> values;
  Value scaleByte;
  if (!quantized) {
    for (Value x : xs)
      values.push_back(arith::TruncFOp::create(b, loc, bf16T, x));
  } else {
    Value amax = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    for (Value x : xs)
      amax = buildAmaxStep(b, loc, amax, x);
    // Lanes 4q .. 4q + 3 hold the block's 32 columns; all 32 lanes are
    // active here (callers branch around the store only).
    amax = buildLaneAmax(b, loc, amax, {1, 2});
    scaleByte = buildScaleByte(b, loc, amax, p.quant.getElement(),
                               p.quant.getRule());
    if (!p.codesOut)
      values = roundWithScale(xs, scaleByte);
  }
  // Codes: the lane's 8 codes, computed (and, in A-fragment order,
  // exchanged with the neighbouring lane) by every lane.
  Value codesV, fragmentWords[2], fragmentAt[2];
  if (p.codesOut) {
    Type codeType = getMXElementType(b.getContext(), p.quant.getElement());
    Value inverse = buildInverseScale(b, loc, scaleByte);
    auto codesT = VectorType::get({8}, i8T);
    codesV = LLVM::UndefOp::create(b, loc, codesT);
    for (int64_t j = 0; j < 8; j += 2) {
      Value pair =
          buildEncodePair(b, loc, xs[j], xs[j + 1], inverse, inverse, codeType);
      for (int64_t k = 0; k < 2; ++k)
        codesV = LLVM::InsertElementOp::create(
            b, loc, codesV, element(pair, k),
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j + k)));
    }
    if (p.fragmentOrder)
      fragmentOrderWords(codesV, at, fragmentWords, fragmentAt);
  }
  OpBuilder::InsertionGuard guard(b);
  if (inside) {
    auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
  }
  if (p.codesOut) {
    // The lane's 8 codes as one 8-byte store (A-fragment order: two 4-byte
    // words); the first lane of the quad stores the block's scale byte.
    if (p.fragmentOrder) {
      for (int64_t w = 0; w < 2; ++w)
        store(fragmentWords[w], dest, fragmentAt[w], 4);
    } else {
      store(codesV, dest, at, 8);
    }
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        remu(at, kBlock), i64(0));
    auto ifOp = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    // Byte j % 2 of row R in K tile j / 2 (codesOut's layout).
    int64_t blocksPerTile = kCodesScaleTileK / kBlock;
    Value row = divu(at, p.cols);
    Value block = divu(remu(at, p.cols), kBlock);
    Value offset =
        add(mul(add(mul(divu(block, blocksPerTile), p.batch * p.rows), row),
                blocksPerTile),
            remu(block, blocksPerTile));
    store(scaleByte, outScales, offset, 1);
    // A last half K tile: its missing block's byte is a plain 127 (factor
    // 1 for the zero codes the GEMM's TMA fills in).
    int64_t blocks = p.cols / kBlock;
    if (blocks % blocksPerTile) {
      Value last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         block, i64(blocks - 1));
      auto pad = scf::IfOp::create(b, loc, last, /*withElseRegion=*/false);
      b.setInsertionPointToStart(pad.thenBlock());
      store(arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(127)),
            outScales, add(offset, 1), 1);
    }
    return;
  }
  auto vecT = VectorType::get({8}, bf16T);
  Value v = LLVM::UndefOp::create(b, loc, vecT);
  for (int64_t j = 0; j < 8; ++j)
    v = LLVM::InsertElementOp::create(
        b, loc, v, values[j],
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
  store(v, dest, mul(at, 2), 16);
}

void OperandEmitter::fragmentOrderWords(Value codes, Value at,
                                        Value words[2], Value offsets[2]) {
  // Columns 16 j + h of the row's K tile: this lane holds h = 0..7 (even
  // lane of the pair) or h = 8..15 (odd). Word q of step j is the codes of
  // columns 16 j + 2 q, 2 q + 1 (even lane's pair q) and 16 j + 2 q + 8,
  // 2 q + 9 (odd lane's pair q), at byte 16 q + 4 j of the tile. The even
  // lane writes words 0, 1, the odd one 2, 3: each sends the half of its
  // codes the other needs.
  auto i32c = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  auto halves = LLVM::BitcastOp::create(b, loc, VectorType::get({2}, i32T),
                                        codes)
                    .getResult();
  Value lo = element(halves, 0), hi = element(halves, 1);
  Value c = remu(at, p.cols);
  Value odd = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                    remu(c, 16), i64(0));
  Value send = arith::SelectOp::create(b, loc, odd, lo, hi);
  Value recv = gpu::ShuffleOp::create(b, loc, send, i32c(1), i32c(32),
                                      gpu::ShuffleMode::XOR)
                   .getShuffleResult();
  // Even: its own pairs (lo) with the odd lane's (recv); odd: the even
  // lane's (recv) with its own (hi).
  Value first = arith::SelectOp::create(b, loc, odd, recv, lo);
  Value second = arith::SelectOp::create(b, loc, odd, hi, recv);
  auto andI = [&](Value x, int64_t m) {
    return arith::AndIOp::create(b, loc, x, i32c(m)).getResult();
  };
  words[0] = arith::OrIOp::create(
      b, loc, andI(first, 0xFFFF),
      arith::ShLIOp::create(b, loc, second, i32c(16)));
  words[1] = arith::OrIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, first, i32c(16)),
      andI(second, static_cast<int64_t>(0xFFFF0000)));
  // Word q of step j starts at the byte of column 16 j + 2 q.
  KernelArith &ops = *this;
  Value inTile = remu(c, kLhsCodeTileK);
  Value tileBase = arith::SubIOp::create(b, loc, at, inTile);
  Value stepColumn = mul(divu(inTile, 16), 16);
  Value q0 = arith::SelectOp::create(b, loc, odd, i64(2), i64(0));
  for (int64_t w = 0; w < 2; ++w)
    offsets[w] = add(tileBase, lhsCodeByte(ops, add(stepColumn,
                                                     mul(add(q0, w), 2))));
}

void OperandEmitter::storeBlock(ArrayRef<Value> values, Value bytes) {
  auto vecT = VectorType::get({8}, bf16T);
  for (int64_t i = 0; i < kBlock; i += 8) {
    Value v = LLVM::UndefOp::create(b, loc, vecT);
    for (int64_t j = 0; j < 8; ++j)
      v = LLVM::InsertElementOp::create(
          b, loc, v, values[i + j],
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
    store(v, out, add(bytes, 2 * i), 16);
  }
}

void OperandEmitter::emitTiled(gpu::GPUFuncOp func, int64_t threads) {
  assert(threads == kTileColumns && "one thread per tile column");
  auto toI64 = [&](Value index) {
    return arith::IndexCastOp::create(b, loc, i64T, index);
  };
  // Block -> (batch t, row group g, column tile ct), column tiles fastest.
  int64_t tiles = llvm::divideCeil(p.cols, kTileColumns), groups = p.rows / kBlock;
  Value block = toI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  Value tid = toI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value c0 = mul(remu(block, tiles), kTileColumns);
  Value rest = divu(block, tiles);
  Value g = remu(rest, groups);
  Value t = divu(rest, groups);
  Value row0 = add(mul(t, p.rows), mul(g, kBlock));
  Value tile = arith::IndexCastOp::create(
      b, loc, i64T,
      memref::ExtractAlignedPointerAsIndexOp::create(
          b, loc, func.getWorkgroupAttributions().front()));
  auto smemPtrT = LLVM::LLVMPointerType::get(b.getContext(), 3);
  auto smem = [&](Value word) {
    return LLVM::IntToPtrOp::create(b, loc, smemPtrT, add(tile, mul(word, 4)));
  };
  bool partial = p.cols % kTileColumns != 0;
  auto lt = [&](Value x, int64_t y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, i64(y));
  };

  // Rows: warp w reads rows w, w + 8, w + 16, w + 24; lane l the 8 columns
  // 8 l .. 8 l + 7 (one or two 16-byte loads), stored as two 16-byte
  // vectors of f32.
  int64_t width = p.sourceType.getIntOrFloatBitWidth() / 8;
  Value warp = divu(tid, 32), lane = remu(tid, 32);
  Value col = add(c0, mul(lane, 8));
  int64_t warps = kTileColumns / 32;
  for (int64_t i = 0; i < kBlock / warps; ++i) {
    Value r = add(warp, warps * i);
    OpBuilder::InsertionGuard guard(b);
    if (partial) {
      auto ifOp = scf::IfOp::create(b, loc, lt(col, p.cols),
                                    /*withElseRegion=*/false);
      b.setInsertionPointToStart(ifOp.thenBlock());
    }
    auto [row, valid] = sourceRow(add(row0, r));
    SmallVector<Value> xs;
    loadContiguous(mul(add(mul(row, p.cols), col), width), 8, valid, xs);
    if (p.bothAxes)
      storeRowRounded(xs, out, add(mul(add(row0, r), p.cols), col));
    auto vecT = VectorType::get({4}, f32T);
    for (int64_t h = 0; h < 2; ++h) {
      Value v = LLVM::UndefOp::create(b, loc, vecT);
      for (int64_t k = 0; k < 4; ++k)
        v = LLVM::InsertElementOp::create(
            b, loc, v, xs[4 * h + k],
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(k)));
      Value word = add(add(mul(r, kTileStride), mul(lane, 8)), 4 * h);
      LLVM::StoreOp::create(b, loc, v, smem(word), 16);
    }
  }
  gpu::BarrierOp::create(b, loc);

  // Column c0 + tid: its 32 rows from the tile, one output row.
  OpBuilder::InsertionGuard guard(b);
  Value c = add(c0, tid);
  if (partial) {
    auto ifOp = scf::IfOp::create(b, loc, lt(c, p.cols),
                                  /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
  }
  SmallVector<Value> column;
  for (int64_t j = 0; j < kBlock; ++j)
    column.push_back(LLVM::LoadOp::create(
        b, loc, f32T, smem(add(mul(i64(j), kTileStride), tid)), 4));
  SmallVector<Value> rounded = roundBlock(column, Value());
  if (p.bothAxes || !p.transposeOut) {
    // In place: row 32 g + j of column c; a warp's 32 neighbouring columns
    // make one 64-byte store per row.
    Value dest = p.bothAxes ? outRows : out;
    for (int64_t j = 0; j < kBlock; ++j) {
      Value at = add(mul(add(row0, j), p.cols), c);
      store(rounded[j], dest, mul(at, 2), 2);
    }
    return;
  }
  Value at = add(mul(add(mul(t, p.cols), c), p.rows), mul(g, kBlock));
  storeBlock(rounded, mul(at, 2));
}

void OperandEmitter::emit(gpu::GPUFuncOp func, int64_t threads) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  source = entry.getArgument(0);
  scales = codes ? entry.getArgument(1) : Value();
  ids = gathered ? entry.getArgument(1) : Value();
  out = entry.getArgument(codes || gathered ? 2 : 1);
  if (p.bothAxes)
    outRows = entry.getArgument(gathered ? 3 : 2);
  if (p.codesOut)
    outScales = entry.getArgument((gathered ? 3 : 2) + p.bothAxes);
  if (tiled()) {
    emitTiled(func, threads);
    gpu::ReturnOp::create(b, loc);
    return;
  }

  auto toI64 = [&](Value index) {
    return arith::IndexCastOp::create(b, loc, i64T, index);
  };
  Value item = add(mul(toI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)),
                       threads),
                   toI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x)));
  Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, item,
                                       i64(workItems()));
  int64_t width = codes ? 1 : p.sourceType.getIntOrFloatBitWidth() / 8;

  if (quads()) {
    // Lane item holds elements 8 item .. 8 item + 7 of the source and of
    // the output alike (of the gathered row, for gathered rows). Lanes past
    // the end take the last lane's values and store nothing: the whole
    // warp shuffles.
    Value first = mul(arith::MinUIOp::create(b, loc, item,
                                             i64(workItems() - 1)),
                      kLaneElements);
    Value at = first;
    Value valid;
    if (gathered) {
      auto [row, isRow] = sourceRow(divu(first, p.cols));
      at = add(mul(row, p.cols), remu(first, p.cols));
      valid = isRow;
    }
    SmallVector<Value> xs;
    loadContiguous(mul(at, width), kLaneElements, valid, xs);
    storeRowRounded(xs, out, first,
                    workItems() % threads ? inside : Value());
    gpu::ReturnOp::create(b, loc);
    return;
  }
  auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
  b.setInsertionPointToStart(ifOp.thenBlock());

  if (!p.alongRows) {
    // Codes: block `item` holds elements 32 item .. 32 item + 31 of the
    // source and of the output alike; its scale byte is scales[item].
    Value first = mul(item, kBlock);
    SmallVector<Value> xs;
    loadContiguous(first, kBlock, Value(), xs);
    Value codeScale = load(i8T, scales, item, 1);
    storeBlock(roundBlock(xs, codeScale), mul(first, 2));
  } else {
    // Columns c, c + 1 of rows 32 g .. 32 g + 31 of batch t; neighbouring
    // threads take neighbouring column pairs.
    int64_t pairs = p.cols / 2, groups = p.rows / kBlock;
    Value c = mul(remu(item, pairs), 2);
    Value rest = divu(item, pairs);
    Value g = remu(rest, groups);
    Value t = divu(rest, groups);
    Value row0 = add(mul(t, p.rows), mul(g, kBlock));
    SmallVector<Value> columns[2];
    for (int64_t j = 0; j < kBlock; ++j) {
      auto [row, valid] = sourceRow(add(row0, j));
      Value at = add(mul(row, p.cols), c);
      auto [x0, x1] = loadPair(mul(at, width), valid);
      columns[0].push_back(x0);
      columns[1].push_back(x1);
    }
    Value codeScales[2];
    if (codes) {
      // scales [batch, rows / 32, cols]: bytes (t, g, c) and (t, g, c + 1).
      Value at = add(mul(add(mul(t, groups), g), p.cols), c);
      Value v = load(VectorType::get({2}, i8T), scales, at, 2);
      codeScales[0] = element(v, 0);
      codeScales[1] = element(v, 1);
    }
    SmallVector<Value> rounded[2];
    for (int64_t q = 0; q < 2; ++q)
      rounded[q] = roundBlock(columns[q], codeScales[q]);
    if (p.transposeOut) {
      for (int64_t q = 0; q < 2; ++q) {
        // Output row t * cols + c + q, elements 32 g .. 32 g + 31.
        Value at = add(mul(add(mul(t, p.cols), add(c, q)), p.rows),
                       mul(g, kBlock));
        storeBlock(rounded[q], mul(at, 2));
      }
    } else {
      // In place: the pair of row 32 g + j as one 4-byte store, so that a
      // warp writes 128 contiguous bytes of each row.
      auto pairT = VectorType::get({2}, bf16T);
      for (int64_t j = 0; j < kBlock; ++j) {
        Value v = LLVM::UndefOp::create(b, loc, pairT);
        for (int64_t q = 0; q < 2; ++q)
          v = LLVM::InsertElementOp::create(
              b, loc, v, rounded[q][j],
              arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(q)));
        Value at = add(mul(add(row0, j), p.cols), c);
        store(v, out, mul(at, 2), 4);
      }
    }
  }
  b.setInsertionPointAfter(ifOp);
  gpu::ReturnOp::create(b, loc);
}

std::array<int64_t, 2>
moe::codesOutScaleShape(const MXOperandProblem &problem) {
  int64_t tiles = (problem.cols + kCodesScaleTileK - 1) / kCodesScaleTileK;
  return {tiles * problem.batch * problem.rows / 8, 16};
}

bool moe::canRoundBothAxes(const MXOperandProblem &problem) {
  return !isMXCodeType(problem.sourceType) && problem.quant &&
         problem.quant.isQuantized() && problem.cols % kTileColumns == 0 &&
         problem.rows % kBlock == 0;
}

LogicalResult
moe::checkMXOperandKernel(const MXOperandProblem &problem,
                          function_ref<InFlightDiagnostic()> emitError) {
  Type type = problem.sourceType;
  if (!isMXCodeType(type) && !type.isBF16() && !type.isF32())
    return emitError() << "GEMM operand of element type " << type
                       << " is not supported on the GPU (bf16, f32 or FP8 "
                          "codes with scales)";
  int64_t along = problem.alongRows ? problem.rows : problem.cols;
  auto shape = [&](InFlightDiagnostic diag) {
    return std::move(diag) << "GEMM operand [" << problem.batch << ", "
                           << problem.rows << ", " << problem.cols << "] ";
  };
  // Whole 32-element blocks along the contraction axis (the unquantized
  // forms too: they share the thread mapping), and column pairs for the
  // transposed form, keep every access in bounds and aligned.
  if (along % kBlock)
    return shape(emitError())
           << "needs a multiple of 32 along its contraction axis";
  if (problem.alongRows && problem.cols % 2)
    return shape(emitError())
           << "needs an even number of columns to be written transposed";
  if (problem.codesOut &&
      (isMXCodeType(type) || !problem.quant || !problem.quant.isQuantized() ||
       (problem.alongRows && !problem.bothAxes) ||
       (problem.batch * problem.rows) % 8))
    return shape(emitError())
           << "can be written as FP8 codes only when its values are "
              "MX-quantized along its columns and its rows are a multiple "
              "of 8";
  if (problem.fragmentOrder &&
      (!problem.codesOut || problem.cols % kLhsCodeTileK))
    return shape(emitError())
           << "can be written in A-fragment order only as FP8 codes with "
              "columns a multiple of "
           << kLhsCodeTileK;
  if (problem.bothAxes && !canRoundBothAxes(problem))
    return shape(emitError())
           << "cannot be rounded along both axes at once (quantized values, "
              "columns a multiple of 256 and rows of 32)";
  return success();
}

MXOperandLaunch moe::buildMXOperandKernel(OpBuilder &builder, Location loc,
                                          gpu::GPUModuleOp module,
                                          StringRef name,
                                          const MXOperandProblem &problem,
                                          const TargetInfo &target) {
  assert((problem.sourceRows == 0 ||
          (problem.batch == 1 && !isMXCodeType(problem.sourceType))) &&
         "gathered rows are values of one matrix");
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  Type gptr = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> args = {gptr, gptr};
  if (isMXCodeType(problem.sourceType) || problem.sourceRows > 0)
    args.push_back(gptr);
  if (problem.bothAxes)
    args.push_back(gptr);
  if (problem.codesOut)
    args.push_back(gptr);
  OperandEmitter emitter(builder, loc, problem);
  SmallVector<Type> workgroup;
  if (emitter.tiled())
    workgroup.push_back(OperandEmitter::tileType(ctx));
  auto func = gpu::GPUFuncOp::create(builder, loc, name,
                                     FunctionType::get(ctx, args, {}),
                                     workgroup);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  // The tile takes 16-byte stores.
  if (emitter.tiled())
    func.setWorkgroupAttributionAttr(0, LLVM::LLVMDialect::getAlignAttrName(),
                                     builder.getI64IntegerAttr(16));
  int64_t threads = target.getOperandKernelThreads();
  func->setAttr("nvvm.maxntid",
                builder.getDenseI32ArrayAttr(
                    {static_cast<int32_t>(threads), 1, 1}));
  emitter.emit(func, threads);
  int64_t blocks = emitter.tiled()
                       ? emitter.workItems()
                       : (emitter.workItems() + threads - 1) / threads;
  return MXOperandLaunch{func, {blocks, 1, 1}, {threads, 1, 1}};
}
