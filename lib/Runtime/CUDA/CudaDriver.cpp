//===- CudaDriver.cpp - The CUDA driver API, loaded with dlopen -----------===//
//
// Opens the driver library and fills the DriverApi table with dlsym. All
// symbols are resolved at once on the first entry-point call: a driver too old
// for one of them (cuTensorMapEncodeTiled needs CUDA 12) fails there, with the
// symbol named, instead of in the middle of a run.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"

#include <dlfcn.h>

namespace moe::cudart {

const char *const kDriverSymbols[] = {
#define MOE_CU_NAME(fn) MOE_CU_SYMBOL(fn),
    MOE_CUDA_DRIVER_FUNCTIONS(MOE_CU_NAME)
#undef MOE_CU_NAME
};
const size_t kNumDriverSymbols =
    sizeof(kDriverSymbols) / sizeof(kDriverSymbols[0]);

bool loadDriver(const char *library, void *&handle, DriverApi &api,
                std::string &error) {
  handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    error = std::string("moe-cuda-runtime: ") + library +
            " not found: " + (reason ? reason : "unknown dlopen error") +
            " (no NVIDIA driver here: running GPU code needs one; compiling "
            "it does not, e.g. moe-run --compile-only)";
    return false;
  }
  DriverApi resolved;
  // dlsym's void * becomes each member's own function pointer type.
#define MOE_CU_RESOLVE(fn)                                                     \
  resolved.fn = reinterpret_cast<decltype(resolved.fn)>(                       \
      dlsym(handle, MOE_CU_SYMBOL(fn)));                                       \
  if (!resolved.fn) {                                                          \
    const char *reason = dlerror();                                            \
    error = std::string("moe-cuda-runtime: ") + library + " lacks " +          \
            MOE_CU_SYMBOL(fn) + " (driver older than CUDA 12?): " +            \
            (reason ? reason : "symbol not found");                            \
    dlclose(handle);                                                           \
    handle = nullptr;                                                          \
    return false;                                                              \
  }
  MOE_CUDA_DRIVER_FUNCTIONS(MOE_CU_RESOLVE)
#undef MOE_CU_RESOLVE
  api = resolved;
  return true;
}

void unloadDriver(void *handle) {
  if (handle)
    dlclose(handle);
}

} // namespace moe::cudart
