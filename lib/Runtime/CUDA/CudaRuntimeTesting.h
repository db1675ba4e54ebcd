//===- CudaRuntimeTesting.h - Test hooks of the CUDA runtime ----*- C++ -*-===//
//
// Internal entry for the unit tests, which link the runtime statically: they
// run the mgpu* entry points against a missing driver and against a fake
// libcuda that records its calls. Not exported from libmoe_cuda_runtime.so.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_RUNTIME_CUDA_CUDARUNTIMETESTING_H
#define MOE_LIB_RUNTIME_CUDA_CUDARUNTIMETESTING_H

namespace moe::cudart {

/// Returns the runtime to its state at process start (releasing what it
/// holds through the current driver, closing the driver, forgetting the
/// error, the device and the contexts), with `library` as the driver that
/// the next entry point loads instead of libcuda.so.1.
void setDriverLibraryForTesting(const char *library);

} // namespace moe::cudart

#endif // MOE_LIB_RUNTIME_CUDA_CUDARUNTIMETESTING_H
