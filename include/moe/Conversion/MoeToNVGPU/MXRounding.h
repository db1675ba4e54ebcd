//===- MXRounding.h - MX rounding to exact bf16 with NVVM conversions -----===//
//
// The pieces every sm_90a kernel that rounds values to their MX values
// shares (the operand kernels, P1's epilogue): the hardware pair
// conversions around the scale factors of MXBuilders.h, and a block's amax
// across the lanes that hold it. The scale byte, its inverse and its
// factor come from MXBuilders (buildScaleByte, buildInverseScale,
// buildDecodeE8M0), the definition the host lowering uses; x * inverse and
// code * factor are single IEEE fp32 multiplies by powers of two, as in
// buildEncodeFP8 and buildDequantize, so the values are the host's. The bit
// rounding of RCEIL blocks (no conversion) is MXBitRounding.h's templates,
// built here as IR.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_MXROUNDING_H
#define MOE_CONVERSION_MOETONVGPU_MXROUNDING_H

#include "moe/Conversion/MoeToNVGPU/MXBitRounding.h"
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

/// Whether blocks of `rule` round on the bits: RCEIL's scale keeps every
/// x / 2^(s - 127) within elem_max; FLOOR's values above it saturate, which
/// the bits do not.
inline bool hasMXBitRounding(ScaleRule rule) {
  return rule == ScaleRule::rceil;
}

/// The constants of `element` (e4m3: offset 14, fraction 3, step 2^4;
/// e5m2: 29, 2, 2^5).
inline MXBitRounding getMXBitRounding(MXElement element) {
  return element == MXElement::f8E4M3FN ? kMXBitRoundingE4M3
                                        : kMXBitRoundingE5M2;
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
