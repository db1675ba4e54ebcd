//===- MXBitRoundingTest.cpp - MX rounding on bf16 bits vs the reference
//---===//
//
// mxThresholdPair and mxRoundPairBits (MXRounding.h) are the kernels' MX
// rounding of bf16 pairs without scale bytes or FP8 codes. Here they run on
// integers, with fma.rn.bf16x2 modelled lane by lane (the exact product by a
// power of two and sum in fp64, rounded once to bf16), and every result is
// compared with lib/Reference's quantizeBlock + decodeFP8 * decodeE8M0 of the
// same block: every amax exponent with the fractions around elem_max's, every
// element within 40 binades below the amax (and every bf16 subnormal), both
// signs, both element types.
//
//===----------------------------------------------------------------------===//

#include "moe/Conversion/MoeToNVGPU/MXRounding.h"
#include "moe/Reference/BF16.h"
#include "moe/Reference/MX.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace mlir::moe;

namespace {

float floatOfBf16(uint32_t h) {
  return moe::ref::floatFromBF16(static_cast<uint16_t>(h));
}

uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

/// `v` rounded once, to nearest even, to bf16 bits (lib/Reference).
uint32_t bf16Of(double v) { return bitsOf(moe::ref::roundToBF16(v)) >> 16; }

/// The word operations on integers (MXRounding.h's Ops).
struct CpuOps {
  uint32_t c(uint32_t v) { return v; }
  uint32_t add(uint32_t x, uint32_t y) { return x + y; }
  uint32_t band(uint32_t x, uint32_t y) { return x & y; }
  uint32_t bor(uint32_t x, uint32_t y) { return x | y; }
  uint32_t andOr(uint32_t x, uint32_t y, uint32_t z) { return (x & y) | z; }
  uint32_t max16x2(uint32_t x, uint32_t y) {
    return std::max(x & 0xFFFF, y & 0xFFFF) | std::max(x >> 16, y >> 16) << 16;
  }
  /// max{.NaN}.xorsign.abs.bf16x2 lane by lane (PTX ISA): the larger
  /// magnitude by value (as the magnitudes' bits, NaN aside) with the xor
  /// of the signs; with .NaN a NaN lane gives the canonical NaN, without it
  /// the other operand's magnitude.
  static uint32_t absMaxLanes(uint32_t x, uint32_t y, bool nan) {
    uint32_t out = 0;
    for (int lane = 0; lane < 2; ++lane) {
      uint32_t a = (x >> (16 * lane)) & 0xFFFF, b = (y >> (16 * lane)) & 0xFFFF;
      bool aNaN = (a & 0x7FFF) > 0x7F80, bNaN = (b & 0x7FFF) > 0x7F80;
      uint32_t magnitude =
          (aNaN || bNaN) ? (nan ? 0x7FFF : (aNaN ? b : a) & 0x7FFF)
                         : std::max(a & 0x7FFF, b & 0x7FFF);
      out |= (magnitude | ((a ^ b) & 0x8000)) << (16 * lane);
    }
    return out;
  }
  uint32_t absMax(uint32_t x, uint32_t y) { return absMaxLanes(x, y, false); }
  uint32_t absMaxNaN(uint32_t x, uint32_t y) {
    return absMaxLanes(x, y, true);
  }
  uint32_t sub(uint32_t x, uint32_t y) { return x - y; }
  uint32_t min16x2(uint32_t x, uint32_t y) {
    return std::min(x & 0xFFFF, y & 0xFFFF) | std::min(x >> 16, y >> 16) << 16;
  }
  uint32_t swapLanes(uint32_t x) { return x >> 16 | x << 16; }
  uint32_t low16(uint32_t x) { return x & 0xFFFF; }
  bool isNonzero(uint32_t x) { return x != 0; }
  bool ult(uint32_t x, uint32_t y) { return x < y; }
  bool orB(bool x, bool y) { return x || y; }
  uint32_t fmaBf16x2(uint32_t x, uint32_t y, uint32_t z) {
    uint32_t out = 0;
    for (int lane = 0; lane < 2; ++lane) {
      auto at = [&](uint32_t w) { return (w >> (16 * lane)) & 0xFFFF; };
      // x * y is exact (y a power of two); the sum is exact in fp64 unless
      // the smaller term is below 2^-45 of the larger, far from a bf16 tie.
      double v = static_cast<double>(floatOfBf16(at(x))) *
                     static_cast<double>(floatOfBf16(at(y))) +
                 static_cast<double>(floatOfBf16(at(z)));
      out |= bf16Of(v) << (16 * lane);
    }
    return out;
  }
};

moe::ref::MXElem refElem(MXElement element) {
  return element == MXElement::f8E4M3FN ? moe::ref::MXElem::E4M3
                                        : moe::ref::MXElem::E5M2;
}

/// The reference's MX value (bf16 bits) of `x` in a block of amax `amax`
/// (magnitude bits, >= |x|).
uint32_t referenceValue(uint32_t amax, uint32_t x, MXElement element) {
  float block[2] = {floatOfBf16(amax), floatOfBf16(x)};
  uint8_t codes[2];
  uint8_t scale = moe::ref::quantizeBlock(block, 2, 1, refElem(element),
                                          moe::ref::ScaleRule::RCeil, codes, 1);
  float value = moe::ref::decodeFP8(codes[1], refElem(element)) *
                moe::ref::decodeE8M0(scale);
  uint32_t bits = bitsOf(value);
  EXPECT_EQ(bits & 0xFFFF, 0u) << "the MX value is not a bf16 value";
  return bits >> 16;
}

/// The bit rounding of the pair (x0 in a block of amax a0, x1 of a1).
uint32_t bitRounding(uint32_t a0, uint32_t x0, uint32_t a1, uint32_t x1,
                     MXElement element) {
  CpuOps o;
  MXBitRounding r = getMXBitRounding(element);
  uint32_t word = x0 | x1 << 16;
  uint32_t bound = mxThresholdPair(o, a0 | a1 << 16, r);
  return mxRoundPairBits(o, word, bound, r);
}

class MXBitRoundingTest : public ::testing::TestWithParam<MXElement> {};

TEST_P(MXBitRoundingTest, EqualsTheReferenceInEveryBlockThatFits) {
  MXElement element = GetParam();
  MXBitRounding r = getMXBitRounding(element);
  int64_t checked = 0;
  for (uint32_t exponent = 0; exponent <= 254; ++exponent) {
    for (uint32_t fraction : {0x00u, 0x01u, 0x5Fu, 0x60u, 0x61u, 0x7Fu}) {
      uint32_t amax = exponent << 7 | fraction;
      // Every block from 2^(offset - 126) to 2^122 fits: not vacuous.
      if (exponent > r.offset && exponent < 250) {
        EXPECT_TRUE(mxBitsBlockFits(amax, r)) << "amax 0x" << std::hex << amax;
      }
      if (!mxBitsBlockFits(amax, r))
        continue;
      uint32_t lowest = exponent > 40 ? exponent - 40 : 0;
      std::vector<uint32_t> magnitudes;
      for (uint32_t m = lowest << 7; m <= amax; ++m)
        magnitudes.push_back(m);
      for (uint32_t m = 0; m < std::min(lowest << 7, 0x100u); ++m)
        magnitudes.push_back(m); // bf16 subnormals and the first binade
      for (uint32_t m : magnitudes) {
        uint32_t expect = referenceValue(amax, m, element);
        uint32_t expectNegative = referenceValue(amax, m | 0x8000, element);
        uint32_t got = bitRounding(amax, m, amax, m | 0x8000, element);
        ASSERT_EQ(got & 0xFFFF, expect)
            << "amax 0x" << std::hex << amax << " x 0x" << m;
        ASSERT_EQ(got >> 16, expectNegative)
            << "amax 0x" << std::hex << amax << " x -0x" << m;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1000000);
}

TEST_P(MXBitRoundingTest, LanesAreIndependent) {
  MXElement element = GetParam();
  MXBitRounding r = getMXBitRounding(element);
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> any(0, 0x7F7F);
  for (int i = 0; i < 200000; ++i) {
    uint32_t a[2], x[2];
    for (int lane = 0; lane < 2; ++lane) {
      do
        a[lane] = any(gen);
      while (!mxBitsBlockFits(a[lane], r));
      // An element of the block, as a magnitude fraction of the amax.
      x[lane] = bf16Of(floatOfBf16(a[lane]) *
                       std::ldexp(static_cast<double>(gen() % 4096) / 4096,
                                  -static_cast<int>(gen() % 24))) |
                (gen() % 2) << 15;
    }
    uint32_t got = bitRounding(a[0], x[0], a[1], x[1], element);
    ASSERT_EQ(got & 0xFFFF, referenceValue(a[0], x[0], element));
    ASSERT_EQ(got >> 16, referenceValue(a[1], x[1], element));
  }
}

TEST_P(MXBitRoundingTest, NonFiniteAndTinyBlocksDoNotFit) {
  MXBitRounding r = getMXBitRounding(GetParam());
  EXPECT_TRUE(mxBitsBlockFits(0, r));
  EXPECT_FALSE(mxBitsBlockFits(0x7F80, r)); // Inf
  EXPECT_FALSE(mxBitsBlockFits(0x7FC0, r)); // NaN
  EXPECT_FALSE(mxBitsBlockFits(0x7D00, r)); // C would overflow
  EXPECT_TRUE(mxBitsBlockFits(0x7CFF, r));
  EXPECT_FALSE(mxBitsBlockFits(1, r)); // a bf16 subnormal amax
  EXPECT_FALSE(mxBitsBlockFits((r.offset << 7) | 0x60, r));
  EXPECT_TRUE(mxBitsBlockFits((r.offset << 7) | 0x61, r));
}

// The amax by bf16 arithmetic (mxPairAmaxBits) is the amax of the
// magnitudes' bits (buildAmaxStep's order) wherever no lane holds a NaN,
// and a NaN, so the same scale byte 0xFF, where one does.
TEST(MXBitRounding, PairAmaxByBf16MaxMatchesTheBitsOrder) {
  std::mt19937 gen(11);
  const uint32_t special[] = {0x0000, 0x8000, 0x0001, 0x807F, 0x0080,
                              0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7F81,
                              0xFFC0, 0x7FFF, 0x3F80, 0xBF80};
  auto lane = [&]() -> uint32_t {
    return gen() % 4 ? gen() & 0xFFFF : special[gen() % 14];
  };
  CpuOps o;
  for (int i = 0; i < 500000; ++i) {
    uint32_t words[4];
    for (uint32_t &w : words)
      w = lane() | lane() << 16;
    uint32_t got = mxPairAmaxBits(o, llvm::ArrayRef<uint32_t>(words));
    for (int h = 0; h < 2; ++h) {
      uint32_t bits = 0;
      bool nan = false;
      for (uint32_t w : words) {
        uint32_t m = (w >> (16 * h)) & 0x7FFF;
        nan |= m > 0x7F80;
        bits = std::max(bits, m);
      }
      uint32_t lane16 = (got >> (16 * h)) & 0xFFFF;
      if (nan)
        ASSERT_GT(lane16, 0x7F80u);
      else
        ASSERT_EQ(lane16, bits);
    }
  }
}

// The kernels' packed check says "fits" exactly where every block does.
TEST_P(MXBitRoundingTest, MisfitMatchesTheBlocks) {
  MXBitRounding r = getMXBitRounding(GetParam());
  uint32_t smallest = (r.offset << 7) | 0x61;
  std::vector<uint32_t> edges = {
      0,      1,      0x80,   smallest - 1, smallest, smallest + 1,
      0x3F80, 0x7CFF, 0x7D00, 0x7F80,       0x7FC0,   0x7FFF};
  std::mt19937 gen(3);
  std::uniform_int_distribution<uint32_t> any(0, 0x7FFF);
  for (int i = 0; i < 64; ++i)
    edges.push_back(any(gen));
  CpuOps o;
  for (uint32_t a : edges)
    for (uint32_t b : edges)
      for (uint32_t c : {0u, smallest, 0x4000u, 0x7D00u}) {
        uint32_t pairs[2] = {a | b << 16, c | c << 16};
        bool misfit = mxBitsMisfit(o, llvm::ArrayRef<uint32_t>(pairs), r);
        bool fits = mxBitsBlockFits(a, r) && mxBitsBlockFits(b, r) &&
                    mxBitsBlockFits(c, r);
        EXPECT_EQ(misfit, !fits) << std::hex << a << " " << b << " " << c;
      }
}

INSTANTIATE_TEST_SUITE_P(Elements, MXBitRoundingTest,
                         ::testing::Values(MXElement::f8E4M3FN,
                                           MXElement::f8E5M2));

} // namespace
