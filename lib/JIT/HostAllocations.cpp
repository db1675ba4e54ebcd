//===- HostAllocations.cpp - checked host allocations of generated code ---===//
//
// Every hook allocation carries a header just before the pointer handed
// out: the base pointer to free, its size, and its links in the list of the
// call in progress on this thread (if any). The list needs no allocation of
// its own, so running out of memory cannot break the bookkeeping.
//
//===----------------------------------------------------------------------===//
#include "HostAllocations.h"

#include <csetjmp>
#include <cstddef>
#include <cstdlib>
#include <cstring>

using namespace moe::jit::detail;

namespace {

struct Header;

/// The allocations of one callEntry, and where a failure unwinds to.
struct Call {
  std::jmp_buf unwind;
  Header *head = nullptr;
  uint64_t liveBytes = 0;
  AllocationFailure failure;
};

struct alignas(16) Header {
  void *base;
  uint64_t size;
  Call *call;
  Header *prev, *next;
};

thread_local Call *currentCall = nullptr;

/// The header ends where the user pointer starts: `offset` bytes into the
/// block, the header's size rounded up to the alignment (a power of two,
/// at least 16).
uint64_t headerOffset(uint64_t alignment) {
  return (sizeof(Header) + alignment - 1) / alignment * alignment;
}

Header *headerOf(void *pointer) {
  return reinterpret_cast<Header *>(static_cast<char *>(pointer) -
                                    sizeof(Header));
}

void link(Header *h, Call *call) {
  h->call = call;
  h->prev = nullptr;
  h->next = call ? call->head : nullptr;
  if (!call)
    return;
  if (call->head)
    call->head->prev = h;
  call->head = h;
  call->liveBytes += h->size;
}

void unlink(Header *h) {
  Call *call = h->call;
  if (!call)
    return;
  if (h->prev)
    h->prev->next = h->next;
  else
    call->head = h->next;
  if (h->next)
    h->next->prev = h->prev;
  call->liveBytes -= h->size;
}

[[noreturn]] void fail(Call *call, uint64_t size) {
  call->failure.requestedBytes = size;
  call->failure.liveBytes = call->liveBytes;
  std::longjmp(call->unwind, 1);
}

void *allocate(uint64_t alignment, uint64_t size) {
  Call *call = currentCall;
  if (alignment < alignof(Header))
    alignment = alignof(Header);
  uint64_t offset = headerOffset(alignment);
  void *base = nullptr;
  if (size > UINT64_MAX - offset ||
      posix_memalign(&base, alignment, size + offset) != 0)
    base = nullptr;
  if (!base) {
    if (call)
      fail(call, size);
    return nullptr;
  }
  char *user = static_cast<char *>(base) + offset;
  Header *h = headerOf(user);
  h->base = base;
  h->size = size;
  link(h, call);
  return user;
}

/// Separate from callEntry so that nothing whose value changes after
/// setjmp lives in this frame.
bool callUnwindable(void (*entry)(void **), void **args, Call &call) {
  if (setjmp(call.unwind) != 0)
    return false;
  entry(args);
  return true;
}

} // namespace

void *moe::jit::detail::hostAlloc(uint64_t size) {
  return allocate(alignof(std::max_align_t), size);
}

void *moe::jit::detail::hostAlignedAlloc(uint64_t alignment, uint64_t size) {
  // Not a power of two: the lowering never asks for that; treat it as the
  // default alignment rather than fail.
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    alignment = alignof(std::max_align_t);
  return allocate(alignment, size);
}

void moe::jit::detail::hostFree(void *pointer) {
  if (!pointer)
    return;
  Header *h = headerOf(pointer);
  unlink(h);
  std::free(h->base);
}

bool moe::jit::detail::callEntry(void (*entry)(void **), void **args,
                                 AllocationFailure &failure) {
  Call call;
  Call *outer = currentCall;
  currentCall = &call;
  bool completed = callUnwindable(entry, args, call);
  currentCall = outer;
  if (completed) {
    // Results go to the caller's buffers, so nothing should be left; if
    // something is, it stays allocated (a later free finds no call).
    for (Header *h = call.head; h; h = h->next)
      h->call = nullptr;
    return true;
  }
  failure = call.failure;
  for (Header *h = call.head; h;) {
    Header *next = h->next;
    std::free(h->base);
    h = next;
  }
  return false;
}
