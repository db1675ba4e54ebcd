//===- MX.h - OCP microscaling (MXFP8) numerics, bit exact --------*- C++ -*-===//
//
// The one host-side definition of MX quantization that every target is
// judged against (SPEC section 5): FP8 element codecs (E4M3FN, E5M2), the
// E8M0 scale codec, the RCEIL / FLOOR / FLOOR_ALT scale rules, and block
// quantization along either axis of a row-major matrix.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_REFERENCE_MX_H
#define MOE_REFERENCE_MX_H

#include <cstdint>
#include <string>
#include <vector>

namespace moe::ref {

/// Number of elements sharing one E8M0 scale.
constexpr int64_t kMXBlock = 32;

/// FP8 element formats of an MX block.
enum class MXElem { E4M3, E5M2 };

/// How the shared E8M0 scale of a block is chosen from the block's amax.
enum class ScaleRule {
  /// byte = exponent(amax / elem_max rounded to fp32), +1 if mantissa != 0.
  RCeil,
  /// byte = exponent(amax) - emax_elem (OCP v1.0 example).
  Floor,
  /// byte = exponent(amax) - (emax_elem - 1) (the NKI kernel).
  FloorAlt,
};

/// Largest finite magnitude: 448 for E4M3, 57344 for E5M2.
float elemMax(MXElem elem);
/// Exponent of the largest power of two not above elemMax: 8 for E4M3, 15
/// for E5M2.
int elemEmax(MXElem elem);

/// Encodes fp32 to an FP8 code: round-to-nearest-even, saturated to
/// +-elemMax (satfinite: +-Inf also saturate), NaN to a NaN code (0x7F with
/// the input's sign bit). Subnormal results are produced, never flushed.
uint8_t encodeFP8(float value, MXElem elem);
/// Decodes an FP8 code to fp32 (exact). E4M3 0x7F/0xFF and E5M2 NaN codes
/// give NaN; E5M2 0x7C/0xFC give +-Inf.
float decodeFP8(uint8_t code, MXElem elem);

/// Decodes an E8M0 scale: 2^(byte - 127); 0xFF is NaN. Exact in fp32
/// (byte 0 and 1 give fp32 subnormals / the smallest normal).
float decodeE8M0(uint8_t byte);

/// The scale byte of a block whose largest magnitude is `amax` (>= 0).
/// amax == 0 gives 0; a NaN or Inf amax gives 0xFF.
uint8_t scaleByte(float amax, MXElem elem, ScaleRule rule);

/// Quantizes `n` (1..32) values read at `x[i * stride]`: computes amax, the
/// scale byte, and codes[i * codeStride] = encodeFP8(x * 2^(127 - byte)),
/// the product computed in fp32. Returns the scale byte. A block holding NaN
/// or Inf gets scale 0xFF (its elements then decode to NaN).
uint8_t quantizeBlock(const float *x, int64_t n, int64_t stride, MXElem elem,
                      ScaleRule rule, uint8_t *codes, int64_t codeStride);

/// A row-major [rows, cols] matrix quantized in 32-element blocks along one
/// axis. axis = 1: blocks run along a row (scales [rows, ceil(cols/32)]);
/// axis = 0: blocks run down a column (scales [ceil(rows/32), cols]). A
/// trailing partial block (length not a multiple of 32) is its own block.
struct MXMatrix {
  int64_t rows = 0, cols = 0;
  int axis = 1;
  MXElem elem = MXElem::E4M3;
  std::vector<uint8_t> codes;  ///< [rows, cols]
  std::vector<uint8_t> scales; ///< see above

  /// Exact fp32 values code * 2^(scale - 127), [rows, cols] row-major.
  std::vector<float> dequantize() const;
};

/// Quantizes `x` ([rows, cols] row-major) along `axis`.
MXMatrix quantizeMatrix(const float *x, int64_t rows, int64_t cols, int axis,
                        MXElem elem, ScaleRule rule);

/// quantizeMatrix followed by dequantize, written into `out` (may alias x).
void quantizeDequantize(const float *x, float *out, int64_t rows,
                        int64_t cols, int axis, MXElem elem, ScaleRule rule);

/// Spellings shared by the CLI and the dialect: "e4m3"/"e5m2",
/// "rceil"/"floor"/"floor_alt". Return false on an unknown name.
bool parseMXElem(const std::string &name, MXElem &elem);
bool parseScaleRule(const std::string &name, ScaleRule &rule);
const char *toString(MXElem elem);
const char *toString(ScaleRule rule);

} // namespace moe::ref

#endif // MOE_REFERENCE_MX_H
