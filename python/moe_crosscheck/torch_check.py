"""The torch commands of ``python3 -m moe_crosscheck``:

``torch-check``      judges a compiler's outputs against R_mx computed by
                     ``torch_ref`` (on the GPU at the reference shapes).
``torch-selfcheck``  checks ``torch_ref`` itself against the numpy reference
                     (``mx``/``layer``) or the C++ one (moe-ref).
``torch-gen``        writes seeded inputs like ``moe-ref gen`` for layers
                     beyond moe-ref's 2^28-element cap (the reference
                     shapes), on the GPU and in bf16 files.

Only numpy and torch are imported here (ml_dtypes only for the numpy
reference), because the GPU machine has no ml_dtypes: .npy files holding
bf16 ('<V2', what numpy writes for ml_dtypes.bfloat16) are read as raw 16-bit
patterns and turned into torch.bfloat16.
"""

import argparse
import json
import math
import os
import shutil
import time

import numpy as np
import torch

from . import routing, torch_ref
from .cases import fresh_dir, quant_inputs, same_bits
from .tool import ToolError, run_tool

INPUT_NAMES = ["x", "dy", "affinities", "wgu", "wd", "token_position_to_id",
               "block_to_expert", "bgu", "bd", "checkpoint"]
REQUIRED_INPUTS = INPUT_NAMES[:7]
PLAIN_DTYPES = ("<f8", "<f4", "<i4", "|u1")


def read_npy(path):
    """A .npy file as a CPU tensor: f64, f32, i32 and u8 as they are, bf16
    ('<V2') as torch.bfloat16. The file is memory-mapped copy-on-write, so a
    large weight tensor is only read as far as it is used."""
    array = np.load(path, mmap_mode="c")
    if array.dtype.kind == "V" and array.dtype.itemsize == 2:
        return torch.from_numpy(array.view("<i2")).view(torch.bfloat16)
    if array.dtype.str not in PLAIN_DTYPES:
        raise ValueError("%s: unsupported dtype %s (expected %s or bfloat16 "
                         "'<V2')" % (path, array.dtype.str,
                                     ", ".join(PLAIN_DTYPES)))
    return torch.from_numpy(array)


def read_inputs(directory):
    """(cfg, inp) of a directory written like ``moe-ref gen --out``."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = torch_ref.normalize_config(json.load(f))
    needed = list(REQUIRED_INPUTS)
    if cfg["bias"]:
        needed += ["bgu", "bd"]
    if cfg["checkpoint"]:
        needed.append("checkpoint")
    inp = {}
    for name in needed:
        path = os.path.join(directory, name + ".npy")
        if not os.path.exists(path):
            raise FileNotFoundError("%s is missing" % path)
        inp[name] = read_npy(path)
    return cfg, inp


def default_device():
    """cuda when torch sees a GPU, else cpu."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def synchronize(device):
    """Waits for the device's queued work (for wall-clock timing)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def compare(actual, expected, chunk=1 << 26):
    """(relative Frobenius error ||actual - expected|| / ||expected|| in
    fp64, NaN count of actual). `actual` may live on the CPU and be large:
    it is moved to expected's device one chunk at a time. The error is NaN
    when either side holds a NaN, inf when expected is zero and actual not."""
    a = actual.reshape(-1)
    b = expected.reshape(-1)
    if a.numel() != b.numel():
        raise ValueError("%d elements, expected %d" % (a.numel(), b.numel()))
    diff2 = ref2 = 0.0
    nans = 0
    for start in range(0, b.numel(), chunk):
        # Moved in its file type, widened on the device.
        x = a[start:start + chunk].to(b.device).to(torch.float64)
        y = b[start:start + chunk].to(torch.float64)
        nans += int(torch.isnan(x).sum())
        diff2 += float(((x - y) ** 2).sum())
        ref2 += float((y * y).sum())
    if ref2 == 0.0:
        return (0.0 if diff2 == 0.0 else math.inf), nans
    return math.sqrt(diff2 / ref2), nans


# ---------------------------------------------------------------------------
# torch-check
# ---------------------------------------------------------------------------

def torch_check(args):
    """torch-check: R_mx (and R_64 with --r64) of the inputs, one table row
    per output of the compiler; 0 when every row passes, else 1."""
    device = args.device or default_device()
    cfg, inp = read_inputs(args.inputs)
    print("torch-check: T=%d H=%d I=%d E=%d K=%d B=%d act=%s affinity=%s "
          "quant=%s rule=%s bias=%s checkpoint=%s on %s" %
          (cfg["T"], cfg["H"], cfg["I"], cfg["E"], cfg["K"], cfg["B"],
           cfg["act"], cfg["affinity"], cfg["quant"], cfg["rule"],
           cfg["bias"], cfg["checkpoint"], device))
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    computes = [("R_mx", torch_ref.backward_mx)]
    if args.r64:
        computes.append(("R_64", torch_ref.backward64))
    refs = {}
    timings = []
    for label, compute in computes:
        start = time.monotonic()
        refs[label] = compute(cfg, inp, device)
        synchronize(device)
        timings.append("%s %.1f s" % (label, time.monotonic() - start))

    print("%-6s %-22s %12s %12s %8s  %s" %
          ("output", "shape", "rel(R_mx)", "rel(R_64)", "NaN", "result"))
    passed = True
    for name, ref in refs["R_mx"].items():
        path = os.path.join(args.outputs, name + ".npy")
        shape = "[%s]" % ", ".join(str(d) for d in ref.shape)
        if not os.path.exists(path):
            print("%-6s %-22s %s" % (name, shape, "missing: " + path))
            passed = False
            continue
        out = read_npy(path)
        if out.numel() != ref.numel():
            print("%-6s %-22s shape %s does not match" %
                  (name, shape, list(out.shape)))
            passed = False
            continue
        rel, nans = compare(out, ref)
        rel64 = "%12s" % "-"
        if args.r64:
            rel64 = "%12.3e" % compare(out, refs["R_64"][name])[0]
        ok = rel <= args.tolerance and nans == 0
        passed &= ok
        print("%-6s %-22s %12.3e %s %8d  %s" % (name, shape, rel, rel64, nans,
                                                "PASS" if ok else "FAIL"))
    memory = ""
    if torch.device(device).type == "cuda":
        memory = ", peak device memory %.1f GiB" % (
            torch.cuda.max_memory_allocated() / 2**30)
    print("time: %s%s" % (", ".join(timings), memory))
    print("torch-check: gate rel(R_mx) <= %g and no NaN: %s" %
          (args.tolerance, "PASS" if passed else "FAIL"))
    return 0 if passed else 1


# ---------------------------------------------------------------------------
# torch-selfcheck
# ---------------------------------------------------------------------------

# torch_ref against a reference on the same inputs. Codes and scales must be
# bit-identical. Outputs: R_64 is fp64 on both sides and only the summation
# order differs (~1e-16 relative); R_mx rounds every GEMM to fp32, so it is
# bit-identical unless an fp64 sum lands within ~1e-16 of an fp32 rounding
# boundary, and one such flip already moves an output by >= 1e-9. Either
# way 1e-12 passes only an agreement to the last fp64 bits.
LAYER_TOL = 1e-12

# moe-ref gen flags: both activations and affinity placements, bias,
# checkpoint, clamps that clip (g, u ~ N(0,1), so a limit of 0.5 clips about
# a third), K = 1, E = 1 dense, empty experts, T*K not a multiple of B,
# e4m3/e5m2/none with every scale rule, every output option.
LAYER_CASES = [
    ("swiglu-e4m3-rceil", "--T 40 --H 64 --I 32 --E 4 --K 2"),
    ("geglu-on_h-bias-floor", "--T 50 --H 96 --I 64 --E 3 --K 2 --act geglu "
     "--affinity on_h --bias --rule floor"),
    ("clamp-ckpt-floor_alt", "--T 45 --H 64 --I 32 --E 4 --K 2 "
     "--clamp-gate :0.5 --clamp-up -0.5:0.5 --checkpoint --rule floor_alt"),
    ("k1-geglu-bias-ckpt-clamp-e5m2", "--T 60 --H 32 --I 64 --E 4 --K 1 "
     "--act geglu --bias --checkpoint --clamp-gate -1:1 --clamp-up -0.75: "
     "--quant e5m2"),
    ("dense", "--T 70 --H 32 --I 96 --dense --bias"),
    ("empty-experts-e5m2", "--T 33 --H 64 --I 64 --E 6 --K 2 "
     "--empty-experts 2 --affinity on_h --quant e5m2 --rule floor_alt"),
    ("e8k3-outputs", "--T 100 --H 32 --I 32 --E 8 --K 3 --dx-f32 "
     "--weight-grad-bf16 --quant e5m2 --rule floor"),
    ("b256-bf16-acc", "--T 20 --H 96 --I 32 --E 2 --K 2 --B 256 --act geglu "
     "--dx-accumulate bf16 --clamp-up 0: --rule floor_alt"),
    ("bf16-operands", "--T 64 --H 64 --I 64 --E 2 --K 2 --quant none "
     "--affinity on_h --bias --checkpoint"),
    ("few-tokens", "--T 3 --H 32 --I 32 --E 8 --K 2 --B 128 --bias"),
    ("larger-clamp", "--T 300 --H 256 --I 128 --E 8 --K 2 --bias "
     "--clamp-gate -1.5:1.5 --clamp-up -1:1"),
]


class NumpyReference:
    """mx.py and layer.py (needs ml_dtypes)."""

    name = "numpy"

    def __init__(self):
        from . import layer, mx
        self.layer, self.mx = layer, mx

    def quantize(self, x, axis, elem, rule, work):
        codes, scales = self.mx.quantize(x, axis, elem, rule)
        return codes, scales, self.mx.dequantize(codes, scales, axis, elem)

    def layer_grads(self, ref, cfg, indir, workdir):
        inp = {name: np.load(os.path.join(indir, name + ".npy"))
               for name in INPUT_NAMES
               if os.path.exists(os.path.join(indir, name + ".npy"))}
        compute = self.layer.backward64 if ref == "r64" else \
            self.layer.backward_mx
        return compute(cfg, inp)


class MoeRefReference:
    """moe-ref quantize and moe-ref bwd (the C++ reference)."""

    name = "cpp"

    def __init__(self, moe_ref):
        self.tool = moe_ref

    def quantize(self, x, axis, elem, rule, work):
        src = os.path.join(work, "src.npy")
        np.save(src, x)
        paths = [os.path.join(work, s + ".npy") for s in ("q", "s", "d")]
        run_tool(self.tool, "quantize", "--in", src, "--axis", axis, "--elem",
                 elem, "--rule", rule, "--codes", paths[0], "--scales",
                 paths[1], "--dequant", paths[2])
        return [np.load(p) for p in paths]

    def layer_grads(self, ref, cfg, indir, workdir):
        outdir = os.path.join(workdir, ref)
        run_tool(self.tool, "bwd", "--in", indir, "--out", outdir, "--ref",
                 ref)
        names = ["dx", "da", "dwgu", "dwd"] + (["dbgu", "dbd"]
                                               if cfg["bias"] else [])
        return {n: np.load(os.path.join(outdir, n + ".npy")) for n in names}


def torch_selfcheck(args):
    """torch-selfcheck: torch_ref on `args.device` against the chosen
    reference; 0 when everything agrees, else 1."""
    device = args.device or default_device()
    if args.reference == "numpy":
        reference = NumpyReference()
    else:
        reference = MoeRefReference(args.moe_ref)
    work = fresh_dir(args.workdir)
    failures = []

    # Quantizer: codes, scales and dequantized values bit for bit.
    rng = np.random.default_rng(20240)
    quant_cases = mismatched = 0
    start = time.monotonic()
    for elem in ("e4m3", "e5m2"):
        for label, x in quant_inputs(rng, elem):
            for axis in (0, 1):
                for rule in torch_ref.RULES:
                    name = "%s-%s-axis%d-%s" % (elem, label, axis, rule)
                    want = reference.quantize(x, axis, elem, rule, work)
                    codes, scales = torch_ref.quantize(
                        torch.from_numpy(x).to(device), axis, elem, rule)
                    got = [codes.cpu().numpy(), scales.cpu().numpy(),
                           torch_ref.dequantize(codes, scales, axis,
                                                elem).cpu().numpy()]
                    quant_cases += 1
                    same = [np.array_equal(got[0], want[0]),
                            np.array_equal(got[1], want[1]),
                            same_bits(got[2], want[2])]
                    for what, ok in zip(("codes", "scales", "dequantized"),
                                        same):
                        if not ok:
                            mismatched += 1
                            failures.append("quantize %s: %s differ" %
                                            (name, what))
    print("quantize: %d cases against %s on %s, %d mismatched arrays "
          "(%.1f s)" % (quant_cases, reference.name, device, mismatched,
                        time.monotonic() - start))

    # Layer: R_64 and R_mx on moe-ref's generated inputs.
    worst = {"r64": 0.0, "rmx": 0.0}
    start = time.monotonic()
    for seed, (label, flags) in enumerate(LAYER_CASES):
        case = fresh_dir(os.path.join(work, label))
        indir = os.path.join(case, "in")
        run_tool(args.moe_ref, "gen", *flags.split(), "--seed", seed + 1,
                 "--out", indir)
        cfg, inp = read_inputs(indir)
        for ref, compute in (("r64", torch_ref.backward64),
                             ("rmx", torch_ref.backward_mx)):
            got = compute(cfg, inp, device)
            want = reference.layer_grads(ref, cfg, indir, case)
            for name, value in want.items():
                expected = torch.from_numpy(np.asarray(value, np.float64))
                if tuple(got[name].shape) != tuple(expected.shape):
                    failures.append("%s %s %s: shape %s, expected %s" %
                                    (label, ref, name, list(got[name].shape),
                                     list(expected.shape)))
                    continue
                err, _ = compare(got[name].cpu(), expected)
                worst[ref] = max(worst[ref], err)
                if not err <= LAYER_TOL:
                    failures.append("%s %s %s: rel err %.3e > %.0e" %
                                    (label, ref, name, err, LAYER_TOL))
    print("layer: %d cases against %s on %s, max rel err R_64 %.1e, R_mx "
          "%.1e (%.1f s)" % (len(LAYER_CASES), reference.name, device,
                             worst["r64"], worst["rmx"],
                             time.monotonic() - start))
    for failure in failures:
        print("FAIL: " + failure)
    print("torch-selfcheck: %s" % ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


# ---------------------------------------------------------------------------
# torch-gen
# ---------------------------------------------------------------------------

SHAPE_KEYS = ("T", "H", "I", "E", "K", "B")
FLAG_KEYS = ("bias", "checkpoint", "dense", "dx_f32", "weight_grad_bf16")
CLAMP_KEYS = ("clamp_gate_lo", "clamp_gate_hi", "clamp_up_lo", "clamp_up_hi")
BF16_INPUTS = ("x", "dy", "wgu", "wd", "bgu", "bd", "checkpoint")


def parse_config(text):
    """A config.json dict from 'KEY=VALUE,...' with config.json's keys: the
    shape, act, affinity, quant, rule, dx_accumulate, clamp limits (numbers)
    and the flags (true or false)."""
    cfg = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key in SHAPE_KEYS:
            cfg[key] = int(value)
        elif key in FLAG_KEYS and value in ("true", "false"):
            cfg[key] = value == "true"
        elif key in CLAMP_KEYS:
            cfg[key] = float(value)
        elif key in torch_ref.CONFIG_DEFAULTS and key not in FLAG_KEYS:
            cfg[key] = value
        else:
            raise ValueError("bad config item %r" % item)
    missing = set(SHAPE_KEYS[:5]) - set(cfg)
    if missing:
        raise ValueError("config lacks " + ", ".join(sorted(missing)))
    return torch_ref.normalize_config(cfg)


def generate_inputs(cfg, seed, empty_experts, device):
    """Seeded inputs of SPEC section 6, as moe-ref gen draws them but from
    torch's generator of `device` (so the values differ from moe-ref's and
    between CPU and CUDA): x, dy ~ N(0,1), weights and biases ~ N(0, 1/H),
    all bf16; top-k of N(0,1) logits (experts beyond E - empty_experts
    never selected) with softmax scores over the selected logits, fp32; in
    dense mode one expert and a sigmoid score; the checkpoint holds the
    clamped fp64 forward g|u rounded to bf16. Returns CPU tensors named like
    the .npy files."""
    T, H, I, E, K, B = (cfg[k] for k in SHAPE_KEYS)
    gen = torch.Generator(device=device).manual_seed(seed)

    def normal(shape, std):
        draw = torch.randn(shape, generator=gen, device=device)
        return (draw * std).to(torch.bfloat16)

    std = H ** -0.5
    inp = {"x": normal((T, H), 1.0), "dy": normal((T, H), 1.0),
           "wgu": normal((E, H, 2, I), std), "wd": normal((E, I, H), std)}
    if cfg["bias"]:
        inp["bgu"] = normal((E, 2, I), std)
        inp["bd"] = normal((E, H), std)
    if cfg["dense"]:
        idx = torch.zeros((T, 1), dtype=torch.int64)
        scores = torch.sigmoid(torch.randn((T, 1), generator=gen,
                                           device=device).double())
    else:
        logits = torch.randn((T, E), generator=gen, device=device).double()
        logits[:, E - empty_experts:] = -1e30
        top, idx = torch.topk(logits, K, dim=1)
        scores = torch.softmax(top, dim=1)
    idx = idx.cpu().numpy()
    scores = scores.float().double().cpu().numpy()
    inp["affinities"] = torch.from_numpy(
        routing.masked_affinities(idx, scores, E).astype(np.float32))
    slots, owner = routing.build_routing(idx, E, B)
    inp["token_position_to_id"] = torch.from_numpy(slots)
    inp["block_to_expert"] = torch.from_numpy(owner)
    if cfg["checkpoint"]:
        inp["checkpoint"] = _checkpoint(cfg, inp, device)
    return {name: value.cpu() for name, value in inp.items()}


def _checkpoint(cfg, inp, device):
    """[N,2,I,B] bf16: per slot, the clamped fp64 g|u of its token under its
    block's expert (zero for padding slots)."""
    H, I, B = cfg["H"], cfg["I"], cfg["B"]
    slots = inp["token_position_to_id"].numpy().astype(np.int64)
    per_slot = torch.zeros((slots.size, 2, I), dtype=torch.bfloat16,
                           device=device)
    limits = [torch_ref.clamp_limits(cfg, half, torch.float64)
              for half in ("gate", "up")]
    for e, expert_slots in torch_ref.expert_slots(cfg, inp["block_to_expert"]):
        ids = slots[expert_slots]
        keep = ids >= 0
        if not keep.any():
            continue
        rows = torch.as_tensor(expert_slots[keep], device=device)
        x = inp["x"][torch.as_tensor(ids[keep], device=device)].double()
        gu = (x @ inp["wgu"][e].double().reshape(H, 2 * I)).reshape(-1, 2, I)
        if cfg["bias"]:
            gu = gu + inp["bgu"][e].double()
        for half, (lo, hi) in enumerate(limits):
            gu[:, half] = torch.clamp(gu[:, half], lo, hi)
        per_slot[rows] = torch_ref.round_bf16(gu).to(torch.bfloat16)
    return per_slot.reshape(-1, B, 2, I).permute(0, 2, 3, 1).contiguous()


def write_npy(path, tensor):
    """Saves a CPU tensor; bfloat16 as 2-byte void elements (descr '|V2'),
    which moe-ref and read_npy take as bf16."""
    if tensor.dtype == torch.bfloat16:
        np.save(path, tensor.view(torch.int16).numpy().view("V2"))
    else:
        np.save(path, tensor.numpy())


def torch_gen(args):
    """torch-gen: generate_inputs written as .npy files plus config.json."""
    cfg = parse_config(args.config)
    device = args.device or default_device()
    start = time.monotonic()
    inp = generate_inputs(cfg, args.seed, args.empty_experts, device)
    os.makedirs(args.out, exist_ok=True)
    for name, value in inp.items():
        if name in BF16_INPUTS and args.dtype == "f64":
            value = value.double()
        write_npy(os.path.join(args.out, name + ".npy"), value)
    config = dict(cfg, N=int(inp["block_to_expert"].numel()), seed=args.seed,
                  empty_experts=args.empty_experts)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print("torch-gen: %s written in %.1f s" %
          (args.out, time.monotonic() - start))
    return 0


def main(argv):
    """Entry of the torch commands; argv[0] is the command name."""
    parser = argparse.ArgumentParser(prog="python3 -m moe_crosscheck")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "torch-check", help="judge a compiler's outputs against R_mx")
    check.add_argument("--inputs", required=True,
                       help="config.json and the input .npy files")
    check.add_argument("--outputs", required=True,
                       help="the compiler's dx, da, dwgu, dwd (dbgu, dbd)")
    check.add_argument("--device", choices=["cuda", "cpu"],
                       help="default: cuda when available")
    check.add_argument("--tolerance", type=float, default=2e-3,
                       help="gate on rel(R_mx) (default 2e-3, SPEC 6)")
    check.add_argument("--r64", action="store_true",
                       help="also report the distance to R_64 (no gate)")
    selfcheck = commands.add_parser(
        "torch-selfcheck", help="check torch_ref against a reference")
    selfcheck.add_argument("--moe-ref", required=True,
                           help="moe-ref binary (generates the inputs)")
    selfcheck.add_argument("--workdir", required=True)
    selfcheck.add_argument("--reference", choices=["numpy", "cpp"],
                           default="numpy",
                           help="numpy: mx.py and layer.py (needs ml_dtypes);"
                           " cpp: moe-ref quantize and moe-ref bwd")
    selfcheck.add_argument("--device", choices=["cuda", "cpu"],
                           help="default: cuda when available")
    gen = commands.add_parser(
        "torch-gen", help="write seeded inputs and config.json")
    gen.add_argument("--config", required=True,
                     help="T=..,H=..,I=..,E=..,K=..[,B=..,KEY=VALUE...] with "
                     "config.json's keys, e.g. act=geglu,bias=true,"
                     "clamp_gate_hi=0.5")
    gen.add_argument("--out", required=True)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--empty-experts", type=int, default=0,
                     help="the N highest experts receive no tokens")
    gen.add_argument("--dtype", choices=["bf16", "f64"], default="bf16",
                     help="file type of the bf16-valued tensors")
    gen.add_argument("--device", choices=["cuda", "cpu"],
                     help="default: cuda when available")
    args = parser.parse_args(argv)
    if args.command == "torch-check":
        return torch_check(args)
    if args.command == "torch-gen":
        return torch_gen(args)
    tool = shutil.which(args.moe_ref)
    if tool is None:
        parser.error("moe-ref not found: %s" % args.moe_ref)
    args.moe_ref = tool
    try:
        return torch_selfcheck(args)
    except ToolError as err:
        print("moe-ref failed: %s" % err)
        print("torch-selfcheck: FAIL")
        return 1
