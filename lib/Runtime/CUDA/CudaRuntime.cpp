//===- CudaRuntime.cpp - mgpu* entry points on the CUDA driver API --------===//
//
// The runtime behind the host code that MLIR's gpu-to-llvm generates. The
// declarations it implements are pinned by test/Runtime/CUDA; the C types are
// those of include/moe/Runtime/CudaRuntime.h.
//
//   JIT-compiled host code
//          |  mgpu* calls
//          v
//   EntryScope --- error recorded? ---> no-op, return null
//          |       (release entry points still release)
//          |  driver loaded at first use (dlopen libcuda.so.1)
//          |  primary context of the default device made current
//          v
//   DriverApi table ---> libcuda --- failure ---> sticky error, printed once:
//          |                          "moe-cuda-runtime: <entry>: <cuCall>
//          |                           failed with <NAME> (<text>): <detail>"
//          v
//   registries of what was handed out (modules, streams, events,
//   allocations, host registrations) and the tensor-map cache; the host
//   reads them with moeCudaRuntimeGetStats and empties them with
//   moeCudaRuntimeReset between runs.
//
// Upstream's wrappers print a failed call and carry on with a null handle;
// here the first failure stops all further work of the run, so no kernel runs
// on memory that was never allocated or copied. Upstream also copies each TMA
// descriptor to device memory and never frees it; here the cache owns the
// copies.
//
// Memory asked for on a stream comes from a stream-ordered pool per context
// (cuMemAllocFromPoolAsync / cuMemFreeAsync) whose release threshold keeps
// freed memory cached, so that a compiled call, which allocates and frees
// its workspace on its stream, makes no cuMemAlloc, no cuMemFree and no host
// synchronization once the pool has grown to its size. The tensor-map entry
// point, whose signature carries no stream, uses the stream the host named
// with moeCudaRuntimeSetCallStream the same way.
//
//===----------------------------------------------------------------------===//

#include "moe/Runtime/CudaRuntime.h"

#include "CudaDriver.h"
#include "CudaRuntimeTesting.h"
#include "TensorMap.h"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

using namespace moe::cudart;

namespace {

constexpr const char *kDefaultDriverLibrary = "libcuda.so.1";
constexpr const char *kPrefix = "moe-cuda-runtime: ";
/// Dynamic shared memory a kernel may use without opting in.
constexpr int32_t kDefaultDynamicSmemBytes = 48 * 1024;
/// Clusters with more blocks need the non-portable cluster-size opt-in.
constexpr int64_t kPortableClusterBlocks = 8;
/// Room for the JIT's error log in a failed module load.
constexpr size_t kJitLogBytes = 16 * 1024;

/// A CUresult that a stub or absent driver cannot describe.
struct KnownResult {
  CUresult result;
  const char *name, *text;
};
constexpr KnownResult kKnownResults[] = {
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
     "the CUDA toolkit's stub libcuda was loaded instead of the NVIDIA "
     "driver's; put the driver's libcuda.so.1 first on the library path"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
     "the driver finds no CUDA device on this machine"},
};

const KnownResult *knownResult(CUresult result) {
  for (const KnownResult &known : kKnownResults)
    if (known.result == result)
      return &known;
  return nullptr;
}

/// printf into a std::string; for error messages only.
template <typename... Args> std::string format(const char *fmt, Args... args) {
  int length = std::snprintf(nullptr, 0, fmt, args...);
  if (length <= 0)
    return {};
  std::string text(size_t(length), '\0');
  std::snprintf(text.data(), text.size() + 1, fmt, args...);
  return text;
}

/// "a, b, c" for the first `count` values; for error messages.
template <typename T> std::string joined(const T *values, uint32_t count) {
  std::string text;
  for (uint32_t i = 0; i < count; ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text;
}

/// A device allocation handed out by mgpuMemAlloc.
struct Allocation {
  CUcontext context;
  int64_t bytes;
  /// From the context's pool (mgpuMemAlloc on a stream).
  bool streamOrdered;
};

/// The device copy of a cached tensor map and its host copy. `callStream`
/// is the stream of the compiled call that uploaded it (null outside a
/// call): such a copy lives until that call ends.
struct TensorMapCopy {
  CUdeviceptr device;
  std::unique_ptr<CUtensorMap> host;
  CUstream callStream = nullptr;
};

/// The context a registered handle was created in, from its registry entry.
CUcontext contextOf(CUcontext context) { return context; }
CUcontext contextOf(const Allocation &allocation) { return allocation.context; }

/// A registered handle as printed by %p.
const void *asPointer(const void *handle) { return handle; }

/// Which tensor maps were built, per context: the key is every argument of
/// cuTensorMapEncodeTiled, the value the device copy that kernels read.
using TensorMapCacheKey = std::pair<CUcontext, TensorMapKey>;

/// Process-wide state of the runtime. One instance, never destroyed: global
/// destructors of JIT-compiled code may unload modules after the static
/// destructors of this library have run.
class Runtime {
public:
  static Runtime &get() {
    static Runtime *runtime = new Runtime();
    return *runtime;
  }

  //===-- Errors ----------------------------------------------------------===//

  bool hasError() const { return failed.load(std::memory_order_acquire); }

  /// Records `message` as the run's error and prints it, unless an error is
  /// recorded already; then it only counts as suppressed.
  void fail(std::string message) {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (failed.load(std::memory_order_relaxed)) {
      ++suppressedErrors;
      return;
    }
    error = std::move(message);
    failed.store(true, std::memory_order_release);
    if (printErrors.load(std::memory_order_relaxed)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      std::fflush(stderr);
    }
  }

  void setErrorPrinting(bool print) {
    printErrors.store(print, std::memory_order_relaxed);
  }

  /// Returns true when `result` is CUDA_SUCCESS; otherwise records which
  /// driver call failed in which entry point, with CUDA's name and text for
  /// the result and `detail` (when not empty) appended.
  bool check(CUresult result, const char *entry, const char *call,
             const std::string &detail) {
    if (result == CUDA_SUCCESS)
      return true;
    const char *name = nullptr;
    const char *text = nullptr;
    if (api.cuGetErrorName(result, &name) != CUDA_SUCCESS)
      name = nullptr;
    if (api.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
      text = nullptr;
    // The results a driver that cannot describe itself (the toolkit's stub
    // libcuda answers every call with CUDA_ERROR_STUB_LIBRARY) or a machine
    // without a usable GPU gives, named and explained here.
    if (!name || !text)
      if (const KnownResult *known = knownResult(result)) {
        name = name ? name : known->name;
        text = text ? text : known->text;
      }
    if (!text)
      text = "no description";
    std::string message =
        std::string(kPrefix) + entry + ": " + call + " failed with " +
        (name ? std::string(name) : format("CUresult %d", int(result))) + " (" +
        text + ")";
    if (!detail.empty())
      message += ": " + detail;
    fail(std::move(message));
    return false;
  }

  const char *lastError() {
    std::lock_guard<std::mutex> lock(errorMutex);
    return failed.load(std::memory_order_relaxed) ? error.c_str() : nullptr;
  }

  void clearError() {
    std::lock_guard<std::mutex> lock(errorMutex);
    failed.store(false, std::memory_order_release);
    error.clear();
    suppressedErrors = 0;
  }

  //===-- Driver and contexts ---------------------------------------------===//

  /// Loads the driver on first use; false when it cannot be loaded (nothing
  /// recorded).
  bool loadDriverQuietly() {
    if (driverState.load(std::memory_order_acquire) == DriverState::Loaded)
      return true;
    std::lock_guard<std::mutex> lock(driverMutex);
    if (driverState.load(std::memory_order_relaxed) == DriverState::Unloaded) {
      if (loadDriver(driverLibrary.c_str(), driverHandle, api, driverError))
        driverState.store(DriverState::Loaded, std::memory_order_release);
      else
        driverState.store(DriverState::Failed, std::memory_order_release);
    }
    return driverState.load(std::memory_order_relaxed) == DriverState::Loaded;
  }

  /// As loadDriverQuietly, recording why the driver is unavailable.
  bool ensureDriver() {
    if (loadDriverQuietly())
      return true;
    fail(driverError);
    return false;
  }

  bool driverLoaded() const {
    return driverState.load(std::memory_order_acquire) == DriverState::Loaded;
  }

  const DriverApi &driver() const { return api; }

  void setDevice(int32_t ordinal) {
    device.store(ordinal, std::memory_order_release);
  }

  /// The primary context of the default device, retained on first use.
  /// Null, with the error recorded, when the device cannot be opened.
  CUcontext context(const char *entry) {
    const int32_t ordinal = device.load(std::memory_order_acquire);
    std::lock_guard<std::mutex> lock(contextMutex);
    auto found = contexts.find(ordinal);
    if (found != contexts.end())
      return found->second;
    if (!initialized) {
      if (!check(api.cuInit(0), entry, MOE_CU_SYMBOL(cuInit), ""))
        return nullptr;
      initialized = true;
    }
    CUdevice handle = 0;
    if (!check(api.cuDeviceGet(&handle, ordinal), entry,
               MOE_CU_SYMBOL(cuDeviceGet), format("device %d", ordinal)))
      return nullptr;
    CUcontext primary = nullptr;
    if (!check(api.cuDevicePrimaryCtxRetain(&primary, handle), entry,
               MOE_CU_SYMBOL(cuDevicePrimaryCtxRetain),
               format("device %d", ordinal)))
      return nullptr;
    contexts.emplace(ordinal, primary);
    return primary;
  }

  /// True when the driver initializes and reports a device; records nothing.
  bool available() {
    if (!loadDriverQuietly())
      return false;
    int count = 0;
    return api.cuInit(0) == CUDA_SUCCESS &&
           api.cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0;
  }

  //===-- Registries ------------------------------------------------------===//

  /// Guards the registries and counters below.
  std::mutex mutex;
  std::unordered_map<CUmodule, CUcontext> modules;
  std::unordered_map<CUfunction, std::string> functionNames;
  std::unordered_map<CUfunction, int32_t> functionSmemOptIn;
  std::unordered_set<CUfunction> functionNonPortableClusters;
  std::unordered_map<CUstream, CUcontext> streams;
  std::unordered_map<CUevent, CUcontext> events;
  std::unordered_map<CUdeviceptr, Allocation> allocations;
  std::unordered_map<void *, CUcontext> hostRegistrations;
  std::map<TensorMapCacheKey, TensorMapCopy> tensorMaps;
  int64_t tensorMapEncodes = 0;
  int64_t tensorMapCacheHits = 0;
  int64_t launches = 0;

  /// The name a function was looked up by, for messages.
  std::string functionName(CUfunction function) {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = functionNames.find(function);
    return found == functionNames.end() ? format("%p", (void *)function)
                                        : "'" + found->second + "'";
  }

  void stats(MoeCudaRuntimeStats &out) {
    std::lock_guard<std::mutex> lock(mutex);
    out.modules = int64_t(modules.size());
    out.streams = int64_t(streams.size());
    out.events = int64_t(events.size());
    out.allocations = int64_t(allocations.size());
    out.allocatedBytes = 0;
    for (const auto &entry : allocations)
      out.allocatedBytes += entry.second.bytes;
    out.hostRegistrations = int64_t(hostRegistrations.size());
    out.tensorMaps = int64_t(tensorMaps.size());
    out.tensorMapEncodes = tensorMapEncodes;
    out.tensorMapCacheHits = tensorMapCacheHits;
    out.launches = launches;
    std::lock_guard<std::mutex> errorLock(errorMutex);
    out.suppressedErrors = suppressedErrors;
  }

  //===-- Stream-ordered memory ------------------------------------------===//

  /// The stream of the compiled call in progress, or null.
  CUstream callStream() const { return stream.load(std::memory_order_acquire); }
  void setCallStream(CUstream callStream) {
    stream.store(callStream, std::memory_order_release);
  }

  /// The device ordinal whose primary context `context` is; -1 if none.
  int32_t deviceOf(CUcontext context) {
    std::lock_guard<std::mutex> lock(contextMutex);
    for (const auto &entry : contexts)
      if (entry.second == context)
        return entry.first;
    return -1;
  }

  /// Guards `pools`.
  std::mutex poolMutex;
  /// The stream-ordered pool of each context, created at its first use.
  std::unordered_map<CUcontext, CUmemoryPool> pools;

  void reset();
  void resetForTesting(const char *library);

private:
  Runtime() = default;

  enum class DriverState { Unloaded, Loaded, Failed };

  std::mutex errorMutex;
  std::atomic<bool> failed{false};
  std::atomic<bool> printErrors{true};
  std::string error;
  int64_t suppressedErrors = 0;

  std::mutex driverMutex;
  std::atomic<DriverState> driverState{DriverState::Unloaded};
  std::string driverLibrary = kDefaultDriverLibrary;
  std::string driverError;
  void *driverHandle = nullptr;
  DriverApi api;

  std::atomic<int32_t> device{0};
  std::atomic<CUstream> stream{nullptr};
  std::mutex contextMutex;
  bool initialized = false;
  std::map<int32_t, CUcontext> contexts;
};

/// Makes a context current on this thread until the guard goes out of scope,
/// then restores the caller's (nothing to do when it is current already).
class ContextGuard {
public:
  explicit ContextGuard(Runtime &runtime) : runtime(runtime) {}
  ~ContextGuard() {
    if (!pushed)
      return;
    CUcontext popped = nullptr;
    runtime.check(runtime.driver().cuCtxPopCurrent(&popped), entry,
                  MOE_CU_SYMBOL(cuCtxPopCurrent), "");
  }
  ContextGuard(const ContextGuard &) = delete;
  ContextGuard &operator=(const ContextGuard &) = delete;

  /// Makes `context` current; false, with the error recorded against
  /// `entryName`, when the driver refuses.
  bool enter(const char *entryName, CUcontext context) {
    entry = entryName;
    const DriverApi &api = runtime.driver();
    CUcontext current = nullptr;
    if (!runtime.check(api.cuCtxGetCurrent(&current), entry,
                       MOE_CU_SYMBOL(cuCtxGetCurrent), ""))
      return false;
    if (current == context)
      return true;
    if (!runtime.check(api.cuCtxPushCurrent(context), entry,
                       MOE_CU_SYMBOL(cuCtxPushCurrent), ""))
      return false;
    pushed = true;
    return true;
  }

private:
  Runtime &runtime;
  const char *entry = "";
  bool pushed = false;
};

/// Opened by every entry point. A work entry point proceeds only while no
/// error is recorded; a release entry point (free, destroy, unload) proceeds
/// regardless, so that a failed run still gives back what it holds. Both
/// load the driver at first use and make the default device's primary
/// context current for the call.
class EntryScope {
public:
  enum class Kind { Work, Release };

  explicit EntryScope(const char *entry, Kind kind = Kind::Work)
      : runtime(Runtime::get()), entry(entry), guard(runtime) {
    if (kind == Kind::Work && runtime.hasError())
      return;
    if (!runtime.ensureDriver())
      return;
    ctx = runtime.context(entry);
    if (!ctx)
      return;
    active = guard.enter(entry, ctx);
  }

  explicit operator bool() const { return active; }

  Runtime &rt() { return runtime; }
  const DriverApi &api() { return runtime.driver(); }
  CUcontext context() const { return ctx; }
  const char *name() const { return entry; }

  bool check(CUresult result, const char *call,
             const std::string &detail = std::string()) {
    return runtime.check(result, entry, call, detail);
  }

  /// Records an argument error of this entry point.
  void fail(const std::string &message) {
    runtime.fail(std::string(kPrefix) + entry + ": " + message);
  }

private:
  Runtime &runtime;
  const char *entry;
  CUcontext ctx = nullptr;
  ContextGuard guard;
  bool active = false;
};

/// Runs `fn` with `context` current: the context a handle was created in,
/// which differs from the scope's when another device was the default then.
template <typename Fn>
void inContextOf(EntryScope &scope, CUcontext context, Fn fn) {
  if (context == scope.context()) {
    fn();
    return;
  }
  ContextGuard guard(scope.rt());
  if (guard.enter(scope.name(), context))
    fn();
}

/// The stream-ordered pool of the scope's context, created on first use on
/// its device with a release threshold that keeps all freed memory cached:
/// the default of zero would hand it back to the OS at every
/// synchronization, and the next call would map it again. Null, with the
/// error recorded, when the driver refuses.
CUmemoryPool memoryPool(EntryScope &scope) {
  Runtime &rt = scope.rt();
  std::lock_guard<std::mutex> lock(rt.poolMutex);
  auto found = rt.pools.find(scope.context());
  if (found != rt.pools.end())
    return found->second;
  const int32_t device = rt.deviceOf(scope.context());
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  CUmemoryPool pool = nullptr;
  if (!scope.check(scope.api().cuMemPoolCreate(&pool, &props),
                   MOE_CU_SYMBOL(cuMemPoolCreate), format("device %d", device)))
    return nullptr;
  cuuint64_t keepAll = UINT64_MAX;
  if (!scope.check(scope.api().cuMemPoolSetAttribute(
                       pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keepAll),
                   MOE_CU_SYMBOL(cuMemPoolSetAttribute), "release threshold")) {
    scope.api().cuMemPoolDestroy(pool);
    return nullptr;
  }
  rt.pools.emplace(scope.context(), pool);
  return pool;
}

/// Records `handle` in `registry` as created in the scope's context.
template <typename Registry, typename Handle>
void registerHandle(EntryScope &scope, Registry &registry, Handle handle) {
  std::lock_guard<std::mutex> lock(scope.rt().mutex);
  registry.emplace(handle, scope.context());
}

/// Removes `handle` from `registry` and returns the context it was created
/// in; null when it is not registered.
template <typename Registry>
CUcontext takeHandle(Runtime &rt, Registry &registry,
                     const typename Registry::key_type &handle) {
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto found = registry.find(handle);
  if (found == registry.end())
    return nullptr;
  CUcontext context = contextOf(found->second);
  registry.erase(found);
  return context;
}

/// The body of the release entry points: takes `handle` out of `registry`
/// and checks `release(handle)`, the driver call named `call`, in the
/// context the handle was created in. An unknown handle is an argument
/// error, `unknownFormat` with the handle for its %p.
template <typename Registry, typename ReleaseFn>
void releaseHandle(EntryScope &scope, Registry &registry,
                   typename Registry::key_type handle,
                   const char *unknownFormat, ReleaseFn release,
                   const char *call,
                   const std::string &detail = std::string()) {
  CUcontext context = takeHandle(scope.rt(), registry, handle);
  if (!context) {
    scope.fail(format(unknownFormat, asPointer(handle)));
    return;
  }
  inContextOf(scope, context,
              [&] { scope.check(release(handle), call, detail); });
}

/// Checks the shape of a launch: every grid and block extent must fit the
/// driver's unsigned 32-bit fields (the IR passes 64-bit index values).
bool checkLaunchShape(EntryScope &scope, void *function, const int64_t grid[3],
                      const int64_t block[3], int32_t smem) {
  if (!function) {
    scope.fail("null function (did mgpuModuleGetFunction fail?)");
    return false;
  }
  for (int i = 0; i < 3; ++i) {
    if (grid[i] < 1 || grid[i] > int64_t(UINT32_MAX) || block[i] < 1 ||
        block[i] > int64_t(UINT32_MAX)) {
      scope.fail(format(
          "kernel %s: invalid launch shape grid (%" PRId64 ", %" PRId64
          ", %" PRId64 ") block (%" PRId64 ", %" PRId64 ", %" PRId64 ")",
          scope.rt().functionName(static_cast<CUfunction>(function)).c_str(),
          grid[0], grid[1], grid[2], block[0], block[1], block[2]));
      return false;
    }
  }
  if (smem < 0) {
    scope.fail(format("negative dynamic shared memory size %d", smem));
    return false;
  }
  return true;
}

/// Opts `function` into `smem` bytes of dynamic shared memory when that is
/// above the default limit, once per function and size.
bool optIntoSharedMemory(EntryScope &scope, CUfunction function, int32_t smem) {
  if (smem <= kDefaultDynamicSmemBytes)
    return true;
  Runtime &rt = scope.rt();
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    auto found = rt.functionSmemOptIn.find(function);
    if (found != rt.functionSmemOptIn.end() && found->second >= smem)
      return true;
  }
  if (!scope.check(
          scope.api().cuFuncSetAttribute(
              function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
          MOE_CU_SYMBOL(cuFuncSetAttribute),
          format("kernel %s, %d bytes of dynamic shared memory",
                 rt.functionName(function).c_str(), smem)))
    return false;
  std::lock_guard<std::mutex> lock(rt.mutex);
  int32_t &optedIn = rt.functionSmemOptIn[function];
  if (optedIn < smem)
    optedIn = smem;
  return true;
}

std::string describeLaunch(Runtime &rt, CUfunction function,
                           const int64_t grid[3], const int64_t block[3],
                           int32_t smem) {
  return format("kernel %s, grid (%" PRId64 ", %" PRId64 ", %" PRId64
                "), block (%" PRId64 ", %" PRId64 ", %" PRId64
                "), %d bytes of dynamic shared memory",
                rt.functionName(function).c_str(), grid[0], grid[1], grid[2],
                block[0], block[1], block[2], smem);
}

/// Loads a module image with the JIT's error log captured. `optLevel` < 0
/// leaves the optimization level to the driver.
void *loadModule(EntryScope &scope, const void *image, int32_t optLevel) {
  std::vector<char> log(kJitLogBytes, '\0');
  CUjit_option options[3];
  void *values[3];
  unsigned count = 0;
  options[count] = CU_JIT_ERROR_LOG_BUFFER;
  values[count++] = log.data();
  options[count] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
  values[count++] = reinterpret_cast<void *>(uintptr_t(log.size() - 1));
  if (optLevel >= 0) {
    options[count] = CU_JIT_OPTIMIZATION_LEVEL;
    values[count++] = reinterpret_cast<void *>(uintptr_t(optLevel));
  }
  CUmodule module = nullptr;
  CUresult result =
      scope.api().cuModuleLoadDataEx(&module, image, count, options, values);
  log.back() = '\0';
  if (!scope.check(result, MOE_CU_SYMBOL(cuModuleLoadDataEx),
                   log[0] ? "JIT log:\n" + std::string(log.data())
                          : std::string()))
    return nullptr;
  registerHandle(scope, scope.rt().modules, module);
  return module;
}

/// The bytes a strided memref spans from its first element, or 0 when it
/// has no elements; -1 for negative sizes or strides.
int64_t memrefSpanBytes(const MemRefView &view, int64_t elementBytes) {
  int64_t lastElement = 0;
  for (int64_t d = 0; d < view.rank; ++d) {
    if (view.sizes[d] < 0 || view.strides[d] < 0)
      return -1;
    if (view.sizes[d] == 0)
      return 0;
    lastElement += (view.sizes[d] - 1) * view.strides[d];
  }
  return (lastElement + 1) * elementBytes;
}

/// Validates the arguments of the host-register entry points; returns the
/// first byte of the memref, or null (no error) when it spans nothing.
char *hostMemRefStart(EntryScope &scope, int64_t rank, void *descriptor,
                      int64_t elementBytes, int64_t &spanBytes) {
  if (!descriptor || rank < 0 || elementBytes < 1) {
    scope.fail(format("invalid memref (descriptor %p, rank %" PRId64
                      ", element size %" PRId64 ")",
                      descriptor, rank, elementBytes));
    return nullptr;
  }
  MemRefView view = viewRankedDescriptor(descriptor, rank);
  spanBytes = memrefSpanBytes(view, elementBytes);
  if (spanBytes < 0) {
    scope.fail("memref with a negative size or stride");
    return nullptr;
  }
  if (spanBytes == 0)
    return nullptr;
  return view.aligned + view.offset * elementBytes;
}

/// The body of the memset entry points: sets `count` elements at `dst` to
/// `value` on `stream` with the driver function `set`, named `call`; `unit`
/// names the element in messages ("words").
template <typename Element, typename SetFn>
void memsetEntry(const char *entry, void *dst, Element value, int64_t count,
                 void *stream, const char *unit, SetFn DriverApi::*set,
                 const char *call) {
  EntryScope scope(entry);
  if (!scope || count == 0)
    return;
  if (count < 0 || !dst) {
    scope.fail(
        format("invalid memset of %" PRId64 " %s at %p", count, unit, dst));
    return;
  }
  scope.check((scope.api().*set)(reinterpret_cast<CUdeviceptr>(dst), value,
                                 size_t(count), static_cast<CUstream>(stream)),
              call, format("%" PRId64 " %s at %p", count, unit, dst));
}

} // namespace

//===----------------------------------------------------------------------===//
// Runtime: reset
//===----------------------------------------------------------------------===//

void Runtime::reset() {
  if (!driverLoaded())
    return;
  std::unordered_map<CUstream, CUcontext> heldStreams;
  std::unordered_map<CUevent, CUcontext> heldEvents;
  std::unordered_map<CUdeviceptr, Allocation> heldAllocations;
  std::unordered_map<void *, CUcontext> heldRegistrations;
  std::map<TensorMapCacheKey, TensorMapCopy> heldTensorMaps;
  setCallStream(nullptr);
  {
    std::lock_guard<std::mutex> lock(mutex);
    heldStreams.swap(streams);
    heldEvents.swap(events);
    heldAllocations.swap(allocations);
    heldRegistrations.swap(hostRegistrations);
    heldTensorMaps.swap(tensorMaps);
    tensorMapEncodes = 0;
    tensorMapCacheHits = 0;
    launches = 0;
  }
  std::vector<CUcontext> held;
  {
    std::lock_guard<std::mutex> lock(contextMutex);
    for (const auto &entry : contexts)
      held.push_back(entry.second);
  }
  constexpr const char *entry = "moeCudaRuntimeReset";
  for (CUcontext context : held) {
    ContextGuard guard(*this);
    if (!guard.enter(entry, context))
      continue;
    // Kernels may still read the descriptors and buffers about to be freed
    // (cuMemFree does not wait for pool memory), and uploads may still read
    // the tensor maps' host copies.
    check(api.cuCtxSynchronize(), entry, MOE_CU_SYMBOL(cuCtxSynchronize), "");
    // Releases the handles of `registry` created in this context.
    auto releaseHeld = [&](const auto &registry, auto release,
                           const char *call) {
      for (const auto &handle : registry)
        if (contextOf(handle.second) == context)
          check(release(handle.first), entry, call, "");
    };
    releaseHeld(heldStreams, api.cuStreamDestroy,
                MOE_CU_SYMBOL(cuStreamDestroy));
    releaseHeld(heldEvents, api.cuEventDestroy, MOE_CU_SYMBOL(cuEventDestroy));
    releaseHeld(heldAllocations, api.cuMemFree, MOE_CU_SYMBOL(cuMemFree));
    releaseHeld(heldRegistrations, api.cuMemHostUnregister,
                MOE_CU_SYMBOL(cuMemHostUnregister));
    for (const auto &tensorMap : heldTensorMaps)
      if (tensorMap.first.first == context)
        check(api.cuMemFree(tensorMap.second.device), entry,
              MOE_CU_SYMBOL(cuMemFree), "");
  }
}

void Runtime::resetForTesting(const char *library) {
  reset();
  {
    std::lock_guard<std::mutex> lock(poolMutex);
    for (const auto &entry : pools)
      check(api.cuMemPoolDestroy(entry.second), "setDriverLibraryForTesting",
            MOE_CU_SYMBOL(cuMemPoolDestroy), "");
    pools.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    modules.clear();
    functionNames.clear();
    functionSmemOptIn.clear();
    functionNonPortableClusters.clear();
  }
  {
    std::lock_guard<std::mutex> lock(contextMutex);
    contexts.clear();
    initialized = false;
  }
  {
    std::lock_guard<std::mutex> lock(driverMutex);
    unloadDriver(driverHandle);
    driverHandle = nullptr;
    api = DriverApi();
    driverError.clear();
    driverLibrary = library;
    driverState.store(DriverState::Unloaded, std::memory_order_release);
  }
  device.store(0, std::memory_order_release);
  clearError();
}

void moe::cudart::setDriverLibraryForTesting(const char *library) {
  Runtime::get().resetForTesting(library);
}

//===----------------------------------------------------------------------===//
// Modules and kernels
//===----------------------------------------------------------------------===//

extern "C" void *mgpuModuleLoad(void *data, int64_t size) {
  EntryScope scope("mgpuModuleLoad");
  if (!scope)
    return nullptr;
  if (!data || size <= 0) {
    scope.fail(
        format("invalid module image (%p, %" PRId64 " bytes)", data, size));
    return nullptr;
  }
  return loadModule(scope, data, /*optLevel=*/-1);
}

extern "C" void *mgpuModuleLoadJIT(void *data, int32_t optLevel) {
  EntryScope scope("mgpuModuleLoadJIT");
  if (!scope)
    return nullptr;
  if (!data || optLevel < 0 || optLevel > 4) {
    scope.fail(format("invalid PTX image %p or optimization level %d (0-4)",
                      data, optLevel));
    return nullptr;
  }
  return loadModule(scope, data, optLevel);
}

extern "C" void mgpuModuleUnload(void *module) {
  // Unloading nothing needs no driver: the JIT destroys executables whose
  // kernels were never loaded (compiled on a machine without a GPU, or
  // never run), and their destructors unload a null module.
  if (!module)
    return;
  EntryScope scope("mgpuModuleUnload", EntryScope::Kind::Release);
  if (!scope)
    return;
  releaseHandle(scope, scope.rt().modules, static_cast<CUmodule>(module),
                "module %p was not loaded by this runtime or is unloaded "
                "already",
                scope.api().cuModuleUnload, MOE_CU_SYMBOL(cuModuleUnload));
}

extern "C" void *mgpuModuleGetFunction(void *module, const char *name) {
  EntryScope scope("mgpuModuleGetFunction");
  if (!scope)
    return nullptr;
  if (!module || !name) {
    scope.fail(format("null module %p or kernel name (did mgpuModuleLoad "
                      "fail?)",
                      module));
    return nullptr;
  }
  CUfunction function = nullptr;
  if (!scope.check(scope.api().cuModuleGetFunction(
                       &function, static_cast<CUmodule>(module), name),
                   MOE_CU_SYMBOL(cuModuleGetFunction),
                   format("kernel '%s'", name)))
    return nullptr;
  Runtime &rt = scope.rt();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.functionNames[function] = name;
  return function;
}

extern "C" void mgpuLaunchKernel(void *function, int64_t gridX, int64_t gridY,
                                 int64_t gridZ, int64_t blockX, int64_t blockY,
                                 int64_t blockZ, int32_t smem, void *stream,
                                 void **params, void **extra,
                                 int64_t paramsCount) {
  EntryScope scope("mgpuLaunchKernel");
  if (!scope)
    return;
  const int64_t grid[3] = {gridX, gridY, gridZ};
  const int64_t block[3] = {blockX, blockY, blockZ};
  if (!checkLaunchShape(scope, function, grid, block, smem))
    return;
  if (paramsCount > 0 && !params) {
    scope.fail(format("%" PRId64 " kernel arguments but no argument array",
                      paramsCount));
    return;
  }
  auto *fn = static_cast<CUfunction>(function);
  if (!optIntoSharedMemory(scope, fn, smem))
    return;
  Runtime &rt = scope.rt();
  CUresult result = scope.api().cuLaunchKernel(
      fn, unsigned(gridX), unsigned(gridY), unsigned(gridZ), unsigned(blockX),
      unsigned(blockY), unsigned(blockZ), unsigned(smem),
      static_cast<CUstream>(stream), params, extra);
  if (!scope.check(result, MOE_CU_SYMBOL(cuLaunchKernel),
                   result == CUDA_SUCCESS
                       ? std::string()
                       : describeLaunch(rt, fn, grid, block, smem)))
    return;
  std::lock_guard<std::mutex> lock(rt.mutex);
  ++rt.launches;
}

extern "C" void mgpuLaunchClusterKernel(
    void *function, int64_t clusterX, int64_t clusterY, int64_t clusterZ,
    int64_t gridX, int64_t gridY, int64_t gridZ, int64_t blockX, int64_t blockY,
    int64_t blockZ, int32_t smem, void *stream, void **params, void **extra) {
  EntryScope scope("mgpuLaunchClusterKernel");
  if (!scope)
    return;
  const int64_t grid[3] = {gridX, gridY, gridZ};
  const int64_t block[3] = {blockX, blockY, blockZ};
  const int64_t cluster[3] = {clusterX, clusterY, clusterZ};
  if (!checkLaunchShape(scope, function, grid, block, smem))
    return;
  Runtime &rt = scope.rt();
  auto *fn = static_cast<CUfunction>(function);
  for (int i = 0; i < 3; ++i) {
    if (cluster[i] < 1 || grid[i] % cluster[i] != 0) {
      scope.fail(format("kernel %s: cluster (%" PRId64 ", %" PRId64 ", %" PRId64
                        ") does not divide grid (%" PRId64 ", %" PRId64
                        ", %" PRId64 ")",
                        rt.functionName(fn).c_str(), clusterX, clusterY,
                        clusterZ, gridX, gridY, gridZ));
      return;
    }
  }
  if (!optIntoSharedMemory(scope, fn, smem))
    return;
  if (clusterX * clusterY * clusterZ > kPortableClusterBlocks) {
    bool optedIn;
    {
      std::lock_guard<std::mutex> lock(rt.mutex);
      optedIn = rt.functionNonPortableClusters.count(fn) != 0;
    }
    if (!optedIn) {
      if (!scope.check(
              scope.api().cuFuncSetAttribute(
                  fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
              MOE_CU_SYMBOL(cuFuncSetAttribute),
              format("kernel %s, non-portable cluster size",
                     rt.functionName(fn).c_str())))
        return;
      std::lock_guard<std::mutex> lock(rt.mutex);
      rt.functionNonPortableClusters.insert(fn);
    }
  }
  CUlaunchAttribute attribute = {};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = unsigned(clusterX);
  attribute.value.clusterDim.y = unsigned(clusterY);
  attribute.value.clusterDim.z = unsigned(clusterZ);
  CUlaunchConfig config = {};
  config.gridDimX = unsigned(gridX);
  config.gridDimY = unsigned(gridY);
  config.gridDimZ = unsigned(gridZ);
  config.blockDimX = unsigned(blockX);
  config.blockDimY = unsigned(blockY);
  config.blockDimZ = unsigned(blockZ);
  config.sharedMemBytes = unsigned(smem);
  config.hStream = static_cast<CUstream>(stream);
  config.attrs = &attribute;
  config.numAttrs = 1;
  CUresult result = scope.api().cuLaunchKernelEx(&config, fn, params, extra);
  if (!scope.check(result, MOE_CU_SYMBOL(cuLaunchKernelEx),
                   result == CUDA_SUCCESS
                       ? std::string()
                       : describeLaunch(rt, fn, grid, block, smem) +
                             format(", cluster (%" PRId64 ", %" PRId64
                                    ", %" PRId64 ")",
                                    clusterX, clusterY, clusterZ)))
    return;
  std::lock_guard<std::mutex> lock(rt.mutex);
  ++rt.launches;
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

/// The body of an entry point that makes one driver call: `call(api)`
/// returns its CUresult, recorded under `symbol` when it fails.
template <typename Call>
void checkedCall(const char *entry, const char *symbol, Call call) {
  EntryScope scope(entry);
  if (scope)
    scope.check(call(scope.api()), symbol);
}

/// The body of an entry point that creates a stream or an event:
/// `create(api, &handle)` returns its CUresult; the handle is registered
/// in `registry` of the runtime, or null on failure.
template <typename Handle, typename Registry, typename Create>
Handle createHandle(const char *entry, const char *symbol,
                    Registry Runtime::*registry, Create create) {
  EntryScope scope(entry);
  if (!scope)
    return nullptr;
  Handle handle = nullptr;
  if (!scope.check(create(scope.api(), &handle), symbol))
    return nullptr;
  registerHandle(scope, scope.rt().*registry, handle);
  return handle;
}

extern "C" void *mgpuStreamCreate() {
  return createHandle<CUstream>(
      "mgpuStreamCreate", MOE_CU_SYMBOL(cuStreamCreate), &Runtime::streams,
      [](const DriverApi &api, CUstream *stream) {
        return api.cuStreamCreate(stream, CU_STREAM_NON_BLOCKING);
      });
}

extern "C" void mgpuStreamSynchronize(void *stream) {
  checkedCall("mgpuStreamSynchronize", MOE_CU_SYMBOL(cuStreamSynchronize),
              [&](const DriverApi &api) {
                return api.cuStreamSynchronize(static_cast<CUstream>(stream));
              });
}

extern "C" void mgpuStreamDestroy(void *stream) {
  EntryScope scope("mgpuStreamDestroy", EntryScope::Kind::Release);
  if (!scope || !stream)
    return;
  releaseHandle(scope, scope.rt().streams, static_cast<CUstream>(stream),
                "stream %p was not created by mgpuStreamCreate or is "
                "destroyed already",
                scope.api().cuStreamDestroy, MOE_CU_SYMBOL(cuStreamDestroy));
}

extern "C" void mgpuStreamWaitEvent(void *stream, void *event) {
  checkedCall("mgpuStreamWaitEvent", MOE_CU_SYMBOL(cuStreamWaitEvent),
              [&](const DriverApi &api) {
                return api.cuStreamWaitEvent(static_cast<CUstream>(stream),
                                             static_cast<CUevent>(event), 0);
              });
}

extern "C" void *mgpuEventCreate() {
  return createHandle<CUevent>(
      "mgpuEventCreate", MOE_CU_SYMBOL(cuEventCreate), &Runtime::events,
      [](const DriverApi &api, CUevent *event) {
        return api.cuEventCreate(event, CU_EVENT_DISABLE_TIMING);
      });
}

extern "C" void mgpuEventDestroy(void *event) {
  EntryScope scope("mgpuEventDestroy", EntryScope::Kind::Release);
  if (!scope || !event)
    return;
  releaseHandle(scope, scope.rt().events, static_cast<CUevent>(event),
                "event %p was not created by mgpuEventCreate or is "
                "destroyed already",
                scope.api().cuEventDestroy, MOE_CU_SYMBOL(cuEventDestroy));
}

extern "C" void mgpuEventSynchronize(void *event) {
  checkedCall("mgpuEventSynchronize", MOE_CU_SYMBOL(cuEventSynchronize),
              [&](const DriverApi &api) {
                return api.cuEventSynchronize(static_cast<CUevent>(event));
              });
}

extern "C" void mgpuEventRecord(void *event, void *stream) {
  checkedCall("mgpuEventRecord", MOE_CU_SYMBOL(cuEventRecord),
              [&](const DriverApi &api) {
                return api.cuEventRecord(static_cast<CUevent>(event),
                                         static_cast<CUstream>(stream));
              });
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

extern "C" void *mgpuMemAlloc(int64_t sizeBytes, void *stream,
                              int8_t isHostShared) {
  EntryScope scope("mgpuMemAlloc");
  if (!scope)
    return nullptr;
  if (sizeBytes < 0) {
    scope.fail(format("negative size %" PRId64, sizeBytes));
    return nullptr;
  }
  if (sizeBytes == 0)
    return nullptr;
  CUdeviceptr pointer = 0;
  const std::string detail = format("%" PRId64 " bytes", sizeBytes);
  // On a stream the allocation is ordered on it, like the gpu.alloc it
  // lowers: it comes from the pool, without a host synchronization.
  const bool streamOrdered = stream && !isHostShared;
  if (isHostShared) {
    if (!scope.check(scope.api().cuMemAllocManaged(&pointer, size_t(sizeBytes),
                                                   CU_MEM_ATTACH_GLOBAL),
                     MOE_CU_SYMBOL(cuMemAllocManaged), detail))
      return nullptr;
  } else if (streamOrdered) {
    CUmemoryPool pool = memoryPool(scope);
    if (!pool || !scope.check(scope.api().cuMemAllocFromPoolAsync(
                                  &pointer, size_t(sizeBytes), pool,
                                  static_cast<CUstream>(stream)),
                              MOE_CU_SYMBOL(cuMemAllocFromPoolAsync), detail))
      return nullptr;
  } else if (!scope.check(scope.api().cuMemAlloc(&pointer, size_t(sizeBytes)),
                          MOE_CU_SYMBOL(cuMemAlloc), detail)) {
    return nullptr;
  }
  Runtime &rt = scope.rt();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.allocations.emplace(pointer,
                         Allocation{scope.context(), sizeBytes, streamOrdered});
  return reinterpret_cast<void *>(pointer);
}

extern "C" void mgpuMemFree(void *ptr, void *stream) {
  EntryScope scope("mgpuMemFree", EntryScope::Kind::Release);
  if (!scope || !ptr)
    return;
  Runtime &rt = scope.rt();
  const auto pointer = reinterpret_cast<CUdeviceptr>(ptr);
  Allocation allocation = {};
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    auto found = rt.allocations.find(pointer);
    if (found == rt.allocations.end()) {
      scope.fail(format(
          "%p was not allocated by mgpuMemAlloc or is freed already", ptr));
      return;
    }
    allocation = found->second;
    rt.allocations.erase(found);
  }
  const std::string detail = format("%p", ptr);
  const DriverApi &api = scope.api();
  inContextOf(scope, allocation.context, [&] {
    if (allocation.streamOrdered && stream) {
      // Back to the pool once the work queued on the stream is done.
      scope.check(api.cuMemFreeAsync(pointer, static_cast<CUstream>(stream)),
                  MOE_CU_SYMBOL(cuMemFreeAsync), detail);
      return;
    }
    // gpu.dealloc is ordered after the work queued on the stream;
    // cuMemFree promises nothing about it (and for pool memory does not
    // even wait for the device).
    if (stream)
      scope.check(api.cuStreamSynchronize(static_cast<CUstream>(stream)),
                  MOE_CU_SYMBOL(cuStreamSynchronize));
    else if (allocation.streamOrdered)
      scope.check(api.cuCtxSynchronize(), MOE_CU_SYMBOL(cuCtxSynchronize));
    scope.check(api.cuMemFree(pointer), MOE_CU_SYMBOL(cuMemFree), detail);
  });
}

extern "C" void mgpuMemcpy(void *dst, void *src, int64_t sizeBytes,
                           void *stream) {
  EntryScope scope("mgpuMemcpy");
  if (!scope)
    return;
  if (sizeBytes == 0)
    return;
  if (sizeBytes < 0 || !dst || !src) {
    scope.fail(format("invalid copy of %" PRId64 " bytes from %p to %p",
                      sizeBytes, src, dst));
    return;
  }
  scope.check(scope.api().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                                        reinterpret_cast<CUdeviceptr>(src),
                                        size_t(sizeBytes),
                                        static_cast<CUstream>(stream)),
              MOE_CU_SYMBOL(cuMemcpyAsync),
              format("%" PRId64 " bytes from %p to %p", sizeBytes, src, dst));
}

extern "C" void mgpuMemset32(void *dst, int32_t value, int64_t count,
                             void *stream) {
  memsetEntry("mgpuMemset32", dst, uint32_t(value), count, stream, "words",
              &DriverApi::cuMemsetD32Async, MOE_CU_SYMBOL(cuMemsetD32Async));
}

extern "C" void mgpuMemset16(void *dst, int16_t value, int64_t count,
                             void *stream) {
  memsetEntry("mgpuMemset16", dst, uint16_t(value), count, stream, "halfwords",
              &DriverApi::cuMemsetD16Async, MOE_CU_SYMBOL(cuMemsetD16Async));
}

extern "C" void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                                          int64_t elementSizeBytes) {
  EntryScope scope("mgpuMemHostRegisterMemRef");
  if (!scope)
    return;
  int64_t spanBytes = 0;
  char *start =
      hostMemRefStart(scope, rank, descriptor, elementSizeBytes, spanBytes);
  if (!start)
    return;
  if (!scope.check(scope.api().cuMemHostRegister(start, size_t(spanBytes), 0),
                   MOE_CU_SYMBOL(cuMemHostRegister),
                   format("%" PRId64 " bytes at %p", spanBytes,
                          static_cast<void *>(start))))
    return;
  registerHandle(scope, scope.rt().hostRegistrations, start);
}

extern "C" void mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                                            int64_t elementSizeBytes) {
  EntryScope scope("mgpuMemHostUnregisterMemRef", EntryScope::Kind::Release);
  if (!scope)
    return;
  int64_t spanBytes = 0;
  char *start =
      hostMemRefStart(scope, rank, descriptor, elementSizeBytes, spanBytes);
  if (!start)
    return;
  releaseHandle(scope, scope.rt().hostRegistrations, start,
                "host memory at %p is not registered",
                scope.api().cuMemHostUnregister,
                MOE_CU_SYMBOL(cuMemHostUnregister));
}

//===----------------------------------------------------------------------===//
// Devices and tensor maps
//===----------------------------------------------------------------------===//

extern "C" void mgpuSetDefaultDevice(int32_t device) {
  Runtime &rt = Runtime::get();
  if (rt.hasError() || !rt.ensureDriver())
    return;
  if (device < 0) {
    rt.fail(std::string(kPrefix) +
            format("mgpuSetDefaultDevice: invalid device %d", device));
    return;
  }
  rt.setDevice(device);
}

extern "C" void *mgpuTensorMapEncodeTiledMemref(
    int64_t rank, void *descriptor, int64_t dataType, int64_t interleave,
    int64_t swizzle, int64_t l2Promotion, int64_t oobFill, int64_t *boxDims) {
  EntryScope scope("mgpuTensorMapEncodeTiledMemref");
  if (!scope)
    return nullptr;
  if (!descriptor) {
    scope.fail("null memref descriptor");
    return nullptr;
  }
  TensorMapArgs args;
  std::string problem = buildTensorMapArgs(
      viewRankedDescriptor(descriptor, rank), dataType, interleave, swizzle,
      l2Promotion, oobFill, boxDims, args);
  if (!problem.empty()) {
    scope.fail(problem);
    return nullptr;
  }
  Runtime &rt = scope.rt();
  const TensorMapCacheKey key(scope.context(), tensorMapKey(args));
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    auto found = rt.tensorMaps.find(key);
    if (found != rt.tensorMaps.end()) {
      ++rt.tensorMapCacheHits;
      return reinterpret_cast<void *>(found->second.device);
    }
  }
  auto tensorMap = std::make_unique<CUtensorMap>();
  CUresult result = scope.api().cuTensorMapEncodeTiled(
      tensorMap.get(), CUtensorMapDataType(args.dataType), args.rank,
      args.globalAddress, args.globalDim, args.globalStrides, args.boxDim,
      args.elementStrides, CUtensorMapInterleave(args.interleave),
      CUtensorMapSwizzle(args.swizzle),
      CUtensorMapL2promotion(args.l2Promotion),
      CUtensorMapFloatOOBfill(args.oobFill));
  if (result != CUDA_SUCCESS) {
    std::string detail = format(
        "data type %u, rank %u, address %p, dims [%s], byte strides "
        "[%s], box [%s], interleave %u, swizzle %u",
        args.dataType, args.rank, args.globalAddress,
        joined(args.globalDim, args.rank).c_str(),
        joined(args.globalStrides, args.rank - 1).c_str(),
        joined(args.boxDim, args.rank).c_str(), args.interleave, args.swizzle);
    scope.check(result, MOE_CU_SYMBOL(cuTensorMapEncodeTiled), detail);
    return nullptr;
  }
  // Kernels take the descriptor by generic address, so it lives in device
  // memory.
  if (CUstream stream = rt.callStream()) {
    // In a compiled call: the copy comes from the pool and is uploaded on
    // the call's stream, ahead of the launch that reads it, without a host
    // synchronization (an upload from pageable memory is staged before
    // cuMemcpyHtoDAsync returns). It serves the rest of the call and is
    // freed on the stream when the call ends (moeCudaRuntimeSetCallStream):
    // a caller's buffers move between calls (a training step's tensors),
    // and descriptors kept across calls would grow without bound. The lock
    // is held so that no other thread uploads the same descriptor
    // meanwhile.
    CUmemoryPool pool = memoryPool(scope);
    if (!pool)
      return nullptr;
    std::lock_guard<std::mutex> lock(rt.mutex);
    auto found = rt.tensorMaps.find(key);
    if (found != rt.tensorMaps.end()) {
      ++rt.tensorMapCacheHits;
      return reinterpret_cast<void *>(found->second.device);
    }
    CUdeviceptr device = 0;
    if (!scope.check(scope.api().cuMemAllocFromPoolAsync(
                         &device, sizeof(CUtensorMap), pool, stream),
                     MOE_CU_SYMBOL(cuMemAllocFromPoolAsync), "tensor map"))
      return nullptr;
    if (!scope.check(scope.api().cuMemcpyHtoDAsync(device, tensorMap.get(),
                                                   sizeof(CUtensorMap), stream),
                     MOE_CU_SYMBOL(cuMemcpyHtoDAsync), "tensor map")) {
      scope.api().cuMemFreeAsync(device, stream);
      return nullptr;
    }
    rt.tensorMaps.emplace(key,
                          TensorMapCopy{device, std::move(tensorMap), stream});
    ++rt.tensorMapEncodes;
    return reinterpret_cast<void *>(device);
  }
  CUdeviceptr device = 0;
  if (!scope.check(scope.api().cuMemAlloc(&device, sizeof(CUtensorMap)),
                   MOE_CU_SYMBOL(cuMemAlloc), "tensor map"))
    return nullptr;
  if (!scope.check(scope.api().cuMemcpyHtoD(device, tensorMap.get(),
                                            sizeof(CUtensorMap)),
                   MOE_CU_SYMBOL(cuMemcpyHtoD), "tensor map")) {
    scope.api().cuMemFree(device);
    return nullptr;
  }
  // A copy from pageable memory may return before it lands, and the
  // launch that reads the descriptor runs on a non-blocking stream, which
  // does not wait for it: wait here (once per cached descriptor).
  if (!scope.check(scope.api().cuCtxSynchronize(),
                   MOE_CU_SYMBOL(cuCtxSynchronize), "tensor map")) {
    scope.api().cuMemFree(device);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto inserted =
      rt.tensorMaps.emplace(key, TensorMapCopy{device, std::move(tensorMap)});
  if (!inserted.second) {
    // Another thread built the same descriptor meanwhile; keep one.
    scope.api().cuMemFree(device);
    ++rt.tensorMapCacheHits;
    return reinterpret_cast<void *>(inserted.first->second.device);
  }
  ++rt.tensorMapEncodes;
  return reinterpret_cast<void *>(device);
}

//===----------------------------------------------------------------------===//
// Host API
//===----------------------------------------------------------------------===//

extern "C" int32_t moeCudaRuntimeIsAvailable() {
  return Runtime::get().available() ? 1 : 0;
}

extern "C" int32_t moeCudaRuntimeHasError() {
  return Runtime::get().hasError() ? 1 : 0;
}

extern "C" const char *moeCudaRuntimeGetLastError() {
  return Runtime::get().lastError();
}

extern "C" void moeCudaRuntimeClearError() { Runtime::get().clearError(); }

extern "C" void moeCudaRuntimeSetErrorPrinting(int32_t print) {
  Runtime::get().setErrorPrinting(print != 0);
}

extern "C" void moeCudaRuntimeGetStats(MoeCudaRuntimeStats *stats) {
  if (stats)
    Runtime::get().stats(*stats);
}

extern "C" void moeCudaRuntimeSetCallStream(void *stream) {
  Runtime &rt = Runtime::get();
  CUstream ended = rt.callStream();
  rt.setCallStream(static_cast<CUstream>(stream));
  if (!ended || ended == stream)
    return;
  // The call on `ended` is queued: its tensor maps go back to the pool in
  // stream order, after the last launch that reads them.
  std::vector<std::pair<CUcontext, CUdeviceptr>> released;
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    for (auto it = rt.tensorMaps.begin(); it != rt.tensorMaps.end();) {
      if (it->second.callStream != ended) {
        ++it;
        continue;
      }
      released.emplace_back(it->first.first, it->second.device);
      it = rt.tensorMaps.erase(it);
    }
  }
  if (released.empty())
    return;
  EntryScope scope("moeCudaRuntimeSetCallStream", EntryScope::Kind::Release);
  if (!scope)
    return;
  for (const auto &entry : released) {
    // (A lambda captures no structured binding before C++20.)
    CUdeviceptr device = entry.second;
    inContextOf(scope, entry.first, [&] {
      scope.check(scope.api().cuMemFreeAsync(device, ended),
                  MOE_CU_SYMBOL(cuMemFreeAsync), "tensor map");
    });
  }
}

extern "C" void moeCudaRuntimeReset() { Runtime::get().reset(); }
