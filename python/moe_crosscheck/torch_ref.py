"""R_mx and R_64 (docs/numerics.md) in torch, for any device.

Why: the numpy references (``layer``, ``mx``) and the C++ one (lib/Reference)
are exact but far too slow for the reference shapes (T=16384 H=4096 I=1536
E=128 K=8: 1.6e9 weights per tensor, 1.3e13 fp64 GEMM flops for R_mx). This
module computes the same two functions with torch, on a GPU when there is
one: fp64 GEMMs run on the H200's fp64 tensor cores, and the layer is walked
one expert at a time, so that besides the outputs only one expert's weights
and slots are ever resident in fp64 or as MX codes.

Numerics, and why they agree with ``mx`` and ``layer``:

* MX quantization works on float32 bit patterns with integer arithmetic:
  the E8M0 scale byte of each rule, and the element rounding (nearest-even,
  saturated to +-elem_max, NaN to 0x7F with the value's sign). No step uses
  torch's float8 casts or depends on how a device handles subnormals. The
  two float steps are an fp64 product (exact) and an fp64 -> fp32 conversion,
  which round exactly once, as numpy's fp32 arithmetic does.
* The elementwise math is rounded to fp32 where docs/numerics.md says so:
  an fp32 product or sum of fp32 operands is the fp32 rounding of the exact
  value, the same as layer.py's ``f32(a * b)`` in fp64.
* GEMMs multiply the dequantized operands in fp64 and round the result to
  fp32. Only the fp64 summation order differs from numpy's (~1e-16 relative);
  it changes an fp32 result only when the exact sum lies that close to an
  fp32 rounding boundary.
* R_mx rounds its inputs to their storage types first (bf16; affinities to
  fp32), as docs/numerics.md and lib/Reference do; layer.py does not, so the
  two agree on inputs that already hold such values (all generated ones).

Conventions as in ``layer``: ``cfg`` is the config.json dict (missing keys
take moe-ref's defaults), ``inp`` maps the .npy names to numpy arrays or torch
tensors (any float dtype, bfloat16 included; int32 routing). ``backward_mx``
returns float32 tensors (every output of R_mx is an fp32 value, or a bf16 one
when requested), ``backward64`` float64 tensors, on ``device``, named and
shaped like the files ``moe-ref bwd`` writes.
"""

import math

import numpy as np
import torch

BLOCK = 32

# Element formats: mantissa bits, exponent bias, smallest normal exponent,
# exponent bits, largest finite value.
FORMATS = {
    "e4m3": {"mbits": 3, "bias": 7, "emin": -6, "ebits": 4, "max": 448.0},
    "e5m2": {"mbits": 2, "bias": 15, "emin": -14, "ebits": 5, "max": 57344.0},
}
# Exponent subtracted from amax's by the floor rules (emax of the format).
ELEM_EMAX = {"e4m3": 8, "e5m2": 15}
RULES = ("rceil", "floor", "floor_alt")

BF16_MAX = float.fromhex("0x1.fep127")
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_C = 0.044715

# moe-ref's defaults for the keys config.json may leave out.
CONFIG_DEFAULTS = {
    "B": 128, "act": "swiglu", "affinity": "on_i", "quant": "e4m3",
    "rule": "rceil", "clamp_gate_lo": None, "clamp_gate_hi": None,
    "clamp_up_lo": None, "clamp_up_hi": None, "bias": False,
    "checkpoint": False, "dense": False, "dx_accumulate": "f32",
    "dx_f32": False, "weight_grad_bf16": False,
}


def normalize_config(cfg):
    """cfg with every optional key present (moe-ref's defaults)."""
    full = dict(CONFIG_DEFAULTS)
    full.update(cfg)
    return full


def as_tensor(value):
    """A CPU torch tensor sharing memory with a numpy array, or the tensor
    itself."""
    return value if isinstance(value, torch.Tensor) else torch.as_tensor(value)


# ---------------------------------------------------------------------------
# Bits and rounding
# ---------------------------------------------------------------------------

def pow2(exponent):
    """2**exponent as float64 for integer tensors in [-1022, 1023], built
    from its bit pattern (exact, no libm)."""
    biased = exponent.to(torch.int64) + 1023
    return torch.bitwise_left_shift(biased, 52).view(torch.float64)


def round_bf16(values):
    """Values rounded directly to the nearest bfloat16 (ties to even, no
    intermediate fp32 rounding), as float64; beyond the bf16 range +-Inf,
    NaN stays NaN. The rounding quantum is 2^(e-7) for |v| in [2^e, 2^(e+1))
    and 2^-133 below the normal range; v / quantum is exact, so torch.round
    (half to even) does the rounding."""
    v = values.to(torch.float64)
    field = torch.bitwise_right_shift(v.view(torch.int64), 52) & 0x7FF
    quantum = pow2(torch.clamp(field - 1023 - 7, min=-133))
    rounded = torch.round(v / quantum) * quantum
    over = rounded.abs() > BF16_MAX
    rounded = torch.where(over, torch.copysign(torch.full_like(v, math.inf),
                                               rounded), rounded)
    return torch.where(torch.isfinite(v), rounded, v)


def exponent_field(values):
    """Biased exponent field of float32 values, int32."""
    bits = values.to(torch.float32).contiguous().view(torch.int32)
    return torch.bitwise_right_shift(bits, 23) & 0xFF


# ---------------------------------------------------------------------------
# MX quantization (SPEC section 5), bit-identical with mx.py
# ---------------------------------------------------------------------------

def scale_bytes(amax, elem, rule):
    """E8M0 scale byte (uint8) per block from the float32 block amax (>= 0,
    NaN or Inf for a block holding one): the rules of mx.scale_bytes."""
    amax = amax.to(torch.float32)
    if rule == "rceil":
        # r = fp32(amax / elem_max). The quotient is formed in fp64 and then
        # rounded to fp32: fp64 division rounds correctly (or within an ulp
        # when a device multiplies by the reciprocal), and no fp32 quotient
        # of a 24-bit amax by 448 or 57344 lies within 2^-40 relative of an
        # fp32 rounding boundary, so the fp32 result is the correctly
        # rounded quotient in every case.
        ratio = (amax.to(torch.float64) / FORMATS[elem]["max"]).to(
            torch.float32)
        bits = ratio.contiguous().view(torch.int32)
        field = torch.bitwise_right_shift(bits, 23) & 0xFF
        mantissa = bits & 0x7FFFFF
        # Round r up to a power of two: exponent field plus one for a non-zero
        # mantissa; a subnormal r rounds up to 2^-127 (byte 0) when
        # r <= 2^-127, else to 2^-126 (byte 1) (docs/numerics.md).
        byte = torch.where(field == 0, (mantissa > 0x400000).to(torch.int32),
                           field + (mantissa != 0).to(torch.int32))
    elif rule == "floor":
        byte = exponent_field(amax) - ELEM_EMAX[elem]
    elif rule == "floor_alt":
        byte = exponent_field(amax) - (ELEM_EMAX[elem] - 1)
    else:
        raise ValueError("unknown scale rule " + rule)
    byte = torch.clamp(byte, 0, 254)
    byte = torch.where(torch.isfinite(amax), byte, 255)
    return byte.to(torch.uint8)


def encode(scaled, elem):
    """FP8 codes (uint8) of float32 values: round to nearest even, saturate
    to +-elem_max, NaN to 0x7F with the value's sign (mx.encode)."""
    fmt = FORMATS[elem]
    mbits, emin = fmt["mbits"], fmt["emin"]
    bits = scaled.to(torch.float32).contiguous().view(torch.int32)
    negative = bits < 0
    magnitude = bits & 0x7FFFFFFF
    nan = magnitude > 0x7F800000
    # Saturation before rounding: for non-negative floats the bit patterns
    # order like the values, so a minimum on them clips |v| to elem_max.
    max_bits = int(np.float32(fmt["max"]).view(np.int32))
    magnitude = torch.clamp(magnitude, max=max_bits)
    field = torch.bitwise_right_shift(magnitude, 23)
    normal = field > 0
    significand = torch.where(normal, (magnitude & 0x7FFFFF) | 0x800000,
                              magnitude & 0x7FFFFF)
    exponent = torch.where(normal, field - 127, -126)  # v = sig * 2^(e-23)
    # Below the format's smallest normal exponent the quantum stays at
    # 2^(emin - mbits) (subnormals): shift further right. From 25 on every
    # bit is dropped and the result is 0, so larger shifts are capped there.
    kept_exponent = torch.clamp(exponent, min=emin)
    shift = torch.clamp(23 - mbits + kept_exponent - exponent, max=25)
    one = torch.ones_like(shift)
    kept = torch.bitwise_right_shift(significand, shift)
    rest = significand & (torch.bitwise_left_shift(one, shift) - 1)
    half = torch.bitwise_left_shift(one, shift - 1)
    round_up = (rest > half) | ((rest == half) & ((kept & 1) == 1))
    # code = biased exponent * 2^mbits + mantissa; with the implicit bit in
    # `kept` that is (e + bias - 1) * 2^mbits + kept, which also covers
    # subnormals (emin + bias - 1 = 0) and a carry into the next binade.
    code = torch.bitwise_left_shift(kept_exponent + (fmt["bias"] - 1),
                                    mbits) + kept + round_up.to(torch.int32)
    sign = torch.bitwise_left_shift(negative.to(torch.int32), 7)
    code = torch.where(nan, 0x7F, code) | sign
    return code.to(torch.uint8)


def decode_scaled(codes, scales, elem):
    """code * 2^(byte - 127) as float64, exact: NaN where the code is NaN or
    the byte is 255, +-Inf for e5m2's infinity codes. `scales` broadcasts
    against `codes`."""
    fmt = FORMATS[elem]
    mbits, ebits = fmt["mbits"], fmt["ebits"]
    c = codes.to(torch.int32)
    field = torch.bitwise_right_shift(c, mbits) & ((1 << ebits) - 1)
    mantissa = c & ((1 << mbits) - 1)
    subnormal = field == 0
    significand = torch.where(subnormal, mantissa, mantissa + (1 << mbits))
    exponent = torch.where(subnormal, fmt["emin"], field - fmt["bias"]) - mbits
    exponent = exponent + scales.to(torch.int32) - 127
    value = significand.to(torch.float64) * pow2(exponent)
    value = torch.where(c >= 0x80, -value, value)
    top = field == (1 << ebits) - 1
    if elem == "e4m3":
        nan = top & (mantissa == 7)
        inf = torch.zeros_like(nan)
    else:
        nan = top & (mantissa != 0)
        inf = top & (mantissa == 0)
    value = torch.where(inf, torch.copysign(torch.full_like(value, math.inf),
                                            value), value)
    return torch.where(nan | (scales == 255), math.nan, value)


def decode(codes, elem):
    """float32 values of FP8 codes (mx.decode)."""
    return decode_scaled(codes, torch.full_like(codes, 127), elem).to(
        torch.float32)


def quantize(x, axis, elem, rule):
    """Quantizes a 2-D array (rounded to float32) in 32-element blocks along
    `axis` (1: along rows, 0: down columns). Returns (codes, scales), uint8
    tensors: codes like x, scales [rows, ceil(cols/32)] or
    [ceil(rows/32), cols] (mx.quantize)."""
    x = as_tensor(x).to(torch.float32)
    if axis == 0:
        codes, scales = quantize(x.t(), 1, elem, rule)
        return codes.t().contiguous(), scales.t().contiguous()
    rows, cols = x.shape
    nblocks = -(-cols // BLOCK)
    blocks = torch.nn.functional.pad(x, (0, nblocks * BLOCK - cols)).reshape(
        rows, nblocks, BLOCK)
    amax = blocks.abs().amax(dim=2)
    # A NaN anywhere in the block makes amax NaN (scale 255), whatever the
    # device's max reduction does with NaN.
    amax = torch.where(torch.isnan(blocks).any(dim=2), math.nan, amax)
    scales = scale_bytes(amax, elem, rule)
    # x * 2^(127 - byte): exact in fp64, then one rounding to fp32 (the
    # correctly rounded fp32 product, subnormal results included).
    factor = pow2(127 - torch.clamp(scales.to(torch.int32), max=254))
    scaled = (blocks.to(torch.float64) * factor[:, :, None]).to(torch.float32)
    codes = encode(scaled, elem)
    # A NaN scale makes every element of its block NaN: the NaN code with
    # the element's own sign.
    sign = torch.bitwise_left_shift(
        (blocks.contiguous().view(torch.int32) < 0).to(torch.int32), 7)
    nan_codes = (sign | 0x7F).to(torch.uint8)
    codes = torch.where((scales == 255)[:, :, None], nan_codes, codes)
    return codes.reshape(rows, nblocks * BLOCK)[:, :cols].contiguous(), scales


def dequantize(codes, scales, axis, elem):
    """float32 values code * 2^(byte - 127) (mx.dequantize): exact, NaN where
    byte = 255, Inf where the value exceeds fp32 (code 256 * 2^120 after an
    amax of FLT_MAX)."""
    if axis == 0:
        return dequantize(codes.t(), scales.t(), 1, elem).t().contiguous()
    cols = codes.shape[1]
    expanded = torch.repeat_interleave(scales, BLOCK, dim=1)[:, :cols]
    return decode_scaled(codes, expanded, elem).to(torch.float32)


def qdq(matrix, axis, quant, rule):
    """Q(M, axis) of docs/numerics.md: MX quantize + dequantize of the fp32
    values of `matrix`, or their bf16 rounding for quant = none; float64."""
    m = as_tensor(matrix).to(torch.float32)
    if quant == "none":
        return round_bf16(m)
    codes, scales = quantize(m, axis, quant, rule)
    return dequantize(codes, scales, axis, quant).to(torch.float64)


# ---------------------------------------------------------------------------
# The layer backward (SPEC section 3)
# ---------------------------------------------------------------------------

def act_and_grad(g, kind):
    """act(g) and act'(g) in fp64: silu (swiglu) or tanh-gelu (geglu), with
    layer.act_and_grad's formulas."""
    g = g.to(torch.float64)
    if kind == "swiglu":
        sig = 1.0 / (1.0 + torch.exp(-g))
        return g * sig, sig * (1.0 + g * (1.0 - sig))
    # g*g is exact for the fp32 g of R_mx, so g*g*g is the correctly rounded
    # cube, as numpy's pow gives.
    inner = SQRT_2_OVER_PI * (g + GELU_C * (g * g * g))
    th = torch.tanh(inner)
    value = 0.5 * g * (1.0 + th)
    grad = 0.5 * (1.0 + th) + 0.5 * g * (1.0 - th * th) * SQRT_2_OVER_PI * (
        1.0 + 3.0 * GELU_C * g * g)
    return value, grad


def clamp_limits(cfg, name, dtype):
    """(lo, hi) of one clamp as python floats rounded to `dtype` (R_mx
    compares in fp32), +-inf where unset."""
    lo, hi = cfg["clamp_%s_lo" % name], cfg["clamp_%s_hi" % name]
    cast = np.float32 if dtype == torch.float32 else np.float64
    return (float(cast(-math.inf if lo is None else lo)),
            float(cast(math.inf if hi is None else hi)))


def expert_slots(cfg, block_to_expert):
    """(e, slots) for every expert that owns blocks: the slot indices of its
    blocks, in order (numpy int64)."""
    B = cfg["B"]
    owner = np.asarray(block_to_expert)
    for e in range(cfg["E"]):
        blocks = np.nonzero(owner == e)[0]
        if blocks.size:
            yield e, (blocks[:, None] * B + np.arange(B)[None, :]).reshape(-1)


def _checkpoint_rows(cfg, ckpt, slots, device):
    """g and u of the given slots from the [N,2,I,B] checkpoint, [S,I] each,
    in the checkpoint's dtype on `device`."""
    B = cfg["B"]
    index = torch.as_tensor(slots)
    rows = ckpt[index // B, :, :, index % B].to(device)  # [S, 2, I]
    return rows[:, 0, :], rows[:, 1, :]


def _zero_grads(cfg, dtype, device):
    T, H, I, E = cfg["T"], cfg["H"], cfg["I"], cfg["E"]
    grads = {
        "dx": torch.zeros((T, H), dtype=dtype, device=device),
        "da": torch.zeros(T * E, dtype=dtype, device=device),
        "dwgu": torch.zeros((E, H, 2, I), dtype=dtype, device=device),
        "dwd": torch.zeros((E, I, H), dtype=dtype, device=device),
    }
    if cfg["bias"]:
        grads["dbgu"] = torch.zeros((E, 2, I), dtype=dtype, device=device)
        grads["dbd"] = torch.zeros((E, H), dtype=dtype, device=device)
    return grads


def _slotted(values, rows, count):
    """[V, n] values of the slots `rows` as a [count, n] matrix whose other
    (padding) rows are zero."""
    full = values.new_zeros((count, values.shape[1]))
    full[rows] = values
    return full


def _routing(inp):
    """token_position_to_id and block_to_expert as numpy int64 arrays."""
    slots = as_tensor(inp["token_position_to_id"]).reshape(-1)
    owner = as_tensor(inp["block_to_expert"]).reshape(-1)
    return (slots.to(torch.int64).cpu().numpy(),
            owner.to(torch.int64).cpu().numpy())


def backward64(cfg, inp, device="cpu"):
    """R_64: the fp64 backward over the routed pairs of the blocked layout,
    one expert at a time; float64 tensors on `device`."""
    cfg = normalize_config(cfg)
    H, I, E = cfg["H"], cfg["I"], cfg["E"]
    f64 = torch.float64
    gate_lo, gate_hi = clamp_limits(cfg, "gate", f64)
    up_lo, up_hi = clamp_limits(cfg, "up", f64)
    x = as_tensor(inp["x"]).to(device=device, dtype=f64)
    dy = as_tensor(inp["dy"]).to(device=device, dtype=f64)
    aff = as_tensor(inp["affinities"]).reshape(-1).to(device=device, dtype=f64)
    token_ids, owner = _routing(inp)
    grads = _zero_grads(cfg, f64, device)
    for e, slots in expert_slots(cfg, owner):
        ids = token_ids[slots]
        keep = ids >= 0
        if not keep.any():
            continue
        slots = slots[keep]
        tok = torch.as_tensor(ids[keep], device=device)
        X, dY = x[tok], dy[tok]
        a = aff[tok * E + e][:, None]
        w = as_tensor(inp["wgu"])[e].to(device=device, dtype=f64).reshape(
            H, 2 * I)
        wd = as_tensor(inp["wd"])[e].to(device=device, dtype=f64)
        if cfg["checkpoint"]:
            g, u = _checkpoint_rows(cfg, as_tensor(inp["checkpoint"]), slots,
                                    device)
            g, u = g.to(f64), u.to(f64)
        else:
            gu = X @ w
            g, u = gu[:, :I], gu[:, I:]
            if cfg["bias"]:
                bgu = as_tensor(inp["bgu"])[e].to(device=device, dtype=f64)
                g, u = g + bgu[0], u + bgu[1]
        g = torch.clamp(g, gate_lo, gate_hi)
        u = torch.clamp(u, up_lo, up_hi)
        s, s_grad = act_and_grad(g, cfg["act"])
        h = s * u
        dA = dY @ wd.T
        da = (dA * h).sum(dim=1)
        if cfg["bias"]:
            bd = as_tensor(inp["bd"])[e].to(device=device, dtype=f64)
            da = da + dY @ bd
        grads["da"][tok * E + e] = da
        dh = a * dA
        dg = dh * u * s_grad * ((gate_lo < g) & (g < gate_hi))
        du = dh * s * ((up_lo < u) & (u < up_hi))
        dgu = torch.cat([dg, du], dim=1)
        grads["dx"].index_add_(0, tok, dgu @ w.T)
        grads["dwgu"][e] = (X.T @ dgu).reshape(H, 2, I)
        grads["dwd"][e] = (a * h).T @ dY
        if cfg["bias"]:
            grads["dbgu"][e] = dgu.sum(dim=0).reshape(2, I)
            grads["dbd"][e] = (a * dY).sum(dim=0)
    return grads


def backward_mx(cfg, inp, device="cpu"):
    """R_mx (docs/numerics.md), one expert at a time over the slots of its
    blocks (padding slots are zero rows of every operand); float32 tensors
    on `device`.

    Row-wise operands (quantized along H or 2I) and the GEMMs use only the
    slots that hold a token: a padding slot's row is zero and its result is
    never written. Operands quantized along the slots keep the padding rows,
    since the 32-slot blocks are laid on slot positions."""
    cfg = normalize_config(cfg)
    H, I, E = cfg["H"], cfg["I"], cfg["E"]
    quant, rule = cfg["quant"], cfg["rule"]
    f32 = torch.float32

    def Q(matrix, axis):
        return qdq(matrix, axis, quant, rule)

    def storage(name, index=None):
        """An input rounded to bf16 (its storage type), fp32 on device."""
        value = as_tensor(inp[name])
        if index is not None:
            value = value[index]
        return round_bf16(value.to(device)).to(f32)

    gate_lo, gate_hi = clamp_limits(cfg, "gate", f32)
    up_lo, up_hi = clamp_limits(cfg, "up", f32)
    x, dy = storage("x"), storage("dy")
    aff = as_tensor(inp["affinities"]).reshape(-1).to(device, f32)
    token_ids, owner = _routing(inp)
    grads = _zero_grads(cfg, f32, device)
    acc = grads["dx"]  # the dx accumulator, experts in ascending order
    for e, slots in expert_slots(cfg, owner):
        ids = token_ids[slots]
        valid = ids >= 0
        if not valid.any():
            continue
        rows = torch.as_tensor(np.nonzero(valid)[0], device=device)
        tok = torch.as_tensor(ids[valid], device=device)

        def slotted(values):
            return _slotted(values, rows, slots.size)

        X, dY = x[tok], dy[tok]
        a = aff[tok * E + e][:, None]
        wgu = storage("wgu", e).reshape(H, 2 * I)
        wd = storage("wd", e)
        if cfg["checkpoint"]:
            g, u = _checkpoint_rows(cfg, as_tensor(inp["checkpoint"]),
                                    slots[valid], device)
            g, u = round_bf16(g).to(f32), round_bf16(u).to(f32)
        else:
            gu = (Q(X, 1) @ Q(wgu, 0)).to(f32)
            g, u = gu[:, :I], gu[:, I:]
            if cfg["bias"]:
                bgu = storage("bgu", e)
                g, u = g + bgu[0], u + bgu[1]
        g = torch.clamp(g, gate_lo, gate_hi)
        u = torch.clamp(u, up_lo, up_hi)
        s_wide, s_grad_wide = act_and_grad(g, cfg["act"])
        s, s_grad = s_wide.to(f32), s_grad_wide.to(f32)
        h = s * u
        dA = (Q(dY, 1) @ Q(wd, 1).T).to(f32)
        dh = a * dA
        dg = (dh * u) * s_grad * ((gate_lo < g) & (g < gate_hi))
        du = (dh * s) * ((up_lo < u) & (u < up_hi))
        dgu = torch.cat([dg, du], dim=1)

        da = (dA.to(torch.float64) * h.to(torch.float64)).sum(dim=1)
        if cfg["bias"]:
            bd = storage("bd", e).to(torch.float64)
            da = da + dY.to(torch.float64) @ bd
        grads["da"][tok * E + e] = da.to(f32)

        c = (Q(dgu, 1) @ Q(wgu, 1).T).to(f32)
        total = acc[tok] + c  # fp32 sum
        if cfg["dx_accumulate"] == "bf16":
            # bf16(fp32(acc + c)) = bf16(acc + c): rounding the fp32 sum of
            # two fp32 values again to 8 bits is innocuous (24 >= 2*8 + 2).
            total = round_bf16(total).to(f32)
        acc[tok] = total

        dwgu = (Q(slotted(X), 0)[rows].T @ Q(slotted(dgu), 0)[rows]).to(f32)
        if cfg["affinity"] == "on_i":
            dwd = Q(slotted(a * h), 0)[rows].T @ Q(slotted(dY), 0)[rows]
        else:
            dwd = Q(slotted(h), 0)[rows].T @ Q(slotted(a * dY), 0)[rows]
        dwd = dwd.to(f32)
        if cfg["weight_grad_bf16"]:
            dwgu, dwd = round_bf16(dwgu).to(f32), round_bf16(dwd).to(f32)
        grads["dwgu"][e] = dwgu.reshape(H, 2, I)
        grads["dwd"][e] = dwd
        if cfg["bias"]:
            grads["dbgu"][e] = dgu.to(torch.float64).sum(dim=0).to(
                f32).reshape(2, I)
            grads["dbd"][e] = (a * dY).to(torch.float64).sum(dim=0).to(f32)

    if not cfg["dx_f32"]:
        grads["dx"] = round_bf16(acc).to(f32)
    return grads
