"""The cross-check suites: each runs ``moe-ref`` on seeded data, recomputes
the same result with this package, and compares.

Every suite returns a SuiteResult; a failing comparison is recorded with the
case and output that failed, never raised, so one run reports everything.
"""

import json
import os

import numpy as np

from . import layer, mx, router, routing
from .cases import fresh_dir, quant_inputs, same_bits
from .tool import ToolError, run_tool

# Tolerances. R_64 is fp64 on both sides: only summation order differs, so
# the relative Frobenius distance sits near 1e-16 and 1e-10 leaves room
# without hiding any real difference (a wrong term moves it to >= 1e-4).
R64_TOL = 1e-10
# R_mx: both sides quantize the same fp32 values to the same codes and sum
# exact products in fp64, so they agree bit for bit unless an fp64 libm
# difference in act()/act'() lands within 1e-16 of an fp32 rounding
# boundary; one such flip moves an output by ~1e-7 relative, a real
# rounding or quantization-axis mistake by >= 1e-3.
RMX_TOL = 1e-6
ROUTER_TOL = 1e-10


class SuiteResult:
    def __init__(self, name):
        self.name = name
        self.cases = 0
        self.failures = []
        self.errors = {}  # label -> max error seen

    def record(self, label, value):
        """Keeps the largest value per label (a float error or a count)."""
        self.errors[label] = max(self.errors.get(label, value), value)

    def fail(self, message):
        self.failures.append(message)

    @property
    def passed(self):
        return not self.failures and self.cases > 0


def rel_frobenius(actual, expected):
    """||actual - expected||_F / ||expected||_F; inf on a NaN or when the
    expected array is zero and the actual one is not."""
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    if np.isnan(actual).any() or np.isnan(expected).any():
        return np.inf
    diff = np.linalg.norm((actual - expected).ravel())
    norm = np.linalg.norm(expected.ravel())
    if norm == 0:
        return 0.0 if diff == 0 else np.inf
    return diff / norm


# ---------------------------------------------------------------------------
# layer
# ---------------------------------------------------------------------------

# Small shapes that still cover every path: both activations and affinity
# placements, clamps that clip (x, W ~ N(0,1), N(0,1/H) make g, u ~ N(0,1),
# so a limit of 0.5 clips about a third), bias, checkpoint, K = 1, E = 1
# dense, empty experts, T*K not a multiple of B, every element type and rule.
LAYER_CASES = [
    ("swiglu-on_i", "--T 40 --H 64 --I 32 --E 4 --K 2 --B 128"),
    ("geglu-on_h-bias", "--T 50 --H 96 --I 64 --E 3 --K 2 --act geglu "
     "--affinity on_h --bias"),
    ("swiglu-clamp-ckpt", "--T 45 --H 64 --I 32 --E 4 --K 2 "
     "--clamp-gate :0.5 --clamp-up -0.5:0.5 --checkpoint"),
    ("geglu-k1-bias-ckpt-clamp", "--T 60 --H 32 --I 64 --E 4 --K 1 "
     "--act geglu --bias --checkpoint --clamp-gate -1:1 --clamp-up -0.75:"),
    ("dense", "--T 70 --H 32 --I 96 --dense --bias"),
    ("empty-experts", "--T 33 --H 64 --I 64 --E 6 --K 2 --empty-experts 2 "
     "--affinity on_h"),
    ("e8k3-outputs", "--T 100 --H 32 --I 32 --E 8 --K 3 --dx-f32 "
     "--weight-grad-bf16 --quant e5m2 --rule floor"),
    ("b256-bf16-acc", "--T 20 --H 96 --I 32 --E 2 --K 2 --B 256 --act geglu "
     "--dx-accumulate bf16 --clamp-up 0: --rule floor_alt"),
    ("few-tokens", "--T 3 --H 32 --I 32 --E 8 --K 2 --B 128 --bias"),
    ("bf16-operands", "--T 64 --H 64 --I 64 --E 2 --K 2 --quant none "
     "--affinity on_h --bias --checkpoint"),
    ("many-blocks", "--T 150 --H 32 --I 32 --E 2 --K 2 --B 128 "
     "--clamp-gate -2:2 --dx-accumulate bf16 --dx-f32"),
]

INPUT_NAMES = ["x", "dy", "affinities", "wgu", "wd", "token_position_to_id",
               "block_to_expert", "bgu", "bd", "checkpoint"]
BF16_INPUTS = ["x", "dy", "wgu", "wd", "bgu", "bd", "checkpoint"]


def _load_dir(path, names):
    out = {}
    for name in names:
        file = os.path.join(path, name + ".npy")
        if os.path.exists(file):
            out[name] = np.load(file)
    return out


def layer_suite(moe_ref, workdir, with_rmx=True):
    result = SuiteResult("layer")
    for seed, (label, flags) in enumerate(LAYER_CASES):
        result.cases += 1
        try:
            _layer_case(moe_ref, workdir, seed + 1, label, flags, with_rmx,
                        result)
        except ToolError as err:
            result.fail("%s: %s" % (label, err))
    return result


def _layer_case(moe_ref, workdir, seed, label, flags, with_rmx, result):
    case = fresh_dir(os.path.join(workdir, label))
    indir = os.path.join(case, "in")
    run_tool(moe_ref, "gen", *flags.split(), "--seed", seed, "--out", indir)
    with open(os.path.join(indir, "config.json")) as f:
        cfg = json.load(f)
    inp = _load_dir(indir, INPUT_NAMES)
    # The generator's contract: bf16 tensors, fp32 affinities.
    for name in BF16_INPUTS:
        if name in inp and not np.array_equal(
                mx.round_bf16(inp[name]), inp[name]):
            result.fail("%s: input %s is not bf16-valued" % (label, name))
    if not np.array_equal(layer.f32(inp["affinities"]), inp["affinities"]):
        result.fail("%s: affinities are not fp32-valued" % label)

    refs = [("r64", layer.backward64, R64_TOL)]
    if with_rmx:
        refs.append(("rmx", layer.backward_mx, RMX_TOL))
    for ref, compute, tol in refs:
        outdir = os.path.join(case, ref)
        run_tool(moe_ref, "bwd", "--in", indir, "--out", outdir, "--ref", ref)
        expected = compute(cfg, inp)
        got = _load_dir(outdir, list(expected))
        for name, want in expected.items():
            if name not in got:
                result.fail("%s %s: moe-ref wrote no %s.npy" %
                            (label, ref, name))
                continue
            if got[name].shape != want.shape:
                result.fail("%s %s %s: shape %s, expected %s" %
                            (label, ref, name, got[name].shape, want.shape))
                continue
            err = rel_frobenius(got[name], want)
            result.record({"r64": "R_64", "rmx": "R_mx"}[ref] + " rel err", err)
            if not err <= tol:
                result.fail("%s %s %s: rel err %.3e > %.0e" %
                            (label, ref, name, err, tol))


# ---------------------------------------------------------------------------
# mx
# ---------------------------------------------------------------------------

def mx_suite(moe_ref, workdir):
    result = SuiteResult("mx")
    work = fresh_dir(os.path.join(workdir, "mx"))
    rng = np.random.default_rng(20240)
    mismatched = 0
    for elem in ("e4m3", "e5m2"):
        for label, x in quant_inputs(rng, elem):
            src = os.path.join(work, "%s-%s.npy" % (elem, label))
            # One input goes in as f64 (exact f32 values), as users may.
            np.save(src, x.astype(np.float64) if label == "normal" else x)
            for axis in (0, 1):
                for rule in mx.RULES:
                    name = "%s-%s-axis%d-%s" % (elem, label, axis, rule)
                    paths = [os.path.join(work, name + s + ".npy")
                             for s in ("-q", "-s", "-d")]
                    run_tool(moe_ref, "quantize", "--in", src, "--axis", axis,
                             "--elem", elem, "--rule", rule, "--codes",
                             paths[0], "--scales", paths[1], "--dequant",
                             paths[2])
                    codes, scales = mx.quantize(x, axis, elem, rule)
                    deq = mx.dequantize(codes, scales, axis, elem)
                    got = [np.load(p) for p in paths]
                    result.cases += 1
                    for what, g, want in (("codes", got[0], codes),
                                          ("scales", got[1], scales)):
                        if g.dtype != np.uint8 or not np.array_equal(g, want):
                            diff = (np.count_nonzero(g != want)
                                    if g.shape == want.shape else "shape")
                            mismatched += 1
                            result.fail("%s: %s differ (%s elements)" %
                                        (name, what, diff))
                    if got[2].dtype != np.float32 or not same_bits(
                            got[2], deq):
                        mismatched += 1
                        result.fail("%s: dequantized values differ" % name)
    result.record("mismatched arrays", mismatched)
    return result


# ---------------------------------------------------------------------------
# routing
# ---------------------------------------------------------------------------

# (T, K, E, B, experts that get no token)
ROUTING_CASES = [
    (40, 2, 4, 128, 0), (300, 2, 8, 128, 0), (129, 1, 1, 128, 0),
    (256, 2, 4, 128, 0), (77, 3, 6, 32, 2), (5, 2, 16, 64, 0),
    (1, 1, 4, 32, 0), (500, 4, 8, 256, 3), (64, 8, 8, 32, 0),
    (2, 1, 200, 32, 0), (1000, 2, 64, 128, 10),
]


def routing_suite(moe_ref, workdir):
    result = SuiteResult("routing")
    work = fresh_dir(os.path.join(workdir, "routing"))
    rng = np.random.default_rng(777)
    for n, (T, K, E, B, empty) in enumerate(ROUTING_CASES):
        label = "T%d-K%d-E%d-B%d-empty%d" % (T, K, E, B, empty)
        live = E - empty
        idx = np.stack([rng.permutation(live)[:K] for _ in range(T)]).astype(
            np.int32)
        # Scores with ties and exact zeros among them, as routers give.
        scores = np.round(rng.uniform(0, 1, size=(T, K)), 2)
        case = fresh_dir(os.path.join(work, label))
        np.save(os.path.join(case, "topk_idx.npy"), idx)
        np.save(os.path.join(case, "topk_scores.npy"), scores)
        out = os.path.join(case, "out")
        run_tool(moe_ref, "route", "--topk-idx",
                 os.path.join(case, "topk_idx.npy"), "--topk-scores",
                 os.path.join(case, "topk_scores.npy"), "--experts", E,
                 "--block-size", B, "--out", out)
        slots, owner = routing.build_routing(idx, E, B)
        aff = routing.masked_affinities(idx, scores, E)
        result.cases += 1
        for name, want in (("token_position_to_id", slots),
                           ("block_to_expert", owner), ("affinities", aff)):
            got = np.load(os.path.join(out, name + ".npy"))
            if got.shape != want.shape:
                result.fail("%s: %s shape %s, expected %s" %
                            (label, name, got.shape, want.shape))
            elif got.dtype != want.dtype or not np.array_equal(got, want):
                result.fail("%s: %s differs" % (label, name))
    result.record("mismatched arrays", len(result.failures))
    return result


# ---------------------------------------------------------------------------
# router
# ---------------------------------------------------------------------------

# (T, E, K, logits: 'normal' or 'ties' (a coarse grid, many equal logits))
ROUTER_CASES = [(37, 8, 2, "normal"), (64, 16, 4, "ties"), (20, 4, 1, "normal"),
                (50, 6, 6, "ties"), (9, 64, 8, "normal")]


def router_suite(moe_ref, workdir):
    result = SuiteResult("router")
    work = fresh_dir(os.path.join(workdir, "router"))
    rng = np.random.default_rng(4242)
    for T, E, K, kind in ROUTER_CASES:
        logits = rng.standard_normal((T, E)) * 2
        if kind == "ties":
            logits = np.round(logits)
        dscores = rng.standard_normal((T, K))
        for mode in router.MODES:
            label = "T%d-E%d-K%d-%s-%s" % (T, E, K, kind, mode)
            case = fresh_dir(os.path.join(work, label))
            np.save(os.path.join(case, "logits.npy"), logits)
            np.save(os.path.join(case, "dscores.npy"), dscores)
            out = os.path.join(case, "out")
            run_tool(moe_ref, "router-bwd", "--logits",
                     os.path.join(case, "logits.npy"), "--topk", K, "--mode",
                     mode, "--dscores", os.path.join(case, "dscores.npy"),
                     "--out", out)
            idx, scores = router.forward(logits, K, mode)
            dlogits = router.backward(logits, idx, dscores, mode)
            result.cases += 1
            got_idx = np.load(os.path.join(out, "topk_idx.npy"))
            if got_idx.dtype != np.int32 or not np.array_equal(got_idx, idx):
                result.fail("%s: topk_idx differs" % label)
                continue
            for name, want in (("topk_scores", scores), ("dlogits", dlogits)):
                err = rel_frobenius(np.load(os.path.join(out, name + ".npy")),
                                    want)
                result.record("rel err", err)
                if not err <= ROUTER_TOL:
                    result.fail("%s: %s rel err %.3e > %.0e" %
                                (label, name, err, ROUTER_TOL))
    return result


SUITES = {
    "layer": layer_suite,
    "mx": mx_suite,
    "routing": routing_suite,
    "router": router_suite,
}
