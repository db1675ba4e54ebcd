//===- BF16Test.cpp - bfloat16 rounding tests -----------------------------===//
//
// Checks bf16 rounding against hand-derived bit patterns: ties to even in the
// normal and subnormal ranges, NaN handling, overflow, and fp64 inputs that
// round differently directly than through fp32. A randomized check compares
// the fp64 path with a nearest-neighbour search written independently here.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/BF16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace moe::ref;

namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t bf16Bits(double value) {
  return uint16_t(bitsOf(roundToBF16(value)) >> 16);
}

} // namespace

TEST(BF16, ExactValuesAndWidening) {
  EXPECT_EQ(bf16FromFloat(1.0f), 0x3F80);
  EXPECT_EQ(bf16FromFloat(-2.0f), 0xC000);
  EXPECT_EQ(bf16FromFloat(0.0f), 0x0000);
  EXPECT_EQ(bf16FromFloat(-0.0f), 0x8000);
  EXPECT_EQ(floatFromBF16(0x3F81), 0x1.02p0f);
  EXPECT_EQ(floatFromBF16(0x0001), 0x1p-133f);
  EXPECT_EQ(floatFromBF16(0x7F7F), 0x1.fep127f);
  EXPECT_TRUE(std::signbit(floatFromBF16(0x8000)));
  EXPECT_EQ(floatFromBF16(0x8000), 0.0f);
}

TEST(BF16, TiesToEvenFromFloat) {
  // 1 + 2^-8 lies halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81).
  EXPECT_EQ(bf16FromFloat(0x1.01p0f), 0x3F80);
  EXPECT_EQ(bf16FromFloat(-0x1.01p0f), 0xBF80);
  // One fp32 ulp either side of the tie decides it.
  EXPECT_EQ(bf16FromFloat(0x1.010002p0f), 0x3F81);
  EXPECT_EQ(bf16FromFloat(0x1.00fffep0f), 0x3F80);
  // 1 + 3 * 2^-8 lies between 0x3F81 (odd) and 0x3F82 (even).
  EXPECT_EQ(bf16FromFloat(0x1.03p0f), 0x3F82);
  // Halfway between 0x3FFF (2 - 2^-7) and 2.0 carries into the exponent.
  EXPECT_EQ(bf16FromFloat(0x1.ffp0f), 0x4000);
}

TEST(BF16, SubnormalTies) {
  // bf16 subnormals are multiples of 2^-133.
  EXPECT_EQ(bf16FromFloat(0x1p-133f), 0x0001);
  EXPECT_EQ(bf16FromFloat(0x1p-134f), 0x0000);
  EXPECT_EQ(bf16FromFloat(-0x1p-134f), 0x8000);
  EXPECT_EQ(bf16FromFloat(0x1p-134f + 0x1p-149f), 0x0001);
  EXPECT_EQ(bf16FromFloat(0x3p-134f), 0x0002);
  EXPECT_EQ(bf16FromFloat(0x5p-134f), 0x0002);
  // Largest subnormal 0x007F plus half a step ties up to the smallest normal.
  EXPECT_EQ(bf16FromFloat(0xffp-134f), 0x0080);
  EXPECT_EQ(bf16FromFloat(0x1p-149f), 0x0000);
}

TEST(BF16, NaNStaysNaN) {
  float quiet = std::numeric_limits<float>::quiet_NaN();
  uint16_t q = bf16FromFloat(quiet);
  EXPECT_EQ(q & 0x7F80, 0x7F80);
  EXPECT_NE(q & 0x007F, 0);
  // A NaN whose payload sits only in the dropped bits must not become Inf.
  EXPECT_EQ(bf16FromFloat(floatOf(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(bf16FromFloat(floatOf(0xFF800001u)), 0xFFC0);
  EXPECT_EQ(bf16FromFloat(floatOf(0x7FFFFFFFu)), 0x7FFF);
  EXPECT_TRUE(std::isnan(roundToBF16(quiet)));
  EXPECT_TRUE(
      std::isnan(roundToBF16(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_TRUE(
      std::signbit(roundToBF16(-std::numeric_limits<double>::quiet_NaN())));
}

TEST(BF16, OverflowToInfinity) {
  EXPECT_EQ(bf16FromFloat(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(bf16FromFloat(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(bf16FromFloat(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(bf16FromFloat(-std::numeric_limits<float>::max()), 0xFF80);
  // Halfway between the largest finite bf16 (0x7F7F, odd) and 2^128 rounds
  // to the even side, infinity; one fp32 ulp below stays finite.
  EXPECT_EQ(bf16FromFloat(0x1.ffp127f), 0x7F80);
  EXPECT_EQ(bf16FromFloat(0x1.fefffep127f), 0x7F7F);
  EXPECT_EQ(bf16Bits(1e39), 0x7F80);
  EXPECT_EQ(bf16Bits(-1e300), 0xFF80);
  EXPECT_EQ(bf16Bits(std::numeric_limits<double>::infinity()), 0x7F80);
}

TEST(BF16, DoubleRoundsDirectly) {
  // 1 + 2^-8 + 2^-30: fp32 rounds it to the tie 1 + 2^-8, which bf16 then
  // sends to 1.0; directly it is above the tie and goes to 1 + 2^-7.
  double above = 1.0 + 0x1p-8 + 0x1p-30;
  EXPECT_EQ(roundToBF16(static_cast<float>(above)), 1.0f);
  EXPECT_EQ(bf16Bits(above), 0x3F81);
  // 1 + 3 * 2^-8 - 2^-30: via fp32 the tie goes up to the even 0x3F82;
  // directly it is below the tie.
  double below = 1.0 + 0x3p-8 - 0x1p-30;
  EXPECT_EQ(roundToBF16(static_cast<float>(below)), 0x1.04p0f);
  EXPECT_EQ(bf16Bits(below), 0x3F81);
  // The same in the subnormal range: 2^-134 + 2^-160 is 2^-134 in fp32.
  double tiny = 0x1p-134 + 0x1p-160;
  EXPECT_EQ(roundToBF16(static_cast<float>(tiny)), 0.0f);
  EXPECT_EQ(bf16Bits(tiny), 0x0001);
  // Just under the overflow tie: fp32 rounds onto the tie (then Inf), the
  // direct rounding stays at the largest finite value.
  double nearMax = 0x1.ffp127 - 0x1p90;
  EXPECT_EQ(bf16FromFloat(static_cast<float>(nearMax)), 0x7F80);
  EXPECT_EQ(bf16Bits(nearMax), 0x7F7F);
  // Exact ties in fp64 still go to even.
  EXPECT_EQ(bf16Bits(1.0 + 0x1p-8), 0x3F80);
  EXPECT_EQ(bf16Bits(1.0 + 0x3p-8), 0x3F82);
  EXPECT_EQ(bf16Bits(-(1.0 + 0x3p-8)), 0xBF82);
  // Below bf16's range: zero with the sign kept, fp64 subnormals included.
  EXPECT_EQ(bf16Bits(1e-300), 0x0000);
  EXPECT_EQ(bf16Bits(-1e-300), 0x8000);
  EXPECT_EQ(bf16Bits(std::numeric_limits<double>::denorm_min()), 0x0000);
  EXPECT_EQ(bf16Bits(0x1p-134), 0x0000);
  EXPECT_EQ(bf16Bits(0x1.8p-134), 0x0001);
}

TEST(BF16, EveryCodeRoundTrips) {
  for (uint32_t code = 0; code < 0x10000; ++code) {
    float value = floatFromBF16(uint16_t(code));
    if (std::isnan(value))
      continue;
    EXPECT_EQ(bf16FromFloat(value), code);
    EXPECT_EQ(bf16Bits(static_cast<double>(value)), code);
  }
}

TEST(BF16, FloatAndDoublePathsAgree) {
  // An fp32 input is exact in fp64, so both paths must give the same bits.
  std::mt19937 gen(12345);
  for (int i = 0; i < 200000; ++i) {
    float value = floatOf(gen());
    if (std::isnan(value))
      continue;
    ASSERT_EQ(bf16FromFloat(value), bf16Bits(static_cast<double>(value)))
        << std::hexfloat << value;
  }
}

TEST(BF16, DoubleMatchesNearestNeighbourSearch) {
  // Reference: among the bf16 codes around the truncated value pick the one
  // nearest in exact fp64 arithmetic (neighbours lie within a factor of two,
  // so the differences are exact), ties to the even code.
  std::mt19937_64 gen(777);
  std::uniform_int_distribution<int> exponent(-140, 127);
  for (int i = 0; i < 100000; ++i) {
    double mantissa = 1.0 + double(gen() >> 11) * 0x1p-53;
    double value = std::ldexp(mantissa, exponent(gen));
    // Every fourth sample sits on or one fp64 ulp off an exact tie.
    if (i % 4 == 0) {
      uint16_t down = uint16_t(bitsOf(float(value)) >> 16);
      double tie = (double(floatFromBF16(down)) +
                    double(floatFromBF16(uint16_t(down + 1)))) /
                   2;
      int offset = int(gen() % 3) - 1;
      value = offset == 0 ? tie : std::nextafter(tie, offset * HUGE_VAL);
    }
    uint32_t low = uint32_t(bitsOf(float(value)) >> 16);
    uint32_t best = 0;
    double bestDist = HUGE_VAL;
    for (uint32_t c = low ? low - 1 : 0; c <= low + 2 && c < 0x7F80; ++c) {
      double dist = std::fabs(value - double(floatFromBF16(uint16_t(c))));
      if (dist < bestDist || (dist == bestDist && (c & 1) == 0)) {
        best = c;
        bestDist = dist;
      }
    }
    // Past the largest finite value by half an ulp or more is infinity.
    if (value >= 0x1.ffp127)
      best = 0x7F80;
    ASSERT_EQ(bf16Bits(value), best) << std::hexfloat << value;
  }
}
