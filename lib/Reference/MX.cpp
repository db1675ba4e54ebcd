//===- MX.cpp - OCP microscaling (MXFP8) numerics, bit exact --------------===//
//
// The host definition of MX quantization (SPEC section 5) that every target
// is judged against. Codecs work on bit patterns with integer arithmetic, so
// no result depends on the FPU's rounding mode, flush-to-zero state or
// excess precision. Choices the contract leaves open are documented at the
// function that makes them:
//  - RCEIL with an fp32-subnormal ratio r (scaleByte),
//  - how the fp32 product x * 2^(127 - byte) is formed (quantizeBlock),
//  - the codes written for a block holding NaN or Inf (quantizeBlock).
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/MX.h"

#include "Bits.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace moe::ref {

namespace {

using bits::bitsOf;
using bits::floatOf;
using bits::shiftRoundEven;

/// Parameters of an FP8 element format.
struct FP8Format {
  int fraction;    ///< explicit fraction bits
  int bias;        ///< exponent bias
  int minExp;      ///< exponent of the smallest normal
  uint8_t maxCode; ///< code of the largest finite magnitude
  uint8_t nanCode; ///< canonical NaN code (the sign bit is ORed in)
};

constexpr FP8Format kE4M3 = {3, 7, -6, 0x7E, 0x7F};
constexpr FP8Format kE5M2 = {2, 15, -14, 0x7B, 0x7F};

const FP8Format &formatOf(MXElem elem) {
  return elem == MXElem::E4M3 ? kE4M3 : kE5M2;
}

/// The exact product `a * b` rounded once to fp32. Both factors are fp32, so
/// their product is exact in fp64 (48 significant bits, exponents far inside
/// fp64's range) and the single conversion is the correctly rounded fp32
/// product, even when b is the fp32 subnormal 2^-127.
float productInFP32(float a, float b) {
  return static_cast<float>(static_cast<double>(a) * static_cast<double>(b));
}

/// 2^(127 - byte) for byte in [0, 254]: 2^127 down to the fp32 subnormal
/// 2^-127, all exact in fp32.
float inverseScale(uint8_t byte) {
  return static_cast<float>(std::ldexp(1.0, 127 - int(byte)));
}

} // namespace

float elemMax(MXElem elem) { return elem == MXElem::E4M3 ? 448.0f : 57344.0f; }

int elemEmax(MXElem elem) { return elem == MXElem::E4M3 ? 8 : 15; }

uint8_t encodeFP8(float value, MXElem elem) {
  const FP8Format &fmt = formatOf(elem);
  uint32_t bits = bitsOf(value);
  uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  int field = static_cast<int>((bits >> 23) & 0xFF);
  uint32_t fraction = bits & 0x7FFFFFu;
  if (field == 0xFF)
    return sign | (fraction ? fmt.nanCode : fmt.maxCode);

  // value = sig * 2^lsbExp exactly; `exp` is floor(log2 |value|) for normal
  // fp32 and, for fp32 subnormals, anything below the FP8 normal range.
  uint64_t sig = field ? (fraction | 0x800000u) : fraction;
  int lsbExp = (field ? field : 1) - 150;
  int exp = field ? field - 127 : -127;
  bool subnormal = exp < fmt.minExp;
  // The FP8 spacing around |value| is 2^(max(exp, minExp) - fraction).
  int quantumExp = (subnormal ? fmt.minExp : exp) - fmt.fraction;
  int64_t rounded =
      static_cast<int64_t>(shiftRoundEven(sig, quantumExp - lsbExp));
  // `rounded` counts quanta including the hidden bit, so adding it to the
  // exponent field minus one gives the code; a carry out of the fraction
  // moves to the next binade (or from the subnormals to the smallest
  // normal). Codes grow with magnitude, so satfinite is a clamp.
  int64_t code = subnormal
                     ? rounded
                     : (int64_t(exp + fmt.bias - 1) << fmt.fraction) + rounded;
  return sign | static_cast<uint8_t>(std::min<int64_t>(code, fmt.maxCode));
}

float decodeFP8(uint8_t code, MXElem elem) {
  const FP8Format &fmt = formatOf(elem);
  uint32_t sign = uint32_t(code & 0x80) << 24;
  int magnitude = code & 0x7F;
  int field = magnitude >> fmt.fraction;
  uint32_t fraction = magnitude & ((1u << fmt.fraction) - 1);
  int maxField = (1 << (7 - fmt.fraction)) - 1;
  if (elem == MXElem::E4M3 && magnitude == 0x7F)
    return floatOf(sign | 0x7FC00000u);
  if (elem == MXElem::E5M2 && field == maxField)
    return floatOf(sign | (fraction ? 0x7FC00000u : 0x7F800000u));
  if (field == 0) {
    // fraction * 2^(minExp - fraction bits): a small integer times a power
    // of two well inside fp32's normal range, so both steps are exact.
    float subnormal =
        std::ldexp(static_cast<float>(fraction), fmt.minExp - fmt.fraction);
    return floatOf(sign | bitsOf(subnormal));
  }
  uint32_t fp32Field = uint32_t(field - fmt.bias + 127);
  return floatOf(sign | (fp32Field << 23) | (fraction << (23 - fmt.fraction)));
}

float decodeE8M0(uint8_t byte) {
  if (byte == 0xFF)
    return std::numeric_limits<float>::quiet_NaN();
  // 2^-127 is the fp32 subnormal with only the top fraction bit set.
  if (byte == 0)
    return floatOf(0x00400000u);
  return floatOf(uint32_t(byte) << 23);
}

/// RCEIL picks the smallest E8M0 value 2^(byte-127) >= r, r = amax / elemMax
/// rounded to fp32, clamped to byte 254. For a normal r this is SPEC's
/// "exponent field of r, +1 if the fraction is non-zero". For an fp32
/// subnormal r (exponent field 0) that formula would always give 1; we keep
/// the smallest E8M0 value >= r instead: 2^-127 (byte 0) when r <= 2^-127,
/// i.e. when the fraction is at most 0x400000, else 2^-126 (byte 1). That is
/// what a round-toward-+inf conversion of r to E8M0 gives. Either byte keeps
/// every element of the block within elemMax.
///
/// FLOOR and FLOOR_ALT subtract emax_elem (or emax_elem - 1) from amax's
/// exponent field; a subnormal amax has field 0 and clamps to byte 0, the
/// same as floor(log2 amax) + 127 - emax_elem clamped.
///
/// Only the magnitude of amax is used.
uint8_t scaleByte(float amax, MXElem elem, ScaleRule rule) {
  uint32_t magnitude = bitsOf(amax) & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u)
    return 0xFF;
  if (magnitude == 0)
    return 0;
  int byte = 0;
  switch (rule) {
  case ScaleRule::RCeil: {
    uint32_t r = bitsOf(floatOf(magnitude) / elemMax(elem));
    int field = static_cast<int>(r >> 23);
    uint32_t fraction = r & 0x7FFFFFu;
    if (field == 0)
      byte = fraction > 0x400000u ? 1 : 0;
    else
      byte = field + (fraction != 0 ? 1 : 0);
    break;
  }
  case ScaleRule::Floor:
    byte = static_cast<int>(magnitude >> 23) - elemEmax(elem);
    break;
  case ScaleRule::FloorAlt:
    byte = static_cast<int>(magnitude >> 23) - (elemEmax(elem) - 1);
    break;
  }
  return static_cast<uint8_t>(std::clamp(byte, 0, 254));
}

/// The element product x * 2^(127 - byte) is formed by productInFP32: the
/// exact product rounded once to fp32, which is what a single IEEE fp32
/// multiply by the power of two gives, including for byte 254 where the
/// factor 2^-127 is an fp32 subnormal.
///
/// A block holding NaN or Inf gets scale 0xFF; its codes are the NaN code
/// carrying each element's sign, so they decode to NaN on their own too.
uint8_t quantizeBlock(const float *x, int64_t n, int64_t stride, MXElem elem,
                      ScaleRule rule, uint8_t *codes, int64_t codeStride) {
  assert(n >= 1 && n <= kMXBlock && "an MX block holds 1..32 elements");
  float amax = 0.0f;
  bool nonFinite = false;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i * stride];
    if (!std::isfinite(v))
      nonFinite = true;
    else
      amax = std::max(amax, std::fabs(v));
  }
  if (nonFinite) {
    const FP8Format &fmt = formatOf(elem);
    for (int64_t i = 0; i < n; ++i)
      codes[i * codeStride] =
          fmt.nanCode | (std::signbit(x[i * stride]) ? 0x80 : 0x00);
    return 0xFF;
  }
  uint8_t byte = scaleByte(amax, elem, rule);
  float factor = inverseScale(byte);
  for (int64_t i = 0; i < n; ++i)
    codes[i * codeStride] =
        encodeFP8(productInFP32(x[i * stride], factor), elem);
  return byte;
}

std::vector<float> MXMatrix::dequantize() const {
  assert((axis == 0 || axis == 1) && "MX axis must be 0 or 1");
  assert(static_cast<int64_t>(codes.size()) == rows * cols);
  std::vector<float> out(codes.size());
  int64_t blocksPerRow = (cols + kMXBlock - 1) / kMXBlock;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      int64_t s = axis == 1 ? r * blocksPerRow + c / kMXBlock
                            : (r / kMXBlock) * cols + c;
      // code * 2^(byte-127) is representable in fp32 for every scale a
      // quantized block can carry, so the rounding below never changes it.
      out[r * cols + c] = productInFP32(decodeFP8(codes[r * cols + c], elem),
                                        decodeE8M0(scales[s]));
    }
  }
  return out;
}

MXMatrix quantizeMatrix(const float *x, int64_t rows, int64_t cols, int axis,
                        MXElem elem, ScaleRule rule) {
  assert((axis == 0 || axis == 1) && "MX axis must be 0 or 1");
  MXMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.axis = axis;
  m.elem = elem;
  m.codes.assign(rows * cols, 0);
  if (axis == 1) {
    int64_t blocksPerRow = (cols + kMXBlock - 1) / kMXBlock;
    m.scales.assign(rows * blocksPerRow, 0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < blocksPerRow; ++b) {
        int64_t start = r * cols + b * kMXBlock;
        int64_t n = std::min<int64_t>(kMXBlock, cols - b * kMXBlock);
        m.scales[r * blocksPerRow + b] = quantizeBlock(
            x + start, n, 1, elem, rule, m.codes.data() + start, 1);
      }
    }
    return m;
  }
  int64_t blocksPerCol = (rows + kMXBlock - 1) / kMXBlock;
  m.scales.assign(blocksPerCol * cols, 0);
  for (int64_t b = 0; b < blocksPerCol; ++b) {
    int64_t n = std::min<int64_t>(kMXBlock, rows - b * kMXBlock);
    for (int64_t c = 0; c < cols; ++c) {
      int64_t start = b * kMXBlock * cols + c;
      m.scales[b * cols + c] = quantizeBlock(x + start, n, cols, elem, rule,
                                             m.codes.data() + start, cols);
    }
  }
  return m;
}

void quantizeDequantize(const float *x, float *out, int64_t rows, int64_t cols,
                        int axis, MXElem elem, ScaleRule rule) {
  std::vector<float> values =
      quantizeMatrix(x, rows, cols, axis, elem, rule).dequantize();
  std::copy(values.begin(), values.end(), out);
}

bool parseMXElem(const std::string &name, MXElem &elem) {
  if (name == "e4m3")
    elem = MXElem::E4M3;
  else if (name == "e5m2")
    elem = MXElem::E5M2;
  else
    return false;
  return true;
}

bool parseScaleRule(const std::string &name, ScaleRule &rule) {
  if (name == "rceil")
    rule = ScaleRule::RCeil;
  else if (name == "floor")
    rule = ScaleRule::Floor;
  else if (name == "floor_alt")
    rule = ScaleRule::FloorAlt;
  else
    return false;
  return true;
}

const char *toString(MXElem elem) {
  return elem == MXElem::E4M3 ? "e4m3" : "e5m2";
}

const char *toString(ScaleRule rule) {
  switch (rule) {
  case ScaleRule::RCeil:
    return "rceil";
  case ScaleRule::Floor:
    return "floor";
  case ScaleRule::FloorAlt:
    return "floor_alt";
  }
  return "rceil";
}

} // namespace moe::ref
