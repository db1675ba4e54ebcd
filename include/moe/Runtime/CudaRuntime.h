/*===- CudaRuntime.h - The mgpu* CUDA runtime of moe-mlir ---------*- C -*-===*\
|*                                                                            *|
|* The C interface of libmoe_cuda_runtime: the `mgpu*` entry points that      *|
|* MLIR 22's `gpu-to-llvm` (and the nvgpu TMA lowering) emit calls to, with   *|
|* the C types of the LLVM IR declarations (test/Runtime/CUDA pins them),     *|
|* and the host API through which moe-run queries and clears the sticky       *|
|* error and releases what a run left behind.                                 *|
|*                                                                            *|
|* The library loads libcuda.so.1 with dlopen at first use, so programs       *|
|* linked with it start on machines without a GPU; there every entry point    *|
|* fails with "moe-cuda-runtime: libcuda.so.1 not found: ...".                *|
|*                                                                            *|
|* Errors are sticky: the first failing driver call (or invalid argument) is  *|
|* recorded with the driver call's name and CUDA's error name and string,     *|
|* printed once to stderr, and from then on every entry point that does       *|
|* work is a no-op that returns null, until moeCudaRuntimeClearError(); the   *|
|* ones that free, destroy or unload still release. Nothing aborts.           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef MOE_RUNTIME_CUDARUNTIME_H
#define MOE_RUNTIME_CUDARUNTIME_H

#include <stdint.h>

#define MOE_CUDA_RUNTIME_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/*===-- Modules and kernels -----------------------------------------------===*/

/// Loads a cubin, fatbin or NUL-terminated PTX image of `size` bytes (the
/// `bin` and `fatbin` objects of gpu-module-to-binary).
MOE_CUDA_RUNTIME_EXPORT void *mgpuModuleLoad(void *data, int64_t size);
/// JIT-compiles a NUL-terminated PTX image (the `assembly` object) at ptxas
/// optimization level `optLevel` (0-4); the JIT log is part of any error.
MOE_CUDA_RUNTIME_EXPORT void *mgpuModuleLoadJIT(void *data, int32_t optLevel);
MOE_CUDA_RUNTIME_EXPORT void mgpuModuleUnload(void *module);
MOE_CUDA_RUNTIME_EXPORT void *mgpuModuleGetFunction(void *module,
                                                    const char *name);
/// `params` holds one pointer per kernel argument (`paramsCount` of them).
/// Dynamic shared memory above 48 KiB is opted into per function.
MOE_CUDA_RUNTIME_EXPORT void
mgpuLaunchKernel(void *function, int64_t gridX, int64_t gridY, int64_t gridZ,
                 int64_t blockX, int64_t blockY, int64_t blockZ, int32_t smem,
                 void *stream, void **params, void **extra,
                 int64_t paramsCount);
/// As mgpuLaunchKernel, with thread-block clusters of the given shape.
MOE_CUDA_RUNTIME_EXPORT void mgpuLaunchClusterKernel(
    void *function, int64_t clusterX, int64_t clusterY, int64_t clusterZ,
    int64_t gridX, int64_t gridY, int64_t gridZ, int64_t blockX, int64_t blockY,
    int64_t blockZ, int32_t smem, void *stream, void **params, void **extra);

/*===-- Streams and events ------------------------------------------------===*/

MOE_CUDA_RUNTIME_EXPORT void *mgpuStreamCreate(void);
MOE_CUDA_RUNTIME_EXPORT void mgpuStreamSynchronize(void *stream);
MOE_CUDA_RUNTIME_EXPORT void mgpuStreamDestroy(void *stream);
MOE_CUDA_RUNTIME_EXPORT void mgpuStreamWaitEvent(void *stream, void *event);
MOE_CUDA_RUNTIME_EXPORT void *mgpuEventCreate(void);
MOE_CUDA_RUNTIME_EXPORT void mgpuEventDestroy(void *event);
MOE_CUDA_RUNTIME_EXPORT void mgpuEventSynchronize(void *event);
MOE_CUDA_RUNTIME_EXPORT void mgpuEventRecord(void *event, void *stream);

/*===-- Memory ------------------------------------------------------------===*/

/// Device memory, or managed memory when `isHostShared` is non-zero. Zero
/// bytes give a null pointer without an error. On a stream, device memory
/// comes from the context's stream-ordered pool (cuMemAllocFromPoolAsync),
/// usable by the work queued on the stream after the call; the pool keeps
/// freed memory cached, so this needs no host synchronization and, once
/// the pool has grown, no OS allocation. Without a stream: cuMemAlloc.
MOE_CUDA_RUNTIME_EXPORT void *mgpuMemAlloc(int64_t sizeBytes, void *stream,
                                           int8_t isHostShared);
/// Frees after the work queued on `stream` has completed: pool memory
/// freed on a stream goes back to the pool in stream order
/// (cuMemFreeAsync, no host synchronization); anything else waits for the
/// stream (the device without one) and is freed with cuMemFree.
MOE_CUDA_RUNTIME_EXPORT void mgpuMemFree(void *ptr, void *stream);
MOE_CUDA_RUNTIME_EXPORT void mgpuMemcpy(void *dst, void *src, int64_t sizeBytes,
                                        void *stream);
MOE_CUDA_RUNTIME_EXPORT void mgpuMemset32(void *dst, int32_t value,
                                          int64_t count, void *stream);
MOE_CUDA_RUNTIME_EXPORT void mgpuMemset16(void *dst, int16_t value,
                                          int64_t count, void *stream);
/// Page-locks the host memory spanned by a ranked memref descriptor (any
/// strides) of `rank` dimensions, so the device can access it.
MOE_CUDA_RUNTIME_EXPORT void
mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                          int64_t elementSizeBytes);
MOE_CUDA_RUNTIME_EXPORT void
mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                            int64_t elementSizeBytes);

/*===-- Devices and tensor maps -------------------------------------------===*/

/// Selects the device whose primary context the following calls use.
MOE_CUDA_RUNTIME_EXPORT void mgpuSetDefaultDevice(int32_t device);

/// Returns a device pointer to a CUtensorMap (TMA descriptor) for the
/// ranked memref descriptor `descriptor` of rank 1-5, tiled by `boxDims`
/// (memref order, outermost first). `dataType`, `interleave`, `swizzle`,
/// `l2Promotion` and `oobFill` are the CUtensorMap* enum values. Global
/// dimensions and byte strides come from the memref's sizes and strides,
/// the address includes its offset. Descriptors are cached per argument
/// set; the device copies belong to the cache, which
/// moeCudaRuntimeReset() empties. While a call stream is set
/// (moeCudaRuntimeSetCallStream), a new descriptor's copy comes from the
/// pool and is uploaded on that stream, so a launch queued on it later sees
/// it, with no host synchronization; it is cached for the rest of that call
/// only, and freed on the stream when the call ends. Otherwise the copy is
/// complete on return (the context is synchronized), so a launch on any
/// stream sees it.
MOE_CUDA_RUNTIME_EXPORT void *mgpuTensorMapEncodeTiledMemref(
    int64_t rank, void *descriptor, int64_t dataType, int64_t interleave,
    int64_t swizzle, int64_t l2Promotion, int64_t oobFill, int64_t *boxDims);

/*===-- Host API ----------------------------------------------------------===*/

/// What the runtime holds now (handed out and not yet released) and what
/// the tensor-map cache did since the last reset.
typedef struct MoeCudaRuntimeStats {
  int64_t modules;
  int64_t streams;
  int64_t events;
  int64_t allocations;
  int64_t allocatedBytes;
  int64_t hostRegistrations;
  int64_t tensorMaps;
  int64_t tensorMapEncodes;
  int64_t tensorMapCacheHits;
  int64_t launches;
  /// Failures after the first one (not recorded, not printed).
  int64_t suppressedErrors;
} MoeCudaRuntimeStats;

/// Non-zero when libcuda loads, initializes and has a device. Records no
/// error.
MOE_CUDA_RUNTIME_EXPORT int32_t moeCudaRuntimeIsAvailable(void);
/// Non-zero once an error is recorded.
MOE_CUDA_RUNTIME_EXPORT int32_t moeCudaRuntimeHasError(void);
/// The recorded error ("moe-cuda-runtime: ..."), or null. The text stays
/// valid until moeCudaRuntimeClearError().
MOE_CUDA_RUNTIME_EXPORT const char *moeCudaRuntimeGetLastError(void);
/// Forgets the recorded error so that the entry points work again.
MOE_CUDA_RUNTIME_EXPORT void moeCudaRuntimeClearError(void);
/// Whether the runtime prints each recorded error to stderr (default 1, for
/// programs such as mlir-runner that never ask for it). A host that reports
/// moeCudaRuntimeGetLastError itself, as the JIT does, sets 0 so that the
/// error is printed once, by the host.
MOE_CUDA_RUNTIME_EXPORT void moeCudaRuntimeSetErrorPrinting(int32_t print);
MOE_CUDA_RUNTIME_EXPORT void moeCudaRuntimeGetStats(MoeCudaRuntimeStats *stats);
/// Names the stream that the compiled call about to run queues its work on
/// (null: none). mgpuTensorMapEncodeTiledMemref, whose signature carries no
/// stream, then uploads new descriptors on it instead of synchronizing.
/// Naming another stream or null ends the call: the descriptors uploaded
/// on its stream are freed there, in stream order (cuMemFreeAsync), so
/// that a process running many calls on moving buffers holds none of them.
/// The stream must outlive the call; moeCudaRuntimeReset() forgets it.
MOE_CUDA_RUNTIME_EXPORT void moeCudaRuntimeSetCallStream(void *stream);
/// Ends a run: waits for the device, then destroys the streams and events,
/// frees the device allocations (pool memory goes back to the pool, which
/// keeps it for the next run), unregisters the host memory and frees the
/// tensor-map descriptors that are still held, forgets the call stream and
/// zeroes the counters.
/// Modules stay loaded: the JIT-compiled code unloads them in its global
/// destructors. Call it after the run's results have been copied out. The
/// recorded error, if any, stays until moeCudaRuntimeClearError().
MOE_CUDA_RUNTIME_EXPORT void moeCudaRuntimeReset(void);

#ifdef __cplusplus
}
#endif

/// Every function above, X(name) each: for a host that links the runtime
/// statically and hands the addresses to its JIT (an absolute symbol per
/// name) instead of exporting them from the executable.
#define MOE_CUDA_RUNTIME_FUNCTIONS(X)                                          \
  X(mgpuModuleLoad)                                                            \
  X(mgpuModuleLoadJIT)                                                         \
  X(mgpuModuleUnload)                                                          \
  X(mgpuModuleGetFunction)                                                     \
  X(mgpuLaunchKernel)                                                          \
  X(mgpuLaunchClusterKernel)                                                   \
  X(mgpuStreamCreate)                                                          \
  X(mgpuStreamSynchronize)                                                     \
  X(mgpuStreamDestroy)                                                         \
  X(mgpuStreamWaitEvent)                                                       \
  X(mgpuEventCreate)                                                           \
  X(mgpuEventDestroy)                                                          \
  X(mgpuEventSynchronize)                                                      \
  X(mgpuEventRecord)                                                           \
  X(mgpuMemAlloc)                                                              \
  X(mgpuMemFree)                                                               \
  X(mgpuMemcpy)                                                                \
  X(mgpuMemset32)                                                              \
  X(mgpuMemset16)                                                              \
  X(mgpuMemHostRegisterMemRef)                                                 \
  X(mgpuMemHostUnregisterMemRef)                                               \
  X(mgpuSetDefaultDevice)                                                      \
  X(mgpuTensorMapEncodeTiledMemref)                                            \
  X(moeCudaRuntimeIsAvailable)                                                 \
  X(moeCudaRuntimeHasError)                                                    \
  X(moeCudaRuntimeGetLastError)                                                \
  X(moeCudaRuntimeClearError)                                                  \
  X(moeCudaRuntimeGetStats)                                                    \
  X(moeCudaRuntimeSetCallStream)                                               \
  X(moeCudaRuntimeReset)

#endif /* MOE_RUNTIME_CUDARUNTIME_H */
