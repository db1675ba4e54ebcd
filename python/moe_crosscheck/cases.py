"""Inputs and comparisons shared by the numpy and the torch cross-checks.

Only numpy is imported here: the torch commands run on a machine without
ml_dtypes, so nothing below may depend on it (or on torch).
"""

import os
import shutil

import numpy as np

# Largest finite magnitude and (exponent bits, mantissa bits, bias) of the
# OCP FP8 element types.
ELEM_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
_FORMAT = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}


def fresh_dir(path):
    """An empty directory at `path` (removed first if it exists)."""
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


def same_bits(a, b):
    """Equal float32 arrays, bit for bit, NaN payloads aside."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.shape != b.shape:
        return False
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and np.array_equal(
        a[~nan].view(np.uint32), b[~nan].view(np.uint32))


def fp8_magnitudes(elem):
    """The finite non-negative values of an FP8 type, ascending, decoded
    from the bit fields (f8E4M3FN has no infinities; its all-ones code is
    NaN; f8E5M2 reserves its top exponent)."""
    ebits, mbits, bias = _FORMAT[elem]
    values = []
    for exponent in range(1 << ebits):
        for mantissa in range(1 << mbits):
            if elem == "e4m3" and exponent == 15 and mantissa == 7:
                continue
            if elem == "e5m2" and exponent == 31:
                continue
            fraction = mantissa / float(1 << mbits)
            if exponent == 0:
                values.append(fraction * 2.0 ** (1 - bias))
            else:
                values.append((1.0 + fraction) * 2.0 ** (exponent - bias))
    return np.unique(np.array(values))


def _tie_values(rng, elem, shape):
    """Exact midpoints between adjacent FP8 magnitudes, with one element per
    32-block at elem_max, all times a common power of two, so that every rule
    keeps them midpoints after scaling."""
    grid = fp8_magnitudes(elem)
    mids = (grid[:-1] + grid[1:]) / 2
    values = rng.choice(mids, size=shape) * rng.choice([-1.0, 1.0],
                                                       size=shape)
    values[:, ::32] = ELEM_MAX[elem]
    values[::32, :] = ELEM_MAX[elem]
    return np.ldexp(values, rng.integers(-20, 20))


def _rounding_classes(elem):
    """Blocks led by elem_max (so that RCEIL and FLOOR pick the scale 2^0 and
    the other 31 elements are encoded as they are), whose elements cover
    every fp32 exponent up to elem_max's and, for every shift the encoder
    may use, the dropped bits below, at and above one half, zero, all ones,
    under random kept bits, with both signs."""
    rng = np.random.default_rng(99)
    top = int(np.float32(ELEM_MAX[elem]).view(np.uint32))
    mantissas = []
    for shift in range(1, 24):
        mask, half = (1 << shift) - 1, 1 << (shift - 1)
        for low in (0, half - 1, half, half + 1, mask):
            kept = rng.integers(0, 1 << 23, size=3) & ~mask
            mantissas.extend(list(kept | low) + [low])
    mantissas = np.unique(np.array(mantissas, dtype=np.uint32))
    fields = np.arange(0, (top >> 23) + 1, dtype=np.uint32)
    bits = ((fields[:, None] << 23) | mantissas[None, :]).reshape(-1)
    bits = bits[bits <= top]
    bits = np.concatenate([bits, bits | np.uint32(1 << 31)])
    bits = np.concatenate([bits, np.zeros(-bits.size % 31, np.uint32)])
    body = bits.view(np.float32).reshape(-1, 31)
    lead = np.full((body.shape[0], 1), ELEM_MAX[elem], np.float32)
    return np.concatenate([lead, body], axis=1)


def _scale_boundaries(rng, elem):
    """One 32-block per row whose amax sits on, or one ulp beside, a value
    where a rule's scale byte changes: elem_max * 2^k (RCEIL, down to the
    subnormal ratios 2^-127 and 2^-126) and 2^k (the FLOOR rules), over the
    whole fp32 range."""
    centers = np.array([c * 2.0 ** k for k in range(-160, 128)
                        for c in (1.0, ELEM_MAX[elem])])
    centers = centers[centers <= np.finfo(np.float32).max].astype(np.float32)
    centers = centers[centers > 0]
    amax = np.concatenate([centers, np.nextafter(centers, np.float32(0)),
                           np.nextafter(centers, np.float32(np.inf))])
    amax = amax[np.isfinite(amax) & (amax > 0)]
    block = amax[:, None] * rng.uniform(-0.99, 0.99, size=(amax.size, 32))
    block[np.arange(amax.size), np.arange(amax.size) % 32] = amax
    return block


def quant_inputs(rng, elem):
    """(label, float32 array) pairs covering the quantizer's corners."""
    shape = (70, 45)  # partial blocks along both axes
    cases = [("normal", rng.standard_normal(shape))]
    cases.append(("wide-range", rng.standard_normal(shape) * np.exp2(
        rng.uniform(-60, 60, size=shape))))
    zeros = rng.standard_normal(shape)
    zeros[:32, :] = 0.0
    zeros[:, :32] = 0.0
    zeros[40:, 40] = -0.0
    cases.append(("zero-blocks", zeros))
    # fp32 subnormals and the smallest normals: scales clamp at byte 0.
    cases.append(("subnormal", rng.standard_normal(shape) * np.exp2(
        rng.uniform(-149, -118, size=shape))))
    huge = rng.uniform(-1.0, 1.0, size=shape) * 3.4e38
    huge[5, :] = np.finfo(np.float32).max
    cases.append(("huge", huge))
    # FLOOR saturates blocks whose amax sits above a power of two.
    cases.append(("saturation", np.exp2(rng.integers(-10, 10, size=shape)) *
                  rng.uniform(1.0, 2.0, size=shape) *
                  rng.choice([-1.0, 1.0], size=shape)))
    cases.append(("ties", _tie_values(rng, elem, shape)))
    special = rng.standard_normal(shape)
    special[3, 5] = np.nan
    special[40, 33] = -np.nan
    special[66, 2] = np.inf
    special[10, 44] = -np.inf
    special[35, 10] = 3.4e38
    cases.append(("nan-inf", special))
    cases.append(("integers", rng.integers(-600, 600, size=(64, 96))))
    cases.append(("rounding-classes", _rounding_classes(elem)))
    cases.append(("scale-boundaries", _scale_boundaries(rng, elem)))
    return [(label, np.asarray(v, np.float64).astype(np.float32))
            for label, v in cases]
