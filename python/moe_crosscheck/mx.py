"""MX block quantization (SPEC section 5) with numpy and ml_dtypes.

Scales are E8M0 bytes derived from float32 bit patterns; elements are
rounded to nearest-even by ml_dtypes' float32 -> float8 casts after the
saturation (satfinite) that the contract asks for has been applied here,
because ml_dtypes itself turns overflow into NaN.
"""

import ml_dtypes
import numpy as np

BLOCK = 32

ELEM_TYPES = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
ELEM_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
ELEM_EMAX = {"e4m3": 8, "e5m2": 15}
RULES = ("rceil", "floor", "floor_alt")

BF16_MAX = float(np.float32(ml_dtypes.finfo(ml_dtypes.bfloat16).max))


def _exponent_field(values):
    """Biased exponent field of float32 values, as int64."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    return ((bits >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)


def scale_bytes(amax, elem, rule):
    """E8M0 scale byte per block from the block amax (float32, >= 0 or
    NaN/Inf for blocks that hold one)."""
    amax = np.asarray(amax, dtype=np.float32)
    if rule == "rceil":
        # The exponent of r rounded up to a power of two. For normal r that
        # is the exponent field plus one when the mantissa is non-zero (the
        # SPEC's recipe); a subnormal r (exponent field 0) rounds up to
        # 2^-127 (byte 0) when r <= 2^-127, i.e. mantissa <= 0x400000, and
        # to 2^-126 (byte 1) above. Read literally, the recipe would give
        # byte 1 for every subnormal r, but the rule is a ceiling, and
        # 2^-127 is the ceiling of any r <= 2^-127.
        ratio = amax / np.float32(ELEM_MAX[elem])  # float32, nearest-even
        mantissa = ratio.view(np.uint32) & np.uint32(0x7FFFFF)
        field = _exponent_field(ratio)
        byte = np.where(field == 0, (mantissa > 0x400000).astype(np.int64),
                        field + (mantissa != 0))
    elif rule == "floor":
        byte = _exponent_field(amax) - ELEM_EMAX[elem]
    elif rule == "floor_alt":
        byte = _exponent_field(amax) - (ELEM_EMAX[elem] - 1)
    else:
        raise ValueError("unknown scale rule " + rule)
    byte = np.clip(byte, 0, 254)
    byte = np.where(np.isfinite(amax), byte, 255)
    return byte.astype(np.uint8)


def pow2_f32(exponent):
    """2**exponent as float32 (exact for exponent in [-149, 127])."""
    return np.ldexp(np.float64(1.0), np.asarray(exponent, np.int64)).astype(
        np.float32)


def encode(scaled, elem):
    """FP8 codes of float32 values: round-to-nearest-even, saturated to
    +-max, NaN to 0x7F with the value's sign."""
    scaled = np.asarray(scaled, dtype=np.float32)
    emax = np.float32(ELEM_MAX[elem])
    clipped = np.clip(scaled, -emax, emax)
    codes = clipped.astype(ELEM_TYPES[elem]).view(np.uint8).copy()
    nan = np.isnan(scaled)
    sign = np.signbit(scaled).astype(np.uint8) << np.uint8(7)
    codes[nan] = (np.uint8(0x7F) | sign)[nan]
    return codes


def decode(codes, elem):
    """float32 values of FP8 codes."""
    return np.asarray(codes, np.uint8).view(ELEM_TYPES[elem]).astype(
        np.float32)


def quantize(x, axis, elem, rule):
    """Quantizes a 2-D float32 array in 32-element blocks along `axis`
    (1: along rows, 0: down columns). Returns (codes, scales) as uint8:
    codes like x, scales [rows, ceil(cols/32)] or [ceil(rows/32), cols]."""
    x = np.asarray(x, dtype=np.float32)
    if axis == 0:
        codes, scales = quantize(x.T, 1, elem, rule)
        return codes.T.copy(), scales.T.copy()
    rows, cols = x.shape
    nblocks = -(-cols // BLOCK)
    padded = np.zeros((rows, nblocks * BLOCK), np.float32)
    padded[:, :cols] = x
    blocks = padded.reshape(rows, nblocks, BLOCK)
    # max propagates NaN, and scale_bytes maps NaN and Inf to 255.
    amax = np.abs(blocks).max(axis=2)
    scales = scale_bytes(amax, elem, rule)
    # x * 2^(127 - byte) in float32 (NaN blocks are overwritten below).
    factor = pow2_f32(127 - np.minimum(scales, 254).astype(np.int64))
    scaled = blocks * factor[:, :, None]
    codes = encode(scaled, elem)
    # A NaN scale makes every element of its block NaN (x / NaN): the
    # NaN code with the element's own sign.
    nan_block = np.broadcast_to((scales == 255)[:, :, None], codes.shape)
    sign = np.signbit(blocks).astype(np.uint8) << np.uint8(7)
    codes = np.where(nan_block, np.uint8(0x7F) | sign, codes)
    codes = codes.reshape(rows, nblocks * BLOCK)[:, :cols]
    return codes.copy(), scales


def dequantize(codes, scales, axis, elem):
    """Exact float32 values code * 2^(byte - 127); NaN where byte = 255."""
    codes = np.asarray(codes, np.uint8)
    if axis == 0:
        return dequantize(codes.T, scales.T, 1, elem).T.copy()
    rows, cols = codes.shape
    expanded = np.repeat(scales.astype(np.int64), BLOCK, axis=1)[:, :cols]
    values = decode(codes, elem).astype(np.float64) * np.ldexp(
        1.0, expanded - 127)
    values[expanded == 255] = np.nan
    # Exact, except that a value rounded up past the top of fp32 (code 256
    # under scale 2^120 after amax = FLT_MAX) is 2^128: Inf in fp32.
    with np.errstate(over="ignore"):
        return values.astype(np.float32)


def round_bf16(values):
    """Rounds values (any float dtype) directly to the nearest bfloat16,
    ties to even, without an intermediate float32 rounding; returns float64.
    (ml_dtypes' float64 -> bfloat16 cast goes through float32.)"""
    v = np.asarray(values, dtype=np.float64)
    out = v.copy()
    finite = np.isfinite(v) & (v != 0)
    _, exp = np.frexp(v[finite])  # |v| in [2^(exp-1), 2^exp)
    quantum = np.ldexp(1.0, np.maximum(exp - 8, -133))
    rounded = np.rint(v[finite] / quantum) * quantum
    rounded[np.abs(rounded) > BF16_MAX] = np.inf * np.sign(
        rounded[np.abs(rounded) > BF16_MAX])
    out[finite] = rounded
    return out


def qdq(matrix, axis, quant, rule):
    """Q(M, axis) of docs/numerics.md: MX quantize + dequantize (float32
    values), or bf16 rounding for quant = none. Returns float64."""
    m = np.asarray(matrix, dtype=np.float32)
    if quant == "none":
        return round_bf16(m)
    codes, scales = quantize(m, axis, quant, rule)
    return dequantize(codes, scales, axis, quant).astype(np.float64)
