//===- Bits.h - bit patterns and integer rounding for the reference -*- C++ -*-===//
//
// The integer helpers that the reference's roundings (BF16.cpp, MX.cpp)
// share: a float's bit pattern and back, and round-to-nearest-even of a
// right shift. Internal to lib/Reference.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_REFERENCE_BITS_H
#define MOE_LIB_REFERENCE_BITS_H

#include <cstdint>
#include <cstring>

namespace moe::ref::bits {

inline uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline uint64_t bitsOf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// Returns round-to-nearest-even of `sig / 2^shift`. Requires sig < 2^62, so
/// any shift above 63 leaves less than half a unit and rounds to zero.
inline uint64_t shiftRoundEven(uint64_t sig, int shift) {
  if (shift <= 0)
    return sig;
  if (shift > 63)
    return 0;
  uint64_t kept = sig >> shift;
  uint64_t rest = sig & ((uint64_t(1) << shift) - 1);
  uint64_t half = uint64_t(1) << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    ++kept;
  return kept;
}

} // namespace moe::ref::bits

#endif // MOE_LIB_REFERENCE_BITS_H
