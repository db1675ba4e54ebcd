"""Trains a small MoE block with the compiled MXFP8 backward, next to the
same model with torch's own bf16 backward, and plots both loss curves.

    python examples/python/train_moe.py --target host --steps 200 \
        --out docs/results/train-moe-host

The task is synthetic: a fixed random "teacher" MoE block (router + gated
experts) maps random tokens to targets, and two identical "students" learn
it by Adam on the mean squared error. Each student has a router (a linear
layer, softmax over its top-k logits) and a moe_mlir.nn.MoEMLP; they differ
only in the backward of the expert MLP:
  - "moe-mlir MXFP8": the compiled moe-mlir backward (MX quantization of
    every GEMM operand, the layer's recompute mode);
  - "torch bf16": autograd through the same bf16 forward.
The router's gradient flows through the top-k scores' gradient either way.
Writes OUT.csv (step, both losses, both step times) and, with matplotlib,
OUT.png; prints a summary line last. --target sm90a runs on the GPU (CUDA
tensors, the kernel on torch's current stream; the tokens are drawn on the
device). --profile-step S runs step S of the moe-mlir student under the
torch profiler and prints the copies between host and device and the
synchronizations it made (the loss is read after the profiled region).
"""
import argparse
import csv
import os
import sys
import time

import numpy as np
import torch

from moe_mlir.nn import MoEMLP, _forward


class Block(torch.nn.Module):
    """Router + experts. backward="moe-mlir" uses MoEMLP's compiled backward;
    "torch" differentiates the same forward with autograd."""

    def __init__(self, H, I, E, K, target, backward, device):
        super().__init__()
        self.K, self.backward = K, backward
        self.router = torch.nn.Linear(H, E, bias=False, device=device)
        self.mlp = MoEMLP(H, I, E, K, target=target, dtype=torch.float32,
                          device=device)

    def forward(self, x):
        logits = self.router(x.float())
        top, idx = logits.topk(self.K, dim=1)
        scores = torch.softmax(top, dim=1)
        xb = x.to(torch.bfloat16)
        if self.backward == "moe-mlir":
            y = self.mlp(xb, idx.to(torch.int32), scores)
        else:
            y = _forward(xb, idx, scores, self.mlp.wgu, self.mlp.wd,
                         self.mlp.activation)
        return y.float()


def _profiler(device):
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    return profile(activities=activities)


def _report_profile(prof, step, device):
    """Prints what the profiled step copied between host and device and how
    often it synchronized inside its "training step" block."""
    from moe_mlir.profiling import transfers  # noqa: PLC0415
    moved = transfers(prof, region="training step")
    up = moved["HtoD"] + moved["other"]
    print("profile step %d (moe-mlir student: forward, backward, Adam): %d "
          "bytes to the host, %d bytes to the device in %d copies (largest "
          "%d), %d synchronizations" % (
              step, sum(moved["DtoH"]), sum(up), len(up), max(up or [0]),
              len(moved["syncs"])))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="host", choices=("host", "sm90a"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=64)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="OUT.csv and OUT.png (default: none)")
    p.add_argument("--profile-step", type=int, default=-1,
                   help="profile this step of the moe-mlir student")
    a = p.parse_args(argv)
    device = "cuda" if a.target == "sm90a" else "cpu"
    T, H, I, E, K = a.tokens, a.hidden, a.intermediate, a.experts, a.top_k

    torch.manual_seed(a.seed)
    teacher = Block(H, I, E, K, a.target, "torch", device)
    students = {}
    for name in ("moe-mlir", "torch"):
        torch.manual_seed(a.seed + 1)  # the same initial weights
        students[name] = Block(H, I, E, K, a.target, name, device)
    opts = {n: torch.optim.Adam(s.parameters(), lr=a.lr)
            for n, s in students.items()}

    rows = []
    for step in range(a.steps):
        gen = torch.Generator(device=device).manual_seed(10_000 + step)
        x = torch.randn(T, H, generator=gen, device=device)
        with torch.no_grad():
            target = teacher(x)
        row = {"step": step}
        for name, student in students.items():
            if device == "cuda":
                torch.cuda.synchronize()
            profiled = step == a.profile_step and name == "moe-mlir"
            prof = _profiler(device) if profiled else None
            start = time.perf_counter()
            if prof:
                prof.__enter__()
            with torch.profiler.record_function("training step"):
                opts[name].zero_grad()
                loss = ((student(x) - target) ** 2).mean()
                loss.backward()
                opts[name].step()
            if device == "cuda":
                torch.cuda.synchronize()
            if prof:
                prof.__exit__(None, None, None)
                _report_profile(prof, step, device)
            row[name + "_loss"] = loss.item()
            row[name + "_ms"] = 1e3 * (time.perf_counter() - start)
        rows.append(row)
        if step % 50 == 0 or step == a.steps - 1:
            print("step %4d  loss moe-mlir %.5f  torch %.5f" %
                  (step, row["moe-mlir_loss"], row["torch_loss"]))

    first = {n: rows[0][n + "_loss"] for n in students}
    last = {n: np.mean([r[n + "_loss"] for r in rows[-10:]])
            for n in students}
    ms = {n: np.median([r[n + "_ms"] for r in rows[1:]] or [0])
          for n in students}
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out + ".csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        try:
            import matplotlib  # noqa: PLC0415 (optional)
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt  # noqa: PLC0415
            fig, ax = plt.subplots(figsize=(7, 4))
            for n, label in (("torch", "torch bf16 backward"),
                             ("moe-mlir", "moe-mlir MXFP8 backward")):
                ax.plot([r[n + "_loss"] for r in rows],
                        label="%s (%.1f ms/step)" % (label, ms[n]))
            ax.set_yscale("log")
            ax.set_xlabel("step")
            ax.set_ylabel("MSE loss")
            ax.set_title("MoE block T=%d H=%d I=%d E=%d K=%d, target %s" %
                         (T, H, I, E, K, a.target))
            ax.legend()
            fig.tight_layout()
            fig.savefig(a.out + ".png", dpi=120)
            print("wrote %s.csv and %s.png" % (a.out, a.out))
        except ImportError:
            print("wrote %s.csv (no matplotlib: no plot)" % a.out)
    ratio = last["moe-mlir"] / last["torch"]
    falls = all(last[n] < first[n] for n in students)
    print("train-moe: %d steps, loss %.5f -> %.5f (moe-mlir) and %.5f -> "
          "%.5f (torch), final ratio %.3f, %.1f and %.1f ms/step: %s" % (
              a.steps, first["moe-mlir"], last["moe-mlir"], first["torch"],
              last["torch"], ratio, ms["moe-mlir"], ms["torch"],
              "PASS" if falls else "FAIL"))
    return 0 if falls else 1


if __name__ == "__main__":
    sys.exit(main())
