//===- SanitizerDefaults.cpp - ASan defaults of the fuzz harnesses --------===//
//
// The harnesses link the static MLIR/LLVM libraries of the system, which are
// not instrumented. LLVM's BumpPtrAllocator poisons its slabs only in
// instrumented code, and the linker may keep an instrumented copy of its
// inline functions for uninstrumented callers, whose writes then look like
// use-after-poison. Manual poisoning is off, as in test/lit.cfg.py; ASan
// still checks every heap, stack and global access.
//
//===----------------------------------------------------------------------===//
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}
