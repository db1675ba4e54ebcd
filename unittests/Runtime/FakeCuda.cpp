//===- FakeCuda.cpp - A stand-in libcuda for the runtime's unit tests -----===//
//
// Built as a shared library that exports the driver functions the runtime
// resolves, under the same (versioned) names, defined with cuda.h's own
// prototypes. "Device" memory is host memory, so copies and fills can be
// checked; modules, functions, streams, events and memory pools are counted
// objects. Every call is counted and logged in order with its stream, any
// call can be made to fail once, and the arguments of the last launch and
// tensor-map encode are kept, all reachable through the fakeCuda* control
// functions declared in FakeCuda.h.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

struct FakeState {
  std::mutex mutex;
  std::map<std::string, int> calls;
  std::vector<FakeCall> log;
  std::map<std::string, CUresult> pendingFailures;
  std::set<void *> allocations;
  std::set<void *> hostRegistrations;
  std::set<uintptr_t> modules, streams, events, pools;
  uintptr_t nextHandle = 0x1000;
  FakeLaunch lastLaunch = {};
  FakeTensorMapCall lastTensorMap = {};
  int64_t lastOptLevel = -1;
  int64_t lastSmemAttribute = -1;
  int64_t lastHostRegisterBytes = -1;
  int64_t tensorMapEncodes = 0;
  uint64_t lastReleaseThreshold = 0;
};

FakeState &state() {
  static FakeState *fake = new FakeState();
  return *fake;
}

thread_local int contextDepth = 0;
thread_local CUcontext currentContext = nullptr;
/// The one primary context the fake hands out.
CUcontext primaryContext() {
  return reinterpret_cast<CUcontext>(uintptr_t(0xc0de));
}

/// Counts and logs a call of `symbol` on `stream` and returns the failure
/// queued for it, if any.
CUresult enter(const char *symbol, CUstream stream = nullptr) {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  ++fake.calls[symbol];
  fake.log.push_back({symbol, reinterpret_cast<uintptr_t>(stream)});
  auto pending = fake.pendingFailures.find(symbol);
  if (pending == fake.pendingFailures.end())
    return CUDA_SUCCESS;
  CUresult result = pending->second;
  fake.pendingFailures.erase(pending);
  return result;
}

uintptr_t newHandle(std::set<uintptr_t> &into) {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  uintptr_t handle = fake.nextHandle;
  fake.nextHandle += 0x10;
  into.insert(handle);
  return handle;
}

CUresult dropHandle(std::set<uintptr_t> &from, uintptr_t handle) {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  return from.erase(handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

#define FAKE_ENTER(fn)                                                         \
  if (CUresult injected = enter(#fn))                                          \
    return injected;
/// As FAKE_ENTER, for a call that takes a stream.
#define FAKE_ENTER_ON(fn, stream)                                              \
  if (CUresult injected = enter(#fn, stream))                                  \
    return injected;

} // namespace

//===----------------------------------------------------------------------===//
// Control functions
//===----------------------------------------------------------------------===//

extern "C" void fakeCudaReset() {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  fake.calls.clear();
  fake.log.clear();
  fake.pendingFailures.clear();
  fake.lastLaunch = {};
  fake.lastTensorMap = {};
  fake.lastOptLevel = -1;
  fake.lastSmemAttribute = -1;
  fake.lastHostRegisterBytes = -1;
  fake.tensorMapEncodes = 0;
  fake.lastReleaseThreshold = 0;
}

extern "C" void fakeCudaFailNext(const char *symbol, int result) {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  fake.pendingFailures[symbol] = CUresult(result);
}

extern "C" int fakeCudaCalls(const char *symbol) {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  auto found = fake.calls.find(symbol);
  return found == fake.calls.end() ? 0 : found->second;
}

extern "C" int fakeCudaCallCount() {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  return int(fake.log.size());
}

extern "C" FakeCall fakeCudaCallAt(int index) {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  return fake.log.at(size_t(index));
}

extern "C" uint64_t fakeCudaLastReleaseThreshold() {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  return fake.lastReleaseThreshold;
}

extern "C" FakeLiveObjects fakeCudaLive() {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  return {int(fake.modules.size()),
          int(fake.streams.size()),
          int(fake.events.size()),
          int(fake.allocations.size()),
          int(fake.hostRegistrations.size()),
          int(fake.pools.size())};
}

extern "C" FakeLaunch fakeCudaLastLaunch() {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  return fake.lastLaunch;
}

extern "C" FakeTensorMapCall fakeCudaLastTensorMap() {
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  return fake.lastTensorMap;
}

extern "C" int64_t fakeCudaLastOptLevel() { return state().lastOptLevel; }

extern "C" int64_t fakeCudaLastSmemAttribute() {
  return state().lastSmemAttribute;
}

extern "C" int64_t fakeCudaLastHostRegisterBytes() {
  return state().lastHostRegisterBytes;
}

extern "C" int fakeCudaContextDepth() { return contextDepth; }

//===----------------------------------------------------------------------===//
// Driver functions
//===----------------------------------------------------------------------===//

CUresult cuInit(unsigned int) {
  FAKE_ENTER(cuInit);
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
  switch (error) {
  case CUDA_ERROR_INVALID_VALUE:
    *name = "CUDA_ERROR_INVALID_VALUE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_DEVICE:
    *name = "CUDA_ERROR_INVALID_DEVICE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_PTX:
    *name = "CUDA_ERROR_INVALID_PTX";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_FOUND:
    *name = "CUDA_ERROR_NOT_FOUND";
    return CUDA_SUCCESS;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
    return CUDA_SUCCESS;
  default:
    *name = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult error, const char **text) {
  switch (error) {
  case CUDA_ERROR_INVALID_VALUE:
    *text = "invalid argument";
    return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *text = "out of memory";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_DEVICE:
    *text = "invalid device ordinal";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_PTX:
    *text = "a PTX JIT compilation failed";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_FOUND:
    *text = "named symbol not found";
    return CUDA_SUCCESS;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *text = "an illegal memory access was encountered";
    return CUDA_SUCCESS;
  default:
    *text = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  FAKE_ENTER(cuDeviceGet);
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  FAKE_ENTER(cuDeviceGetCount);
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice) {
  FAKE_ENTER(cuDevicePrimaryCtxRetain);
  *context = primaryContext();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *context) {
  FAKE_ENTER(cuCtxGetCurrent);
  *context = currentContext;
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext context) {
  FAKE_ENTER(cuCtxPushCurrent_v2);
  ++contextDepth;
  currentContext = context;
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *context) {
  FAKE_ENTER(cuCtxPopCurrent_v2);
  if (contextDepth == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  *context = currentContext;
  if (--contextDepth == 0)
    currentContext = nullptr;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  FAKE_ENTER(cuCtxSynchronize);
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                            unsigned int numOptions, CUjit_option *options,
                            void **values) {
  FAKE_ENTER(cuModuleLoadDataEx);
  char *log = nullptr;
  size_t logBytes = 0;
  state().lastOptLevel = -1;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
      log = static_cast<char *>(values[i]);
    else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      logBytes = reinterpret_cast<uintptr_t>(values[i]);
    else if (options[i] == CU_JIT_OPTIMIZATION_LEVEL)
      state().lastOptLevel = int64_t(reinterpret_cast<uintptr_t>(values[i]));
  }
  // Images starting with "BAD" fail like PTX that ptxas rejects.
  if (std::strncmp(static_cast<const char *>(image), "BAD", 3) == 0) {
    if (log && logBytes)
      std::strncpy(log, "ptxas fatal   : Unexpected token 'BAD'", logBytes);
    return CUDA_ERROR_INVALID_PTX;
  }
  *module = reinterpret_cast<CUmodule>(newHandle(state().modules));
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  FAKE_ENTER(cuModuleUnload);
  return dropHandle(state().modules, reinterpret_cast<uintptr_t>(module));
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule, const char *name) {
  FAKE_ENTER(cuModuleGetFunction);
  if (std::strcmp(name, "missing") == 0)
    return CUDA_ERROR_NOT_FOUND;
  // Distinct per name, so that per-function opt-ins can be observed.
  uintptr_t hash = 0xf000;
  for (const char *c = name; *c; ++c)
    hash = hash * 31 + uintptr_t(*c);
  *function = reinterpret_cast<CUfunction>(hash << 4);
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction, CUfunction_attribute attribute,
                            int value) {
  FAKE_ENTER(cuFuncSetAttribute);
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    state().lastSmemAttribute = value;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction function, unsigned gridX, unsigned gridY,
                        unsigned gridZ, unsigned blockX, unsigned blockY,
                        unsigned blockZ, unsigned smem, CUstream stream,
                        void **, void **) {
  FAKE_ENTER_ON(cuLaunchKernel, stream);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  fake.lastLaunch = {reinterpret_cast<uintptr_t>(function),
                     {gridX, gridY, gridZ},
                     {blockX, blockY, blockZ},
                     {0, 0, 0},
                     smem,
                     reinterpret_cast<uintptr_t>(stream)};
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction function,
                          void **, void **) {
  FAKE_ENTER_ON(cuLaunchKernelEx, config->hStream);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  fake.lastLaunch = {reinterpret_cast<uintptr_t>(function),
                     {config->gridDimX, config->gridDimY, config->gridDimZ},
                     {config->blockDimX, config->blockDimY, config->blockDimZ},
                     {0, 0, 0},
                     config->sharedMemBytes,
                     reinterpret_cast<uintptr_t>(config->hStream)};
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      continue;
    fake.lastLaunch.cluster[0] = config->attrs[i].value.clusterDim.x;
    fake.lastLaunch.cluster[1] = config->attrs[i].value.clusterDim.y;
    fake.lastLaunch.cluster[2] = config->attrs[i].value.clusterDim.z;
  }
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *stream, unsigned int) {
  FAKE_ENTER(cuStreamCreate);
  *stream = reinterpret_cast<CUstream>(newHandle(state().streams));
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream) {
  FAKE_ENTER_ON(cuStreamDestroy_v2, stream);
  return dropHandle(state().streams, reinterpret_cast<uintptr_t>(stream));
}

CUresult cuStreamSynchronize(CUstream stream) {
  FAKE_ENTER_ON(cuStreamSynchronize, stream);
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent, unsigned int) {
  FAKE_ENTER_ON(cuStreamWaitEvent, stream);
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *event, unsigned int) {
  FAKE_ENTER(cuEventCreate);
  *event = reinterpret_cast<CUevent>(newHandle(state().events));
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent event) {
  FAKE_ENTER(cuEventDestroy_v2);
  return dropHandle(state().events, reinterpret_cast<uintptr_t>(event));
}

CUresult cuEventRecord(CUevent, CUstream stream) {
  FAKE_ENTER_ON(cuEventRecord, stream);
  return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent) {
  FAKE_ENTER(cuEventSynchronize);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  FAKE_ENTER(cuMemAlloc_v2);
  // 256-byte aligned like the driver's allocations.
  void *memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  fake.allocations.insert(memory);
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr *pointer, size_t bytes, unsigned int) {
  FAKE_ENTER(cuMemAllocManaged);
  void *memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  fake.allocations.insert(memory);
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

/// Frees a fake allocation (both free entry points take them alike).
static CUresult releaseAllocation(CUdeviceptr pointer) {
  void *memory = reinterpret_cast<void *>(pointer);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  if (!fake.allocations.erase(memory))
    return CUDA_ERROR_INVALID_VALUE;
  std::free(memory);
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr pointer) {
  FAKE_ENTER(cuMemFree_v2);
  return releaseAllocation(pointer);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                       CUstream stream) {
  FAKE_ENTER_ON(cuMemcpyAsync, stream);
  std::memcpy(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src),
              bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  FAKE_ENTER(cuMemPoolCreate);
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      props->location.id != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(newHandle(state().pools));
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  FAKE_ENTER(cuMemPoolDestroy);
  return dropHandle(state().pools, reinterpret_cast<uintptr_t>(pool));
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute,
                               void *value) {
  FAKE_ENTER(cuMemPoolSetAttribute);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  if (!fake.pools.count(reinterpret_cast<uintptr_t>(pool)))
    return CUDA_ERROR_INVALID_VALUE;
  if (attribute == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
    fake.lastReleaseThreshold = *static_cast<cuuint64_t *>(value);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *pointer, size_t bytes,
                                 CUmemoryPool pool, CUstream stream) {
  FAKE_ENTER_ON(cuMemAllocFromPoolAsync, stream);
  void *memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  if (!fake.pools.count(reinterpret_cast<uintptr_t>(pool))) {
    std::free(memory);
    return CUDA_ERROR_INVALID_VALUE;
  }
  fake.allocations.insert(memory);
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  FAKE_ENTER_ON(cuMemFreeAsync, stream);
  return releaseAllocation(pointer);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes,
                           CUstream stream) {
  FAKE_ENTER_ON(cuMemcpyHtoDAsync_v2, stream);
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
  FAKE_ENTER(cuMemcpyHtoD_v2);
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                          CUstream stream) {
  FAKE_ENTER_ON(cuMemsetD32Async, stream);
  auto *words = reinterpret_cast<uint32_t *>(dst);
  for (size_t i = 0; i < count; ++i)
    words[i] = value;
  return CUDA_SUCCESS;
}

CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t count,
                          CUstream stream) {
  FAKE_ENTER_ON(cuMemsetD16Async, stream);
  auto *halves = reinterpret_cast<uint16_t *>(dst);
  for (size_t i = 0; i < count; ++i)
    halves[i] = value;
  return CUDA_SUCCESS;
}

CUresult cuMemHostRegister(void *pointer, size_t bytes, unsigned int) {
  FAKE_ENTER(cuMemHostRegister_v2);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  fake.hostRegistrations.insert(pointer);
  fake.lastHostRegisterBytes = int64_t(bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *pointer) {
  FAKE_ENTER(cuMemHostUnregister);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  return fake.hostRegistrations.erase(pointer) ? CUDA_SUCCESS
                                               : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuTensorMapEncodeTiled(
    CUtensorMap *tensorMap, CUtensorMapDataType dataType, cuuint32_t rank,
    void *globalAddress, const cuuint64_t *globalDim,
    const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
    const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  FAKE_ENTER(cuTensorMapEncodeTiled);
  FakeState &fake = state();
  std::lock_guard<std::mutex> lock(fake.mutex);
  FakeTensorMapCall call = {};
  call.dataType = dataType;
  call.rank = rank;
  call.globalAddress = globalAddress;
  for (cuuint32_t i = 0; i < rank && i < 5; ++i) {
    call.globalDim[i] = globalDim[i];
    call.boxDim[i] = boxDim[i];
    call.elementStrides[i] = elementStrides[i];
    if (i + 1 < rank)
      call.globalStrides[i] = globalStrides[i];
  }
  call.interleave = interleave;
  call.swizzle = swizzle;
  call.l2Promotion = l2Promotion;
  call.oobFill = oobFill;
  fake.lastTensorMap = call;
  // A recognizable descriptor: a serial number, then the address.
  std::memset(tensorMap, 0, sizeof(*tensorMap));
  tensorMap->opaque[0] = uint64_t(++fake.tensorMapEncodes);
  tensorMap->opaque[1] = reinterpret_cast<uintptr_t>(globalAddress);
  return CUDA_SUCCESS;
}
