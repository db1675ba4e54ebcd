//===- BF16.cpp - bfloat16 rounding for the reference model ---------------===//
//
// Rounds fp32 and fp64 values to bfloat16 with round-to-nearest-even. The
// fp64 path rounds the wide value once, straight to the bf16 grid: going
// through fp32 first could round twice and land on the other neighbour when
// the fp32 rounding creates an exact bf16 tie. Everything is integer
// arithmetic on the bit patterns, so the result does not depend on the FPU's
// rounding mode, flush-to-zero state or excess precision.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/BF16.h"

#include "Bits.h"

namespace moe::ref {

namespace {

using bits::bitsOf;
using bits::floatOf;
using bits::shiftRoundEven;

constexpr uint16_t kBF16Inf = 0x7F80;
constexpr uint16_t kBF16QuietNaN = 0x7FC0;
/// bf16 keeps 7 fraction bits and fp32's exponent range.
constexpr int kBF16Fraction = 7;
constexpr int kBF16MinExp = -126;
constexpr int kBF16Bias = 127;

} // namespace

uint16_t bf16FromFloat(float value) {
  uint32_t bits = bitsOf(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7FFF plus the lowest kept bit rounds the dropped 16 bits to
  // nearest, ties to even. A carry out of the fraction bumps the exponent,
  // which is exactly the next binade (or infinity past the largest finite).
  uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7FFFu + lsb) >> 16);
}

float floatFromBF16(uint16_t bits) { return floatOf(uint32_t(bits) << 16); }

float roundToBF16(float value) { return floatFromBF16(bf16FromFloat(value)); }

float roundToBF16(double value) {
  uint64_t bits = bitsOf(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 48) & 0x8000u);
  int field = static_cast<int>((bits >> 52) & 0x7FF);
  uint64_t fraction = bits & ((uint64_t(1) << 52) - 1);
  if (field == 0x7FF)
    return floatFromBF16(sign | (fraction ? kBF16QuietNaN : kBF16Inf));

  // value = sig * 2^lsbExp exactly; `exp` is floor(log2 |value|) for normal
  // doubles and anything below bf16's range for subnormal ones.
  uint64_t sig = field ? (fraction | (uint64_t(1) << 52)) : fraction;
  int lsbExp = (field ? field : 1) - 1075;
  int exp = field ? field - 1023 : -1023;
  bool subnormal = exp < kBF16MinExp;
  // The bf16 spacing around |value| is 2^(max(exp, emin) - 7).
  int quantumExp = (subnormal ? kBF16MinExp : exp) - kBF16Fraction;
  int64_t rounded =
      static_cast<int64_t>(shiftRoundEven(sig, quantumExp - lsbExp));
  // `rounded` counts quanta including the hidden bit, so adding it to the
  // exponent field minus one yields the code, with a carry into the next
  // binade when rounding reaches 2^8 quanta.
  int64_t code =
      subnormal ? rounded
                : (int64_t(exp + kBF16Bias - 1) << kBF16Fraction) + rounded;
  if (code >= kBF16Inf)
    code = kBF16Inf;
  return floatFromBF16(static_cast<uint16_t>(sign | code));
}

} // namespace moe::ref
