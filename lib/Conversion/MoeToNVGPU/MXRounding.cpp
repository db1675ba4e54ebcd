//===- MXRounding.cpp - MX rounding to exact bf16 with NVVM conversions ---===//
#include "moe/Conversion/MoeToNVGPU/MXRounding.h"

#include "moe/Dialect/Moe/Utils/MXBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::moe;

static Value i32Constant(OpBuilder &b, Location loc, int32_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

std::pair<Value, Value> moe::buildDecodePairToBf16(OpBuilder &b, Location loc,
                                                   Value codes, Value factor0,
                                                   Value factor1,
                                                   Type codeType) {
  Type f32T = b.getF32Type(), bf16T = b.getBF16Type();
  auto pairF16T = VectorType::get({2}, b.getF16Type());
  Value halves = NVVM::ConvertF8x2ToF16x2Op::create(
      b, loc, pairF16T, codes, b.getBoolAttr(false), TypeAttr::get(codeType));
  Value factors[2] = {factor0, factor1};
  Value out[2];
  for (int32_t j = 0; j < 2; ++j) {
    Value half =
        LLVM::ExtractElementOp::create(b, loc, halves, i32Constant(b, loc, j));
    Value v = arith::ExtFOp::create(b, loc, f32T, half);
    v = arith::MulFOp::create(b, loc, v, factors[j]);
    out[j] = arith::TruncFOp::create(b, loc, bf16T, v);
  }
  return {out[0], out[1]};
}

Value moe::buildEncodePair(OpBuilder &b, Location loc, Value x0, Value x1,
                           Value inverse0, Value inverse1, Type codeType) {
  auto pairI8T = VectorType::get({2}, b.getI8Type());
  Value y0 = arith::MulFOp::create(b, loc, x0, inverse0);
  Value y1 = arith::MulFOp::create(b, loc, x1, inverse1);
  // The first operand lands in the upper byte, element 1.
  return NVVM::ConvertF32x2ToF8x2Op::create(
      b, loc, pairI8T, y1, y0, NVVM::FPRoundingMode::RN,
      NVVM::SaturationMode::SATFINITE, /*relu=*/false, codeType);
}

std::pair<Value, Value>
moe::buildRoundPairToBf16(OpBuilder &b, Location loc, Value x0, Value x1,
                          Value inverse0, Value inverse1, Value factor0,
                          Value factor1, Type codeType) {
  Value codes = buildEncodePair(b, loc, x0, x1, inverse0, inverse1, codeType);
  return buildDecodePairToBf16(b, loc, codes, factor0, factor1, codeType);
}

std::pair<Value, Value> moe::buildBlockScale(OpBuilder &b, Location loc,
                                             Value amax, MXQuantAttr quant) {
  Value scaleByte =
      buildScaleByte(b, loc, amax, quant.getElement(), quant.getRule());
  return {buildInverseScale(b, loc, scaleByte),
          buildDecodeE8M0(b, loc, scaleByte)};
}

/// The i32 result of the side-effect-free PTX `text` over the i32
/// `operands` ($1, $2, ...).
static Value wordPtx(OpBuilder &b, Location loc, ValueRange operands,
                     StringRef text) {
  auto dialect =
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT);
  std::string constraints = "=r";
  for (size_t i = 0; i < operands.size(); ++i)
    constraints += ",r";
  return LLVM::InlineAsmOp::create(
             b, loc, TypeRange(b.getI32Type()), operands, text, constraints,
             /*has_side_effects=*/false, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None, dialect,
             /*operand_attrs=*/ArrayAttr())
      .getResult(0);
}

Value moe::buildMaxU16x2(OpBuilder &b, Location loc, Value x, Value y) {
  return wordPtx(b, loc, {x, y}, "max.u16x2 $0, $1, $2;");
}

Value moe::buildMinU16x2(OpBuilder &b, Location loc, Value x, Value y) {
  return wordPtx(b, loc, {x, y}, "min.u16x2 $0, $1, $2;");
}

Value moe::buildPackedAmax(OpBuilder &b, Location loc, int64_t count,
                           function_ref<Value(int64_t)> word) {
  auto max16x2 = [&](Value x, Value y) { return buildMaxU16x2(b, loc, x, y); };
  SmallVector<Value> maxima;
  for (int64_t j = 0; j < count; ++j) {
    Value magnitude =
        arith::AndIOp::create(b, loc, word(j), i32Constant(b, loc, 0x7FFF7FFF));
    if (j < 4)
      maxima.push_back(magnitude);
    else
      maxima[j % 4] = max16x2(maxima[j % 4], magnitude);
  }
  if (maxima.empty())
    return i32Constant(b, loc, 0); // no words: the amax of nothing
  // A tree, in place: pairs in order, an odd one carried up.
  for (size_t width = maxima.size(); width > 1; width = (width + 1) / 2) {
    for (size_t j = 0; j + 1 < width; j += 2)
      maxima[j / 2] = max16x2(maxima[j], maxima[j + 1]);
    if (width % 2)
      maxima[width / 2] = maxima[width - 1];
  }
  return maxima.front();
}

std::pair<Value, Value> moe::buildPairAmax(OpBuilder &b, Location loc,
                                           int64_t count,
                                           function_ref<Value(int64_t)> word) {
  return widenPackedAmax(b, loc, buildPackedAmax(b, loc, count, word));
}

std::pair<Value, Value> moe::widenPackedAmax(OpBuilder &b, Location loc,
                                             Value packed) {
  Type f32T = b.getF32Type();
  // Each lane's bits in the top half of an f32: the exact widening.
  Value low = arith::ShLIOp::create(b, loc, packed, i32Constant(b, loc, 16));
  Value high =
      arith::AndIOp::create(b, loc, packed, i32Constant(b, loc, -65536));
  return {arith::BitcastOp::create(b, loc, f32T, low),
          arith::BitcastOp::create(b, loc, f32T, high)};
}

Value moe::buildLaneAmax(OpBuilder &b, Location loc, Value amax,
                         ArrayRef<int32_t> xorOffsets) {
  Value width = i32Constant(b, loc, 32);
  for (int32_t offset : xorOffsets) {
    Value other =
        gpu::ShuffleOp::create(b, loc, amax, i32Constant(b, loc, offset), width,
                               gpu::ShuffleMode::XOR)
            .getShuffleResult();
    amax = buildAmaxStep(b, loc, amax, other);
  }
  return amax;
}

namespace {
/// The i32 word operations of the bit rounding's templates (MXRounding.h)
/// as IR.
struct IRWordOps {
  OpBuilder &b;
  Location loc;
  Value c(uint32_t v) { return i32Constant(b, loc, static_cast<int32_t>(v)); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value band(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value bor(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  // lop3 (0xEA: a & b | c): ptxas keeps two immediates' and-or as two
  // LOP3s, one LOP3 with the second constant in a register here.
  Value andOr(Value x, Value y, Value z) {
    return wordPtx(b, loc, {x, y, z}, "lop3.b32 $0, $1, $2, $3, 0xEA;");
  }
  Value max16x2(Value x, Value y) { return buildMaxU16x2(b, loc, x, y); }
  Value fmaBf16x2(Value x, Value y, Value z) {
    return wordPtx(b, loc, {x, y, z}, "fma.rn.bf16x2 $0, $1, $2, $3;");
  }
  Value absMax(Value x, Value y) {
    return wordPtx(b, loc, {x, y}, "max.xorsign.abs.bf16x2 $0, $1, $2;");
  }
  Value absMaxNaN(Value x, Value y) {
    return wordPtx(b, loc, {x, y}, "max.NaN.xorsign.abs.bf16x2 $0, $1, $2;");
  }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value min16x2(Value x, Value y) { return buildMinU16x2(b, loc, x, y); }
  Value swapLanes(Value x) {
    return wordPtx(b, loc, {x, x}, "prmt.b32 $0, $1, $2, 0x1032;");
  }
  Value low16(Value x) {
    Value mask = c(0xFFFF);
    return band(x, mask);
  }
  Value isNonzero(Value x) {
    Value zero = c(0);
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, x, zero);
  }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value orB(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
};
} // namespace

Value moe::buildMXThresholdPair(OpBuilder &b, Location loc, Value amaxPair,
                                MXElement element) {
  IRWordOps o{b, loc};
  return mxThresholdPair(o, amaxPair, getMXBitRounding(element));
}

Value moe::buildMXRoundPairBits(OpBuilder &b, Location loc, Value word,
                                Value bound, MXElement element) {
  IRWordOps o{b, loc};
  return mxRoundPairBits(o, word, bound, getMXBitRounding(element));
}

Value moe::buildMXPairAmaxBits(OpBuilder &b, Location loc,
                               ArrayRef<Value> words) {
  IRWordOps o{b, loc};
  return mxPairAmaxBits(o, words);
}

Value moe::buildMXBitsMisfit(OpBuilder &b, Location loc,
                             ArrayRef<Value> amaxPairs, MXElement element) {
  IRWordOps o{b, loc};
  return mxBitsMisfit(o, amaxPairs, getMXBitRounding(element));
}

Value moe::buildWarpMXBitsMisfit(OpBuilder &b, Location loc,
                                 ArrayRef<Value> amaxPairs, MXElement element) {
  Value misfit = buildMXBitsMisfit(b, loc, amaxPairs, element);
  Value lanes = i32Constant(b, loc, -1);
  return NVVM::VoteSyncOp::create(b, loc, b.getI1Type(), lanes, misfit,
                                  NVVM::VoteSyncKind::any);
}
