//===- MXBuilders.h - MX numerics as IR builders ----------------*- C++ -*-===//
//
// The one IR definition of the MX (OCP microscaling) numerics and of the
// elementwise activation backward, shared by every lowering: the host
// lowering (convert-moe-to-linalg) and the GPU lowerings emit exactly these
// ops, so the bits checked on the CPU in CI are the bits a GPU kernel
// computes. Each builder is bit exact with its counterpart in
// lib/Reference/MX.cpp (docs/numerics.md):
//
//   amax  --buildAmaxStep (|x| as bits, NaN/Inf above every finite value)
//     |
//   buildScaleByte  (RCEIL / FLOOR / FLOOR_ALT, 0xFF for NaN/Inf blocks)
//     |
//   buildEncodeFP8  x * 2^(127 - byte) as one IEEE fp32 multiply, then
//                   round-to-nearest-even to E4M3 / E5M2 (satfinite,
//                   subnormals kept) on the integer bits
//
//   buildDecodeFP8 * buildDecodeE8M0 = buildDequantize (exact in fp32)
//
// Codes and scale bytes are i8 values (bit patterns); a lowering moves them
// into f8E4M3FN / f8E5M2 / f8E8M0FNU tensors with arith.bitcast (the LLVM
// type conversion stores such tensors as i8 and folds the casts). The
// builders take and return scalars (the body of a linalg.generic or one GPU
// thread's element) and emit only arith and math ops, which both the LLVM
// and the NVVM lowerings handle; the float operations involved are IEEE
// multiplies and one division, which must not be compiled with flush-to-zero
// (the host never is).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_UTILS_MXBUILDERS_H
#define MOE_DIALECT_MOE_UTILS_MXBUILDERS_H

#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::moe {

/// The MLIR element type of MX codes: f8E4M3FN or f8E5M2.
Type getMXElementType(MLIRContext *context, MXElement element);

/// The MXElement of an MX code type (f8E4M3FN or f8E5M2).
MXElement getMXElement(Type type);

/// One step of a block's amax reduction: max(acc, |x|), compared as the
/// integer bits of the magnitudes, so a NaN or Inf element makes the result
/// at least +Inf (and the scale byte 0xFF) and no flush-to-zero mode can
/// change a subnormal. `acc` starts at +0.0; both operands are f32.
Value buildAmaxStep(OpBuilder &b, Location loc, Value acc, Value x);

/// The E8M0 scale byte (i8) of a block whose amax (f32, sign ignored) is
/// `amax`: 0 for amax = 0, 0xFF for NaN or Inf, else the byte of `rule`
/// clamped to [0, 254]. RCEIL divides amax by the element's largest value in
/// IEEE fp32 and rounds the quotient up to a power of two, including the
/// fp32-subnormal quotients (byte 0 when r <= 2^-127, else 1).
Value buildScaleByte(OpBuilder &b, Location loc, Value amax, MXElement element,
                     ScaleRule rule);

/// 2^(127 - byte) as f32 for a scale byte in [0, 254]: from 2^127 (byte 0)
/// down to the fp32 subnormal 2^-127 (byte 254), each built from its bits.
Value buildInverseScale(OpBuilder &b, Location loc, Value scaleByte);

/// The MX code (i8) of the f32 element `x` in a block with scale byte
/// `scaleByte` (i8): round-to-nearest-even of x * 2^(127 - byte), the
/// product one IEEE fp32 multiply, saturated to +-elem_max; for byte 0xFF
/// (a block holding NaN or Inf) the NaN code with x's sign.
Value buildEncodeFP8(OpBuilder &b, Location loc, Value x, Value scaleByte,
                     MXElement element);

/// The exact f32 value of an FP8 code (i8). E4M3 0x7F/0xFF and the E5M2
/// NaN codes give NaN, E5M2 0x7C/0xFC give +-Inf.
Value buildDecodeFP8(OpBuilder &b, Location loc, Value code, MXElement element);

/// The f32 value 2^(byte - 127) of an E8M0 scale byte (i8); 0xFF is NaN and
/// byte 0 the fp32 subnormal 2^-127.
Value buildDecodeE8M0(OpBuilder &b, Location loc, Value scaleByte);

/// code * 2^(byte - 127) as f32: one IEEE multiply, exact for every scale a
/// quantizer produces; a NaN scale gives NaN.
Value buildDequantize(OpBuilder &b, Location loc, Value code, Value scaleByte,
                      MXElement element);

/// act(g) for f32 `g`, evaluated in f32 in R_mx's operand order (R_mx
/// evaluates in f64 and rounds: the values agree within a few f32 ulps):
/// silu g * sigmoid(g) for swiglu, the tanh form of gelu for geglu.
Value buildActivation(OpBuilder &b, Location loc, Activation activation,
                      Value g);

/// act'(g) for f32 `g`, evaluated in f32 like buildActivation.
Value buildActivationDerivative(OpBuilder &b, Location loc,
                                Activation activation, Value g);

/// The f32 results of the clamped gated activation backward at one element.
struct GatedActGrads {
  Value dGate; ///< dh * u * act'(g) * [gate_lo < g < gate_hi]
  Value dUp;   ///< dh * act(g) * [up_lo < u < up_hi]
  Value h;     ///< act(g) * u
};

/// The backward of the clamped gated activation at one element, in the f32
/// operation order of docs/numerics.md: g and u (`gateRaw`, `upRaw`)
/// clamped to the limits of `clamp` (may be null) rounded to f32, s and s'
/// from buildActivation / buildActivationDerivative, h = s * u,
/// dh = a * dA, dg = (dh * u) * s' and du = dh * s, each zero where the
/// strict clamp mask is false.
GatedActGrads buildGatedActBwd(OpBuilder &b, Location loc,
                               Activation activation, ClampAttr clamp,
                               Value gateRaw, Value upRaw, Value dAct,
                               Value affinity);

} // namespace mlir::moe

#endif // MOE_DIALECT_MOE_UTILS_MXBUILDERS_H
