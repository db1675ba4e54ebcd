//===- MXBitRounding.h - The MX bit rounding of bf16 pairs ---*- C++ -*-===//
//
// The MX rounding of bf16 pairs on their bits (mxRoundPairBits and the
// amax, threshold and misfit test around it) as templates over the word
// operations, with no MLIR or LLVM dependence: MXRounding.cpp instantiates
// them over IR values (the kernels' PTX), MXBitRoundingTest over uint32_t
// (checked against lib/Reference), and the device probes
// (scripts/device/probes/wgmma_probe.h) over CUDA inline PTX, so that
// every one of them runs the same instructions in the same order.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_MXBITROUNDING_H
#define MOE_CONVERSION_MOETONVGPU_MXBITROUNDING_H

#include <cstdint>

#if defined(__CUDACC__)
#define MOE_BITS_HD __host__ __device__
#else
#define MOE_BITS_HD
#endif

namespace mlir::moe {

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

/// The constants of e4m3 (offset 14, fraction 3, step 2^4) and of e5m2
/// (29, 2, 2^5).
constexpr MXBitRounding kMXBitRoundingE4M3{14, (127u + 4) << 7};
constexpr MXBitRounding kMXBitRoundingE5M2{29, (127u + 5) << 7};

/// Whether a block with amax magnitude bits `amax` (bf16, 0..0x7FFF) rounds
/// on the bits: C stays finite (exponent field <= 249 for x and the amax,
/// which also leaves NaN and Inf blocks out), and the normal range starts
/// at T > 0 unclamped, or the block is all zeros (bf16-subnormal elements
/// need the scale's own quantum then).
MOE_BITS_HD inline bool mxBitsBlockFits(uint32_t amax, MXBitRounding r) {
  return amax == 0 || (amax >= ((r.offset << 7) | 0x61) && amax < 0x7D00);
}

// The templates below build one op per statement, so that every compiler
// emits their ops (constants included) in the same order: a word constant,
// then the op that takes it.
namespace mxbits {
/// `lane` in both 16-bit lanes of a word.
MOE_BITS_HD inline uint32_t lanes(uint32_t lane) { return lane << 16 | lane; }
template <typename Ops, typename V>
MOE_BITS_HD V andK(Ops &o, V x, uint32_t k) {
  V c = o.c(k);
  return o.band(x, c);
}
template <typename Ops, typename V> MOE_BITS_HD V orK(Ops &o, V x, uint32_t k) {
  V c = o.c(k);
  return o.bor(x, c);
}
template <typename Ops, typename V>
MOE_BITS_HD V addK(Ops &o, V x, uint32_t k) {
  V c = o.c(k);
  return o.add(x, c);
}
} // namespace mxbits

/// Both lanes' (T << 7) | 0x7F from the amax magnitude bits of both lanes'
/// blocks (`amaxPair`): the bound mxRoundPairBits takes.
template <typename Ops, typename V>
MOE_BITS_HD V mxThresholdPair(Ops &o, V amaxPair, MXBitRounding r) {
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
MOE_BITS_HD V mxRoundPairBits(Ops &o, V word, V bound, MXBitRounding r) {
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
/// at least 0x7F81, the same scale byte 0xFF) where one does. `Words`:
/// size() >= 1 and operator[] (an ArrayRef, or a device array's view).
template <typename Ops, typename Words>
MOE_BITS_HD auto mxPairAmaxBits(Ops &o, const Words &words) {
  auto m = words[0];
  for (decltype(words.size()) i = 1; i < words.size(); ++i)
    m = o.absMaxNaN(m, words[i]);
  return mxbits::andK(o, m, 0x7FFF7FFF);
}

/// Whether a block among both lanes of the words `amaxPairs` (amax
/// magnitude bits) fails mxBitsBlockFits: a lane at or above 0x7D00 (its
/// exponent field + 3 carries into bit 15), or in [1, smallest): amax - 1
/// modulo 2^15 below smallest - 1 (bit 15 set in both lanes first, so that
/// neither borrows; an amax of 0 reads 0x7FFF). `Ops` adds sub(V, V),
/// min16x2, swapLanes (the halves exchanged), low16 (the low half),
/// isNonzero (-> B), ult(V, V) (-> B) and orB(B, B).
template <typename Ops, typename Words>
MOE_BITS_HD auto mxBitsMisfit(Ops &o, const Words &amaxPairs, MXBitRounding r) {
  using namespace mxbits;
  using V = decltype(o.c(0));
  auto lessOne = [&](V pair) {
    V guarded = orK(o, pair, 0x80008000);
    V ones = o.c(0x00010001);
    V less = o.sub(guarded, ones);
    return andK(o, less, 0x7FFF7FFF);
  };
  V largest = amaxPairs[0];
  V lowest = lessOne(amaxPairs[0]);
  for (decltype(amaxPairs.size()) i = 1; i < amaxPairs.size(); ++i) {
    V pair = amaxPairs[i];
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

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_MXBITROUNDING_H
