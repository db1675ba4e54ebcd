"""What a profiled region moved between host and device, from a
torch.profiler trace.

    with torch.profiler.profile(activities=[CPU, CUDA]) as prof:
        step()
    print(moe_mlir.profiling.transfers(prof))

``transfers`` reads the trace's copy activities (CUPTI records each one with
its direction and bytes) and its synchronization calls, so a training step
can be shown to copy no activation to or from the host: what the tests and
examples/python/train_moe.py check.
"""
import json
import os
import tempfile

__all__ = ["transfers", "SYNC_CALLS"]

# CUDA runtime and driver calls that wait for the device.
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize",
              "cudaEventSynchronize", "cuStreamSynchronize",
              "cuCtxSynchronize", "cuEventSynchronize")


def _inside(event, region):
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == region:
            return True
        parent = parent.cpu_parent
    return False


def transfers(prof, region=None):
    """{"HtoD": [bytes, ...], "DtoH": [...], "DtoD": [...], "other": [...],
    "syncs": [name, ...]} of the profiled region, copies in trace order.
    A synchronous cudaMemcpy counts as a synchronization too. With
    `region`, the name of a torch.profiler.record_function block, only the
    synchronizations inside it count (the profiler and the caller may
    synchronize around it); copies are the device's activities, which carry
    no such nesting, so all of them count."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    finally:
        os.unlink(path)
    out = {"HtoD": [], "DtoH": [], "DtoD": [], "other": [], "syncs": []}
    for ev in events:
        name = ev.get("name", "")
        if ev.get("cat") == "gpu_memcpy" or name.startswith("Memcpy "):
            kind = name.split()[1] if len(name.split()) > 1 else ""
            size = int(ev.get("args", {}).get("bytes", -1))
            out[kind if kind in ("HtoD", "DtoH", "DtoD") else "other"].append(
                size)
    for ev in prof.events():
        if ev.name in SYNC_CALLS or ev.name == "cudaMemcpy":
            if region is None or _inside(ev, region):
                out["syncs"].append(ev.name)
    return out
