"""Bit-exact check of the host lowering of every moe phase-level op.

  ops_sweep.py gen DIR
      writes DIR/ops.mlir: a @main that runs each op (and one moe.fused
      region) on seeded inputs in a small routing layout (T = 40 tokens, E = 4
      experts of which expert 1 gets no token, K = 2, B = 32, N = 6 blocks
      with padding and a spare block) and prints every result's bits.
  ops_sweep.py check DIR OUTPUT
      recomputes every result in numpy / Python with the operation order the
      lowering documents (f32 sums in ascending k, slot or block order, the
      bias after the sum, docs/numerics.md's f32 orders for the activation
      backward and the affinity gradient, act / act' in f32 through libm's
      expf / tanhf in lib/Reference/Model.cpp's operand order)
      and compares bit for bit.

MX operands are quantized by the compiled program; the expected values use
moe_crosscheck.mx, which test/python/mx.test holds bit-identical to
lib/Reference (and mx-sweep.test holds the lowering to it).
"""

import ctypes
import ctypes.util
import math
import os
import sys

import ml_dtypes
import numpy as np

from runner_output import parse_printout

from moe_crosscheck import mx, routing

T, H, I, E, K, B = 40, 64, 64, 4, 2, 32
F32 = np.float32
BF16 = ml_dtypes.bfloat16
GATE_HI, UP_LO, UP_HI = 1.5, -1.25, 2.0      # swiglu clamp
GEGLU_GATE_LO, GEGLU_GATE_HI = -1.0, 1.0     # geglu clamp


def make_inputs():
    rng = np.random.default_rng(11)
    # Top-2 of experts {0, 2, 3}: expert 1 stays empty.
    choices = np.array([0, 2, 3])
    topk = np.stack([rng.choice(choices, size=2, replace=False)
                     for _ in range(T)])
    scores = rng.uniform(0.1, 0.9, size=(T, K))
    tok, blk = routing.build_routing(topk, E, B)
    N = blk.size
    inp = {
        "x": rng.standard_normal((T, H)).astype(BF16),
        "tok": tok.astype(np.int32),
        "blk": blk.astype(np.int32),
        "aff": routing.masked_affinities(topk, scores, E).astype(F32),
        "ckpt": (2.0 * rng.standard_normal((N, 2, I, B))).astype(BF16),
        "wd": (rng.standard_normal((E, I, H)) / 8).astype(BF16),
        "wgu": (rng.standard_normal((E, H, 2 * I)) / 8).astype(BF16),
        "bgu": rng.standard_normal((E, 2 * I)).astype(BF16),
        "bd": rng.standard_normal((E, H)).astype(BF16),
        "c": rng.standard_normal((N * B, H)).astype(F32),
    }
    return inp


MLIR_TYPES = {np.dtype(F32): "f32", np.dtype(BF16): "bf16",
              np.dtype(np.int32): "i32"}


def ttype(shape, elem):
    return "tensor<%sx%s>" % ("x".join(map(str, shape)), elem)


def program(inp):
    """The text of @main and the list of printed results (name, shape,
    element type)."""
    N = inp["blk"].size
    S = N * B
    t = {
        "x": ttype((T, H), "bf16"), "tok": ttype((S,), "i32"),
        "blk": ttype((N,), "i32"), "aff": ttype((T * E,), "f32"),
        "ckpt": ttype((N, 2, I, B), "bf16"), "wd": ttype((E, I, H), "bf16"),
        "wgu": ttype((E, H, 2 * I), "bf16"), "bgu": ttype((E, 2 * I), "bf16"),
        "bd": ttype((E, H), "bf16"), "c": ttype((S, H), "f32"),
        "rows": ttype((S, H), "bf16"), "a": ttype((S,), "f32"),
        "gu": ttype((S, 2 * I), "f32"), "si": ttype((S, I), "f32"),
        "sh": ttype((S, H), "f32"), "da": ttype((T * E,), "f32"),
    }
    mx4 = "#moe.mx<f8E4M3FN, block = 32, rule = rceil>"
    mx5 = "#moe.mx<f8E5M2, block = 32, rule = floor>"
    body = []
    for name, value in inp.items():
        body.append('%%%s = arith.constant dense<"0x%s"> : %s' %
                    (name, value.tobytes().hex().upper(), t[name]))
    B_ = "block_size = %d : i64" % B
    body.append("""
  %rows = moe.gather_rows %x[%tok] : {x}, {tok} -> {rows}
  %a = moe.slot_affinities %aff, %tok, %blk {{{B_}, num_experts = {E} : i64}}
      : {aff}, {tok}, {blk} -> {a}
  %gu = moe.unpack_checkpoint %ckpt : {ckpt} -> {gu}
  %rq, %rs = moe.mx_quantize %rows {{axis = 1 : i64, quant = {mx4}}}
      : {rows} -> {rqt}, {rst}
  %wdq, %wds = moe.mx_quantize %wd {{axis = 2 : i64, quant = {mx4}}}
      : {wd} -> {wdqt}, {wdst}
  %dA = moe.block_matmul lhs(%rq : {rqt} scales %rs : {rst})
      rhs(%wdq : {wdqt} scales %wds : {wdst}) experts(%blk : {blk})
      {{{B_}}} -> {si}
  %wguq, %wgus = moe.mx_quantize %wgu {{axis = 1 : i64, quant = {mx5}}}
      : {wgu} -> {wguqt}, {wgust}
  %rq5, %rs5 = moe.mx_quantize %rows {{axis = 1 : i64, quant = {mx5}}}
      : {rows} -> {rq5t}, {rst}
  %gure = moe.block_matmul lhs(%rq5 : {rq5t} scales %rs5 : {rst})
      rhs(%wguq : {wguqt} scales %wgus : {wgust}) experts(%blk : {blk})
      bias(%bgu : {bgu}) {{{B_}, transpose_rhs}} -> {gu}
  %mmbf = moe.block_matmul lhs(%rows : {rows}) rhs(%wd : {wd})
      experts(%blk : {blk}) {{{B_}}} -> {si}
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a {{activation =
      #moe.activation<swiglu>, clamp = #moe.clamp<gate_hi = {GATE_HI},
      up_lo = {UP_LO}, up_hi = {UP_HI}>}} : {gu}, {si}, {a} -> {gu}, {si}
  %dgu2, %h2 = moe.gated_act_bwd %gure, %dA, %a {{activation =
      #moe.activation<geglu>, clamp = #moe.clamp<gate_lo = {GLO},
      gate_hi = {GHI}>}} : {gu}, {si}, {a} -> {gu}, {si}
  %da = moe.affinity_grad %dA dot %h, %tok, %blk bias(%rows, %bd)
      {{{B_}, num_experts = {E} : i64}}
      : {si} dot {si}, {tok}, {blk}, {rows}, {bd} -> {da}
  %da2 = moe.affinity_grad %dA dot %h2, %tok, %blk
      {{{B_}, num_experts = {E} : i64}} : {si} dot {si}, {tok}, {blk} -> {da}
  // The partial-sums form (no h): each slot's row of %dA summed.
  %da3 = moe.affinity_grad %dA, %tok, %blk
      {{{B_}, num_experts = {E} : i64}} : {si}, {tok}, {blk} -> {da}
  %ah = moe.scale_rows %h, %a : {si}, {a} -> {si}
  %ady = moe.scale_rows %rows, %a : {rows}, {a} -> {sh}
  %ahq, %ahs = moe.mx_quantize %ah {{axis = 0 : i64, quant = {mx4}}}
      : {si} -> {ahqt}, {ahst}
  %dyq, %dys = moe.mx_quantize %rows {{axis = 0 : i64, quant = {mx4}}}
      : {rows} -> {dyqt}, {dyst}
  %dwd = moe.expert_matmul lhs(%ahq : {ahqt} scales %ahs : {ahst})
      rhs(%dyq : {dyqt} scales %dys : {dyst}) experts(%blk : {blk})
      {{{B_}}} -> {dwdt}
  %dwbf = moe.expert_matmul lhs(%rows : {rows}) rhs(%rows : {rows})
      experts(%blk : {blk}) {{{B_}}} -> {dwbft}
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {{{B_}, num_experts = {E} : i64, top_k = {K} : i64}}
      : {c}, {tok}, {blk} -> {x}
  %dxb = moe.scatter_add_rows %c[%tok], %blk
      {{{B_}, dx_accumulate = #moe.dx_accumulate<bf16>, num_experts = {E} : i64,
       top_k = {K} : i64}}
      : {c}, {tok}, {blk} -> {x}
  // top_k = E bounds every token's K slots loosely: the parallel form's
  // per-token slot lists end in unused (-1) entries.
  %dxf = moe.scatter_add_rows %c[%tok], %blk
      {{{B_}, num_experts = {E} : i64, top_k = {E} : i64}}
      : {c}, {tok}, {blk} -> {dxft}
  %dbgu = moe.expert_sum %dgu, %blk {{{B_}}} : {gu}, {blk} -> {dbgut}
  %fused = moe.fused phase(#moe.phase<p4>) ins(%h, %a, %blk : {si}, {a}, {blk}) {{
  ^bb0(%h0: {si}, %a0: {a}, %b0: {blk}):
    %s0 = moe.scale_rows %h0, %a0 : {si}, {a} -> {si}
    %e0 = moe.expert_sum %s0, %b0 {{{B_}}} : {si}, {blk} -> {fusedt}
    moe.yield %e0 : {fusedt}
  }} -> {fusedt}""".format(
        B_=B_, E=E, K=K, mx4=mx4, mx5=mx5, GATE_HI=GATE_HI, UP_LO=UP_LO,
        UP_HI=UP_HI, GLO=GEGLU_GATE_LO, GHI=GEGLU_GATE_HI,
        rqt=ttype((S, H), "f8E4M3FN"), rst=ttype((S, H // 32), "f8E8M0FNU"),
        rq5t=ttype((S, H), "f8E5M2"),
        wdqt=ttype((E, I, H), "f8E4M3FN"),
        wdst=ttype((E, I, H // 32), "f8E8M0FNU"),
        wguqt=ttype((E, H, 2 * I), "f8E5M2"),
        wgust=ttype((E, H // 32, 2 * I), "f8E8M0FNU"),
        ahqt=ttype((S, I), "f8E4M3FN"), ahst=ttype((S // 32, I), "f8E8M0FNU"),
        dyqt=ttype((S, H), "f8E4M3FN"), dyst=ttype((S // 32, H), "f8E8M0FNU"),
        dwdt=ttype((E, I, H), "f32"), dwbft=ttype((E, H, H), "f32"),
        dxft=ttype((T, H), "f32"), dbgut=ttype((E, 2 * I), "f32"),
        fusedt=ttype((E, I), "f32"), **t))
    results = [
        ("rows", (S, H), "bf16"), ("a", (S,), "f32"), ("gu", (S, 2 * I), "f32"),
        ("dA", (S, I), "f32"), ("gure", (S, 2 * I), "f32"),
        ("mmbf", (S, I), "f32"), ("dgu", (S, 2 * I), "f32"),
        ("h", (S, I), "f32"), ("dgu2", (S, 2 * I), "f32"),
        ("h2", (S, I), "f32"), ("da", (T * E,), "f32"),
        ("da2", (T * E,), "f32"), ("da3", (T * E,), "f32"),
        ("ah", (S, I), "f32"),
        ("ady", (S, H), "f32"), ("dwd", (E, I, H), "f32"),
        ("dwbf", (E, H, H), "f32"), ("dx", (T, H), "bf16"),
        ("dxb", (T, H), "bf16"), ("dxf", (T, H), "f32"),
        ("dbgu", (E, 2 * I), "f32"), ("fused", (E, I), "f32"),
    ]
    for name, shape, elem in results:
        i32 = ttype(shape, "i32")
        memref = "memref<%sxi32>" % "x".join(map(str, shape))
        if elem == "f32":
            body.append("%%%s_i = arith.bitcast %%%s : %s to %s" %
                        (name, name, ttype(shape, "f32"), i32))
        else:
            i16 = ttype(shape, "i16")
            body.append("%%%s_h = arith.bitcast %%%s : %s to %s" %
                        (name, name, ttype(shape, "bf16"), i16))
            body.append("%%%s_i = arith.extui %%%s_h : %s to %s" %
                        (name, name, i16, i32))
        body.append("%%%s_m = bufferization.to_buffer %%%s_i : %s to %s" %
                    (name, name, i32, memref))
        body.append("%%%s_u = memref.cast %%%s_m : %s to memref<*xi32>" %
                    (name, name, memref))
        body.append("call @printMemrefI32(%%%s_u) : (memref<*xi32>) -> ()" %
                    name)
    text = ("func.func private @printMemrefI32(memref<*xi32>)\n"
            "func.func @main() {\n  " + "\n  ".join(body) +
            "\n  return\n}\n")
    return text, results


# ---------------------------------------------------------------------------
# Expected values
# ---------------------------------------------------------------------------

def qdq(m, axis, elem, rule):
    """MX quantize + dequantize of a 2-D f32 array (exact f32 values)."""
    codes, scales = mx.quantize(np.asarray(m, F32), axis, elem, rule)
    return mx.dequantize(codes, scales, axis, elem)


def block_matmul(lhs, rhs_e, blk, bias=None):
    """result[s, n] = sum_k lhs[s, k] * rhs_e[e(s)][n, k] in f32, k
    ascending, then + bias[e(s)]."""
    S, Kd = lhs.shape
    experts = np.repeat(blk, B)
    rows_rhs = rhs_e[experts]  # [S, Nout, K]
    acc = np.zeros(rows_rhs.shape[:2], F32)
    for k in range(Kd):
        acc = acc + lhs[:, k:k + 1] * rows_rhs[:, :, k]
    if bias is not None:
        acc = acc + bias[experts].astype(F32)
    return acc


def expert_matmul(lhs, rhs, blk):
    acc = np.zeros((E, lhs.shape[1], rhs.shape[1]), F32)
    for s in range(lhs.shape[0]):
        e = blk[s // B]
        acc[e] = acc[e] + np.outer(lhs[s], rhs[s]).astype(F32)
    return acc


_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
for _name in ("expf", "tanhf"):
    getattr(_LIBM, _name).restype = ctypes.c_float
    getattr(_LIBM, _name).argtypes = [ctypes.c_float]


def activation(kind, g):
    """act(g), act'(g) in f32 from an f32 g, in lib/Reference/Model.cpp's
    operand order, with the C library's expf and tanhf (which the host
    lowering calls); constants rounded to f32 as the lowering rounds them."""
    g = F32(g)
    one = F32(1.0)
    if kind == "swiglu":
        s = one / (one + F32(_LIBM.expf(float(-g))))
        return g * s, s * (one + g * (one - s))
    c = F32(math.sqrt(2.0 / 3.14159265358979323846))
    a = F32(0.044715)
    half = F32(0.5)
    t = F32(_LIBM.tanhf(float(c * (g + a * g * g * g))))
    return (half * g * (one + t),
            half * (one + t) + half * g * (one - t * t) * c *
            (one + F32(3.0 * 0.044715) * g * g))


def gated_act_bwd(gu, dA, a, kind, gate, up):
    """dgu [S, 2I] and h [S, I] in the f32 order of docs/numerics.md."""
    S = gu.shape[0]
    g_raw, u_raw = gu[:, :I], gu[:, I:]
    dgu = np.zeros((S, 2 * I), F32)
    h = np.zeros((S, I), F32)

    def clamp(v, lo, hi):
        lo = None if lo is None else F32(lo)
        hi = None if hi is None else F32(hi)
        if lo is not None and v < lo:
            v = lo
        if hi is not None and hi < v:
            v = hi
        inside = (lo is None or v > lo) and (hi is None or v < hi)
        return v, inside

    for s in range(S):
        for i in range(I):
            g, g_in = clamp(g_raw[s, i], *gate)
            u, u_in = clamp(u_raw[s, i], *up)
            sv, sp = activation(kind, g)
            h[s, i] = sv * u
            dh = a[s] * dA[s, i]
            dgu[s, i] = (dh * u) * sp if g_in else F32(0)
            dgu[s, I + i] = dh * sv if u_in else F32(0)
    return dgu, h


def affinity_grad(dA, h, tok, blk, dy=None, bd=None):
    # 32 lane sums per slot, lane l over the elements l, l + 32, ..., then
    # the lanes added in order (docs/numerics.md).
    lanes = np.zeros((dA.shape[0], 32), F32)
    for j in range(0, dA.shape[1], 32):
        lanes = lanes + dA[:, j:j + 32] * h[:, j:j + 32]
    if bd is not None:
        bias_rows = bd[np.repeat(blk, B)].astype(F32)
        for j in range(0, dy.shape[1], 32):
            lanes = lanes + dy[:, j:j + 32].astype(F32) * bias_rows[:, j:j + 32]
    sums = np.zeros(dA.shape[0], F32)
    for lane in range(32):
        sums = sums + lanes[:, lane]
    out = np.zeros(T * E, F32)
    for s, t in enumerate(tok):
        if t >= 0:
            out[t * E + blk[s // B]] = sums[s]
    return out


def scatter_add(c, tok, round_each):
    acc = np.zeros((T, H), F32)
    for s, t in enumerate(tok):
        if t < 0:
            continue
        acc[t] = acc[t] + c[s]
        if round_each:
            acc[t] = acc[t].astype(BF16).astype(F32)
    return acc


def expert_sum(m, blk):
    acc = np.zeros((E, m.shape[1]), F32)
    for s in range(m.shape[0]):
        e = blk[s // B]
        acc[e] = acc[e] + m[s]
    return acc


def expected(inp):
    tok, blk = inp["tok"], inp["blk"]
    S = tok.size
    valid = tok >= 0
    safe = np.where(valid, tok, 0)
    out = {}
    rows = np.where(valid[:, None], inp["x"][safe], BF16(0)).astype(BF16)
    out["rows"] = rows
    out["a"] = np.where(valid, inp["aff"][safe * E + blk[np.arange(S) // B]],
                        F32(0)).astype(F32)
    a = out["a"]
    gu = inp["ckpt"].astype(F32).transpose(0, 3, 1, 2).reshape(S, 2 * I)
    out["gu"] = gu
    rows32 = rows.astype(F32)
    wd = np.stack([qdq(w, 1, "e4m3", "rceil") for w in inp["wd"].astype(F32)])
    out["dA"] = block_matmul(qdq(rows32, 1, "e4m3", "rceil"), wd, blk)
    wgu = np.stack([qdq(w, 0, "e5m2", "floor").T
                    for w in inp["wgu"].astype(F32)])
    out["gure"] = block_matmul(qdq(rows32, 1, "e5m2", "floor"), wgu, blk,
                               inp["bgu"])
    out["mmbf"] = block_matmul(rows32, inp["wd"].astype(F32), blk)
    out["dgu"], out["h"] = gated_act_bwd(gu, out["dA"], a, "swiglu",
                                         (None, GATE_HI), (UP_LO, UP_HI))
    out["dgu2"], out["h2"] = gated_act_bwd(
        out["gure"], out["dA"], a, "geglu", (GEGLU_GATE_LO, GEGLU_GATE_HI),
        (None, None))
    out["da"] = affinity_grad(out["dA"], out["h"], tok, blk, rows, inp["bd"])
    out["da2"] = affinity_grad(out["dA"], out["h2"], tok, blk)
    out["da3"] = affinity_grad(out["dA"], np.ones_like(out["dA"]), tok, blk)
    out["ah"] = (a[:, None] * out["h"]).astype(F32)
    out["ady"] = (a[:, None] * rows32).astype(F32)
    out["dwd"] = expert_matmul(qdq(out["ah"], 0, "e4m3", "rceil"),
                               qdq(rows32, 0, "e4m3", "rceil"), blk)
    out["dwbf"] = expert_matmul(rows32, rows32, blk)
    out["dx"] = scatter_add(inp["c"], tok, False).astype(BF16)
    out["dxb"] = scatter_add(inp["c"], tok, True).astype(BF16)
    out["dxf"] = scatter_add(inp["c"], tok, False)
    out["dbgu"] = expert_sum(out["dgu"], blk)
    out["fused"] = expert_sum(out["ah"], blk)
    return out


def bits(array):
    array = np.asarray(array)
    if array.dtype == BF16:
        return array.view(np.uint16).astype(np.int64)
    return np.asarray(array, F32).view(np.uint32).astype(np.int64)


def main():
    inp = make_inputs()
    text, results = program(inp)
    if sys.argv[1] == "gen":
        with open(os.path.join(sys.argv[2], "ops.mlir"), "w") as f:
            f.write(text)
        return 0
    got = parse_printout(sys.argv[3])
    want = expected(inp)
    if len(got) != len(results):
        print("FAIL: %d arrays printed, expected %d" % (len(got), len(results)))
        return 1
    failures = 0
    for (name, shape, _), g in zip(results, got):
        w = bits(want[name])
        g = g & (0xFFFF if want[name].dtype == BF16 else 0xFFFFFFFF)
        bad = np.count_nonzero(g != w)
        nonzero = np.count_nonzero(w & 0x7FFFFFFF)
        status = "ok" if bad == 0 else "FAIL"
        failures += bad != 0
        print("%s: %s %d/%d elements differ (%d non-zero)" %
              (status, name, bad, w.size, nonzero))
    print("ops sweep: %d results, %d failed" % (len(results), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
