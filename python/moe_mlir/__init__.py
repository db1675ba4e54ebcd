"""moe-mlir from Python: compile a MoE layer's MXFP8 backward and run it.

    import moe_mlir
    kernel = moe_mlir.compile("T=256,H=256,I=128,E=4,K=2,B=128")
    dx, da, dwgu, dwd = kernel(x, dy, affinities, wgu, wd, tok, blk)

``build_routing`` and ``masked_affinities`` turn a router's top-k indices
and scores [T, K] into the layer's routing inputs.

``compile`` takes the layer spelling of ``moe-run --layer`` (or MLIR text
with ``module=True``) and a target, and returns a ``Kernel``. A call takes
the inputs in signature order (``kernel.inputs``) as numpy arrays and
returns new arrays for the outputs (``kernel.outputs``), or writes the
arrays given as ``out``. torch tensors work the same way: CPU tensors for
the host target; CUDA tensors for sm90a, where the call is queued on the
device's current stream with no copy and no synchronization. numpy arrays
work on every target (sm90a copies them to the device and back). Every input is checked before anything runs: its
dtype (bf16 is ``ml_dtypes.bfloat16``), shape and C-contiguity, each error
naming the tensor; the library then checks pointers and the routing layout
as the C++ API does. The library is the C API of libMoeJIT.so
(include/moe-c/MoeMLIR.h) through ctypes; the installed package carries
its own copy, or ``$MOE_MLIR_LIBRARY`` names one.
"""
import ctypes
import threading

import ml_dtypes
import numpy as np

from . import _capi

__all__ = ["compile", "Kernel", "TensorSpec", "MoeMLIRError",
           "build_routing", "masked_affinities", "quantize_mx",
           "check_kernel_choices"]

_DTYPES = {0: ml_dtypes.bfloat16, 1: np.float32, 2: np.int32,
           3: ml_dtypes.float8_e4m3fn, 4: ml_dtypes.float8_e5m2,
           5: ml_dtypes.float8_e8m0fnu}
_DTYPE_CODES = {np.dtype(v).name: k for k, v in _DTYPES.items()}
_TORCH_DTYPE_NAMES = {"bfloat16": "bfloat16", "float32": "float32",
                      "int32": "int32", "float8_e4m3fn": "float8_e4m3fn",
                      "float8_e5m2": "float8_e5m2",
                      "float8_e8m0fnu": "float8_e8m0fnu"}
_TARGETS = {"host": 0, "sm90a": 1, "sm_90a": 1}


def _torch():
    import torch  # noqa: PLC0415 (optional dependency)
    return torch


def _is_torch(value):
    """Whether `value` is a torch tensor, without importing torch."""
    return type(value).__module__.startswith("torch") and hasattr(
        value, "data_ptr")


class _TorchDTypes:
    """numpy dtype name -> torch dtype, resolved at first use."""

    def __getitem__(self, name):
        return getattr(_torch(), _TORCH_DTYPE_NAMES[name])


_TORCH_DTYPES = _TorchDTypes()


class MoeMLIRError(RuntimeError):
    """An error of the compiler or of a run, with the library's message."""


class TensorSpec:
    """One input or output: name, numpy dtype and shape."""

    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, np.dtype(dtype), tuple(shape)

    def __repr__(self):
        return "TensorSpec(%r, %s, %s)" % (self.name, self.dtype, self.shape)


class Kernel:
    """A compiled function (see the module docstring)."""

    def __init__(self, handle):
        lib = _capi.lib()
        self._handle = ctypes.c_void_p(handle)
        self._lib = lib

        def specs(is_output, count):
            out = []
            for i in range(count):
                rank = lib.moeExecutableTensorRank(self._handle, is_output, i)
                out.append(TensorSpec(
                    lib.moeExecutableTensorName(self._handle, is_output,
                                                i).decode(),
                    _DTYPES[lib.moeExecutableTensorDType(self._handle,
                                                         is_output, i)],
                    [lib.moeExecutableTensorDim(self._handle, is_output, i, d)
                     for d in range(rank)]))
            return out

        self.inputs = specs(0, lib.moeExecutableNumInputs(self._handle))
        self.outputs = specs(1, lib.moeExecutableNumOutputs(self._handle))
        self.target = lib.moeExecutableTarget(self._handle).decode()
        self.gpu_mode = lib.moeExecutableGpuMode(self._handle).decode()
        self.last_call_seconds = None
        self._plan = None
        self._local = threading.local()

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            self._lib.moeExecutableDestroy(handle)
            self._handle = None

    def _torch_plan(self):
        """(dtype, shape) of every input and output as torch spells them."""
        if self._plan is None:
            self._plan = tuple(
                [(_TORCH_DTYPES[s.dtype.name], s.shape) for s in specs]
                for specs in (self.inputs, self.outputs))
        return self._plan

    def _check_torch(self, kind, index, spec, tensor, device):
        what = "%s '%s' (#%d)" % (kind, spec.name, index)
        torch = _torch()
        if not isinstance(tensor, torch.Tensor):
            raise TypeError("%s: expected a torch tensor like the other "
                            "arguments, got %s" % (what, type(tensor).__name__))
        want = _TORCH_DTYPES[spec.dtype.name]
        if tensor.dtype != want:
            raise ValueError("%s: dtype %s, expected %s" %
                             (what, tensor.dtype, want))
        if tuple(tensor.shape) != spec.shape:
            raise ValueError("%s: shape %s, expected %s" %
                             (what, list(tensor.shape), list(spec.shape)))
        if not tensor.is_contiguous():
            raise ValueError("%s: not contiguous (use .contiguous())" % what)
        if tensor.device != device:
            raise ValueError("%s: on %s, expected %s (%s target)" %
                             (what, tensor.device, device, self.target))

    def _call_torch(self, inputs, out):
        torch = _torch()
        if self.target == "host":
            device = torch.device("cpu")
        else:
            first = inputs[0]
            device = first.device if isinstance(first, torch.Tensor) else None
            if device is None or device.type != "cuda":
                raise ValueError("input '%s' (#0): an sm90a kernel takes CUDA "
                                 "tensors, got %s" % (
                                     self.inputs[0].name,
                                     getattr(first, "device", type(first))))
        if out is None:
            out = [torch.empty(s.shape, dtype=_TORCH_DTYPES[s.dtype.name],
                               device=device) for s in self.outputs]
        elif len(out) != len(self.outputs):
            raise TypeError("out: %d tensors expected, got %d" %
                            (len(self.outputs), len(out)))
        plan = self._torch_plan()
        for kind, specs, wants, tensors in (
                ("input", self.inputs, plan[0], inputs),
                ("output", self.outputs, plan[1], out)):
            for i, (want, tensor) in enumerate(zip(wants, tensors)):
                # The common case in one test; the named error otherwise.
                if not (isinstance(tensor, torch.Tensor) and
                        tensor.dtype == want[0] and tensor.shape == want[1]
                        and tensor.device == device and
                        tensor.is_contiguous()):
                    self._check_torch(kind, i, specs[i], tensor, device)
        ins, outs = self._call_tables()
        for table, tensors in ((ins, inputs), (outs, out)):
            for entry, tensor in zip(table, tensors):
                entry.data = tensor.data_ptr()
        if self.target == "host":
            seconds = ctypes.c_double(0.0)
            status = self._lib.moeExecutableRun(
                self._handle, ins, len(inputs), outs, len(out),
                ctypes.byref(seconds))
            self.last_call_seconds = seconds.value
        else:
            # Queued on the current stream of the tensors' device, as torch
            # queues its own kernels; nothing synchronizes.
            stream = torch.cuda.current_stream(device).cuda_stream
            status = self._lib.moeExecutableRunOnDevice(
                self._handle, ins, len(inputs), outs, len(out),
                ctypes.c_void_p(stream))
            self.last_call_seconds = None
        if status != 0:
            raise MoeMLIRError(_capi.last_error())
        return tuple(out)

    def _call_tables(self):
        """The C arrays of MoeTensor of a torch call, built once per thread
        (shapes and dtypes never change; the caller sets the pointers), so
        that a call costs the C entry plus a few microseconds."""
        local = self._local
        tables = getattr(local, "tables", None)
        if tables is None:
            tables = (self._tensors(self.inputs, [0] * len(self.inputs)),
                      self._tensors(self.outputs, [0] * len(self.outputs)))
            local.tables = tables
        return tables[0][0], tables[1][0]

    @staticmethod
    def _tensors(specs, pointers):
        """A C array of MoeTensor over `pointers`, and the shape arrays it
        points into (kept alive by the caller)."""
        table = (_capi.Tensor * len(pointers))()
        shapes = []
        for t, spec, pointer in zip(table, specs, pointers):
            shape = (ctypes.c_int64 * len(spec.shape))(*spec.shape)
            shapes.append(shape)
            t.data = pointer
            t.dtype = _DTYPE_CODES[spec.dtype.name]
            t.rank = len(spec.shape)
            t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        return table, shapes

    @staticmethod
    def _check(kind, index, spec, array):
        what = "%s '%s' (#%d)" % (kind, spec.name, index)
        if not isinstance(array, np.ndarray):
            raise TypeError("%s: expected a numpy array, got %s" %
                            (what, type(array).__name__))
        if array.dtype != spec.dtype:
            raise ValueError("%s: dtype %s, expected %s" %
                             (what, array.dtype, spec.dtype))
        if array.shape != spec.shape:
            raise ValueError("%s: shape %s, expected %s" %
                             (what, list(array.shape), list(spec.shape)))
        if not array.flags.c_contiguous:
            raise ValueError("%s: not C-contiguous (use "
                             "numpy.ascontiguousarray)" % what)
        if kind == "output" and not array.flags.writeable:
            raise ValueError("%s: read-only" % what)

    def __call__(self, *inputs, out=None):
        if len(inputs) != len(self.inputs):
            raise TypeError("kernel takes %d inputs (%s), got %d" % (
                len(self.inputs), ", ".join(s.name for s in self.inputs),
                len(inputs)))
        if inputs and _is_torch(inputs[0]):
            return self._call_torch(inputs, out)
        if out is None:
            out = [np.empty(s.shape, s.dtype) for s in self.outputs]
        elif len(out) != len(self.outputs):
            raise TypeError("out: %d arrays expected, got %d" %
                            (len(self.outputs), len(out)))
        for kind, specs, arrays in (("input", self.inputs, inputs),
                                    ("output", self.outputs, out)):
            for i, (spec, array) in enumerate(zip(specs, arrays)):
                self._check(kind, i, spec, array)

        ins, keep_in = self._tensors(self.inputs,
                                     [a.ctypes.data for a in inputs])
        outs, keep_out = self._tensors(self.outputs,
                                       [a.ctypes.data for a in out])
        seconds = ctypes.c_double(0.0)
        status = self._lib.moeExecutableRun(self._handle, ins, len(inputs),
                                            outs, len(out),
                                            ctypes.byref(seconds))
        del keep_in, keep_out
        if status != 0:
            raise MoeMLIRError(_capi.last_error())
        self.last_call_seconds = seconds.value
        return tuple(out)


class Compiler:
    """A compiler with its caches (one per process is plenty)."""

    def __init__(self, cache_dir=None):
        """cache_dir: the disk cache (None: $MOE_MLIR_CACHE_DIR, else
        ~/.cache/moe-mlir; "": none)."""
        lib = _capi.lib()
        self._lib = lib
        self._handle = ctypes.c_void_p(lib.moeCompilerCreate(
            None if cache_dir is None else cache_dir.encode()))

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            self._lib.moeCompilerDestroy(handle)
            self._handle = None

    def compile(self, source, target="host", *, module=False, opt_level=2,
                fuse=True, mma_path=None, gpu_mode=None, entry=None,
                source_name=None, kernel_choices=None):
        """``kernel_choices`` (GPU targets): the kernel choices of
        include/moe/Pipelines/KernelChoices.def as a mapping of option
        names to values, ``{"weight-reuse": 2, "swap-weights": True}``, or
        as text, ``"weight-reuse=2,swap-weights=true"``; an unknown option
        or a bad value raises MoeMLIRError before anything compiles."""
        if target not in _TARGETS:
            raise ValueError("target %r: expected one of %s" %
                             (target, ", ".join(sorted(_TARGETS))))
        options = _capi.CompileOptions()
        self._lib.moeCompileOptionsInit(ctypes.byref(options))
        options.target = _TARGETS[target]
        options.fuse = int(bool(fuse))
        options.optLevel = int(opt_level)
        encode = lambda s: s.encode() if s else None  # noqa: E731
        options.mmaPath = encode(mma_path)
        options.gpuMode = encode(gpu_mode)
        options.entry = encode(entry)
        options.sourceName = encode(source_name)
        options.kernelChoices = encode(_kernel_choices_text(kernel_choices))
        build = (self._lib.moeCompileModule if module
                 else self._lib.moeCompileLayer)
        handle = build(self._handle, source.encode(), ctypes.byref(options))
        if not handle:
            raise MoeMLIRError(_capi.last_error())
        return Kernel(handle)


def check_kernel_choices(choices):
    """Raises MoeMLIRError (or TypeError) unless ``compile`` would take
    ``choices`` as its ``kernel_choices``; returns their text. Nothing is
    compiled."""
    text = _kernel_choices_text(choices)
    if text is not None and _capi.lib().moeCheckKernelChoices(
            text.encode()) != 0:
        raise MoeMLIRError(_capi.last_error())
    return text


def _kernel_choices_text(choices):
    """The C API's text of ``kernel_choices``: a mapping of the options of
    KernelChoices.def to values (``{"weight-reuse": 2, "swap-weights":
    True}``) or that text itself (``"weight-reuse=2,swap-weights=true"``);
    the library checks the names and values."""
    if choices is None or isinstance(choices, str):
        return choices
    if not hasattr(choices, "items"):
        raise TypeError("kernel_choices: expected a mapping of option names "
                        "to values or a string, got %s" %
                        type(choices).__name__)
    pairs = []
    for name, value in choices.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        pairs.append("%s=%s" % (name, value))
    return ",".join(pairs)


_default = None


def compile(source, target="host", **options):  # noqa: A001
    """Compiles a layer (``"T=...,H=...,..."``) or, with ``module=True``,
    MLIR text, for ``target`` ("host" or "sm90a") with the process's
    compiler; see ``Compiler.compile`` for the options."""
    global _default
    if _default is None:
        _default = Compiler()
    return _default.compile(source, target, **options)


def _topk(topk_idx, name="topk_idx"):
    topk_idx = np.ascontiguousarray(topk_idx, dtype=np.int32)
    if topk_idx.ndim != 2:
        raise ValueError("%s: expected a [T, K] array, got shape %s" %
                         (name, list(topk_idx.shape)))
    return topk_idx


def build_routing(topk_idx, num_experts, block_size):
    """(token_position_to_id [N*B], block_to_expert [N]) int32 arrays of the
    blocked layout for the top-k expert indices [T, K]: what moe.route
    computes (experts ascending, each expert's tokens ascending, spare
    blocks for expert E-1). Raises MoeMLIRError for an index outside
    [0, E) or an expert twice in a token's row, naming the token."""
    idx = _topk(topk_idx)
    T, K = idx.shape
    lib = _capi.lib()
    n = lib.moeRoutingNumBlocks(T, K, num_experts, block_size)
    if n < 0:
        raise MoeMLIRError(_capi.last_error())
    tok = np.empty(n * block_size, np.int32)
    blk = np.empty(n, np.int32)
    if lib.moeBuildRouting(idx.ctypes.data, T, K, num_experts, block_size,
                           tok.ctypes.data, blk.ctypes.data) != 0:
        raise MoeMLIRError(_capi.last_error())
    return tok, blk


def masked_affinities(topk_idx, topk_scores, num_experts):
    """The layer's affinities [T*E] float32: scores[t, k] at t*E + idx[t, k],
    zero elsewhere."""
    idx = _topk(topk_idx)
    scores = np.ascontiguousarray(topk_scores, dtype=np.float32)
    if scores.shape != idx.shape:
        raise ValueError("topk_scores: shape %s, expected %s" %
                         (list(scores.shape), list(idx.shape)))
    out = np.empty(idx.shape[0] * num_experts, np.float32)
    if _capi.lib().moeMaskedAffinities(idx.ctypes.data, scores.ctypes.data,
                                       idx.shape[0], idx.shape[1],
                                       num_experts, out.ctypes.data) != 0:
        raise MoeMLIRError(_capi.last_error())
    return out


def quantize_mx(values, element="e4m3", rule="rceil"):
    """(codes, scales): `values` MX-quantized along its last axis in blocks
    of 32 (a multiple of 32 long), as ml_dtypes float8 codes of the same
    shape and float8_e8m0fnu scales [..., n / 32]. What a weights=mx layer
    takes: quantize_mx(wgu) for wgu / wgu_scales, quantize_mx(wd) for
    wd / wd_scales."""
    array = np.ascontiguousarray(values, dtype=np.float32)
    if array.ndim == 0:
        raise ValueError("quantize_mx: expected an array, got a scalar")
    cols = array.shape[-1]
    rows = array.size // cols if cols else 0
    codes = np.empty(array.shape, np.uint8)
    scales = np.empty(array.shape[:-1] + (cols // 32,), np.uint8)
    if _capi.lib().moeQuantizeMX(array.ctypes.data, rows, cols,
                                 element.encode(), rule.encode(),
                                 codes.ctypes.data, scales.ctypes.data) != 0:
        raise MoeMLIRError(_capi.last_error())
    code_type = {"e4m3": ml_dtypes.float8_e4m3fn,
                 "e5m2": ml_dtypes.float8_e5m2}[element]
    return codes.view(code_type), scales.view(ml_dtypes.float8_e8m0fnu)
