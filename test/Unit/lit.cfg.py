# -*- Python -*-
# Runs the GoogleTest binaries (build/bin/*Tests) through lit, so that
# `check-moe` is the one runner for every test.
import os

import lit.formats

config.name = "MOE-Unit"
config.suffixes = []
config.test_exec_root = os.path.join(config.moe_obj_root, "bin")
config.test_source_root = config.test_exec_root
config.test_format = lit.formats.GoogleTest(config.llvm_build_mode, "Tests")
# The JIT's disk cache is on by default: off for the unit tests.
config.environment["MOE_MLIR_CACHE_DIR"] = ""
# A sanitizer build (the `sanitize` preset): the options of test/lit.cfg.py.
if config.moe_sanitizer:
    config.environment["ASAN_OPTIONS"] = "allow_user_poisoning=0:allocator_may_return_null=1"
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1"
