//===- CudaDriver.h - The CUDA driver API, loaded with dlopen ---*- C++ -*-===//
//
// The table of CUDA driver functions that the runtime calls, resolved with
// dlsym from libcuda.so.1 at first use, so that nothing links against libcuda
// and CPU-only machines can load the runtime. cuda.h is included for its
// types and prototypes only.
//
// cuda.h maps the plain names of functions whose ABI changed to versioned
// symbols (`#define cuMemAlloc cuMemAlloc_v2`). The table is written with the
// plain names and expands through those macros, so each entry gets the
// prototype and the exported symbol name of the same version.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_RUNTIME_CUDA_CUDADRIVER_H
#define MOE_LIB_RUNTIME_CUDA_CUDADRIVER_H

#include <cuda.h>

#include <cstddef>
#include <string>

namespace moe::cudart {

#define MOE_CU_STRINGIFY_IMPL(x) #x
/// The exported symbol of driver function `fn` as cuda.h selects it
/// (cuMemAlloc -> "cuMemAlloc_v2"); the argument is macro-expanded first.
#define MOE_CU_SYMBOL(fn) MOE_CU_STRINGIFY_IMPL(fn)

/// Every driver function the runtime uses.
#define MOE_CUDA_DRIVER_FUNCTIONS(X)                                           \
  X(cuInit)                                                                    \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxGetCurrent)                                                           \
  X(cuCtxPushCurrent)                                                          \
  X(cuCtxPopCurrent)                                                           \
  X(cuCtxSynchronize)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuLaunchKernelEx)                                                          \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuMemAlloc)                                                                \
  X(cuMemAllocManaged)                                                         \
  X(cuMemFree)                                                                 \
  X(cuMemPoolCreate)                                                           \
  X(cuMemPoolDestroy)                                                          \
  X(cuMemPoolSetAttribute)                                                     \
  X(cuMemAllocFromPoolAsync)                                                   \
  X(cuMemFreeAsync)                                                            \
  X(cuMemcpyAsync)                                                             \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemsetD32Async)                                                          \
  X(cuMemsetD16Async)                                                          \
  X(cuMemHostRegister)                                                         \
  X(cuMemHostUnregister)                                                       \
  X(cuTensorMapEncodeTiled)

/// Pointers to the driver functions, named as cuda.h names them after its
/// version macros (so `api.cuMemAlloc(...)` calls cuMemAlloc_v2).
struct DriverApi {
#define MOE_CU_MEMBER(fn) decltype(&::fn) fn = nullptr;
  MOE_CUDA_DRIVER_FUNCTIONS(MOE_CU_MEMBER)
#undef MOE_CU_MEMBER
};

/// The exported symbols of the DriverApi functions, in table order.
extern const char *const kDriverSymbols[];
extern const size_t kNumDriverSymbols;

/// dlopens `library` and resolves every function of the table. On failure
/// returns false, leaves nothing open and sets `error` to the message the
/// runtime reports ("moe-cuda-runtime: <library> not found: <dlerror>", or
/// which symbol is missing).
bool loadDriver(const char *library, void *&handle, DriverApi &api,
                std::string &error);

/// dlcloses a handle from loadDriver.
void unloadDriver(void *handle);

} // namespace moe::cudart

#endif // MOE_LIB_RUNTIME_CUDA_CUDADRIVER_H
