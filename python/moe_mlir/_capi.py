"""ctypes declarations of include/moe-c/MoeMLIR.h and the library lookup."""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


class CompileOptions(ctypes.Structure):
    _fields_ = [("target", ctypes.c_int), ("fuse", ctypes.c_int32),
                ("optLevel", ctypes.c_int32), ("entry", ctypes.c_char_p),
                ("mmaPath", ctypes.c_char_p), ("gpuMode", ctypes.c_char_p),
                ("sourceName", ctypes.c_char_p),
                ("kernelChoices", ctypes.c_char_p)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


def library_path():
    """$MOE_MLIR_LIBRARY, else the copy installed with the package."""
    path = os.environ.get("MOE_MLIR_LIBRARY")
    if path:
        return path
    return os.path.join(_HERE, "lib", "libMoeJIT.so")


_lib = None


def lib():
    """The loaded library, with its prototypes; an OSError says where it
    looked."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if not os.path.exists(path):
        raise OSError(
            "moe_mlir: libMoeJIT.so not found at %s (build the project with "
            "scripts/build.sh before `pip install ./python`, or set "
            "MOE_MLIR_LIBRARY to the library)" % path)
    so = ctypes.CDLL(path)
    p = ctypes.c_void_p
    i32, i64 = ctypes.c_int32, ctypes.c_int64
    sigs = {
        "moeGetLastError": (ctypes.c_char_p, []),
        "moeCompileOptionsInit": (None, [ctypes.POINTER(CompileOptions)]),
        "moeCheckKernelChoices": (i32, [ctypes.c_char_p]),
        "moeCompilerCreate": (p, [ctypes.c_char_p]),
        "moeCompilerDestroy": (None, [p]),
        "moeCompileLayer": (p, [p, ctypes.c_char_p,
                                ctypes.POINTER(CompileOptions)]),
        "moeCompileModule": (p, [p, ctypes.c_char_p,
                                 ctypes.POINTER(CompileOptions)]),
        "moeExecutableDestroy": (None, [p]),
        "moeExecutableNumInputs": (i32, [p]),
        "moeExecutableNumOutputs": (i32, [p]),
        "moeExecutableTensorName": (ctypes.c_char_p, [p, i32, i32]),
        "moeExecutableTensorDType": (i32, [p, i32, i32]),
        "moeExecutableTensorRank": (i32, [p, i32, i32]),
        "moeExecutableTensorDim": (i64, [p, i32, i32, i32]),
        "moeExecutableTarget": (ctypes.c_char_p, [p]),
        "moeExecutableGpuMode": (ctypes.c_char_p, [p]),
        "moeExecutableRun": (i32, [p, ctypes.POINTER(Tensor), i32,
                                   ctypes.POINTER(Tensor), i32,
                                   ctypes.POINTER(ctypes.c_double)]),
        "moeExecutableRunOnDevice": (i32, [p, ctypes.POINTER(Tensor), i32,
                                           ctypes.POINTER(Tensor), i32, p]),
        "moeRoutingNumBlocks": (i64, [i64, i64, i64, i64]),
        "moeBuildRouting": (i32, [p, i64, i64, i64, i64, p, p]),
        "moeMaskedAffinities": (i32, [p, p, i64, i64, i64, p]),
        "moeQuantizeMX": (i32, [p, i64, i64, ctypes.c_char_p,
                                ctypes.c_char_p, p, p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(so, name)
        fn.restype = restype
        fn.argtypes = argtypes
    _lib = so
    return so


def last_error():
    return lib().moeGetLastError().decode("utf-8", "replace")
