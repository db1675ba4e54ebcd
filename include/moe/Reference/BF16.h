//===- BF16.h - bfloat16 rounding for the reference model --------*- C++ -*-===//
//
// bf16 is the storage type of activations and weights. The reference keeps
// values in wider types but rounds through these helpers wherever the contract
// (SPEC section 5, quant = none; bf16 outputs) says a bf16 value exists.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_REFERENCE_BF16_H
#define MOE_REFERENCE_BF16_H

#include <cstdint>

namespace moe::ref {

/// Rounds an fp32 value to bf16 bits, round-to-nearest-even. NaN stays NaN
/// (quieted, sign kept); overflow rounds to infinity as IEEE requires.
uint16_t bf16FromFloat(float value);

/// Widens bf16 bits to fp32 (exact).
float floatFromBF16(uint16_t bits);

/// Rounds an fp32 value to the nearest bf16 value, returned as fp32.
float roundToBF16(float value);

/// Rounds an fp64 value directly to the nearest bf16 (ties to even, no
/// intermediate fp32 rounding), as a wide accumulator written to a bf16 output.
float roundToBF16(double value);

} // namespace moe::ref

#endif // MOE_REFERENCE_BF16_H
