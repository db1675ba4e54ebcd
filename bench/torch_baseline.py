"""bf16 torch baseline of the MoE layer backward, timed per phase.

What: the backward of SPEC section 3 (SwiGLU, affinity on I, no bias, no
clamp, no checkpoint) the way a torch MoE trainer runs it: the routed
(token, expert) pairs are sorted by expert (tokens ascending within an
expert) and every GEMM is one torch._grouped_mm over the experts' row
groups, with bf16 operands, fp32 accumulation and bf16 results (the only
output type torch._grouped_mm has for bf16 operands); the elementwise
activation backward runs in fp32. Phases:

    recompute  gather x, G|U = x Wgu                  (4 TKHI flops)
    P1         gather dy, dA = dy Wd^T                 (2 TKHI)
    act-bwd    da = <dA, h>, dg|du, a*h                (elementwise)
    P2         dx = scatter-add of [dg|du] Wgu^T        (4 TKHI)
    P3         dWgu = x^T [dg|du]                       (4 TKHI)
    P4         dWd = (a h)^T dy                         (2 TKHI)

A second baseline is the backward as autograd runs it (autograd_bench):
the forward (gather, grouped G|U, silu(g) u, a h, grouped Y, combine)
with its activations saved, then torch.autograd.grad. It has no
recompute; it is the one the issue tables compare with, and the one
bench/moe_bench.py reports as torch_autograd_ms.

Model flops are 12 T K H I (P1..P4); the recompute is excluded, as SonicMoE
counts it, so model TFLOPS = 12 T K H I / whole-backward time.

Why: it is the bar an MXFP8 backward from moe-mlir has to clear on the H200,
next to the roofline (bf16 dense 989 TF spec, 781 TF measured; grouped bf16
650-756 TF measured: shared/DEVICE.md).

The baseline checks itself first: at a small shape its gradients must match
torch_ref.backward64 (fp64 R_64 on the same inputs) within CHECK_TOL.

    python3 bench/torch_baseline.py [--layer T=..,H=..,I=..,E=..,K=..] ...
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from moe_crosscheck import routing, torch_ref  # noqa: E402

REFERENCE_LAYERS = ["T=16384,H=4096,I=1536,E=128,K=8,B=128",
                    "T=24576,H=1536,I=256,E=128,K=8,B=128"]
CHECK_LAYER = "T=300,H=256,I=128,E=8,K=2,B=128"
PHASES = ["recompute", "P1", "act-bwd", "P2", "P3", "P4"]
# Flops per routed pair in units of H*I.
PHASE_FLOPS = {"recompute": 4, "P1": 2, "act-bwd": 0, "P2": 4, "P3": 4,
               "P4": 2}
MODEL_FLOPS = 12
ROOFLINE = ("bf16 dense 989 TF spec, 781 TF measured; grouped bf16 "
            "650-756 TF measured (H200, shared/DEVICE.md)")
MEASURED_DENSE_TF = 781.0

# Self-check tolerance, relative Frobenius per output against fp64. Every
# value on the way is rounded to bf16 a few times (g|u, dA, dg|du, a*h, the
# output itself), each with relative error at most 2^-9 = 2e-3 and about
# 1e-3 RMS; independent roundings add in quadrature to ~2-4e-3. 1e-2 (five
# unit roundoffs) leaves room for that and fails on any wrong or missing
# term larger than 1% of an output.
CHECK_TOL = 1e-2


def parse_layer(text):
    """{'T': .., 'H': .., 'I': .., 'E': .., 'K': .., 'B': ..} from
    'T=..,H=..,...' (the --layer syntax of moe-run; B defaults to 128 and
    only shapes the routing layout of the self-check)."""
    shape = {"B": 128}
    for item in text.split(","):
        key, value = item.split("=")
        if key not in ("T", "H", "I", "E", "K", "B"):
            raise ValueError("unknown layer key %r in %r" % (key, text))
        shape[key] = int(value)
    missing = {"T", "H", "I", "E", "K"} - set(shape)
    if missing:
        raise ValueError("%r lacks %s" % (text, ", ".join(sorted(missing))))
    return shape


def make_layer(shape, device, seed):
    """Seeded inputs (SPEC section 6): x, dy ~ N(0,1), weights ~ N(0, 1/H),
    all bf16; top-k experts of random logits with softmax scores over the
    selected logits (fp32)."""
    T, H, I, E, K = (shape[k] for k in "THIEK")
    gen = torch.Generator(device=device).manual_seed(seed)

    def normal(size, std):
        return (torch.randn(size, generator=gen, device=device) * std).to(
            torch.bfloat16)

    logits = torch.randn((T, E), generator=gen, device=device)
    top, idx = torch.topk(logits, K, dim=1)
    return {
        "x": normal((T, H), 1.0),
        "dy": normal((T, H), 1.0),
        "wgu": normal((E, H, 2 * I), H ** -0.5),  # [:, :, :I] gate, [I:] up
        "wd": normal((E, I, H), H ** -0.5),
        "idx": idx,
        "scores": torch.softmax(top, dim=1),
    }


def plan(layer, align):
    """Rows of the grouped GEMMs: the routed pairs sorted by expert, each
    expert's group padded to a multiple of `align` rows (zero rows; TMA wants
    16-byte aligned group starts, and 16 keeps them so for any layout).
    Padding rows read the zero row T of x and dy and write to sink rows."""
    idx, scores = layer["idx"], layer["scores"]
    T, K = idx.shape
    E = layer["wgu"].shape[0]
    device = idx.device
    expert = idx.reshape(-1)
    token = torch.arange(T, device=device).repeat_interleave(K)
    order = torch.sort(expert, stable=True).indices
    counts = torch.bincount(expert, minlength=E)
    padded = (counts + align - 1) // align * align
    ends = torch.cumsum(padded, 0)
    firsts = torch.cumsum(counts, 0) - counts
    sorted_expert = expert[order]
    row = (ends - padded)[sorted_expert] + torch.arange(
        T * K, device=device) - firsts[sorted_expert]
    rows = int(ends[-1])
    tok = torch.full((rows,), T, dtype=torch.int64, device=device)
    tok[row] = token[order]
    pair = torch.full((rows,), T * E, dtype=torch.int64, device=device)
    pair[row] = token[order] * E + sorted_expert
    # The routed pair's index in the flattened [T, K] scores (the autograd
    # forward gathers its affinity there); T*K, a zero score, for padding.
    slot = torch.full((rows,), T * K, dtype=torch.int64, device=device)
    slot[row] = order
    a = torch.zeros(rows, dtype=torch.float32, device=device)
    a[row] = scores.reshape(-1)[order].float()
    return {"tok": tok, "pair": pair, "slot": slot, "a": a[:, None],
            "offs": ends.to(torch.int32)}


class Marks:
    """Timestamps between phases: CUDA events on a GPU, the host clock on
    the CPU (where every op is synchronous)."""

    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"
        self.marks = []

    def mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def intervals_ms(self):
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b)
                    for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]


def backward(layer, rows, marks):
    """One backward; returns dx [T,H] bf16, da [T*E] fp32, dWgu [E,H,2I] and
    dWd [E,I,H] bf16. `marks` gets a timestamp before and after each
    phase."""
    x, wgu, wd = layer["x"], layer["wgu"], layer["wd"]
    T, H = x.shape
    E, _, two_i = wgu.shape
    I = two_i // 2
    tok, pair, a, offs = rows["tok"], rows["pair"], rows["a"], rows["offs"]
    gmm = torch._grouped_mm

    marks.mark()
    xg = layer["x_pad"][tok]
    gu = gmm(xg, wgu, offs=offs)
    marks.mark()
    dyg = layer["dy_pad"][tok]
    dA = gmm(dyg, wd.transpose(1, 2), offs=offs)
    marks.mark()
    g, u = gu[:, :I].float(), gu[:, I:].float()
    sig = torch.sigmoid(g)
    s = g * sig
    h = s * u
    dA32 = dA.float()
    da = torch.zeros(T * E + 1, dtype=torch.float32, device=x.device)
    da[pair] = (dA32 * h).sum(dim=1)
    dh = a * dA32
    dgu = torch.cat([dh * u * (sig * (1.0 + g * (1.0 - sig))), dh * s],
                    dim=1).to(torch.bfloat16)
    ah = (a * h).to(torch.bfloat16)
    marks.mark()
    c = gmm(dgu, wgu.transpose(1, 2), offs=offs)
    dx = torch.zeros((T + 1, H), dtype=torch.float32, device=x.device)
    dx.index_add_(0, tok, c.float())
    dx = dx[:T].to(torch.bfloat16)
    marks.mark()
    dwgu = gmm(xg.t(), dgu, offs=offs)
    marks.mark()
    dwd = gmm(ah.t(), dyg, offs=offs)
    marks.mark()
    return dx, da[:T * E], dwgu, dwd


def forward(layer, rows, params):
    """The forward as a trainer writes it, for autograd: gather x rows,
    G|U = x Wgu, h = silu(g) u, scale by the affinity, Y = (a h) Wd, and
    the combine (scatter-add of Y's rows into the tokens, fp32). `params`
    holds the leaves x, scores [T, K] fp32, wgu and wd; autograd saves the
    activations it needs (x rows, G|U, h, a h) for the backward."""
    x, scores, wgu, wd = (params[k] for k in ("x", "scores", "wgu", "wd"))
    T, H = x.shape
    I = wgu.shape[2] // 2
    tok, slot, offs = rows["tok"], rows["slot"], rows["offs"]
    zero_row = torch.zeros((1, H), dtype=x.dtype, device=x.device)
    xg = torch.cat([x, zero_row])[tok]
    gu = torch._grouped_mm(xg, wgu, offs=offs)
    h = torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]
    zero_score = torch.zeros(1, dtype=scores.dtype, device=x.device)
    a = torch.cat([scores.reshape(-1), zero_score])[slot]
    ah = h * a[:, None].to(h.dtype)
    yr = torch._grouped_mm(ah, wd, offs=offs)
    y = torch.zeros((T + 1, H), dtype=torch.float32, device=x.device)
    return y.index_add(0, tok, yr.float())[:T].to(torch.bfloat16)


def autograd_bench(shape, device, seed, align, warmup, iters):
    """Median ms of the autograd backward over `iters` runs: each run does
    the forward (not timed), then torch.autograd.grad of dx, d(scores),
    dWgu and dWd between two CUDA events (host clock on the CPU)."""
    layer, rows = prepare(shape, device, seed, align)
    params = {"x": layer["x"], "scores": layer["scores"].float(),
              "wgu": layer["wgu"], "wd": layer["wd"]}
    params = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    leaves = [params[k] for k in ("x", "scores", "wgu", "wd")]
    times = []
    for i in range(warmup + iters):
        y = forward(layer, rows, params)
        marks = Marks(device)
        marks.mark()
        grads = torch.autograd.grad(y, leaves, layer["dy"])
        marks.mark()
        del y, grads
        if i >= warmup:
            times.append(marks.intervals_ms()[0])
    return statistics.median(times)


def prepare(shape, device, seed, align):
    layer = make_layer(shape, device, seed)
    zero = torch.zeros((1, shape["H"]), dtype=torch.bfloat16, device=device)
    layer["x_pad"] = torch.cat([layer["x"], zero])
    layer["dy_pad"] = torch.cat([layer["dy"], zero])
    return layer, plan(layer, align)


def self_check(device, seed, align):
    """Baseline gradients at CHECK_LAYER against torch_ref.backward64 (R_64)
    on the same bf16 inputs; returns (passed, {output: rel err})."""
    shape = parse_layer(CHECK_LAYER)
    T, H, I, E, K, B = (shape[k] for k in "THIEKB")
    layer, rows = prepare(shape, device, seed, align)
    dx, da, dwgu, dwd = backward(layer, rows, Marks(device))
    idx = layer["idx"].cpu().numpy()
    slots, owner = routing.build_routing(idx, E, B)
    cfg = {"T": T, "H": H, "I": I, "E": E, "K": K, "B": B, "quant": "none"}
    inp = {
        "x": layer["x"], "dy": layer["dy"],
        "wgu": layer["wgu"].reshape(E, H, 2, I), "wd": layer["wd"],
        "affinities": routing.masked_affinities(
            idx, layer["scores"].double().cpu().numpy(), E),
        "token_position_to_id": slots, "block_to_expert": owner,
    }
    ref = torch_ref.backward64(cfg, inp, device)
    got = {"dx": dx, "da": da, "dwgu": dwgu.reshape(E, H, 2, I), "dwd": dwd}
    errors = {}
    for name, value in got.items():
        want = ref[name]
        diff = torch.linalg.norm((value.double() - want).reshape(-1))
        errors[name] = float(diff / torch.linalg.norm(want.reshape(-1)))
    return all(e <= CHECK_TOL for e in errors.values()), errors


def bench(shape, device, seed, align, warmup, iters):
    """Median ms per phase and for the whole backward over `iters` runs."""
    layer, rows = prepare(shape, device, seed, align)
    for _ in range(warmup):
        backward(layer, rows, Marks(device))
    per_phase = {p: [] for p in PHASES}
    whole = []
    for _ in range(iters):
        marks = Marks(device)
        backward(layer, rows, marks)
        intervals = marks.intervals_ms()
        for phase, ms in zip(PHASES, intervals):
            per_phase[phase].append(ms)
        whole.append(sum(intervals))
    return ({p: statistics.median(v) for p, v in per_phase.items()},
            statistics.median(whole))


def tflops(units, shape, ms):
    T, H, I, K = (shape[k] for k in "THIK")
    return units * T * K * H * I / (ms * 1e-3) / 1e12


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layer", action="append",
                        help="T=..,H=..,I=..,E=..,K=..[,B=..] (repeatable; "
                        "default: the two reference shapes)")
    parser.add_argument("--device", choices=["cuda", "cpu"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--align", type=int, default=16,
                        help="rows per expert group padded to a multiple of "
                        "this (1: exact token counts)")
    args = parser.parse_args(argv)
    layers = [parse_layer(t) for t in (args.layer or REFERENCE_LAYERS)]
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print("torch %s on %s; bf16 torch._grouped_mm, fp32 accumulation, groups "
          "aligned to %d rows" % (torch.__version__, name, args.align))

    passed, errors = self_check(args.device, args.seed, args.align)
    print("self-check at %s vs torch_ref.backward64 (fp64): %s (tolerance "
          "%.0e): %s" % (CHECK_LAYER, ", ".join(
              "%s %.2e" % kv for kv in errors.items()), CHECK_TOL,
              "PASS" if passed else "FAIL"))

    summary = []
    for shape in layers:
        label = "T=%d H=%d I=%d E=%d K=%d" % tuple(shape[k] for k in "THIEK")
        phases, whole = bench(shape, args.device, args.seed, args.align,
                              args.warmup, args.iters)
        print("\n%s: median of %d runs after %d warm-up" %
              (label, args.iters, args.warmup))
        print("  %-10s %10s %10s" % ("phase", "ms", "TFLOPS"))
        for phase in PHASES:
            rate = "%10.1f" % tflops(PHASE_FLOPS[phase], shape, phases[
                phase]) if PHASE_FLOPS[phase] else "%10s" % "-"
            print("  %-10s %10.3f %s" % (phase, phases[phase], rate))
        model = tflops(MODEL_FLOPS, shape, whole)
        print("  %-10s %10.3f %10.1f  (model TFLOPS: 12*T*K*H*I over the "
              "whole backward)" % ("backward", whole, model))
        rest = whole - phases["recompute"]
        print("  %-10s %10.3f %10.1f  (as with a gate/up checkpoint)" %
              ("w/o recomp", rest, tflops(MODEL_FLOPS, shape, rest)))
        auto = autograd_bench(shape, args.device, args.seed, args.align,
                              args.warmup, args.iters)
        print("  %-10s %10.3f %10.1f  (autograd over the forward with saved "
              "activations)" % ("autograd", auto, tflops(MODEL_FLOPS, shape,
                                                         auto)))
        summary.append((label, whole, model, rest))

    print("\nroofline: " + ROOFLINE)
    print("%-34s %12s %10s %12s %16s" % ("layer", "backward ms", "model TF",
                                         "% of 781 TF", "w/o recomp ms"))
    for label, whole, model, rest in summary:
        print("%-34s %12.3f %10.1f %11.1f%% %16.3f" %
              (label, whole, model, 100.0 * model / MEASURED_DENSE_TF, rest))
    print("self-check: %s" % ("PASS" if passed else "FAIL"))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
