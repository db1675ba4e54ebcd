"""The moe-mlir backward benchmark on the H200, next to torch.

What: for each shape (default: the issue's three, all B=128),
  - torch, in this process: the bf16 torch._grouped_mm backward as a trainer
    runs it (autograd over the forward with saved activations) and the
    hand-written backward with a recompute of G|U (bench/torch_baseline.py),
    median of --iters after --warmup, CUDA events;
  - moe-mlir: `moe-run --target=sm90a --check none` on seeded inputs
    (python3 -m moe_crosscheck torch-gen, on the GPU) in both layer modes,
    recompute (the default) and checkpoint (layer option checkpoint=bf16:
    G|U from the forward), median call time of --iters after --warmup, and
    the cold compile time of each layer;
  - ncu: the duration of every kernel of one recompute backward, largest
    first, with the share of kernel time in the GEMM kernels (the kernels
    the compiler names block_matmul_<n> / expert_matmul_<n>, with an mx_
    prefix on the MX-code paths; its operand kernels mx_operand_<n> are not
    GEMMs);
  - GEMM rows (--gemms): single GEMMs of `moe-run --gemm` (an exact-MX GEMM
    of 8192^3, e4m3 RCEIL along K, and the five GEMMs of a reference shape
    with its experts as groups), the median call (operand kernels
    included) and, with ncu, the GEMM kernel alone, next to torch's bf16
    and fp8 row-wise GEMMs of the same shapes in this process
    (bench/torch_gemms.py);
  - the SASS instruction mix of every kernel of each shape's recompute
    layer (`moe-run --compile-only --emit cubin`, cuobjdump): opcode counts,
    registers and spill bytes per kernel.
Writes OUT/bench-latest.json and the raw log OUT/bench-latest.log, and
prints a table last. Every failing or skipped step is recorded in the JSON
and the table with its reason; the JSON is rewritten after every step, so
it exists whatever happens. Exit status 0 when no step failed (a shape
skipped for lack of memory is not a failure), else 1; 2 on a bad command
line.

Model TF = 12*T*K*H*I / backward time (the recompute is not counted); a
GEMM row's TF = 2*M*N*K / time.
ratio_vs_torch = torch_autograd_ms / moe_ms (above 1: moe-mlir is faster).

The moe-mlir time is moe-run's `call`: the compiled function from entry to
return, which ends with a device synchronization, on the host clock, with
the caller's buffers already in device memory (moe-run copies them there
once for all its runs; the copies are reported apart). The call is synchronous, so CUDA events around it would measure the
same span.

Run it on the GPU machine through bench/run.sh; --dry-run prints the
commands and writes the JSON without running anything (no torch needed).

    python3 bench/moe_bench.py --out DIR [--shapes 1,2,3] [--dry-run] ...
"""

import argparse
import csv
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# torch-gen runs as `python3 -m moe_crosscheck` from the tree's python/.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.join(ROOT, "python")] +
    ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))

SHAPES = {
    "1": "T=16384,H=4096,I=1536,E=128,K=8,B=128",
    "2": "T=24576,H=1536,I=256,E=128,K=8,B=128",
    "3": "T=8192,H=7168,I=2048,E=256,K=8,B=128",
}
MODEL_FLOPS = 12
# The GEMM kernels' names: block_matmul_<n>, expert_matmul_<n> (mx_ in
# front on the fp8 / bf16 MMA paths), block_matmul_act_<n> (P1 with the
# activation backward in its epilogue); mx_operand_<n> round operands.
GEMM_KERNEL = re.compile(r"^(mx_)?(block|expert)_matmul(_act)?_[0-9]+$")
# The device machine allows 10 minutes a command; past this many seconds
# the remaining steps are skipped (and recorded) so that the JSON and the
# table still come out.
DEFAULT_BUDGET_S = 540


def gemm_specs(name):
    """[(label, moe-run --gemm spec)] of a --gemms entry: "square" (8192^3)
    or a shape's five GEMMs, its T*K routed slots in E groups of whole
    blocks (no padding): the recompute g|u = x Wgu, P1 dA = dy Wd^T, P2
    dgu Wgu^T (block GEMMs), P3 dWgu = x^T dgu and P4 dWd = (a h)^T dy
    (expert GEMMs)."""
    if name == "square":
        return [("square", "M=8192,N=8192,K=8192,G=1,B=128")]
    s = parse_layer(SHAPES[name])
    T, H, I, E, K, B = (s[k] for k in ("T", "H", "I", "E", "K", "B"))
    slots = T * K
    out = []
    for phase, n, k in (("recompute", 2 * I, H), ("P1", I, H),
                        ("P2", H, 2 * I)):
        out.append(("shape%s %s" % (name, phase),
                    "M=%d,N=%d,K=%d,G=%d,B=%d" % (slots, n, k, E, B)))
    for phase, m, n in (("P3", H, 2 * I), ("P4", I, H)):
        out.append(("shape%s %s" % (name, phase),
                    "M=%d,N=%d,K=%d,G=%d,B=%d,kind=expert" % (m, n, slots, E,
                                                               B)))
    return out


def parse_layer(text):
    """{'T': .., 'H': .., 'I': .., 'E': .., 'K': .., 'B': ..} of a
    T=..,H=..,... layer spec (B defaults to 128)."""
    shape = {"B": 128}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key not in "THIEKB" or len(key) != 1 or not value.isdigit():
            raise ValueError("bad layer item %r in %r" % (item, text))
        shape[key] = int(value)
    if set("THIEK") - set(shape):
        raise ValueError("%r lacks one of T H I E K" % text)
    return shape


def model_tf(shape, ms):
    if not ms:
        return None
    T, H, I, K = (shape[k] for k in "THIK")
    return MODEL_FLOPS * T * K * H * I / (ms * 1e-3) / 1e12


def moe_run_host_bytes(shape):
    """Host memory moe-run needs for --inputs with --check none: it reads
    every .npy straight into the buffer the compiled function takes (bf16
    weights, tokens and checkpoint: 2 B an element) and holds the outputs
    (f32 weight gradients: 4 B, bf16 dx); the device copies of the resident
    mode are made from those buffers. About 18 B per E*H*I, the token-sized
    arrays aside."""
    T, H, I, E, K, B = (shape[k] for k in "THIEKB")
    weights = 3 * E * H * I
    tokens = 2 * T * H
    # The checkpoint layer's G|U: one row of 2I per slot, about T*K + E*B.
    checkpoint = (T * K + E * B) * 2 * I
    return 2 * (weights + tokens + checkpoint) + 4 * weights + 2 * T * H


def mem_available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


class Log:
    """Every line to stdout and to the raw log file."""

    def __init__(self, path):
        self.file = open(path, "w")

    def __call__(self, text=""):
        for stream in (sys.stdout, self.file):
            stream.write(text + "\n")
            stream.flush()


class Bench:
    def __init__(self, args):
        self.args = args
        os.makedirs(args.out, exist_ok=True)
        self.json_path = os.path.join(args.out, "bench-latest.json")
        self.log = Log(os.path.join(args.out, "bench-latest.log"))
        self.start = time.monotonic()
        self.failed = False
        # (entry, spec, inputs) of the shapes whose kernels ncu profiles
        # once every shape is timed.
        self.profiles = []
        self.result = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ"),
            "commit": None, "bundle": None, "device": None, "torch": None,
            "command": " ".join(shlex.quote(a) for a in sys.argv),
            "dry_run": args.dry_run,
            "moe_run_args": args.moe_run_arg,
            "settings": {"iters": args.iters, "warmup": args.warmup,
                         "moe_warmup": args.moe_warmup,
                         "seed": args.seed, "align": args.align,
                         "budget_s": args.budget},
            "model_tf": "12*T*K*H*I / backward time",
            "ratio_vs_torch": "torch_autograd_ms / moe_ms",
            "moe_time": "moe-run call (median): compiled function entry to "
                        "return incl. device sync, buffers already on the "
                        "device",
            "torch_self_check": None,
            "shapes": [],
            "gemms": [],
            "elapsed_s": None,
        }

    # -- bookkeeping -------------------------------------------------------

    def elapsed(self):
        return time.monotonic() - self.start

    def remaining(self):
        return self.args.budget - self.elapsed()

    def save(self):
        self.result["elapsed_s"] = round(self.elapsed(), 1)
        tmp = self.json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.result, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.json_path)

    def error(self, entry, text):
        self.log("ERROR: " + text)
        entry["errors"].append(text)
        self.failed = True

    def skip(self, entry, text):
        self.log("SKIPPED: " + text)
        entry["skipped"].append(text)

    def run(self, cmd, timeout, env=None):
        """Runs cmd with its output streamed into the log; (exit status,
        output). A run past `timeout` s is killed with its process group
        and returns status None."""
        self.log("$ " + " ".join(shlex.quote(c) for c in cmd))
        if self.args.dry_run:
            return 0, ""
        lines = []
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True,
                                    errors="replace", env=env,
                                    start_new_session=True)
        except OSError as err:
            self.log(str(err))
            return 127, str(err)
        expired = []

        def kill():
            expired.append(True)
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(max(timeout, 1), kill)
        timer.start()
        for line in proc.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            self.log(line)
        proc.wait()
        timer.cancel()
        if expired:
            self.log("(killed after %d s)" % timeout)
            return None, "\n".join(lines)
        return proc.returncode, "\n".join(lines)

    # -- the steps ---------------------------------------------------------

    def describe_machine(self):
        commit = None
        if shutil.which("git"):
            got = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                                 capture_output=True, text=True)
            commit = got.stdout.strip() or None
        bundle = os.environ.get("MOE_BUNDLE_DIR")
        if bundle and os.path.exists(os.path.join(bundle, "BUILD-INFO")):
            with open(os.path.join(bundle, "BUILD-INFO")) as f:
                for line in f:
                    if line.startswith("commit: "):
                        self.result["bundle"] = line[len("commit: "):].strip()
        # The bundle's commit is the code that ran. The device machine's
        # copy of the working tree may have no .git, or a stale one (a run
        # at d5c006f recorded the session's first commit).
        self.result["commit"] = self.result["bundle"] or commit
        if self.args.dry_run:
            self.result["device"] = "dry run"
            return
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"],
                             capture_output=True, text=True) \
            if shutil.which("nvidia-smi") else None
        self.result["device"] = (smi.stdout.strip() if smi and smi.stdout
                                 else None)

    def torch_baselines(self, entry, shape):
        """Both torch backwards in this process; frees the GPU memory they
        used before moe-run needs it."""
        self.log("== torch bf16 baselines %s (in this process: autograd "
                 "with saved activations, and the recompute backward of "
                 "bench/torch_baseline.py)" % entry["layer"])
        if self.args.dry_run:
            return
        try:
            import torch
            import torch_baseline as tb
        except ImportError as err:
            self.error(entry, "torch baselines: %r" % err)
            return
        a = self.args
        try:
            auto = tb.autograd_bench(shape, "cuda", a.seed, a.align,
                                     a.warmup, a.iters)
            entry["torch_autograd_ms"] = auto
            entry["torch_autograd_tf"] = model_tf(shape, auto)
            self.log("torch autograd backward: %.3f ms, %.1f model TF" %
                     (auto, entry["torch_autograd_tf"]))
        except Exception as err:  # recorded; the other steps still run
            self.error(entry, "torch autograd baseline: %r" % err)
        torch.cuda.empty_cache()
        try:
            phases, whole = tb.bench(shape, "cuda", a.seed, a.align,
                                     a.warmup, a.iters)
            entry["torch_recompute_ms"] = whole
            entry["torch_recompute_tf"] = model_tf(shape, whole)
            entry["torch_recompute_phases_ms"] = phases
            self.log("torch recompute backward: %.3f ms, %.1f model TF "
                     "(%s)" % (whole, entry["torch_recompute_tf"], ", ".join(
                         "%s %.3f" % kv for kv in phases.items())))
        except Exception as err:
            self.error(entry, "torch recompute baseline: %r" % err)
        torch.cuda.empty_cache()

    def moe_run(self, entry, spec, inputs, mode):
        """One moe-run of the layer; fills entry's fields for `mode`."""
        key = "moe_ms" if mode == "recompute" else "moe_ckpt_ms"
        suffix = "" if mode == "recompute" else "_ckpt"
        layer = spec if mode == "recompute" else spec + ",checkpoint=bf16"
        times = os.path.join(self.work, "times-%s-%s.json" %
                             (entry["name"], mode))
        self.log("== moe-run %s (%s)" % (layer, mode))
        budget = self.remaining() - 30
        if budget < 60:
            self.skip(entry, "moe-run %s: out of time budget" % mode)
            return
        rc, out = self.run(
            [self.args.moe_run, "--target=sm90a"] + self.args.moe_run_arg +
            ["--layer", layer, "--inputs", inputs, "--check", "none",
             "--repeat",
             str(self.args.iters), "--warmup", str(self.args.moe_warmup),
             "--times-json", times], budget)
        if self.args.dry_run:
            return
        m = re.search(r"^compile: ([0-9.]+) s \(([^;]*); parse ([0-9.]+) s, "
                      r"pipeline ([0-9.]+) s, codegen ([0-9.]+) s\)", out,
                      re.M)
        if m:
            entry["compile%s_s" % suffix] = float(m.group(1))
            entry["compile%s_detail" % suffix] = {
                "source": m.group(2), "parse_s": float(m.group(3)),
                "pipeline_s": float(m.group(4)),
                "codegen_s": float(m.group(5))}
        m = re.search(r"^gpu: mode (\S+)", out, re.M)
        entry["gpu_mode%s" % suffix] = m.group(1) if m else None
        if rc != 0 or not re.search(r"^moe-run: PASS$", out, re.M):
            tail = [l for l in out.splitlines() if l.strip()][-3:]
            self.error(entry, "moe-run %s: exit status %s: %s" % (
                mode, rc, " | ".join(tail)))
            return
        try:
            with open(times) as f:
                samples = json.load(f)["call_s"]
        except (OSError, ValueError, KeyError) as err:
            self.error(entry, "moe-run %s: no --times-json: %r" % (mode, err))
            return
        ms = [1e3 * s for s in samples]
        entry[key] = statistics.median(ms)
        entry["%s_min" % key] = min(ms)
        entry["%s_samples" % key] = ms
        entry["model_tf%s" % suffix] = model_tf(entry, entry[key])
        if entry.get("torch_autograd_ms"):
            entry["ratio%s_vs_torch" % suffix] = (entry["torch_autograd_ms"] /
                                                 entry[key])

    def cached_compile(self, entry, spec):
        """The recompute layer compiled again by a new process, from the disk
        cache its first compile filled: compile_cached_s."""
        self.log("== moe-run --compile-only %s (a second process: the disk "
                 "cache)" % spec)
        if self.remaining() < 30:
            self.skip(entry, "cached compile: out of time budget")
            return
        rc, out = self.run([self.args.moe_run, "--target=sm90a"] +
                           self.args.moe_run_arg +
                           ["--layer", spec, "--compile-only"], 60)
        if self.args.dry_run:
            return
        m = re.search(r"^compile: ([0-9.]+) s \(([^;]*);", out, re.M)
        if rc != 0 or not m:
            self.error(entry, "cached compile: exit status %s" % rc)
            return
        entry["compile_cached_s"] = float(m.group(1))
        entry["compile_cached_source"] = m.group(2)

    def sass_mix(self, entry, spec):
        """The SASS instruction mix of every kernel of the recompute layer:
        the cubins moe-run compiles (--emit cubin), disassembled by
        cuobjdump, with each kernel's registers and spill bytes."""
        self.log("== SASS mix of %s (moe-run --emit cubin, cuobjdump)" % spec)
        tool = find_cuobjdump()
        if not tool and not self.args.dry_run:
            self.skip(entry, "SASS mix: no cuobjdump (PATH, "
                      "/usr/local/cuda/bin, triton's backends/nvidia/bin)")
            return
        if self.remaining() < 30:
            self.skip(entry, "SASS mix: out of time budget")
            return
        out_dir = os.path.join(self.work, "cubin-" + entry["name"])
        rc, _ = self.run([self.args.moe_run, "--target=sm90a"] +
                         self.args.moe_run_arg +
                         ["--layer", spec, "--compile-only", "--emit",
                          "cubin", out_dir], 120)
        if self.args.dry_run:
            self.log("$ cuobjdump -sass -res-usage %s/*.cubin" % out_dir)
            return
        if rc != 0 or not os.path.isdir(out_dir):
            self.error(entry, "SASS mix: moe-run --emit: exit status %s" % rc)
            return
        kernels = []
        for name in sorted(os.listdir(out_dir)):
            if not name.endswith(".cubin"):
                continue
            path = os.path.join(out_dir, name)
            got = run_cuobjdump(tool, path)
            if got.returncode != 0:
                self.error(entry, "SASS mix: cuobjdump %s: %s" % (
                    name, got.stderr.strip()[-200:]))
                return
            kernels += parse_sass(got.stdout)
        entry["sass"] = kernels
        self.log("SASS mix, %s (instructions by opcode, the 8 most "
                 "frequent; REG registers a thread, STACK the stack frame "
                 "that spills take, LOCAL local memory):" %
                 entry["name"])
        for k in kernels:
            top = sorted(k["mix"].items(), key=lambda kv: -kv[1])[:8]
            self.log("  %-34s REG %3s STACK %s LOCAL %s  %5d instr: %s" % (
                k["name"], k["registers"], k["stack_bytes"], k["local_bytes"],
                k["instructions"], ", ".join("%s %d" % kv for kv in top)))

    def ncu_profile(self, entry, spec, inputs):
        """ncu duration of every kernel of one recompute backward."""
        self.log("== ncu: every kernel of one backward %s (recompute)" % spec)
        budget = self.remaining() - 20
        if budget < 60:
            self.skip(entry, "ncu: out of time budget")
            return
        cmd = [self.args.ncu, "--clock-control", "none", "--metrics",
               "gpu__time_duration.sum", "--print-units", "base", "--csv"]
        if self.args.ncu_replay != "kernel":
            cmd += ["--replay-mode", self.args.ncu_replay]
        if self.args.ncu_kernels:
            cmd += ["--kernel-name", "regex:" + self.args.ncu_kernels]
        cmd += [self.args.moe_run, "--target=sm90a"] + self.args.moe_run_arg
        cmd += ["--layer", spec, "--inputs", inputs, "--check", "none"]
        started = time.monotonic()
        rc, out = self.run(cmd, budget)
        entry["ncu_wall_s"] = round(time.monotonic() - started, 1)
        if self.args.dry_run:
            return
        kernels = parse_ncu_csv(out)
        if rc != 0 or not kernels:
            self.error(entry, "ncu: exit status %s, %d kernels parsed" %
                       (rc, len(kernels)))
            return
        kernels.sort(key=lambda k: -k["ms"])
        total = sum(k["ms"] for k in kernels)
        gemm = sum(k["ms"] for k in kernels if k["gemm"])
        entry["kernels"] = kernels
        entry["kernel_total_ms"] = total
        entry["gemm_ms"] = gemm
        entry["gemm_share"] = gemm / total if total else None
        self.log("per-kernel ncu times, %s, largest first (%d launches, "
                 "%.3f ms; %.3f ms = %.1f%% in GEMM kernels; ncu took "
                 "%.0f s):" % (entry["name"], len(kernels), total, gemm,
                               100 * entry["gemm_share"],
                               entry["ncu_wall_s"]))
        for k in kernels:
            self.log("  %10.3f ms  %s%s" % (k["ms"], k["name"],
                                           "  [GEMM]" if k["gemm"] else ""))

    def shape(self, name, spec):
        shape = parse_layer(spec)
        entry = dict(shape, name="shape%s" % name, layer=spec,
                     moe_ms=None, moe_ckpt_ms=None, torch_autograd_ms=None,
                     torch_recompute_ms=None, model_tf=None,
                     model_tf_ckpt=None, torch_autograd_tf=None,
                     torch_recompute_tf=None, ratio_vs_torch=None,
                     ratio_ckpt_vs_torch=None, compile_s=None,
                     compile_ckpt_s=None, compile_cached_s=None, kernels=[],
                     kernel_total_ms=None,
                     gemm_ms=None, gemm_share=None, errors=[], skipped=[])
        self.result["shapes"].append(entry)
        self.log("\n======== shape %s: %s" % (name, spec))
        if self.remaining() < 60:
            self.skip(entry, "out of time budget (%.0f s used)" %
                      self.elapsed())
            self.save()
            return
        self.torch_baselines(entry, shape)
        self.save()

        need = moe_run_host_bytes(shape)
        have = (self.args.host_mem_gb * 1e9 if self.args.host_mem_gb
                else mem_available_bytes())
        entry["moe_run_host_gb_estimate"] = round(need / 1e9, 1)
        if have is not None and need > 0.9 * have:
            self.skip(entry, "moe-run: needs ~%.0f GB of host memory "
                      "(inputs and outputs in their storage types), %.0f GB "
                      "available" %
                      (need / 1e9, have / 1e9))
            self.save()
            return

        inputs = os.path.join(self.work, "in-" + name)
        # One set of inputs serves both modes: checkpoint=true adds the
        # forward's G|U (checkpoint.npy), which the recompute layer ignores.
        self.log("== torch-gen %s,checkpoint=true (seeded inputs on the GPU)"
                 % spec)
        rc, _ = self.run([sys.executable, "-m", "moe_crosscheck", "torch-gen",
                          "--config", spec + ",checkpoint=true", "--seed",
                          str(self.args.seed), "--out", inputs],
                         max(self.remaining() - 60, 1))
        if rc != 0:
            self.error(entry, "torch-gen: exit status %s" % rc)
            self.save()
            return
        for mode in ("recompute", "checkpoint"):
            self.moe_run(entry, spec, inputs, mode)
            self.save()
        self.cached_compile(entry, spec)
        self.save()
        self.sass_mix(entry, spec)
        self.save()
        # The profiles come after every shape's timings (the longest step;
        # a budget cut then costs a profile, not a time).
        if self.args.ncu_profile:
            self.profiles.append((entry, spec, inputs))
        else:
            shutil.rmtree(inputs, ignore_errors=True)
        self.save()

    def gemm_row(self, label, spec, config=None, torch_row=None):
        """One GEMM row: moe-run --gemm (median call), ncu of its GEMM
        kernel, torch's bf16 and fp8 GEMMs of the shape (measured once per
        shape: `torch_row` holds them for a further kernel `config`)."""
        g = dict(re.findall(r"(\w+)=(\w+)", spec))
        entry = {"name": label, "spec": spec, "config": config,
                 "M": int(g["M"]),
                 "N": int(g["N"]), "K": int(g["K"]), "groups": int(g["G"]),
                 "kind": g.get("kind", "block"), "moe_ms": None,
                 "moe_tf": None, "moe_kernel_ms": None, "moe_kernel_tf": None,
                 "torch_bf16_ms": None, "torch_bf16_tf": None,
                 "torch_fp8_ms": None, "torch_fp8_tf": None,
                 "errors": [], "skipped": []}
        self.result["gemms"].append(entry)
        flops = 2.0 * entry["M"] * entry["N"] * entry["K"]
        self.log("\n======== GEMM %s: moe-run --gemm %s%s" % (
            label, spec, " --gemm-config '%s'" % config if config else ""))
        if self.remaining() < 60:
            self.skip(entry, "out of time budget (%.0f s used)" %
                      self.elapsed())
            return
        if torch_row is not None:
            for key in ("torch_bf16_ms", "torch_bf16_tf", "torch_fp8_ms",
                        "torch_fp8_tf"):
                entry[key] = torch_row[key]
        elif not self.args.dry_run:
            try:
                sys.path.insert(0, HERE)
                import torch_gemms  # noqa: PLC0415 (needs torch)
                got = torch_gemms.measure(spec, "cuda", self.args.iters,
                                          self.args.warmup)
                for text in got.pop("errors"):
                    self.skip(entry, text)
                entry.update(got)
                self.log("torch bf16 %s ms, fp8 row-wise %s ms" % (
                    got["torch_bf16_ms"], got["torch_fp8_ms"]))
            except Exception as err:
                self.error(entry, "torch GEMMs: %r" % err)
        self.save()
        times = os.path.join(self.work, "times-gemm-%d.json" %
                             len(self.result["gemms"]))
        with_config = ["--gemm-config", config] if config else []
        rc, out = self.run(
            [self.args.moe_run, "--target=sm90a", "--gemm", spec] +
            with_config + ["--repeat", str(self.args.iters), "--warmup",
                           str(self.args.moe_warmup), "--times-json", times],
            max(self.remaining() - 30, 1))
        if not self.args.dry_run:
            if rc != 0 or not re.search(r"^moe-run: PASS$", out, re.M):
                tail = [l for l in out.splitlines() if l.strip()][-3:]
                self.error(entry, "moe-run --gemm: exit status %s: %s" % (
                    rc, " | ".join(tail)))
                return
            with open(times) as f:
                entry["moe_ms"] = 1e3 * statistics.median(
                    json.load(f)["call_s"])
            entry["moe_tf"] = flops / (entry["moe_ms"] * 1e9)
            self.save()
        if not self.args.ncu_profile:
            return
        rc, out = self.run(
            [self.args.ncu, "--clock-control", "none", "--metrics",
             "gpu__time_duration.sum", "--kernel-name", "regex:matmul",
             "--print-units", "base", "--csv", self.args.moe_run,
             "--target=sm90a", "--gemm", spec, "--check", "none"] +
            with_config,
            max(self.remaining() - 30, 1))
        if self.args.dry_run:
            return
        kernels = parse_ncu_csv(out) if rc == 0 else []
        if not kernels:
            self.error(entry, "ncu of the GEMM kernel: exit status %s" % rc)
            return
        entry["moe_kernel_ms"] = sum(k["ms"] for k in kernels)
        entry["moe_kernel_tf"] = flops / (entry["moe_kernel_ms"] * 1e9)

    def profile_all(self):
        for entry, spec, inputs in self.profiles:
            self.ncu_profile(entry, spec, inputs)
            shutil.rmtree(inputs, ignore_errors=True)
            self.save()

    def table(self):
        rows = []
        head = ("%-8s %-10s %9s %8s %10s %11s %7s %6s %7s" %
                ("shape", "mode", "moe ms", "moe TF", "torch ms",
                 "torch rc ms", "ratio", "GEMM%", "compile"))

        def num(value, fmt):
            return fmt % value if value is not None else "-"

        for e in self.result["shapes"]:
            for mode, sfx in (("recompute", ""), ("checkpoint", "_ckpt")):
                ms = e["moe_ms"] if not sfx else e["moe_ckpt_ms"]
                rows.append("%-8s %-10s %9s %8s %10s %11s %7s %6s %7s" % (
                    e["name"], mode, num(ms, "%.3f"),
                    num(e["model_tf" + sfx], "%.1f"),
                    num(e["torch_autograd_ms"], "%.3f"),
                    num(e["torch_recompute_ms"], "%.3f"),
                    num(e["ratio%s_vs_torch" % sfx], "%.2fx"),
                    num(e["gemm_share"] * 100 if e["gemm_share"] is not None
                        and not sfx else None, "%.1f"),
                    num(e["compile%s_s" % sfx], "%.2fs") +
                    ("" if sfx or e.get("compile_cached_s") is None else
                     "/%.3fs" % e["compile_cached_s"])))
        self.log("\n================ moe-mlir backward on %s (median of %d "
                 "after %d (moe-run) / %d (torch) warm-up; torch = autograd "
                 "with saved activations, "
                 "torch rc = recompute backward; ratio = torch / moe; model "
                 "TF = 12*T*K*H*I / time; GEMM%% = ncu time in the GEMM "
                 "kernels; compile = cold/cached, the cached one a second "
                 "process loading the disk cache)"
                 % (self.result["device"], self.args.iters,
                    self.args.moe_warmup, self.args.warmup))
        self.log(head)
        for r in rows:
            self.log(r)
        if self.result["gemms"]:
            self.log("\n================ GEMM rows (TF = 2*M*N*K / time; moe "
                     "call = the GEMM with its operand kernels, moe kernel = "
                     "the GEMM kernel alone (ncu); torch bf16 / fp8 "
                     "row-wise in this process)")
            self.log("%-18s %-34s %9s %8s %9s %8s %8s %8s" % (
                "gemm", "M,N,K,G,kind", "call ms", "call TF", "kernel ms",
                "kern TF", "bf16 TF", "fp8 TF"))
            for e in self.result["gemms"]:
                self.log("%-18s %-34s %9s %8s %9s %8s %8s %8s" % (
                    e["name"], "%d,%d,%d,%d,%s" % (e["M"], e["N"], e["K"],
                                                   e["groups"], e["kind"]),
                    num(e["moe_ms"], "%.3f"), num(e["moe_tf"], "%.1f"),
                    num(e["moe_kernel_ms"], "%.3f"),
                    num(e["moe_kernel_tf"], "%.1f"),
                    num(e["torch_bf16_tf"], "%.1f"),
                    num(e["torch_fp8_tf"], "%.1f")))
        for e in self.result["shapes"] + self.result["gemms"]:
            what = e.get("layer") or e.get("spec")
            for text in e["skipped"]:
                self.log("%s (%s): skipped: %s" % (e["name"], what, text))
            for text in e["errors"]:
                self.log("%s (%s): FAILED: %s" % (e["name"], what, text))
        self.log("json: %s, log: %s" % (
            self.json_path, os.path.join(self.args.out, "bench-latest.log")))

    def main(self):
        self.describe_machine()
        self.log("moe-mlir benchmark: commit %s, device %s" %
                 (self.result["commit"], self.result["device"]))
        self.save()
        self.work = self.args.work or tempfile.mkdtemp(prefix="moe-bench-")
        os.makedirs(self.work, exist_ok=True)
        # moe-run's disk cache (on by default) in a fresh folder: each
        # layer's first compile is cold, and a second process's compile of
        # it (cached_compile) loads the object code stored then.
        os.environ["MOE_MLIR_CACHE_DIR"] = tempfile.mkdtemp(
            prefix="jit-cache-", dir=self.work)
        try:
            if not self.args.dry_run:
                try:
                    self.torch_setup()
                except Exception as err:  # the torch columns stay empty
                    self.log("ERROR: torch setup: %r" % err)
                    self.result["torch_self_check"] = {"error": repr(err)}
                    self.failed = True
            for name in shape_names(self.args.shapes):
                try:
                    self.shape(name, SHAPES[name])
                except Exception as err:  # recorded; the next shape runs
                    self.error(self.result["shapes"][-1],
                               "unexpected: %r" % err)
            # The layers' profiles before the GEMM rows: a run whose
            # budget the eleven rows of --gemms square,1,2 would spend
            # (2026-12-03) still gets its GEMM share.
            try:
                self.profile_all()
            except Exception as err:
                self.log("ERROR: ncu profiles: %r" % err)
                self.failed = True
            for name in shape_names(self.args.gemms):
                for label, spec in gemm_specs(name):
                    first = None
                    for i, config in enumerate([None] +
                                               self.args.gemm_config):
                        try:
                            self.gemm_row(label + ("" if i == 0 else
                                                   " cfg%d" % i),
                                          spec, config, first)
                        except Exception as err:  # recorded; next one runs
                            self.error(self.result["gemms"][-1],
                                       "unexpected: %r" % err)
                        first = first or self.result["gemms"][-1]
                        self.save()
        finally:
            if not self.args.work:
                shutil.rmtree(self.work, ignore_errors=True)
            self.save()
            self.table()
        return 1 if self.failed else 0

    def torch_setup(self):
        sys.path.insert(0, HERE)
        import torch
        import torch_baseline as tb
        self.result["torch"] = torch.__version__
        passed, errors = tb.self_check("cuda", self.args.seed, self.args.align)
        self.result["torch_self_check"] = {"passed": passed, "rel": errors}
        self.log("torch %s; baseline self-check vs fp64 at %s: %s (%s)" % (
            torch.__version__, tb.CHECK_LAYER, "PASS" if passed else "FAIL",
            ", ".join("%s %.2e" % kv for kv in errors.items())))
        if not passed:
            self.failed = True


def shape_names(text):
    """The names of a --shapes / --gemms list ("none": no name)."""
    return [] if text == "none" else text.split(",")


def find_cuobjdump():
    """cuobjdump from PATH, the CUDA toolkit, the checkout's .tools/sass
    (scripts/install-sass-tools.sh, with its nvdisasm beside it) or the one
    triton ships."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    candidates = ["/usr/local/cuda/bin/cuobjdump",
                  os.path.join(os.path.dirname(os.path.dirname(
                      os.path.abspath(__file__))), ".tools", "sass", "nvidia",
                      "cu13", "bin", "cuobjdump")]
    try:
        import importlib.util  # noqa: PLC0415
        spec = importlib.util.find_spec("triton")
        if spec and spec.origin:
            candidates.append(os.path.join(
                os.path.dirname(spec.origin), "backends", "nvidia", "bin",
                "cuobjdump"))
    except (ImportError, ValueError):
        pass
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def run_cuobjdump(tool, cubin):
    """`cuobjdump -sass -res-usage` of one cubin, with the nvdisasm beside
    `tool` found first (the PyPI wheels ship them side by side)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(tool) + os.pathsep + env.get("PATH", "")
    return subprocess.run([tool, "-sass", "-res-usage", cubin],
                          capture_output=True, text=True, env=env)


def parse_sass(text):
    """[{name, instructions, mix: {opcode: count}, registers, stack_bytes,
    local_bytes}]
    from `cuobjdump -sass -res-usage`. An opcode keeps its first modifier
    for the tensor-core and memory instructions (HGMMA.64x256x16, LDS.128
    ...), which is what tells the paths apart; others are the bare opcode."""
    kernels = []
    usage = {}
    current = None
    pending = None
    for line in text.splitlines():
        # -res-usage: "Function NAME:" then a line "REG:... LOCAL:...".
        m = re.match(r"\s*Function (\S+):$", line)
        if m:
            pending = m.group(1)
            continue
        if pending and "REG:" in line:
            usage[pending] = line
            pending = None
            continue
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            current = {"name": m.group(1), "instructions": 0, "mix": {}}
            kernels.append(current)
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)",
                     line)
        if not m or current is None:
            continue
        parts = m.group(2).split(".")
        keep = 2 if parts[0] in ("HGMMA", "QGMMA", "LDS", "STS", "LDG",
                                 "STG", "LDSM", "UTMALDG", "UTMASTG",
                                 "SYNCS", "USETMAXREG") else 1
        op = ".".join(parts[:keep])
        current["instructions"] += 1
        current["mix"][op] = current["mix"].get(op, 0) + 1
    for k in kernels:
        line = usage.get(k["name"], "")
        reg = re.search(r"REG:(\d+)", line)
        local = re.search(r"LOCAL:(\d+)", line)
        # (ptxas's spills go to the stack frame: STACK, not LOCAL.)
        stack = re.search(r"STACK:(\d+)", line)
        k["registers"] = int(reg.group(1)) if reg else None
        k["stack_bytes"] = int(stack.group(1)) if stack else None
        k["local_bytes"] = int(local.group(1)) if local else None
    return kernels


def parse_ncu_csv(text):
    """[{id, name, ms, gemm}] from ncu --csv output with one metric, in
    launch order. The CSV lines are the ones starting with a quote (the
    profiled program's own output is interleaved)."""
    rows = [l for l in text.splitlines() if l.startswith('"')]
    scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3,
             "ms": 1.0, "msecond": 1.0, "s": 1e3, "second": 1e3}
    kernels = []
    for row in csv.DictReader(rows):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        name = row["Kernel Name"]
        kernels.append({"id": int(row["ID"]), "name": name,
                        "ms": value * scale.get(row["Metric Unit"], 1e-6),
                        "gemm": bool(GEMM_KERNEL.match(name))})
    return kernels


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True,
                        help="folder for bench-latest.json and "
                        "bench-latest.log")
    parser.add_argument("--shapes", default="1,2,3",
                        help="comma-separated subset of 1, 2, 3 (default "
                        "all), or none: " + "; ".join("%s: %s" % kv
                                                      for kv in SHAPES.items()))
    parser.add_argument("--gemms", default="square",
                        help="GEMM rows: comma-separated subset of square "
                        "(8192^3) and 1, 2, 3 (the five GEMMs of that "
                        "shape), or none (default: square)")
    parser.add_argument("--gemm-config", action="append", default=[],
                        metavar="ATTR",
                        help="also measure each GEMM row with this kernel "
                        "configuration (a #moe.gemm_config; repeatable); "
                        "the rows are labelled cfg1, cfg2, ...")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3,
                        help="torch: untimed runs first (default 3)")
    # One warm-up run loads the kernels and faults the memory in; more buy
    # nothing but time: each moe-run repetition at shape 1 spends ~3 s in
    # host copies and output poisoning around a ~0.16 s call.
    parser.add_argument("--moe-warmup", type=int, default=1,
                        help="moe-run: untimed runs first (default 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--align", type=int, default=16,
                        help="torch: rows per expert group padded to a "
                        "multiple of this")
    parser.add_argument("--moe-run", default="moe-run")
    parser.add_argument("--moe-run-arg", action="append", default=[],
                        metavar="ARG",
                        help="an argument for every moe-run of the layers "
                        "(repeatable), e.g. --moe-run-arg=--operands-both-"
                        "axes to measure that variant")
    parser.add_argument("--ncu", default="ncu")
    parser.add_argument("--no-ncu", dest="ncu_profile", action="store_false",
                        help="skip the per-kernel profile")
    parser.add_argument("--ncu-kernels", metavar="REGEX",
                        help="profile only kernels matching REGEX (default: "
                        "every kernel)")
    parser.add_argument("--ncu-replay", choices=("kernel", "application"),
                        default="kernel",
                        help="ncu's replay mode; one metric needs one pass, "
                        "so 'application' profiles a single run of moe-run "
                        "without saving and restoring device memory around "
                        "each kernel (default: kernel)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                        help="seconds after which remaining steps are "
                        "skipped (default %d)" % DEFAULT_BUDGET_S)
    parser.add_argument("--host-mem-gb", type=float,
                        help="host memory available to moe-run (default: "
                        "MemAvailable)")
    parser.add_argument("--work", help="scratch folder for the inputs "
                        "(default: a temporary one, removed at the end)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the steps and commands, run nothing")
    args = parser.parse_args(argv)
    if args.iters < 1 or args.warmup < 0 or args.moe_warmup < 0:
        parser.error("--iters must be >= 1, the warm-ups >= 0")
    for name in shape_names(args.shapes):
        if name not in SHAPES:
            parser.error("unknown shape %r (expected 1, 2, 3 or none)" % name)
    for name in shape_names(args.gemms):
        if name not in SHAPES and name != "square":
            parser.error("unknown GEMM set %r (expected square, 1, 2, 3 or "
                         "none)" % name)
    return Bench(args).main()


if __name__ == "__main__":
    sys.exit(main())
