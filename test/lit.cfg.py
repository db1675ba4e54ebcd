# -*- Python -*-
# lit configuration for moe-mlir. Substitutions:
#   moe-opt, moe-ref      the project's tools (from the build's bin/)
#   FileCheck, not, count  LLVM's test tools
#   %python               the interpreter the set-up script provisioned
#   %moe_src, %moe_obj    the source and build roots
import os
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MOE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "Unit", "corpus"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moe_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# use_default_substitutions() defines %python as lit's own interpreter;
# the tests need the one with the pinned packages.
config.substitutions = [s for s in config.substitutions if s[0] != "%python"]
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%moe_src", config.moe_src_root))
config.substitutions.append(("%moe_obj", config.moe_obj_root))
llvm_config.with_environment("PYTHONPATH", os.path.join(config.moe_src_root, "python"), append_path=True)
# The JIT's disk cache is on by default (~/.cache/moe-mlir): off for the
# tests, which compile afresh unless they name a cache directory.
config.environment["MOE_MLIR_CACHE_DIR"] = ""

# A sanitizer build (the `sanitize` preset, scripts/sanitize.sh). The
# static MLIR/LLVM libraries are not instrumented, and BumpPtrAllocator
# poisons its slabs only in instrumented code, whose inline copies the
# linker may hand to uninstrumented callers: manual poisoning is off. A
# failed allocation returns null, as the C library's would (the tests of
# out-of-memory errors ask for more than ASan allows). Tests
# that load the project's libraries into an uninstrumented interpreter
# (Python) say `UNSUPPORTED: sanitizer`.
if config.moe_sanitizer:
    config.available_features.add("sanitizer")
    config.environment["ASAN_OPTIONS"] = "allow_user_poisoning=0:allocator_may_return_null=1"
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1"
# The libFuzzer harnesses (tools/moe-fuzzers), built by the sanitize preset.
if os.path.exists(os.path.join(config.moe_tools_dir, "moe-ir-fuzzer")):
    config.available_features.add("fuzzers")

# Python modules that some tests need in %python: `torch` for the torch
# reference (python/moe_crosscheck/torch_ref.py) and moe_mlir's torch
# support (scripts/setup.sh installs it unless MOE_SKIP_TORCH=1; the GPU
# machine has it), `ml_dtypes` for the numpy reference it is compared with.
def python_has(module):
    try:
        return subprocess.run([config.python_executable, "-c", "import " + module],
                              capture_output=True).returncode == 0
    except OSError:
        return False


for module in ("torch", "ml_dtypes"):
    if python_has(module):
        config.available_features.add(module)

tool_dirs = [config.moe_tools_dir, config.llvm_tools_dir]
tools = [ToolSubst("moe-opt", unresolved="fatal"), ToolSubst("moe-ref", unresolved="fatal")]
if "fuzzers" in config.available_features:
    tools += [ToolSubst(name, unresolved="fatal") for name in
              ("moe-ir-fuzzer", "moe-ir-gpu-fuzzer", "moe-layer-fuzzer", "moe-npy-fuzzer")]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# Executed tests (test/Integration): mlir-runner and its runtime libraries.
# %mlir_runner_utils precedes %mlir_runner, which is a prefix of it.
llvm_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
config.substitutions.append(("%mlir_c_runner_utils", os.path.join(llvm_lib_dir, "libmlir_c_runner_utils.so")))
config.substitutions.append(("%mlir_runner_utils", os.path.join(llvm_lib_dir, "libmlir_runner_utils.so")))
config.substitutions.append(("%mlir_runner", os.path.join(config.llvm_tools_dir, "mlir-runner")))

# GPU code generation tests: ptxas of the CUDA toolkit (CUDA_HOME, else
# /usr/local/cuda). Tests that run it say `REQUIRES: ptxas`.
ptxas = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
    # The toolkit root, for gpu-module-to-binary's `toolkit` option.
    config.substitutions.append(("%cuda_root", os.path.dirname(os.path.dirname(ptxas))))
# nvcc builds the device probes of scripts/device/probes (`REQUIRES: nvcc`).
nvcc = os.path.join(os.path.dirname(ptxas), "nvcc")
if os.path.exists(nvcc):
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", nvcc))
