// Helpers the device probes share (scripts/device/probes/*.cu): error
// checks of the driver and runtime calls, shared-memory addresses, and the
// driver's cuTensorMapEncodeTiled through the runtime (so that a probe
// links with the static runtime alone, no libcuda stub).
#ifndef MOE_SCRIPTS_DEVICE_PROBES_PROBE_H
#define MOE_SCRIPTS_DEVICE_PROBES_PROBE_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK_CU(x)                                                            \
  do {                                                                         \
    CUresult r = (x);                                                          \
    if (r != CUDA_SUCCESS) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: CUresult %d\n", __FILE__, __LINE__, #x, \
                   static_cast<int>(r));                                       \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)
#define CHECK_RT(x)                                                            \
  do {                                                                         \
    cudaError_t r = (x);                                                       \
    if (r != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,          \
                   cudaGetErrorString(r));                                     \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

__device__ inline uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// The driver's cuTensorMapEncodeTiled, through the runtime.
inline PFN_cuTensorMapEncodeTiled_v12000 encodeTiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *found = nullptr;
    cudaDriverEntryPointQueryResult status;
    CHECK_RT(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &found,
                                              12000, cudaEnableDefault,
                                              &status));
    if (status != cudaDriverEntryPointSuccess || !found) {
      std::fprintf(stderr, "no cuTensorMapEncodeTiled in the driver\n");
      std::exit(2);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(found);
  }();
  return fn;
}

#endif // MOE_SCRIPTS_DEVICE_PROBES_PROBE_H
