//===- FakeCuda.h - Controls of the stand-in libcuda ------------*- C++ -*-===//
//
// What the unit tests can ask of and tell the fake driver (FakeCuda.cpp),
// which the test binary links and the runtime dlopens by path.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_UNITTESTS_RUNTIME_FAKECUDA_H
#define MOE_UNITTESTS_RUNTIME_FAKECUDA_H

#include <cstdint>

/// Arguments of the last cuLaunchKernel or cuLaunchKernelEx.
struct FakeLaunch {
  uintptr_t function;
  unsigned grid[3];
  unsigned block[3];
  unsigned cluster[3];
  unsigned smem;
  uintptr_t stream;
};

/// Arguments of the last cuTensorMapEncodeTiled (entries past rank zero).
struct FakeTensorMapCall {
  int dataType;
  unsigned rank;
  void *globalAddress;
  uint64_t globalDim[5];
  uint64_t globalStrides[4];
  unsigned boxDim[5];
  unsigned elementStrides[5];
  int interleave, swizzle, l2Promotion, oobFill;
};

/// Objects the fake driver holds now.
struct FakeLiveObjects {
  int modules, streams, events, allocations, hostRegistrations, pools;
};

/// One driver call: its exported name, and its stream argument (0 for the
/// legacy stream and for calls that take none).
struct FakeCall {
  const char *symbol;
  uintptr_t stream;
};

extern "C" {
/// Forgets call counts, queued failures and recorded arguments.
void fakeCudaReset();
/// The next call of `symbol` (exported name, e.g. "cuMemAlloc_v2") returns
/// `result`.
void fakeCudaFailNext(const char *symbol, int result);
int fakeCudaCalls(const char *symbol);
/// The calls made since fakeCudaReset, in order (all but cuGetErrorName and
/// cuGetErrorString).
int fakeCudaCallCount();
FakeCall fakeCudaCallAt(int index);
/// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD of the last pool it was set on, or 0.
uint64_t fakeCudaLastReleaseThreshold();
FakeLiveObjects fakeCudaLive();
FakeLaunch fakeCudaLastLaunch();
FakeTensorMapCall fakeCudaLastTensorMap();
/// CU_JIT_OPTIMIZATION_LEVEL of the last module load, -1 when not given.
int64_t fakeCudaLastOptLevel();
/// The last CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES set, or -1.
int64_t fakeCudaLastSmemAttribute();
int64_t fakeCudaLastHostRegisterBytes();
/// Contexts pushed and not popped on this thread.
int fakeCudaContextDepth();
}

#endif // MOE_UNITTESTS_RUNTIME_FAKECUDA_H
