//===- MXBuilders.cpp - MX numerics as IR builders ------------------------===//
//
// Emits the MX numerics and the activation backward as arith / math ops,
// mirroring lib/Reference/MX.cpp and lib/Reference/Model.cpp step for step
// so that a reader can check one against the other. The FP8 codecs and the
// scale rules work on integer bits (bitcast, shifts, selects), which fixes
// every rounding independently of the target's float modes; the only float
// operations are IEEE multiplies by powers of two, RCEIL's division and the
// f64 activations.
//
//===----------------------------------------------------------------------===//
#include "moe/Dialect/Moe/Utils/MXBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Bit-level parameters of an FP8 element format (the same table as
/// lib/Reference/MX.cpp).
struct FP8Format {
  int64_t fraction; ///< explicit fraction bits
  int64_t bias;     ///< exponent bias
  int64_t minExp;   ///< exponent of the smallest normal
  int64_t maxCode;  ///< code of the largest finite magnitude
  int64_t nanCode;  ///< canonical NaN code (the sign bit is ORed in)
  int64_t emax;     ///< exponent of the largest power of two <= elem_max
  float maxValue;   ///< elem_max
};

constexpr FP8Format kE4M3 = {3, 7, -6, 0x7E, 0x7F, 8, 448.0f};
constexpr FP8Format kE5M2 = {2, 15, -14, 0x7B, 0x7F, 15, 57344.0f};

const FP8Format &formatOf(MXElement element) {
  assert(element != MXElement::none && "MX numerics need an element type");
  return element == MXElement::f8E4M3FN ? kE4M3 : kE5M2;
}

/// Emits the ops of one builder call: scalar integer and float helpers.
class Emitter {
public:
  Emitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Type i8() const { return b.getI8Type(); }
  Type i32() const { return b.getI32Type(); }
  Type f32() const { return b.getF32Type(); }
  Type f64() const { return b.getF64Type(); }

  Value i32(int64_t value) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(value));
  }
  Value f32(float value) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  }
  Value f64(double value) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(value));
  }

  Value bitsOf(Value f) { return arith::BitcastOp::create(b, loc, i32(), f); }
  Value floatOf(Value bits) {
    return arith::BitcastOp::create(b, loc, f32(), bits);
  }
  Value byteToI32(Value byte) {
    return arith::ExtUIOp::create(b, loc, i32(), byte);
  }
  Value toI8(Value v) { return arith::TruncIOp::create(b, loc, i8(), v); }

  Value andI(Value x, int64_t mask) {
    return arith::AndIOp::create(b, loc, x, i32(mask));
  }
  Value orI(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value shr(Value x, int64_t n) {
    return arith::ShRUIOp::create(b, loc, x, i32(n));
  }
  Value shl(Value x, int64_t n) {
    return arith::ShLIOp::create(b, loc, x, i32(n));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value add(Value x, int64_t y) { return add(x, i32(y)); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate pred, Value x, int64_t y) {
    return arith::CmpIOp::create(b, loc, pred, x, i32(y));
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value select(Value cond, int64_t x, Value y) {
    return select(cond, i32(x), y);
  }

  OpBuilder &b;
  Location loc;
};

/// The FP8 code (sign | magnitude, as i32) of the f32 `value`: RNE on the
/// integer bits, satfinite, NaN to the NaN code and +-Inf to +-max. The steps
/// are those of encodeFP8 in lib/Reference/MX.cpp.
Value roundToFP8(Emitter &e, Value value, const FP8Format &fmt) {
  using P = arith::CmpIPredicate;
  Value bits = e.bitsOf(value);
  Value sign = e.andI(e.shr(bits, 24), 0x80);
  Value field = e.andI(e.shr(bits, 23), 0xFF);
  Value fraction = e.andI(bits, 0x7FFFFF);
  Value isNormal = e.cmp(P::ne, field, 0);

  // value = sig * 2^lsbExp exactly; exp = field - 127 is floor(log2|value|)
  // for normal fp32 and below every FP8 exponent for fp32 subnormals.
  Value sig = e.select(isNormal, e.orI(fraction, e.i32(0x800000)), fraction);
  Value lsbExp = e.add(e.select(isNormal, field, e.i32(1)), -150);
  Value exp = e.add(field, -127);
  Value subnormal = e.cmp(P::slt, exp, fmt.minExp);
  Value quantumExp =
      e.add(arith::MaxSIOp::create(e.b, e.loc, exp, e.i32(fmt.minExp)),
            -fmt.fraction);
  // The shift is at least 23 - fraction (20 or 21); from 25 on, sig < 2^24
  // always rounds to 0, so clamping keeps every shift inside i32.
  Value unclamped = e.sub(quantumExp, lsbExp);
  Value shift = arith::MinSIOp::create(e.b, e.loc, unclamped, e.i32(25));
  // Round to nearest even: add half - 1 plus the kept LSB, then truncate.
  Value keptLsb = e.andI(arith::ShRUIOp::create(e.b, e.loc, sig, shift), 1);
  Value one = e.i32(1);
  Value halfMinusOne =
      e.add(arith::ShLIOp::create(e.b, e.loc, one, e.add(shift, -1)), -1);
  Value rounded = arith::ShRUIOp::create(
      e.b, e.loc, e.add(e.add(sig, halfMinusOne), keptLsb), shift);
  // `rounded` counts quanta including the hidden bit, so it adds to the
  // exponent field minus one; a carry moves to the next binade. Codes grow
  // with magnitude, so satfinite is a clamp.
  Value normalCode =
      e.add(e.shl(e.add(exp, fmt.bias - 1), fmt.fraction), rounded);
  Value code = e.select(subnormal, rounded, normalCode);
  code = arith::MinSIOp::create(e.b, e.loc, code, e.i32(fmt.maxCode));
  Value isNaN = e.cmp(P::ne, fraction, 0);
  Value nanCode = e.i32(fmt.nanCode);
  Value special = e.select(isNaN, nanCode, e.i32(fmt.maxCode));
  code = e.select(e.cmp(P::eq, field, 0xFF), special, code);
  return e.orI(sign, code);
}

} // namespace

Type mlir::moe::getMXElementType(MLIRContext *context, MXElement element) {
  assert(element != MXElement::none && "no MX element type for `none`");
  if (element == MXElement::f8E4M3FN)
    return Float8E4M3FNType::get(context);
  return Float8E5M2Type::get(context);
}

MXElement mlir::moe::getMXElement(Type type) {
  assert((isa<Float8E4M3FNType, Float8E5M2Type>(type)) && "not an MX type");
  return isa<Float8E4M3FNType>(type) ? MXElement::f8E4M3FN : MXElement::f8E5M2;
}

Value mlir::moe::buildAmaxStep(OpBuilder &b, Location loc, Value acc, Value x) {
  Emitter e(b, loc);
  // Magnitudes compare like their bit patterns, and NaN bits lie above Inf.
  Value magnitude = e.andI(e.bitsOf(x), 0x7FFFFFFF);
  return e.floatOf(arith::MaxUIOp::create(b, loc, e.bitsOf(acc), magnitude));
}

Value mlir::moe::buildScaleByte(OpBuilder &b, Location loc, Value amax,
                                MXElement element, ScaleRule rule) {
  using P = arith::CmpIPredicate;
  const FP8Format &fmt = formatOf(element);
  Emitter e(b, loc);
  Value magnitude = e.andI(e.bitsOf(amax), 0x7FFFFFFF);
  Value byte;
  switch (rule) {
  case ScaleRule::rceil: {
    // r = amax / elem_max in IEEE fp32; the byte of the smallest power of
    // two >= r. A subnormal r gives 0 when r <= 2^-127 (fraction 0x400000)
    // and 1 above (docs/numerics.md, RCEIL with a subnormal ratio).
    Value amaxF = e.floatOf(magnitude);
    Value ratio = arith::DivFOp::create(b, loc, amaxF, e.f32(fmt.maxValue));
    Value r = e.bitsOf(ratio);
    Value field = e.shr(r, 23);
    Value fraction = e.andI(r, 0x7FFFFF);
    Value inexact =
        arith::ExtUIOp::create(b, loc, e.i32(), e.cmp(P::ne, fraction, 0));
    Value subnormalByte = arith::ExtUIOp::create(
        b, loc, e.i32(), e.cmp(P::ugt, fraction, 0x400000));
    Value isSubnormal = e.cmp(P::eq, field, 0);
    byte = e.select(isSubnormal, subnormalByte, e.add(field, inexact));
    break;
  }
  case ScaleRule::floor:
    byte = e.add(e.shr(magnitude, 23), -fmt.emax);
    break;
  case ScaleRule::floor_alt:
    byte = e.add(e.shr(magnitude, 23), -(fmt.emax - 1));
    break;
  }
  byte = arith::MaxSIOp::create(b, loc, byte, e.i32(0));
  byte = arith::MinSIOp::create(b, loc, byte, e.i32(254));
  byte = e.select(e.cmp(P::eq, magnitude, 0), 0, byte);
  byte = e.select(e.cmp(P::uge, magnitude, 0x7F800000), 0xFF, byte);
  return e.toI8(byte);
}

Value mlir::moe::buildInverseScale(OpBuilder &b, Location loc,
                                   Value scaleByte) {
  Emitter e(b, loc);
  Value byte = e.byteToI32(scaleByte);
  // 2^(127 - byte) has exponent field 254 - byte down to byte 253 (2^-126);
  // byte 254 is the subnormal 2^-127, only its top fraction bit set.
  Value normal = e.shl(e.sub(e.i32(254), byte), 23);
  Value bits =
      e.select(e.cmp(arith::CmpIPredicate::eq, byte, 254), 0x00400000, normal);
  return e.floatOf(bits);
}

Value mlir::moe::buildEncodeFP8(OpBuilder &b, Location loc, Value x,
                                Value scaleByte, MXElement element) {
  const FP8Format &fmt = formatOf(element);
  Emitter e(b, loc);
  // One IEEE fp32 multiply by an exact power of two is the correctly
  // rounded product that lib/Reference/MX.cpp forms through fp64.
  Value product =
      arith::MulFOp::create(b, loc, x, buildInverseScale(b, loc, scaleByte));
  Value code = roundToFP8(e, product, fmt);
  // A NaN/Inf block: every element becomes NaN, keeping its sign.
  Value sign = e.andI(e.shr(e.bitsOf(x), 24), 0x80);
  Value nanCode = e.orI(sign, e.i32(fmt.nanCode));
  Value isNaNBlock =
      e.cmp(arith::CmpIPredicate::eq, e.byteToI32(scaleByte), 0xFF);
  return e.toI8(e.select(isNaNBlock, nanCode, code));
}

Value mlir::moe::buildDecodeFP8(OpBuilder &b, Location loc, Value code,
                                MXElement element) {
  using P = arith::CmpIPredicate;
  const FP8Format &fmt = formatOf(element);
  Emitter e(b, loc);
  Value c = e.byteToI32(code);
  Value sign = e.shl(e.andI(c, 0x80), 24);
  Value magnitude = e.andI(c, 0x7F);
  Value field = e.shr(magnitude, fmt.fraction);
  Value fraction = e.andI(magnitude, (int64_t(1) << fmt.fraction) - 1);
  Value normalExp = e.shl(e.add(field, 127 - fmt.bias), 23);
  Value normal = e.orI(normalExp, e.shl(fraction, 23 - fmt.fraction));
  // fraction * 2^(minExp - fraction bits): a small integer times a normal
  // power of two, both steps exact.
  Value fractionF = arith::UIToFPOp::create(b, loc, e.f32(), fraction);
  Value subnormal = e.bitsOf(arith::MulFOp::create(
      b, loc, fractionF, e.f32(std::ldexp(1.0f, fmt.minExp - fmt.fraction))));
  Value bits = e.select(e.cmp(P::eq, field, 0), subnormal, normal);
  int64_t maxField = (int64_t(1) << (7 - fmt.fraction)) - 1;
  if (element == MXElement::f8E4M3FN) {
    bits = e.select(e.cmp(P::eq, magnitude, 0x7F), 0x7FC00000, bits);
  } else {
    Value isNaN = e.cmp(P::ne, fraction, 0);
    Value nan = e.i32(0x7FC00000);
    Value special = e.select(isNaN, nan, e.i32(0x7F800000));
    bits = e.select(e.cmp(P::eq, field, maxField), special, bits);
  }
  return e.floatOf(e.orI(sign, bits));
}

Value mlir::moe::buildDecodeE8M0(OpBuilder &b, Location loc, Value scaleByte) {
  using P = arith::CmpIPredicate;
  Emitter e(b, loc);
  Value byte = e.byteToI32(scaleByte);
  Value isZero = e.cmp(P::eq, byte, 0);
  Value bits = e.select(isZero, 0x00400000, e.shl(byte, 23));
  bits = e.select(e.cmp(P::eq, byte, 0xFF), 0x7FC00000, bits);
  return e.floatOf(bits);
}

Value mlir::moe::buildDequantize(OpBuilder &b, Location loc, Value code,
                                 Value scaleByte, MXElement element) {
  // The scale first: the order every test of the sequence expects.
  Value scale = buildDecodeE8M0(b, loc, scaleByte);
  return arith::MulFOp::create(b, loc, buildDecodeFP8(b, loc, code, element),
                               scale);
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

namespace {

/// f32 arithmetic in the operand order of lib/Reference/Model.cpp, which
/// evaluates the activations in f64: the exponential and tanh here are the
/// target's f32 functions (libm on the host, libdevice on the GPU), within
/// a few f32 ulps of R_mx's f64 values rounded to f32. f64 cost the GPU
/// epilogue ~40 f64 instructions per element (__nv_exp, rcp.rn.f64).
struct ActMath {
  Emitter &e;
  Value add(Value x, Value y) {
    return arith::AddFOp::create(e.b, e.loc, x, y);
  }
  Value sub(Value x, Value y) {
    return arith::SubFOp::create(e.b, e.loc, x, y);
  }
  Value mul(Value x, Value y) {
    return arith::MulFOp::create(e.b, e.loc, x, y);
  }
  Value div(Value x, Value y) {
    return arith::DivFOp::create(e.b, e.loc, x, y);
  }
  Value c(double v) { return e.f32(static_cast<float>(v)); }

  /// 1 / (1 + exp(-g)).
  Value sigmoid(Value g) {
    Value negG = arith::NegFOp::create(e.b, e.loc, g);
    Value one = c(1.0);
    return div(one, add(c(1.0), math::ExpOp::create(e.b, e.loc, negG)));
  }
  /// tanh(C * (g + A * g * g * g)) of the gelu tanh form.
  Value geluTanh(Value g) {
    Value cube = mul(mul(mul(c(kGeluA), g), g), g);
    Value scale = c(geluC());
    return math::TanhOp::create(e.b, e.loc, mul(scale, add(g, cube)));
  }

  static constexpr double kGeluA = 0.044715;
  /// sqrt(2/pi), computed as the reference computes it.
  static double geluC() { return std::sqrt(2.0 / 3.14159265358979323846); }
};

} // namespace

Value mlir::moe::buildActivation(OpBuilder &b, Location loc,
                                 Activation activation, Value g) {
  Emitter e(b, loc);
  ActMath m{e};
  if (activation == Activation::swiglu)
    return m.mul(g, m.sigmoid(g));
  // 0.5 * g * (1 + t)
  Value t = m.geluTanh(g);
  Value half = m.mul(m.c(0.5), g);
  return m.mul(half, m.add(m.c(1.0), t));
}

Value mlir::moe::buildActivationDerivative(OpBuilder &b, Location loc,
                                           Activation activation, Value g) {
  Emitter e(b, loc);
  ActMath m{e};
  Value gd = g;
  Value one = m.c(1.0);
  if (activation == Activation::swiglu) {
    // s * (1 + g * (1 - s))
    Value s = m.sigmoid(gd);
    return m.mul(s, m.add(one, m.mul(gd, m.sub(one, s))));
  }
  // 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * C * (1 + 3 * A * g * g)
  Value t = m.geluTanh(gd);
  Value halfLeft = m.c(0.5);
  Value left = m.mul(halfLeft, m.add(one, t));
  Value poly = m.add(one, m.mul(m.mul(m.c(3.0 * ActMath::kGeluA), gd), gd));
  Value halfG = m.mul(m.c(0.5), gd);
  Value sech2 = m.sub(one, m.mul(t, t));
  Value right =
      m.mul(m.mul(m.mul(halfG, sech2), m.c(ActMath::geluC())), poly);
  return m.add(left, right);
}

GatedActGrads mlir::moe::buildGatedActBwd(OpBuilder &b, Location loc,
                                          Activation activation,
                                          ClampAttr clamp, Value gateRaw,
                                          Value upRaw, Value dAct,
                                          Value affinity) {
  using P = arith::CmpFPredicate;
  Emitter e(b, loc);
  auto limit = [&](FloatAttr attr) -> Value {
    if (!attr)
      return {};
    // Limits are rounded to f32 and compared in f32, as R_mx does.
    return e.f32(static_cast<float>(attr.getValueAsDouble()));
  };
  // max(v, lo) then min(v, hi) as `v < lo ? lo : v` and `hi < v ? hi : v`,
  // so a NaN passes through like std::max / std::min in the reference; the
  // mask is lo < v < hi on the clamped value, null without limits.
  auto clampAndMask = [&](Value v, FloatAttr loAttr,
                          FloatAttr hiAttr) -> std::pair<Value, Value> {
    Value inside;
    auto both = [&](Value cond) -> Value {
      return inside ? arith::AndIOp::create(b, loc, inside, cond) : cond;
    };
    if (Value lo = limit(loAttr)) {
      v = e.select(arith::CmpFOp::create(b, loc, P::OLT, v, lo), lo, v);
      inside = both(arith::CmpFOp::create(b, loc, P::OGT, v, lo));
    }
    if (Value hi = limit(hiAttr)) {
      v = e.select(arith::CmpFOp::create(b, loc, P::OLT, hi, v), hi, v);
      inside = both(arith::CmpFOp::create(b, loc, P::OLT, v, hi));
    }
    return {v, inside};
  };
  auto [g, gateInside] =
      clampAndMask(gateRaw, clamp ? clamp.getGateLo() : FloatAttr(),
                   clamp ? clamp.getGateHi() : FloatAttr());
  auto [u, upInside] =
      clampAndMask(upRaw, clamp ? clamp.getUpLo() : FloatAttr(),
                   clamp ? clamp.getUpHi() : FloatAttr());

  auto mul = [&](Value x, Value y) -> Value {
    return arith::MulFOp::create(b, loc, x, y);
  };
  auto masked = [&](Value inside, Value v) -> Value {
    return inside ? e.select(inside, v, e.f32(0.0f)) : v;
  };
  Value s = buildActivation(b, loc, activation, g);
  Value sPrime = buildActivationDerivative(b, loc, activation, g);
  Value dh = mul(affinity, dAct);
  GatedActGrads grads;
  grads.h = mul(s, u);
  grads.dGate = masked(gateInside, mul(mul(dh, u), sPrime));
  grads.dUp = masked(upInside, mul(dh, s));
  return grads;
}
