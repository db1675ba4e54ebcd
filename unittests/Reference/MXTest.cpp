//===- MXTest.cpp - MXFP8 codec, scale rule and block tests ---------------===//
//
// Checks the MX numerics of the reference against values derived by hand in
// this file and against an independent formulation written here: FP8 values
// from their sign/exponent/fraction fields via ldexp, rounding by a nearest
// search over the code table, and scales from the smallest power of two that
// fits the block (RCEIL) or from frexp (FLOOR, FLOOR_ALT).
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/MX.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace moe::ref;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// Largest finite code of each format, from the OCP tables.
int topCode(MXElem elem) { return elem == MXElem::E4M3 ? 0x7E : 0x7B; }

/// The value of an FP8 code from its fields: E4M3 has bias 7 and 3 fraction
/// bits, E5M2 bias 15 and 2 fraction bits; field 0 is subnormal.
double formulaValue(int code, MXElem elem) {
  bool e4m3 = elem == MXElem::E4M3;
  int fractionBits = e4m3 ? 3 : 2;
  int bias = e4m3 ? 7 : 15;
  double sign = (code & 0x80) ? -1.0 : 1.0;
  int field = (code & 0x7F) >> fractionBits;
  int fraction = code & ((1 << fractionBits) - 1);
  double f = double(fraction) / double(1 << fractionBits);
  if (e4m3 && (code & 0x7F) == 0x7F)
    return std::numeric_limits<double>::quiet_NaN();
  if (!e4m3 && field == 31)
    return fraction ? std::numeric_limits<double>::quiet_NaN()
                    : sign * HUGE_VAL;
  if (field == 0)
    return sign * std::ldexp(f, 1 - bias);
  return sign * std::ldexp(1.0 + f, field - bias);
}

/// Nearest finite code to `y` by search over the positive code table, ties
/// to the even code, magnitudes past the largest finite value saturated.
int nearestCode(double y, MXElem elem) {
  int sign = std::signbit(y) ? 0x80 : 0;
  double a = std::fabs(y);
  int top = topCode(elem);
  if (a >= formulaValue(top, elem))
    return sign | top;
  int lo = 0;
  while (formulaValue(lo + 1, elem) <= a)
    ++lo;
  double dLo = a - formulaValue(lo, elem);
  double dHi = formulaValue(lo + 1, elem) - a;
  if (dLo < dHi)
    return sign | lo;
  if (dHi < dLo)
    return sign | (lo + 1);
  return sign | (lo % 2 == 0 ? lo : lo + 1);
}

/// The block scale exponent k (scale 2^k, byte k + 127) for a normal amax.
/// RCEIL: the smallest k with elemMax * 2^k >= amax; FLOOR: floor(log2
/// amax) - emax; FLOOR_ALT one more.
int expectedScaleExp(double amax, MXElem elem, ScaleRule rule) {
  bool e4m3 = elem == MXElem::E4M3;
  if (rule == ScaleRule::RCeil) {
    double top = e4m3 ? 448.0 : 57344.0;
    int k = -127;
    while (std::ldexp(top, k) < amax)
      ++k;
    return k;
  }
  int exp;
  std::frexp(amax, &exp);
  int k = (exp - 1) - (e4m3 ? 8 : 15);
  return rule == ScaleRule::FloorAlt ? k + 1 : k;
}

/// Independently quantizes and dequantizes one block of finite values.
std::vector<double> expectedBlock(const std::vector<float> &x, MXElem elem,
                                  ScaleRule rule, int &byte) {
  double amax = 0;
  for (float v : x)
    amax = std::max(amax, std::fabs(double(v)));
  std::vector<double> out(x.size(), 0.0);
  if (amax == 0) {
    byte = 0;
    return out;
  }
  int k = expectedScaleExp(amax, elem, rule);
  byte = k + 127;
  for (size_t i = 0; i < x.size(); ++i) {
    // Scaling by a power of two is exact here (no fp32 underflow for these
    // magnitudes), so this is the fp32 product the contract names.
    double scaled = std::ldexp(double(x[i]), -k);
    out[i] = std::ldexp(formulaValue(nearestCode(scaled, elem), elem), k);
  }
  return out;
}

/// Random matrix values: N(0, 1) times a per-entry power of two in
/// [-spread, spread], with some entries shrunk by 2^-12 so that blocks hold
/// subnormal codes after scaling.
std::vector<float> randomValues(std::mt19937 &gen, int64_t count, int spread) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> power(-spread, spread);
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i) {
    float v = std::ldexp(normal(gen), power(gen));
    if (gen() % 4 == 0)
      v = std::ldexp(v, -12);
    values[i] = v;
  }
  return values;
}

const MXElem kElems[] = {MXElem::E4M3, MXElem::E5M2};
const ScaleRule kRules[] = {ScaleRule::RCeil, ScaleRule::Floor,
                            ScaleRule::FloorAlt};

} // namespace

TEST(MXCodec, DecodeMatchesFieldFormula) {
  for (MXElem elem : kElems) {
    for (int code = 0; code < 256; ++code) {
      double expected = formulaValue(code, elem);
      float got = decodeFP8(uint8_t(code), elem);
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got)) << toString(elem) << " " << code;
        continue;
      }
      EXPECT_EQ(double(got), expected) << toString(elem) << " " << code;
      EXPECT_EQ(std::signbit(got), (code & 0x80) != 0) << code;
    }
  }
}

TEST(MXCodec, DecodeHandValues) {
  EXPECT_EQ(decodeFP8(0x38, MXElem::E4M3), 1.0f);
  EXPECT_EQ(decodeFP8(0x7E, MXElem::E4M3), 448.0f);
  EXPECT_EQ(decodeFP8(0xFE, MXElem::E4M3), -448.0f);
  EXPECT_EQ(decodeFP8(0x01, MXElem::E4M3), 0x1p-9f);
  EXPECT_EQ(decodeFP8(0x07, MXElem::E4M3), 0x7p-9f);
  EXPECT_EQ(decodeFP8(0x08, MXElem::E4M3), 0x1p-6f);
  EXPECT_EQ(decodeFP8(0x7C, MXElem::E4M3), 384.0f);
  EXPECT_EQ(decodeFP8(0x78, MXElem::E4M3), 256.0f);
  EXPECT_TRUE(std::isnan(decodeFP8(0x7F, MXElem::E4M3)));
  EXPECT_TRUE(std::isnan(decodeFP8(0xFF, MXElem::E4M3)));
  EXPECT_EQ(decodeFP8(0x3C, MXElem::E5M2), 1.0f);
  EXPECT_EQ(decodeFP8(0x7B, MXElem::E5M2), 57344.0f);
  EXPECT_EQ(decodeFP8(0x01, MXElem::E5M2), 0x1p-16f);
  EXPECT_EQ(decodeFP8(0x04, MXElem::E5M2), 0x1p-14f);
  EXPECT_EQ(decodeFP8(0x7C, MXElem::E5M2), kInf);
  EXPECT_EQ(decodeFP8(0xFC, MXElem::E5M2), -kInf);
  for (int code : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF})
    EXPECT_TRUE(std::isnan(decodeFP8(uint8_t(code), MXElem::E5M2))) << code;
}

TEST(MXCodec, EveryCodeRoundTrips) {
  for (MXElem elem : kElems) {
    for (int code = 0; code < 256; ++code) {
      uint8_t back = encodeFP8(decodeFP8(uint8_t(code), elem), elem);
      if (std::isnan(formulaValue(code, elem)))
        EXPECT_EQ(int(back), 0x7F | (code & 0x80))
            << toString(elem) << " " << code;
      else if (std::isinf(formulaValue(code, elem)))
        EXPECT_EQ(int(back), topCode(elem) | (code & 0x80)) << code;
      else
        EXPECT_EQ(int(back), code) << toString(elem) << " " << code;
    }
  }
  // The canonical NaN code is 0x7F with the sign, for every NaN code.
  EXPECT_EQ(encodeFP8(decodeFP8(0xFF, MXElem::E4M3), MXElem::E4M3), 0xFF);
  EXPECT_EQ(encodeFP8(decodeFP8(0x7D, MXElem::E5M2), MXElem::E5M2), 0x7F);
  EXPECT_EQ(encodeFP8(decodeFP8(0xFE, MXElem::E5M2), MXElem::E5M2), 0xFF);
  // satfinite: the E5M2 infinities come back as the largest finite codes.
  EXPECT_EQ(encodeFP8(decodeFP8(0x7C, MXElem::E5M2), MXElem::E5M2), 0x7B);
  EXPECT_EQ(encodeFP8(decodeFP8(0xFC, MXElem::E5M2), MXElem::E5M2), 0xFB);
}

TEST(MXCodec, E4M3HandVectors) {
  auto enc = [](float v) { return int(encodeFP8(v, MXElem::E4M3)); };
  EXPECT_EQ(enc(1.0f), 0x38);
  EXPECT_EQ(enc(0.0f), 0x00);
  EXPECT_EQ(enc(-0.0f), 0x80);
  // Normal ties: 1.0625 halfway between 1.0 (0x38) and 1.125 (0x39).
  EXPECT_EQ(enc(1.0625f), 0x38);
  EXPECT_EQ(enc(1.0625f + 0x1p-20f), 0x39);
  EXPECT_EQ(enc(1.0625f - 0x1p-20f), 0x38);
  EXPECT_EQ(enc(1.1875f), 0x3A);
  EXPECT_EQ(enc(-1.1875f), 0xBA);
  // 1.9375 is halfway between 1.875 (0x3F) and 2.0 (0x40): carry to 2.0.
  EXPECT_EQ(enc(1.9375f), 0x40);
  // In [256, 512) the spacing is 32: 400 ties to 384 (0x7C), 432 to 448.
  EXPECT_EQ(enc(400.0f), 0x7C);
  EXPECT_EQ(enc(432.0f), 0x7E);
  // Subnormals are multiples of 2^-9.
  EXPECT_EQ(enc(0x1p-9f), 0x01);
  EXPECT_EQ(enc(0x1p-10f), 0x00);
  EXPECT_EQ(enc(-0x1p-10f), 0x80);
  EXPECT_EQ(enc(0x1p-10f + 0x1p-30f), 0x01);
  EXPECT_EQ(enc(0x3p-10f), 0x02);
  EXPECT_EQ(enc(0x5p-10f), 0x02);
  EXPECT_EQ(enc(0x7p-10f), 0x04);
  // Largest subnormal 7 * 2^-9 plus half a step ties up to 2^-6 (0x08).
  EXPECT_EQ(enc(0xfp-10f), 0x08);
  EXPECT_EQ(enc(1e-40f), 0x00);
  EXPECT_EQ(enc(-1e-40f), 0x80);
  // Saturation: 464 is max + half an ulp, beyond that still max.
  EXPECT_EQ(enc(448.0f), 0x7E);
  EXPECT_EQ(enc(464.0f), 0x7E);
  EXPECT_EQ(enc(479.0f), 0x7E);
  EXPECT_EQ(enc(1e6f), 0x7E);
  EXPECT_EQ(enc(FLT_MAX), 0x7E);
  EXPECT_EQ(enc(-464.0f), 0xFE);
  EXPECT_EQ(enc(kInf), 0x7E);
  EXPECT_EQ(enc(-kInf), 0xFE);
  EXPECT_EQ(enc(kNaN), 0x7F);
  EXPECT_EQ(enc(-kNaN), 0xFF);
}

TEST(MXCodec, E5M2HandVectors) {
  auto enc = [](float v) { return int(encodeFP8(v, MXElem::E5M2)); };
  EXPECT_EQ(enc(1.0f), 0x3C);
  EXPECT_EQ(enc(-0.0f), 0x80);
  // 1.125 ties between 1.0 (0x3C) and 1.25 (0x3D); 1.375 between 0x3D/0x3E.
  EXPECT_EQ(enc(1.125f), 0x3C);
  EXPECT_EQ(enc(1.125f + 0x1p-20f), 0x3D);
  EXPECT_EQ(enc(1.375f), 0x3E);
  EXPECT_EQ(enc(1.875f), 0x40);
  // Subnormals are multiples of 2^-16.
  EXPECT_EQ(enc(0x1p-16f), 0x01);
  EXPECT_EQ(enc(0x1p-17f), 0x00);
  EXPECT_EQ(enc(-0x1p-17f), 0x80);
  EXPECT_EQ(enc(0x1p-17f + 0x1p-30f), 0x01);
  EXPECT_EQ(enc(0x3p-17f), 0x02);
  EXPECT_EQ(enc(0x5p-17f), 0x02);
  EXPECT_EQ(enc(0x7p-17f), 0x04);
  // 61440 is max + half an ulp (the tie with 2^16).
  EXPECT_EQ(enc(57344.0f), 0x7B);
  EXPECT_EQ(enc(61440.0f), 0x7B);
  EXPECT_EQ(enc(65536.0f), 0x7B);
  EXPECT_EQ(enc(-1e30f), 0xFB);
  EXPECT_EQ(enc(kInf), 0x7B);
  EXPECT_EQ(enc(-kInf), 0xFB);
  EXPECT_EQ(enc(kNaN), 0x7F);
  EXPECT_EQ(enc(-kNaN), 0xFF);
}

TEST(MXCodec, EveryMidpointTiesToEven) {
  for (MXElem elem : kElems) {
    int top = topCode(elem);
    for (int c = 0; c < top; ++c) {
      float lo = float(formulaValue(c, elem));
      float hi = float(formulaValue(c + 1, elem));
      float mid = (lo + hi) / 2;
      int even = c % 2 == 0 ? c : c + 1;
      for (int sign : {0, 0x80}) {
        float s = sign ? -1.0f : 1.0f;
        EXPECT_EQ(encodeFP8(s * mid, elem), even | sign) << c;
        EXPECT_EQ(encodeFP8(s * std::nextafter(mid, kInf), elem),
                  (c + 1) | sign)
            << c;
        EXPECT_EQ(encodeFP8(s * std::nextafter(mid, 0.0f), elem), c | sign)
            << c;
      }
    }
  }
}

TEST(MXCodec, EncodeMatchesNearestSearch) {
  std::mt19937 gen(2024);
  for (MXElem elem : kElems) {
    // fp32 exponents from far below the FP8 subnormals to past the maximum.
    std::uniform_int_distribution<uint32_t> field(100, 150);
    for (int i = 0; i < 60000; ++i) {
      uint32_t bits = (gen() & 0x807FFFFFu) | (field(gen) << 23);
      float v = floatOf(bits);
      ASSERT_EQ(int(encodeFP8(v, elem)), nearestCode(v, elem))
          << toString(elem) << " " << std::hexfloat << v;
    }
  }
}

TEST(MXScale, DecodeE8M0) {
  EXPECT_EQ(decodeE8M0(127), 1.0f);
  EXPECT_EQ(decodeE8M0(128), 2.0f);
  EXPECT_EQ(decodeE8M0(254), 0x1p127f);
  EXPECT_EQ(decodeE8M0(1), FLT_MIN);
  EXPECT_EQ(decodeE8M0(0), 0x1p-127f);
  EXPECT_EQ(std::fpclassify(decodeE8M0(0)), FP_SUBNORMAL);
  EXPECT_TRUE(std::isnan(decodeE8M0(255)));
  for (int byte = 0; byte < 255; ++byte)
    EXPECT_EQ(double(decodeE8M0(uint8_t(byte))), std::ldexp(1.0, byte - 127))
        << byte;
}

TEST(MXScale, RCeilHandVectors) {
  auto e4 = [](float amax) {
    return int(scaleByte(amax, MXElem::E4M3, ScaleRule::RCeil));
  };
  auto e5 = [](float amax) {
    return int(scaleByte(amax, MXElem::E5M2, ScaleRule::RCeil));
  };
  EXPECT_EQ(e4(448.0f), 127);
  EXPECT_EQ(e4(449.0f), 128);
  // The next fp32 above 448 still gives r > 1 after rounding.
  EXPECT_EQ(e4(std::nextafter(448.0f, kInf)), 128);
  EXPECT_EQ(e4(224.0f), 126);
  EXPECT_EQ(e4(56.0f), 124);
  // 1 / 448 = 1.14 * 2^-9: exponent field 118, fraction non-zero.
  EXPECT_EQ(e4(1.0f), 119);
  EXPECT_EQ(e5(57344.0f), 127);
  EXPECT_EQ(e5(57345.0f), 128);
  EXPECT_EQ(e5(1.0f), 112);
  // FLT_MAX / 448 = 1.14 * 2^119 and FLT_MAX / 57344 = 1.14 * 2^112; no
  // finite amax reaches the clamp at 254.
  EXPECT_EQ(e4(FLT_MAX), 247);
  EXPECT_EQ(e5(FLT_MAX), 240);
  // r = 2^-126, the smallest normal: field 1, fraction 0.
  EXPECT_EQ(e4(0x1.cp-118f), 1);
  // Subnormal r: exactly 2^-127 is E8M0 byte 0; just above it needs byte 1.
  EXPECT_EQ(e4(0x1.cp-119f), 0);
  EXPECT_EQ(e4(0x1.c1p-119f), 1);
  EXPECT_EQ(e4(0x1.cp-120f), 0);
  // r is rounded to fp32 first: (448 + ulp) * 2^-127 / 448 rounds to 2^-127.
  EXPECT_EQ(e4(std::nextafter(0x1.cp-119f, kInf)), 0);
  // amax / 448 underflows to zero.
  EXPECT_EQ(e4(0x1p-149f), 0);
}

TEST(MXScale, FloorHandVectors) {
  auto byte = [](float amax, MXElem elem, ScaleRule rule) {
    return int(scaleByte(amax, elem, rule));
  };
  const MXElem e4 = MXElem::E4M3, e5 = MXElem::E5M2;
  const ScaleRule fl = ScaleRule::Floor, alt = ScaleRule::FloorAlt;
  EXPECT_EQ(byte(1.0f, e4, fl), 119);
  EXPECT_EQ(byte(1.0f, e4, alt), 120);
  EXPECT_EQ(byte(1.0f, e5, fl), 112);
  EXPECT_EQ(byte(1.0f, e5, alt), 113);
  EXPECT_EQ(byte(1.999f, e4, fl), 119);
  EXPECT_EQ(byte(448.0f, e4, fl), 127);
  EXPECT_EQ(byte(511.0f, e4, fl), 127);
  EXPECT_EQ(byte(512.0f, e4, fl), 128);
  EXPECT_EQ(byte(130000.0f, e5, fl), 128);
  // Small amax clamps at 0: 2^-120 has field 7.
  EXPECT_EQ(byte(0x1p-120f, e4, fl), 0);
  EXPECT_EQ(byte(0x1p-118f, e4, fl), 1);
  EXPECT_EQ(byte(0x1p-120f, e4, alt), 0);
  EXPECT_EQ(byte(0x1p-119f, e4, alt), 1);
  EXPECT_EQ(byte(1e-40f, e4, fl), 0);
  EXPECT_EQ(byte(1e-40f, e5, alt), 0);
  EXPECT_EQ(byte(FLT_MAX, e4, fl), 246);
  EXPECT_EQ(byte(FLT_MAX, e4, alt), 247);
  EXPECT_EQ(byte(FLT_MAX, e5, fl), 239);
  EXPECT_EQ(byte(FLT_MAX, e5, alt), 240);
}

TEST(MXScale, ZeroAndNonFinite) {
  for (MXElem elem : kElems) {
    for (ScaleRule rule : kRules) {
      EXPECT_EQ(scaleByte(0.0f, elem, rule), 0);
      EXPECT_EQ(scaleByte(-0.0f, elem, rule), 0);
      EXPECT_EQ(scaleByte(kNaN, elem, rule), 0xFF);
      EXPECT_EQ(scaleByte(kInf, elem, rule), 0xFF);
    }
  }
}

TEST(MXScale, MatchesIndependentRule) {
  std::mt19937 gen(99);
  std::uniform_int_distribution<uint32_t> field(20, 250);
  for (int i = 0; i < 20000; ++i) {
    float amax = floatOf((gen() & 0x007FFFFFu) | (field(gen) << 23));
    for (MXElem elem : kElems)
      for (ScaleRule rule : kRules)
        ASSERT_EQ(int(scaleByte(amax, elem, rule)),
                  std::max(0, expectedScaleExp(amax, elem, rule) + 127))
            << std::hexfloat << amax << " " << toString(rule);
  }
}

TEST(MXBlock, ZeroBlock) {
  std::vector<float> x(32, 0.0f);
  x[5] = -0.0f;
  std::vector<uint8_t> codes(32, 0xAA);
  EXPECT_EQ(quantizeBlock(x.data(), 32, 1, MXElem::E4M3, ScaleRule::RCeil,
                          codes.data(), 1),
            0);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(int(codes[i]), i == 5 ? 0x80 : 0x00) << i;
}

TEST(MXBlock, NaNAndInfBlocks) {
  std::vector<float> x = {1.0f, kNaN, -2.0f, 3.0f};
  std::vector<uint8_t> codes(4, 0);
  EXPECT_EQ(quantizeBlock(x.data(), 4, 1, MXElem::E4M3, ScaleRule::RCeil,
                          codes.data(), 1),
            0xFF);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x7F, 0x7F, 0xFF, 0x7F}));
  x = {1.0f, -kInf, 2.0f, 0.0f};
  EXPECT_EQ(quantizeBlock(x.data(), 4, 1, MXElem::E5M2, ScaleRule::Floor,
                          codes.data(), 1),
            0xFF);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x7F, 0xFF, 0x7F, 0x7F}));
  // Through the matrix API every element of the block dequantizes to NaN,
  // and the neighbouring finite block is untouched.
  std::vector<float> m(64);
  for (int i = 0; i < 64; ++i)
    m[i] = float(i + 1) * 0.25f;
  m[40] = kInf;
  std::vector<float> out =
      quantizeMatrix(m.data(), 1, 64, 1, MXElem::E4M3, ScaleRule::RCeil)
          .dequantize();
  for (int i = 0; i < 32; ++i)
    EXPECT_FALSE(std::isnan(out[i])) << i;
  for (int i = 32; i < 64; ++i)
    EXPECT_TRUE(std::isnan(out[i])) << i;
}

TEST(MXBlock, SubnormalCodesAfterScaling) {
  // amax = 448 * 2^-20, RCEIL: r = 2^-20, byte 107, elements times 2^20.
  std::vector<float> x = {448.0f,   0x1p-9f,  0x1p-10f, 0x3p-10f,
                          0x5p-10f, -0x1p-8f, 1e-30f,   0xfp-10f};
  for (float &v : x)
    v = std::ldexp(v, -20);
  std::vector<uint8_t> codes(8);
  EXPECT_EQ(quantizeBlock(x.data(), 8, 1, MXElem::E4M3, ScaleRule::RCeil,
                          codes.data(), 1),
            107);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x7E, 0x01, 0x00, 0x02, 0x02, 0x82,
                                         0x00, 0x08}));
  // E5M2: amax = 57344 * 32, byte 132, elements times 2^-5.
  std::vector<float> y = {57344.0f, 0x1p-16f, 0x1p-17f,
                          0x3p-17f, -1.125f,  1.375f};
  for (float &v : y)
    v = std::ldexp(v, 5);
  codes.assign(6, 0);
  EXPECT_EQ(quantizeBlock(y.data(), 6, 1, MXElem::E5M2, ScaleRule::RCeil,
                          codes.data(), 1),
            132);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x7B, 0x01, 0x00, 0x02, 0xBC, 0x3E}));
}

TEST(MXBlock, ExtremeScaleBytes) {
  // FLOOR with a subnormal amax clamps to byte 0: elements times 2^127.
  std::vector<float> x = {0x1p-140f, -0x3p-142f};
  std::vector<uint8_t> codes(2);
  EXPECT_EQ(quantizeBlock(x.data(), 2, 1, MXElem::E4M3, ScaleRule::Floor,
                          codes.data(), 1),
            0);
  // That gives 2^-13 and -0.75 * 2^-13, below half the smallest subnormal
  // 2^-9, so both round to signed zero.
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x00, 0x80}));
  // With amax 2^-126 the FLOOR byte is 0 again but codes are normal.
  x = {0x1p-126f, 0x1.8p-127f};
  EXPECT_EQ(quantizeBlock(x.data(), 2, 1, MXElem::E4M3, ScaleRule::Floor,
                          codes.data(), 1),
            0);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x40, 0x3C}));
  // FLT_MAX under FLOOR_ALT e4m3 gives byte 247, factor 2^-120: FLT_MAX
  // becomes 256 - 2^-16, which rounds to 256.
  x = {FLT_MAX, 0x1p121f};
  EXPECT_EQ(quantizeBlock(x.data(), 2, 1, MXElem::E4M3, ScaleRule::FloorAlt,
                          codes.data(), 1),
            247);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x78, 0x40}));
}

TEST(MXBlock, FloorSaturates) {
  std::vector<float> x = {500.0f, 470.0f, 300.0f, -500.0f, 1.0f};
  std::vector<uint8_t> codes(5);
  // FLOOR: byte 127 (factor 1); 500 and 470 exceed 448 and saturate.
  EXPECT_EQ(quantizeBlock(x.data(), 5, 1, MXElem::E4M3, ScaleRule::Floor,
                          codes.data(), 1),
            127);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x7E, 0x7E, 0x79, 0xFE, 0x38}));
  // RCEIL and FLOOR_ALT: byte 128 (factor 1/2): 250 -> 256, 235 -> 240,
  // 150 -> 144, 0.5 exact.
  for (ScaleRule rule : {ScaleRule::RCeil, ScaleRule::FloorAlt}) {
    EXPECT_EQ(
        quantizeBlock(x.data(), 5, 1, MXElem::E4M3, rule, codes.data(), 1),
        128);
    EXPECT_EQ(codes, (std::vector<uint8_t>{0x78, 0x77, 0x71, 0xF8, 0x30}));
  }
  // E5M2 FLOOR: byte 128; 130000 / 2 = 65000 would round to 2^16, saturates.
  std::vector<float> y = {130000.0f, 1.0f};
  EXPECT_EQ(quantizeBlock(y.data(), 2, 1, MXElem::E5M2, ScaleRule::Floor,
                          codes.data(), 1),
            128);
  EXPECT_EQ(codes[0], 0x7B);
  EXPECT_EQ(codes[1], 0x38);
}

TEST(MXBlock, StridedBlock) {
  // Elements at x[2i], codes at codes[3i]; other slots stay untouched.
  std::vector<float> x = {1.0f, 99.0f, -3.0f, 99.0f, 0.5f};
  std::vector<uint8_t> codes(7, 0xAA);
  EXPECT_EQ(quantizeBlock(x.data(), 3, 2, MXElem::E4M3, ScaleRule::RCeil,
                          codes.data(), 3),
            120);
  // amax 3: byte 120, factor 2^7, so 128, -384 and 64.
  EXPECT_EQ(codes,
            (std::vector<uint8_t>{0x70, 0xAA, 0xAA, 0xFC, 0xAA, 0xAA, 0x68}));
}

TEST(MXBlock, RandomBlocksMatchIndependentModel) {
  std::mt19937 gen(4242);
  for (MXElem elem : kElems) {
    for (ScaleRule rule : kRules) {
      for (int trial = 0; trial < 300; ++trial) {
        int n = 1 + int(gen() % 32);
        std::vector<float> x = randomValues(gen, n, 30);
        std::vector<uint8_t> codes(n);
        uint8_t byte =
            quantizeBlock(x.data(), n, 1, elem, rule, codes.data(), 1);
        int expectedByte;
        std::vector<double> expected =
            expectedBlock(x, elem, rule, expectedByte);
        ASSERT_EQ(int(byte), expectedByte);
        for (int i = 0; i < n; ++i)
          ASSERT_EQ(std::ldexp(formulaValue(codes[i], elem), byte - 127),
                    expected[i])
              << toString(elem) << " " << toString(rule) << " " << i;
      }
    }
  }
}

TEST(MXQuantizeMatrix, PartialBlocksHandDerived) {
  // [2, 33] along axis 1: row 0 is 1.0 except 3.0 in the one-element block
  // at column 32; row 1 is 448 then 2.0 with a zero trailing block.
  std::vector<float> x(2 * 33);
  for (int c = 0; c < 33; ++c) {
    x[c] = c == 32 ? 3.0f : 1.0f;
    x[33 + c] = c == 0 ? 448.0f : (c == 32 ? 0.0f : 2.0f);
  }
  MXMatrix m =
      quantizeMatrix(x.data(), 2, 33, 1, MXElem::E4M3, ScaleRule::RCeil);
  EXPECT_EQ(m.scales, (std::vector<uint8_t>{119, 120, 127, 0}));
  EXPECT_EQ(m.codes[0], 0x78);
  EXPECT_EQ(m.codes[32], 0x7C);
  EXPECT_EQ(m.codes[33], 0x7E);
  EXPECT_EQ(m.codes[34], 0x40);
  EXPECT_EQ(m.codes[65], 0x00);
  EXPECT_EQ(m.dequantize(), x);
  // The transpose, [33, 2] along axis 0, gives scales [2, 2].
  std::vector<float> t(33 * 2);
  for (int r = 0; r < 33; ++r)
    for (int c = 0; c < 2; ++c)
      t[r * 2 + c] = x[c * 33 + r];
  MXMatrix mt =
      quantizeMatrix(t.data(), 33, 2, 0, MXElem::E4M3, ScaleRule::RCeil);
  EXPECT_EQ(mt.scales, (std::vector<uint8_t>{119, 127, 120, 0}));
  EXPECT_EQ(mt.codes[64], 0x7C);
  EXPECT_EQ(mt.codes[65], 0x00);
  EXPECT_EQ(mt.dequantize(), t);
}

TEST(MXQuantizeMatrix, BothAxesMatchIndependentModel) {
  const int64_t rows = 37, cols = 70;
  std::mt19937 gen(31337);
  std::vector<float> x = randomValues(gen, rows * cols, 6);
  for (MXElem elem : kElems) {
    for (ScaleRule rule : kRules) {
      for (int axis : {0, 1}) {
        MXMatrix m = quantizeMatrix(x.data(), rows, cols, axis, elem, rule);
        int64_t outer = axis == 1 ? rows : cols;
        int64_t inner = axis == 1 ? cols : rows;
        int64_t blocks = (inner + 31) / 32;
        ASSERT_EQ(int64_t(m.scales.size()), outer * blocks);
        std::vector<float> deq = m.dequantize();
        std::vector<float> qdq(x);
        quantizeDequantize(qdq.data(), qdq.data(), rows, cols, axis, elem,
                           rule);
        EXPECT_EQ(qdq, deq);
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t b = 0; b < blocks; ++b) {
            std::vector<int64_t> index;
            for (int64_t i = b * 32; i < std::min(inner, b * 32 + 32); ++i)
              index.push_back(axis == 1 ? o * cols + i : i * cols + o);
            std::vector<float> block;
            for (int64_t idx : index)
              block.push_back(x[idx]);
            int byte;
            std::vector<double> expected =
                expectedBlock(block, elem, rule, byte);
            int64_t s = axis == 1 ? o * blocks + b : b * cols + o;
            ASSERT_EQ(int(m.scales[s]), byte)
                << "axis " << axis << " outer " << o << " block " << b;
            for (size_t i = 0; i < index.size(); ++i)
              ASSERT_EQ(double(deq[index[i]]), expected[i])
                  << "axis " << axis << " outer " << o << " block " << b;
          }
        }
      }
    }
  }
}

TEST(MXNames, ParseAndPrint) {
  MXElem elem = MXElem::E4M3;
  EXPECT_TRUE(parseMXElem("e5m2", elem));
  EXPECT_EQ(elem, MXElem::E5M2);
  EXPECT_TRUE(parseMXElem("e4m3", elem));
  EXPECT_EQ(elem, MXElem::E4M3);
  EXPECT_FALSE(parseMXElem("E4M3", elem));
  EXPECT_FALSE(parseMXElem("fp8", elem));
  EXPECT_FALSE(parseMXElem("", elem));
  ScaleRule rule = ScaleRule::RCeil;
  EXPECT_TRUE(parseScaleRule("floor_alt", rule));
  EXPECT_EQ(rule, ScaleRule::FloorAlt);
  EXPECT_TRUE(parseScaleRule("floor", rule));
  EXPECT_EQ(rule, ScaleRule::Floor);
  EXPECT_TRUE(parseScaleRule("rceil", rule));
  EXPECT_EQ(rule, ScaleRule::RCeil);
  EXPECT_FALSE(parseScaleRule("ceil", rule));
  EXPECT_FALSE(parseScaleRule("floor-alt", rule));
  EXPECT_STREQ(toString(MXElem::E4M3), "e4m3");
  EXPECT_STREQ(toString(MXElem::E5M2), "e5m2");
  EXPECT_STREQ(toString(ScaleRule::RCeil), "rceil");
  EXPECT_STREQ(toString(ScaleRule::Floor), "floor");
  EXPECT_STREQ(toString(ScaleRule::FloorAlt), "floor_alt");
  EXPECT_EQ(elemMax(MXElem::E4M3), 448.0f);
  EXPECT_EQ(elemMax(MXElem::E5M2), 57344.0f);
  EXPECT_EQ(elemEmax(MXElem::E4M3), 8);
  EXPECT_EQ(elemEmax(MXElem::E5M2), 15);
}
