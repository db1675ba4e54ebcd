"""torch's GEMMs at the shapes of `moe-run --gemm`, for the benchmark's GEMM
rows (bench/moe_bench.py --gemms).

What: for a GEMM spec (M, N, K, G, B, kind; tools/moe-run/Gemm.h), the same
product in torch, in the layouts moe-run uses:
  - kind block:  C[M, N] = A[M, K] . W[g, N, K]^T, rows in G contiguous
    groups of whole blocks of B;
  - kind expert: C[g, M, N] = A[slots of g, M]^T . B[slots of g, N] over K
    slots grouped the same way;
two ways:
  - bf16: torch.matmul (G = 1) or torch._grouped_mm, fp32 accumulation,
    bf16 result;
  - fp8 row-wise: torch._scaled_mm (G = 1) or torch._scaled_grouped_mm, e4m3
    operands with one fp32 scale per row of A and per column of the result
    (block kind only: torch has no row-wise form for a contraction split into
    groups), the operands quantized before the timing.
Each is timed with CUDA events (median of `iters` after `warmup`) and
reported in TFLOPS = 2 M N K / time. `self_check` compares both with fp64 at a
small size first.

Why: issue 10 puts moe-mlir's exact-MX GEMM kernels next to torch's bf16 and
fp8 GEMMs on the same device in the same process.

    python3 bench/torch_gemms.py --self-check [--device cpu]
"""

import argparse
import statistics
import sys
import time

import torch

FP8_MAX = 448.0


def parse_gemm(spec):
    """{'M','N','K','G','B','kind'} of a --gemm spec (G=1, B=128, kind block
    by default); quant and rule are moe-run's and ignored here."""
    out = {"G": 1, "B": 128, "kind": "block"}
    for item in spec.split(","):
        key, value = item.split("=")
        if key in ("M", "N", "K", "G", "B"):
            out[key] = int(value)
        elif key == "kind":
            out[key] = value
        elif key not in ("quant", "rule"):
            raise ValueError("unknown key %r in %r" % (key, spec))
    return out


def group_offsets(g, device):
    """Cumulative end rows (block kind) or slots (expert kind) of the
    groups, as moe-run's inputs group their blocks: block i of n in group
    i * G / n."""
    blocks = (g["M"] if g["kind"] == "block" else g["K"]) // g["B"]
    counts = [0] * g["G"]
    for i in range(blocks):
        counts[i * g["G"] // blocks] += 1
    ends, total = [], 0
    for c in counts:
        total += c * g["B"]
        ends.append(total)
    return torch.tensor(ends, dtype=torch.int32, device=device)


def make_operands(g, device, seed=0):
    gen = torch.Generator(device=device).manual_seed(seed)

    def normal(*shape):
        return torch.randn(*shape, generator=gen, device=device).to(
            torch.bfloat16)

    if g["kind"] == "block":
        return normal(g["M"], g["K"]), normal(g["G"], g["N"], g["K"])
    return normal(g["K"], g["M"]), normal(g["K"], g["N"])


def bf16_gemm(g, a, b, offs):
    """The bf16 product as a callable."""
    if g["kind"] == "block":
        if g["G"] == 1:
            w = b[0].t()
            return lambda: torch.matmul(a, w)
        w = b.transpose(1, 2)
        return lambda: torch._grouped_mm(a, w, offs=offs)
    at = a.t()
    return lambda: torch._grouped_mm(at, b, offs=offs)


def rowwise_fp8(x):
    """(e4m3 codes, fp32 scales) with one scale per row of x (last axis
    contracted)."""
    amax = x.float().abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
    scale = amax / FP8_MAX
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def fp8_gemm(g, a, b, offs):
    """The fp8 row-wise product as a callable, or None (expert kind)."""
    if g["kind"] != "block":
        return None
    a8, sa = rowwise_fp8(a)
    b8, sb = rowwise_fp8(b)  # [G, N, K]: one scale per (group, column)
    if g["G"] == 1:
        w8 = b8[0].t()
        sb1 = sb[0].reshape(1, -1)
        return lambda: torch._scaled_mm(a8, w8, scale_a=sa, scale_b=sb1,
                                        out_dtype=torch.bfloat16)
    w8 = b8.transpose(1, 2)
    sa1, sb2 = sa.reshape(-1), sb.reshape(g["G"], -1)
    return lambda: torch._scaled_grouped_mm(a8, w8, sa1, sb2, offs=offs,
                                            out_dtype=torch.bfloat16)


def time_ms(fn, iters, warmup):
    """Median milliseconds of fn(): CUDA events on a GPU, the host clock
    otherwise."""
    for _ in range(warmup):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def tflops(g, ms):
    return 2.0 * g["M"] * g["N"] * g["K"] / (ms * 1e9) if ms else None


def measure(spec, device="cuda", iters=10, warmup=3):
    """{'torch_bf16_ms', 'torch_bf16_tf', 'torch_fp8_ms', 'torch_fp8_tf',
    'errors'} of one GEMM spec."""
    g = parse_gemm(spec)
    out = {"torch_bf16_ms": None, "torch_bf16_tf": None,
           "torch_fp8_ms": None, "torch_fp8_tf": None, "errors": []}
    a, b = make_operands(g, device)
    offs = group_offsets(g, device)
    for name, build in (("bf16", bf16_gemm), ("fp8", fp8_gemm)):
        try:
            fn = build(g, a, b, offs)
            if fn is None:
                out["errors"].append("torch %s: no row-wise fp8 form for a "
                                     "contraction split into groups" % name)
                continue
            ms = time_ms(fn, iters, warmup)
            out["torch_%s_ms" % name] = ms
            out["torch_%s_tf" % name] = tflops(g, ms)
        except Exception as err:  # recorded, the other one still runs
            out["errors"].append("torch %s: %s: %s" % (
                name, type(err).__name__, str(err).splitlines()[0][:200]))
    del a, b
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def reference(g, a, b):
    """The exact product of the bf16 values in fp64, in moe-run's output
    layout ([M, N] or [G, M, N])."""
    offs = group_offsets(g, a.device).tolist()
    a64, b64 = a.double(), b.double()
    if g["kind"] == "block":
        out = torch.empty(g["M"], g["N"], dtype=torch.float64)
        start = 0
        for grp, end in enumerate(offs):
            out[start:end] = a64[start:end] @ b64[grp].t()
            start = end
        return out
    out = torch.zeros(g["G"], g["M"], g["N"], dtype=torch.float64)
    start = 0
    for grp, end in enumerate(offs):
        out[grp] = a64[start:end].t() @ b64[start:end]
        start = end
    return out


def self_check(device):
    """Both products against fp64 at small sizes; (passed, {name: rel})."""
    rel, passed = {}, True
    for spec in ("M=256,N=128,K=256,G=1", "M=512,N=128,K=256,G=3",
                 "M=64,N=96,K=512,G=3,kind=expert"):
        g = parse_gemm(spec)
        a, b = make_operands(g, device, seed=1)
        offs = group_offsets(g, device)
        want = reference(g, a.cpu(), b.cpu())
        for name, build, tol in (("bf16", bf16_gemm, 1e-2),
                                 ("fp8", fp8_gemm, 8e-2)):
            try:
                fn = build(g, a, b, offs)
            except Exception as err:
                rel["%s %s" % (name, spec)] = repr(err)
                passed = False
                continue
            if fn is None:
                continue
            try:
                got = fn().double().cpu().reshape(want.shape)
            except (RuntimeError, NotImplementedError) as err:
                # fp8 GEMMs need a GPU that has them.
                rel["%s %s" % (name, spec)] = "unsupported here: %s" % (
                    str(err).splitlines()[0][:80])
                continue
            err = float(torch.linalg.norm(got - want) /
                        torch.linalg.norm(want))
            rel["%s %s" % (name, spec)] = err
            passed &= err <= tol
    return passed, rel


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--self-check", action="store_true")
    p.add_argument("--gemm", action="append", default=[],
                   help="a moe-run --gemm spec to time")
    a = p.parse_args(argv)
    failed = False
    if a.self_check:
        passed, rel = self_check(a.device)
        for k, v in rel.items():
            print("%-40s %s" % (k, "%.3e" % v if isinstance(v, float) else v))
        print("torch GEMM self-check: %s" % ("PASS" if passed else "FAIL"))
        failed |= not passed
    for spec in a.gemm:
        print(spec, measure(spec, a.device))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
