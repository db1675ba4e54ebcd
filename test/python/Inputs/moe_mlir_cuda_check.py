"""moe_mlir on the GPU (sm90a, CUDA tensors): the H200 checks of the Python
package. Run on the H200 by scripts/device/python-checks.sh; needs CUDA.

Usage: moe_mlir_cuda_check.py [--layer T=..,H=..,...] [--repeat N]
                              [--json FILE] [--target sm90a|host]

--target host runs the same steps on CPU tensors (the lit test does, at a
small layer, so that the script is known to work before it reaches a GPU).

1. A kernel on CUDA tensors (queued on the current stream) gives the bits
   of the same kernel on numpy arrays (copied in and out by the library),
   and bad tensors are named (a CPU tensor, a wrong dtype).
2. MoEMLP's gradients (autograd through the compiled backward, the routing
   built on the device) against R_mx of moe_crosscheck.torch_ref computed in
   fp64 on the GPU from the same inputs: dx, dWgu, dWd and the top-k scores'
   gradient, 2e-3.
3. What a call costs: the median wall time of the compiled backward on CUDA
   tensors, each call followed by a synchronization, through the Kernel
   object (argument checks, ctypes) and through the C entry alone
   (moeExecutableRunOnDevice with its arguments built once: the C++ call),
   and of the whole moe_mlir::mlp_backward op (routing by torch ops, the
   kernel, the scores' gather). The overhead is Kernel against the C entry;
   scripts/device/python-checks.sh compares it with moe-run in C++ too.
4. One training step of MoEMLP (forward, backward, Adam) under the torch
   profiler (moe_mlir.profiling.transfers): nothing copied to the host,
   nothing larger than a TMA descriptor (128 bytes) to the device, no
   synchronization.
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import numpy as np
import torch

import moe_mlir
from check_errors import expect_value_errors
from moe_mlir import _capi
from moe_mlir.nn import MoEMLP, mlp_backward, route
from moe_mlir.profiling import SYNC_CALLS, transfers
from moe_crosscheck import torch_ref


def parse_layer(text):
    out = {"B": 128}
    for item in text.split(","):
        key, value = item.split("=")
        out[key] = int(value)
    return out


def rel(got, want):
    got, want = got.double(), want.double()
    return float(torch.linalg.norm(got - want) / torch.linalg.norm(want))


def synchronize():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fns, repeat, warmup=3):
    """(median, min) wall time of each fn() followed by a synchronization,
    the functions taking turns call by call, so that a drift of the clocks
    or of the machine's load reaches all of them alike."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    synchronize()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times):
            start = time.perf_counter()
            fn()
            synchronize()
            out.append(time.perf_counter() - start)
    return [(statistics.median(t), min(t)) for t in times]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layer", default="T=4096,H=2048,I=1024,E=32,K=4,B=128")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--json")
    p.add_argument("--target", default="sm90a", choices=("sm90a", "host"))
    p.add_argument("--explain", action="store_true",
                   help="print each copy and synchronization of the "
                   "profiled step with the torch ops it ran in")
    a = p.parse_args()
    target = a.target
    shape = parse_layer(a.layer)
    T, H, I, E, K, B = (shape[k] for k in "THIEKB")
    spec = "T=%d,H=%d,I=%d,E=%d,K=%d,B=%d" % (T, H, I, E, K, B)
    dev = torch.device("cuda" if target == "sm90a" else "cpu")
    failed = 0
    result = {"layer": spec, "torch": torch.__version__, "target": target,
              "device": torch.cuda.get_device_name(dev) if dev.type == "cuda"
              else "cpu"}
    print("torch %s on %s, layer %s" % (torch.__version__, result["device"],
                                        spec))

    gen = torch.Generator(device=dev).manual_seed(0)
    logits = torch.randn(T, E, generator=gen, device=dev)
    top, idx = logits.topk(K, dim=1)
    idx = idx.to(torch.int32)
    scores = torch.softmax(top, dim=1)
    x = torch.randn(T, H, generator=gen, device=dev).to(torch.bfloat16)
    dy = torch.randn(T, H, generator=gen, device=dev).to(torch.bfloat16)
    wgu = (torch.randn(E, H, 2, I, generator=gen, device=dev) /
           H ** 0.5).to(torch.bfloat16)
    wd = (torch.randn(E, I, H, generator=gen, device=dev) /
          I ** 0.5).to(torch.bfloat16)

    # 1. CUDA tensors against numpy arrays, and named errors.
    start = time.perf_counter()
    kernel = moe_mlir.compile(spec, target)
    result["compile_s"] = time.perf_counter() - start
    print("compiled for %s in %.3f s" % (target, result["compile_s"]))
    r = route(idx, scores, E, B)
    tensors = [x, dy, r["aff"], wgu, wd, r["tok"], r["blk"]]
    got = kernel(*tensors)
    synchronize()

    def host(t):
        t = t.cpu()
        if t.dtype == torch.bfloat16:
            import ml_dtypes  # noqa: PLC0415
            return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()

    want = kernel(*[host(t) for t in tensors])
    same = all(np.array_equal(host(g).view(np.uint8), w.view(np.uint8))
               for g, w in zip(got, want))
    failed += not same
    print("%s: %s tensors give the numpy call's bits" %
          ("PASS" if same else "FAIL", dev.type.upper()))
    bad = [(tensors[:2] + [r["aff"].double()] + tensors[3:],
            "input 'affinities' (#2): dtype torch.float64")]
    if dev.type == "cuda":
        bad.append(([x.cpu()] + tensors[1:],
                    "an sm90a kernel takes CUDA tensors"))
    failed += expect_value_errors(kernel, bad)

    # 2. MoEMLP gradients against R_mx (torch_ref, fp64 on the GPU). f32
    # master weights holding bf16 values: their f32 gradients come back
    # unrounded.
    mlp = MoEMLP(H, I, E, K, block_size=B, dtype=torch.float32, device=dev,
                 target=target)
    with torch.no_grad():
        mlp.wgu.copy_(wgu.float())
        mlp.wd.copy_(wd.float())
    xt = x.clone().requires_grad_(True)
    st = scores.clone().requires_grad_(True)
    y = mlp(xt, idx, st)
    y.backward(dy)
    synchronize()
    cfg = {"T": T, "H": H, "I": I, "E": E, "K": K, "B": B, "act": "swiglu",
           "quant": "e4m3", "rule": "rceil"}
    inp = {"x": x, "dy": dy, "affinities": r["aff"], "wgu": wgu, "wd": wd,
           "token_position_to_id": r["tok"], "block_to_expert": r["blk"]}
    start = time.perf_counter()
    ref = torch_ref.backward_mx(cfg, inp, device=dev)
    print("R_mx (torch_ref on %s) in %.1f s" % (dev.type, time.perf_counter()
                                                - start))
    d_scores_ref = ref["da"].reshape(T, E).gather(1, idx.long())
    result["rel_rmx"] = {}
    for name, g, w in (("dx", xt.grad, ref["dx"]),
                       ("dwgu", mlp.wgu.grad, ref["dwgu"]),
                       ("dwd", mlp.wd.grad, ref["dwd"]),
                       ("d_scores", st.grad, d_scores_ref)):
        err = rel(g, w.reshape(g.shape))
        ok = err <= 2e-3
        failed += not ok
        result["rel_rmx"][name] = err
        print("%-8s rel(R_mx) %.3e %s" % (name, err, "PASS" if ok else "FAIL"))

    # 3. The cost of a call.
    out = [torch.empty(s.shape, dtype=g.dtype, device=dev)
           for s, g in zip(kernel.outputs, got)]
    lib = _capi.lib()
    ins, keep_in = kernel._tensors(kernel.inputs,
                                   [t.data_ptr() for t in tensors])
    outs, keep_out = kernel._tensors(kernel.outputs,
                                     [t.data_ptr() for t in out])
    if dev.type == "cuda":
        stream = ctypes.c_void_p(torch.cuda.current_stream(dev).cuda_stream)

        def c_entry():
            if lib.moeExecutableRunOnDevice(kernel._handle, ins,
                                            len(tensors), outs, len(out),
                                            stream) != 0:
                raise moe_mlir.MoeMLIRError(_capi.last_error())
    else:
        def c_entry():
            if lib.moeExecutableRun(kernel._handle, ins, len(tensors), outs,
                                    len(out), None) != 0:
                raise moe_mlir.MoeMLIRError(_capi.last_error())

    layer = mlp.layer_spec(T)
    kernel_s, c_s, op_s = timed(
        [lambda: kernel(*tensors, out=out), c_entry,
         lambda: mlp_backward(x, dy, idx, scores, wgu, wd, layer, target,
                              mlp.kernel_choices)],
        a.repeat)
    del keep_in, keep_out
    overhead = kernel_s[0] / c_s[0] - 1
    result.update({"kernel_call_s": kernel_s[0], "c_entry_s": c_s[0],
                   "mlp_backward_s": op_s[0], "overhead": overhead})
    for what, (med, low) in (("Kernel call (Python)", kernel_s),
                             ("C entry (ctypes, args built once)", c_s),
                             ("moe_mlir::mlp_backward op", op_s)):
        print("%-36s median %.3f ms, min %.3f ms over %d" %
              (what, 1e3 * med, 1e3 * low, a.repeat))
    if a.explain and dev.type == "cuda":
        # Where a call's wall time goes: the device's busy time (kernels and
        # copies) of 5 calls against their wall time.
        from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415
        synchronize()
        with profile(activities=[ProfilerActivity.CPU,
                                 ProfilerActivity.CUDA]) as prof:
            start = time.perf_counter()
            for _ in range(5):
                kernel(*tensors, out=out)
            synchronize()
            wall = (time.perf_counter() - start) / 5
        busy = sum(e.device_time for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA) / 5e3
        print("explain: a call %.3f ms wall, %.3f ms busy on the device; per "
              "call %s" % (1e3 * wall, busy, {k: len(v) / 5 for k, v in
                                               transfers(prof).items()}))
    # Gated on the GPU only: on the host target a call is the CPU
    # reference lowering, whose run time drifts more than 5% between calls.
    if dev.type == "cuda":
        ok = overhead < 0.05
        failed += not ok
        verdict = "PASS" if ok else "FAIL"
    else:
        verdict = "measured"
    print("%s: Python call overhead %.2f%% over the C entry (< 5%% on the "
          "GPU)" % (verdict, 100 * overhead))

    # 4. A training step under the profiler: copies and synchronizations.
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        loss = (mlp(x, idx, scores).float() ** 2).mean()
        loss.backward()
        opt.step()

    step()
    synchronize()
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415
    activities = [ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        with torch.profiler.record_function("training step"):
            step()
        synchronize()
    if a.explain:
        # Each copy or synchronization call with the torch ops it ran in.
        for ev in prof.events():
            if ev.name.startswith(("cudaMemcpy", "cuMemcpy", "Memcpy") +
                                  SYNC_CALLS):
                chain, parent = [], ev.cpu_parent
                while parent is not None:
                    chain.append(parent.name)
                    parent = parent.cpu_parent
                print("  %s <- %s" % (ev.name, " <- ".join(chain) or "-"))
    moved = transfers(prof, region="training step")
    syncs = len(moved["syncs"])
    # What may go to the device: the compiled call's TMA descriptors
    # (CUtensorMap, 128 bytes each), uploaded on the stream.
    big = [n for n in moved["HtoD"] + moved["other"] if n > 128]
    result["step_transfers"] = {k: len(v) for k, v in moved.items()}
    ok = not moved["DtoH"] and not big and syncs == 0
    failed += not ok
    print("%s: a training step copies %d bytes to the host, %d bytes to the "
          "device (%d copies, the largest %d bytes: descriptors), makes %d "
          "device-to-device copies and %d synchronizations" % (
              "PASS" if ok else "FAIL", sum(moved["DtoH"]),
              sum(moved["HtoD"] + moved["other"]),
              len(moved["HtoD"] + moved["other"]),
              max(moved["HtoD"] + moved["other"] or [0]), len(moved["DtoD"]),
              syncs))
    result["pass"] = not failed
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print("moe_mlir %s check: %s" % (target, "FAIL" if failed else "PASS"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
