"""Bit-exact sweep of the host lowering of moe.mx_quantize / mx_dequantize
against lib/Reference (moe-ref quantize).

  mx_sweep.py gen DIR
      writes DIR/x-<elem>.npy (the inputs) and DIR/sweep.mlir, whose @main
      quantizes them for every element type, scale rule and axis (and a bf16
      copy once), dequantizes the codes, and prints codes, scales and the
      bits of the dequantized values with printMemrefI32.
  mx_sweep.py check DIR OUTPUT MOE_REF
      runs MOE_REF quantize on the same inputs and compares every code,
      scale byte and dequantized bit pattern with OUTPUT (the printout of
      the compiled @main). Prints one line per case and a summary.

The inputs are 32x32 tiles, one per corner of the quantizer, so every
32-element block along either axis lies inside one tile: normal and
wide-range values, zero and -0 blocks, fp32 subnormals, values near
FLT_MAX, floor-rule saturation, exact midpoints between FP8 values
(round-to-nearest-even ties), NaN / Inf blocks, integers, and amax around
elem_max * 2^-127, where RCEIL's ratio r is an fp32 subnormal.
"""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np

from runner_output import parse_printout

ELEMS = {"e4m3": ("f8E4M3FN", ml_dtypes.float8_e4m3fn, 448.0),
         "e5m2": ("f8E5M2", ml_dtypes.float8_e5m2, 57344.0)}
RULES = ("rceil", "floor", "floor_alt")
TILE = 32
GRID = (4, 3)
SHAPE = (GRID[0] * TILE, GRID[1] * TILE)


def fp8_grid(elem):
    """The finite non-negative values of an FP8 type, ascending."""
    values = np.arange(256, dtype=np.uint8).view(ELEMS[elem][1]).astype(
        np.float64)
    return np.unique(np.abs(values[np.isfinite(values)]))


def tiles(rng, elem):
    """The 12 tiles of the input for `elem`, as float64 holding f32 values."""
    shape = (TILE, TILE)
    emax = ELEMS[elem][2]
    out = []
    out.append(rng.standard_normal(shape))
    out.append(rng.standard_normal(shape) *
               np.exp2(rng.uniform(-60, 60, size=shape)))
    zeros = np.zeros(shape)
    zeros[::3, :] = -0.0
    zeros[5, 7:20] = rng.standard_normal(13)
    zeros[9:30, 11] = rng.standard_normal(21)
    out.append(zeros)
    out.append(rng.standard_normal(shape) *
               np.exp2(rng.uniform(-149, -118, size=shape)))
    huge = rng.uniform(-1.0, 1.0, size=shape) * 3.4e38
    huge[4, :] = np.finfo(np.float32).max
    huge[:, 6] = -np.finfo(np.float32).max
    out.append(huge)
    out.append(np.exp2(rng.integers(-10, 10, size=shape)) *
               rng.uniform(1.0, 2.0, size=shape) *
               rng.choice([-1.0, 1.0], size=shape))
    # Midpoints between adjacent FP8 values; row 0 and column 0 hold
    # elem_max * 2^s, so every block along either axis has that amax and
    # the scale maps the midpoints back onto midpoints.
    grid = fp8_grid(elem)
    mids = (grid[:-1] + grid[1:]) / 2
    ties = rng.choice(mids, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    ties[0, :] = emax
    ties[:, 0] = emax
    out.append(np.ldexp(ties, int(rng.integers(-20, 20))))
    special = rng.standard_normal(shape)
    special[3, 5] = np.nan
    special[20, 17] = -np.nan
    special[8, 25] = np.inf
    special[30, 2] = -np.inf
    out.append(special)
    out.append(rng.integers(-600, 600, size=shape).astype(np.float64))
    # amax near elem_max * 2^-127: r = amax / elem_max is an fp32
    # subnormal at or just above 2^-127 (RCEIL byte 0 or 1).
    base = np.float32(emax) * np.float32(2.0 ** -127)
    near = rng.uniform(-1.0, 1.0, size=shape) * float(base)
    steps = np.array([0, 1, -1, 2, 3, 1 << 20, -(1 << 20)], dtype=np.int64)
    for i in range(TILE):
        anchor = np.float32(base).view(np.int32) + steps[i % len(steps)]
        near[i, i] = float(np.int32(anchor).view(np.float32))
    out.append(near)
    # Tiny blocks down to the smallest fp32 subnormal.
    tiny = rng.integers(-3, 4, size=shape) * 2.0 ** -149
    tiny[7, :] = 2.0 ** -149
    out.append(tiny)
    # Values just above and below powers of two (carries into the next
    # binade) next to one large value per row.
    edge = np.ldexp(1.0 - rng.choice([2.0 ** -24, 0.0, -2.0 ** -23],
                                     size=shape),
                    rng.integers(-8, 9, size=shape))
    edge[:, 31] = emax * rng.uniform(0.5, 1.0, size=TILE)
    out.append(edge)
    return out


def make_input(rng, elem):
    rows = []
    tl = tiles(rng, elem)
    for r in range(GRID[0]):
        rows.append(np.concatenate(tl[r * GRID[1]:(r + 1) * GRID[1]], axis=1))
    return np.concatenate(rows, axis=0).astype(np.float32)


def cases():
    """(name, elem, rule, axis, input dtype) of every compiled case."""
    out = []
    for elem in ELEMS:
        for rule in RULES:
            for axis in (0, 1):
                out.append(("%s-%s-axis%d" % (elem, rule, axis), elem, rule,
                            axis, "f32"))
    out.append(("e4m3-rceil-axis1-bf16", "e4m3", "rceil", 1, "bf16"))
    return out


def scale_shape(axis):
    shape = list(SHAPE)
    shape[axis] //= 32
    return shape


def tensor(shape, elem):
    return "tensor<%sx%s>" % ("x".join(map(str, shape)), elem)


def print_lines(value, shape, elem, fresh):
    """MLIR that prints a tensor as i32 (FP8 and E8M0 codes zero-extended,
    f32 as its bits)."""
    lines = []
    i32 = tensor(shape, "i32")
    if elem == "f32":
        lines.append("%s = arith.bitcast %s : %s to %s" %
                     (fresh("bits"), value, tensor(shape, "f32"), i32))
    else:
        i8 = tensor(shape, "i8")
        byte = fresh("byte")
        lines.append("%s = arith.bitcast %s : %s to %s" %
                     (byte, value, tensor(shape, elem), i8))
        lines.append("%s = arith.extui %s : %s to %s" %
                     (fresh("wide"), byte, i8, i32))
    wide = lines[-1].split(" = ")[0]
    memref = "memref<%sxi32>" % "x".join(map(str, shape))
    buf = fresh("buf")
    lines.append("%s = bufferization.to_buffer %s : %s to %s" %
                 (buf, wide, i32, memref))
    unranked = fresh("u")
    lines.append("%s = memref.cast %s : %s to memref<*xi32>" %
                 (unranked, buf, memref))
    lines.append("call @printMemrefI32(%s) : (memref<*xi32>) -> ()" %
                 unranked)
    return lines


def generate(directory):
    rng = np.random.default_rng(7)
    inputs = {elem: make_input(rng, elem) for elem in ELEMS}
    for elem, x in inputs.items():
        np.save(os.path.join(directory, "x-%s.npy" % elem), x)
    # The bf16 case quantizes the bf16 rounding of the e4m3 input; the
    # reference reads the same values as f32.
    x_bf16 = inputs["e4m3"].astype(ml_dtypes.bfloat16)
    np.save(os.path.join(directory, "x-bf16.npy"), x_bf16.astype(np.float32))

    counter = [0]

    def fresh(stem):
        counter[0] += 1
        return "%%%s%d" % (stem, counter[0])

    funcs, body = [], []
    xs = {}
    for elem, x in inputs.items():
        xs[elem] = fresh("x")
        body.append('%s = arith.constant dense<"0x%s"> : %s' %
                    (xs[elem], x.tobytes().hex().upper(),
                     tensor(SHAPE, "f32")))
    xs["bf16"] = fresh("x")
    body.append('%s = arith.constant dense<"0x%s"> : %s' %
                (xs["bf16"], x_bf16.tobytes().hex().upper(),
                 tensor(SHAPE, "bf16")))
    for name, elem, rule, axis, dtype in cases():
        fn = name.replace("-", "_")
        code_type = tensor(SHAPE, ELEMS[elem][0])
        sc_type = tensor(scale_shape(axis), "f8E8M0FNU")
        in_type = tensor(SHAPE, dtype)
        funcs.append(
            "func.func @q_%s(%%x: %s) -> (%s, %s) {\n"
            "  %%q, %%s = moe.mx_quantize %%x {axis = %d : i64, quant = "
            "#moe.mx<%s, block = 32, rule = %s>} : %s -> %s, %s\n"
            "  return %%q, %%s : %s, %s\n}\n" %
            (fn, in_type, code_type, sc_type, axis, ELEMS[elem][0], rule,
             in_type, code_type, sc_type, code_type, sc_type))
        funcs.append(
            "func.func @dq_%s(%%q: %s, %%s: %s) -> %s {\n"
            "  %%d = moe.mx_dequantize %%q, %%s {axis = %d : i64} : %s, %s "
            "-> %s\n  return %%d : %s\n}\n" %
            (fn, code_type, sc_type, tensor(SHAPE, "f32"), axis, code_type,
             sc_type, tensor(SHAPE, "f32"), tensor(SHAPE, "f32")))
        x = xs["bf16" if dtype == "bf16" else elem]
        q, s, d = fresh("q"), fresh("s"), fresh("d")
        body.append("%s, %s = call @q_%s(%s) : (%s) -> (%s, %s)" %
                    (q, s, fn, x, in_type, code_type, sc_type))
        body.append("%s = call @dq_%s(%s, %s) : (%s, %s) -> %s" %
                    (d, fn, q, s, code_type, sc_type, tensor(SHAPE, "f32")))
        body += print_lines(q, SHAPE, ELEMS[elem][0], fresh)
        body += print_lines(s, scale_shape(axis), "f8E8M0FNU", fresh)
        body += print_lines(d, SHAPE, "f32", fresh)
    with open(os.path.join(directory, "sweep.mlir"), "w") as f:
        f.write("".join(funcs))
        f.write("func.func private @printMemrefI32(memref<*xi32>)\n")
        f.write("func.func @main() {\n  ")
        f.write("\n  ".join(body))
        f.write("\n  return\n}\n")


def check(directory, output, moe_ref):
    arrays = parse_printout(output)
    expected_count = 3 * len(cases())
    if len(arrays) != expected_count:
        print("FAIL: %d arrays printed, expected %d" %
              (len(arrays), expected_count))
        return 1
    failures = 0
    for index, (name, elem, rule, axis, dtype) in enumerate(cases()):
        src = os.path.join(directory, "x-%s.npy" %
                           ("bf16" if dtype == "bf16" else elem))
        paths = [os.path.join(directory, "%s-%s.npy" % (name, part))
                 for part in ("q", "s", "d")]
        subprocess.run([moe_ref, "quantize", "--in", src, "--axis", str(axis),
                        "--elem", elem, "--rule", rule, "--codes", paths[0],
                        "--scales", paths[1], "--dequant", paths[2]],
                       check=True)
        want_q, want_s, want_d = [np.load(p) for p in paths]
        got_q, got_s, got_d = arrays[3 * index:3 * index + 3]
        bad_q = np.count_nonzero(got_q != want_q.astype(np.int64))
        bad_s = np.count_nonzero(got_s != want_s.astype(np.int64))
        want_bits = want_d.view(np.uint32).astype(np.int64)
        got_bits = (got_d & 0xFFFFFFFF)
        # NaN payloads are not part of the contract; any NaN matches NaN.
        nan_want = np.isnan(want_d)
        nan_got = np.isnan(got_bits.astype(np.uint32).view(np.float32))
        bad_d = np.count_nonzero((got_bits != want_bits) & ~nan_want) + \
            np.count_nonzero(nan_want != nan_got)
        status = "ok" if bad_q == bad_s == bad_d == 0 else "FAIL"
        failures += status != "ok"
        print("%s: %s codes %d/%d differ, scales %d/%d, dequantized %d/%d" %
              (status, name, bad_q, want_q.size, bad_s, want_s.size, bad_d,
               want_d.size))
    print("mx sweep: %d cases, %d failed" % (len(cases()), failures))
    return 1 if failures else 0


def main():
    if sys.argv[1] == "gen":
        generate(sys.argv[2])
        return 0
    return check(sys.argv[2], sys.argv[3], sys.argv[4])


if __name__ == "__main__":
    sys.exit(main())
