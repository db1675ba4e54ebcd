//===- MXRounding.h - MX rounding to exact bf16 with NVVM conversions -----===//
//
// The pieces every sm_90a kernel that rounds values to their MX values
// shares (the operand kernels, P1's epilogue): the hardware pair
// conversions around the scale factors of MXBuilders.h, and a block's amax
// across the lanes that hold it. The scale byte, its inverse and its
// factor come from MXBuilders (buildScaleByte, buildInverseScale,
// buildDecodeE8M0), the definition the host lowering uses; x * inverse and
// code * factor are single IEEE fp32 multiplies by powers of two, as in
// buildEncodeFP8 and buildDequantize, so the values are the host's.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_MXROUNDING_H
#define MOE_CONVERSION_MOETONVGPU_MXROUNDING_H

#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/ArrayRef.h"

#include <utility>

namespace mlir::moe {

/// The bf16 values of the FP8 code pair `codes` (vector<2xi8> of
/// `codeType`, element 0 first) times `factor0` and `factor1` (f32):
/// cvt.rn.f16x2 of the pair (exact), widened, multiplied, narrowed to bf16
/// (exact for every product a quantizer gives).
std::pair<Value, Value> buildDecodePairToBf16(OpBuilder &b, Location loc,
                                              Value codes, Value factor0,
                                              Value factor1, Type codeType);

/// The FP8 codes (vector<2xi8> of `codeType`, element 0 first) of the f32
/// pair (x0, x1), element i in a block whose scale byte has inverse
/// `inverse_i`: x_i * inverse_i rounded by one cvt.rn.satfinite pair
/// conversion (each element on its own), the rounding of buildEncodeFP8.
Value buildEncodePair(OpBuilder &b, Location loc, Value x0, Value x1,
                      Value inverse0, Value inverse1, Type codeType);

/// The MX values, as bf16, of the f32 pair (x0, x1), element i in a block
/// whose scale byte has inverse `inverse_i` and factor `factor_i`: x_i *
/// inverse_i rounded to `codeType` (buildEncodePair), then
/// buildDecodePairToBf16.
std::pair<Value, Value> buildRoundPairToBf16(OpBuilder &b, Location loc,
                                             Value x0, Value x1, Value inverse0,
                                             Value inverse1, Value factor0,
                                             Value factor1, Type codeType);

/// The inverse 2^(127 - byte) and the factor 2^(byte - 127) (f32) of the
/// scale byte that `quant`'s element and rule give a block whose amax is
/// `amax` (buildScaleByte, buildInverseScale, buildDecodeE8M0).
std::pair<Value, Value> buildBlockScale(OpBuilder &b, Location loc, Value amax,
                                        MXQuantAttr quant);

/// The amaxes (f32) of the low and of the high bf16 halves of `count` i32
/// words, word j made by `word(j)` in turn: buildAmaxStep's order (magnitudes'
/// bits compared as unsigned integers, NaN above Inf) on both 16-bit lanes at
/// once, max.u16x2 into four running maxima, then a tree (few words live and a
/// short chain; the amax a kernel holding column pairs of bf16 needs).
std::pair<Value, Value> buildPairAmax(OpBuilder &b, Location loc, int64_t count,
                                      function_ref<Value(int64_t)> word);

/// max.u16x2 of the i32 words `x` and `y`: the larger of each 16-bit lane
/// pair, compared as unsigned integers (the order of buildAmaxStep on the
/// magnitudes' bits of bf16 pairs).
Value buildMaxU16x2(OpBuilder &b, Location loc, Value x, Value y);

/// min.u16x2 of the i32 words `x` and `y` (buildMaxU16x2's lanes).
Value buildMinU16x2(OpBuilder &b, Location loc, Value x, Value y);

/// `amax` (f32) combined by buildAmaxStep with the amax of lane
/// `lane ^ offset`, for each of `xorOffsets` in turn: the amax of a block
/// that those lanes hold together. Every lane of the warp must execute it.
Value buildLaneAmax(OpBuilder &b, Location loc, Value amax,
                    ArrayRef<int32_t> xorOffsets);

/// The MX rounding of bf16 pairs on their bits (RCEIL scales): the value
/// of every element of a block whose amax passes mxBitsBlockFits, without
/// the scale byte, the FP8 code or a conversion. The scale is a power of
/// two, so the MX value of x is x rounded to nearest-even at a quantum: 2^-f
/// of x's binade in the element's normal range (f its fraction bits), the
/// scale's subnormal quantum 2^(s - 127 + minExp - f) below it. With T =
/// max(s + minExp, 1), the bf16 exponent field where the normal range
/// starts, both are the bf16 ulp of C = 1.5 * 2^(max(e_x, T) + 7 - f - 127)
/// (C's binade holds x + C: |x| < C / 12), so x rounds as (x + C) - C, two
/// fma.rn.bf16x2 of the pair that take C as M * 2^(7 - f), M = 1.5 *
/// 2^(max(e_x, T) - 127) (an exact product; the second fma is exact too),
/// and x's sign goes back on a zero. Checked for every bf16 element of blocks
/// of every amax against lib/Reference
/// (unittests/Conversion/MXBitRoundingTest.cpp). `Ops` makes i32 words: c(u32),
/// add, band, bor, andOr(a, b, c) (a & b | c, one instruction), max16x2,
/// absMax(a, b) (max.xorsign.abs.bf16x2: max(|a|, |b|) by value with the signs'
/// xor, lane by lane) and fmaBf16x2(a, b, c) (a * b + c on both bf16 lanes,
/// rounded once).
struct MXBitRounding {
  /// emax - minExp of the element: T = max(e_amax + c - offset, 1), c = 1
  /// where the amax's fraction exceeds elem_max's (1.75, 0x60).
  uint32_t offset;
  /// The bf16 bits of 2^(7 - f), C / M.
  uint32_t step;
};

/// Whether blocks of `rule` round on the bits: RCEIL's scale keeps every
/// x / 2^(s - 127) within elem_max; FLOOR's values above it saturate, which
/// the bits do not.
inline bool hasMXBitRounding(ScaleRule rule) {
  return rule == ScaleRule::rceil;
}

/// The constants of `element` (e4m3: offset 14, fraction 3, step 2^4;
/// e5m2: 29, 2, 2^5).
inline MXBitRounding getMXBitRounding(MXElement element) {
  return element == MXElement::f8E4M3FN ? MXBitRounding{14, (127u + 4) << 7}
                                        : MXBitRounding{29, (127u + 5) << 7};
}

/// Whether a block with amax magnitude bits `amax` (bf16, 0..0x7FFF) rounds
/// on the bits: C stays finite (exponent field <= 249 for x and the amax,
/// which also leaves NaN and Inf blocks out), and the normal range starts
/// at T > 0 unclamped, or the block is all zeros (bf16-subnormal elements
/// need the scale's own quantum then).
inline bool mxBitsBlockFits(uint32_t amax, MXBitRounding r) {
  return amax == 0 || (amax >= ((r.offset << 7) | 0x61) && amax < 0x7D00);
}

// The templates below build one op per statement, so that every compiler
// emits their ops (constants included) in the same order: a word constant,
// then the op that takes it.
namespace mxbits {
/// `lane` in both 16-bit lanes of a word.
inline uint32_t lanes(uint32_t lane) { return lane << 16 | lane; }
template <typename Ops, typename V> V andK(Ops &o, V x, uint32_t k) {
  V c = o.c(k);
  return o.band(x, c);
}
template <typename Ops, typename V> V orK(Ops &o, V x, uint32_t k) {
  V c = o.c(k);
  return o.bor(x, c);
}
template <typename Ops, typename V> V addK(Ops &o, V x, uint32_t k) {
  V c = o.c(k);
  return o.add(x, c);
}
} // namespace mxbits

/// Both lanes' (T << 7) | 0x7F from the amax magnitude bits of both lanes'
/// blocks (`amaxPair`): the bound mxRoundPairBits takes.
template <typename Ops, typename V>
V mxThresholdPair(Ops &o, V amaxPair, MXBitRounding r) {
  using namespace mxbits;
  // e + c: a fraction above 0x60 carries into the exponent field, which
  // the mask keeps. No lane carries into bit 15 or the next lane: a block
  // that fits has an exponent field of at most 0xF9 (amax < 0x7D00), and
  // the warps whose blocks do not fit never use the bound.
  V carried = addK(o, amaxPair, 0x001F001F);
  V sum = andK(o, carried, 0x7F807F80);
  V floor = o.c(lanes((r.offset + 1) << 7));
  V biased = o.max16x2(sum, floor);
  // max first, then the offset off: no lane borrows.
  return addK(o, biased, ~lanes((r.offset << 7) - 0x7F) + 1);
}

/// The MX values (bf16 pair) of the bf16 pair `word` in blocks whose
/// mxThresholdPair lanes are `bound`.
template <typename Ops, typename V>
V mxRoundPairBits(Ops &o, V word, V bound, MXBitRounding r) {
  using namespace mxbits;
  // M: max(e_x, T) << 7, fraction 0x40 (1.5). The bf16 max of |x| and
  // the bound (a positive bf16 of exponent T, all fraction bits set)
  // orders as the magnitudes' bits; x's sign on it and the fraction go
  // with the mask, the or sets the fraction (one lop3). The fmas scale M
  // to C by the step, exactly (C stays finite in blocks that fit,
  // mxBitsBlockFits): one instruction less than adding C's exponent to
  // M's bits.
  V top = o.absMax(word, bound);
  V mask = o.c(0x7F807F80);
  V fraction = o.c(0x00400040);
  V m = o.andOr(top, mask, fraction);
  V step = o.c(lanes(r.step));
  V sum = o.fmaBf16x2(m, step, word); // M * 2^(7 - f) + x
  V minusStep = o.c(lanes(r.step | 0x8000));
  V value = o.fmaBf16x2(m, minusStep, sum); // -C + (x + C)
  V sign = andK(o, word, 0x80008000);
  return o.bor(value, sign);
}

/// The amax magnitude bits of both lanes of `words`, by bf16 arithmetic:
/// max.NaN.xorsign.abs.bf16x2 down the words (`Ops::absMaxNaN`: a NaN
/// lane gives NaN; other magnitudes order as their bits), then the sign
/// bits off. buildPackedAmax's word where no lane holds a NaN, a NaN (so
/// at least 0x7F81, the same scale byte 0xFF) where one does.
template <typename Ops, typename V>
V mxPairAmaxBits(Ops &o, ArrayRef<V> words) {
  V m = words[0];
  for (V w : words.drop_front())
    m = o.absMaxNaN(m, w);
  return mxbits::andK(o, m, 0x7FFF7FFF);
}

/// Whether a block among both lanes of the words `amaxPairs` (amax
/// magnitude bits) fails mxBitsBlockFits: a lane at or above 0x7D00 (its
/// exponent field + 3 carries into bit 15), or in [1, smallest): amax - 1
/// modulo 2^15 below smallest - 1 (bit 15 set in both lanes first, so that
/// neither borrows; an amax of 0 reads 0x7FFF). `Ops` adds sub(V, V),
/// min16x2, swapLanes (the halves exchanged), low16 (the low half),
/// isNonzero (-> B), ult(V, V) (-> B) and orB(B, B).
template <typename Ops, typename V>
auto mxBitsMisfit(Ops &o, ArrayRef<V> amaxPairs, MXBitRounding r) {
  using namespace mxbits;
  auto lessOne = [&](V pair) {
    V guarded = orK(o, pair, 0x80008000);
    V ones = o.c(0x00010001);
    V less = o.sub(guarded, ones);
    return andK(o, less, 0x7FFF7FFF);
  };
  V largest = amaxPairs[0];
  V lowest = lessOne(amaxPairs[0]);
  for (V pair : amaxPairs.drop_front()) {
    largest = o.max16x2(largest, pair);
    V other = lessOne(pair);
    lowest = o.min16x2(lowest, other);
  }
  V swapped = o.swapLanes(lowest);
  V both = o.min16x2(lowest, swapped);
  lowest = o.low16(both);
  V raised = addK(o, largest, 0x03000300);
  V carried = andK(o, raised, 0x80008000);
  auto huge = o.isNonzero(carried);
  V smallestLess = o.c(((r.offset << 7) | 0x61) - 1);
  auto tiny = o.ult(lowest, smallestLess);
  return o.orB(huge, tiny);
}

/// mxThresholdPair and mxRoundPairBits as IR (i32 words; the packed
/// integer and bf16 instructions as PTX).
Value buildMXThresholdPair(OpBuilder &b, Location loc, Value amaxPair,
                           MXElement element);
Value buildMXRoundPairBits(OpBuilder &b, Location loc, Value word, Value bound,
                           MXElement element);
/// mxPairAmaxBits as IR.
Value buildMXPairAmaxBits(OpBuilder &b, Location loc, ArrayRef<Value> words);
/// mxBitsMisfit as IR (i1), and whether any thread of the warp has one
/// (vote.sync.any: every lane of the warp must execute it).
Value buildMXBitsMisfit(OpBuilder &b, Location loc, ArrayRef<Value> amaxPairs,
                        MXElement element);
Value buildWarpMXBitsMisfit(OpBuilder &b, Location loc,
                            ArrayRef<Value> amaxPairs, MXElement element);

/// The amax magnitude bits of the low and of the high bf16 halves of
/// `count` i32 words, word j made by `word(j)` in turn, as one word
/// (buildPairAmax's maxima before the widening).
Value buildPackedAmax(OpBuilder &b, Location loc, int64_t count,
                      function_ref<Value(int64_t)> word);
/// The f32 amaxes of the low and the high lane of buildPackedAmax's word.
std::pair<Value, Value> widenPackedAmax(OpBuilder &b, Location loc,
                                        Value packed);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_MXROUNDING_H
