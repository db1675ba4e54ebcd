//===- HostAllocations.h - checked host allocations of generated code -----===//
//
// The pipelines' alloc-hooks option makes generated code allocate its host
// buffers through _mlir_memref_to_llvm_alloc / _aligned_alloc / _free,
// which the JIT defines here. Inside callEntry, a failed allocation does
// not return null to code that would write through it: it unwinds to
// callEntry (longjmp; generated code holds no C++ objects), which frees
// every buffer the call still held and reports the size that failed.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_JIT_HOSTALLOCATIONS_H
#define MOE_LIB_JIT_HOSTALLOCATIONS_H

#include <cstdint>

namespace moe::jit::detail {

/// The hooks, by the names finalize-memref-to-llvm's generic functions
/// call.
void *hostAlloc(uint64_t size);
void *hostAlignedAlloc(uint64_t alignment, uint64_t size);
void hostFree(void *pointer);

/// What callEntry reports about a call that ran out of host memory.
struct AllocationFailure {
  /// The request that failed, and what the call held at that moment.
  uint64_t requestedBytes = 0;
  uint64_t liveBytes = 0;
};

/// Calls `entry(args)`, tracking the hooks' allocations on this thread.
/// False when one failed: the call stopped there, and everything it had
/// allocated through the hooks and not freed is freed.
bool callEntry(void (*entry)(void **), void **args,
               AllocationFailure &failure);

} // namespace moe::jit::detail

#endif // MOE_LIB_JIT_HOSTALLOCATIONS_H
