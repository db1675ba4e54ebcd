//===- CudaDriverTest.cpp - The dlopen'ed driver table --------------------===//
//
// The table resolves the versioned symbols that cuda.h selects, and loading
// fails with a message naming the library or the missing symbol.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace moe::cudart;

namespace {

std::set<std::string> driverSymbols() {
  return std::set<std::string>(kDriverSymbols,
                               kDriverSymbols + kNumDriverSymbols);
}

TEST(CudaDriverTable, UsesTheVersionedSymbols) {
  const std::set<std::string> symbols = driverSymbols();
  EXPECT_EQ(symbols.size(), kNumDriverSymbols);
  EXPECT_EQ(kNumDriverSymbols, 40u);
  for (const char *versioned :
       {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2",
        "cuMemcpyHtoDAsync_v2", "cuMemHostRegister_v2", "cuStreamDestroy_v2",
        "cuEventDestroy_v2", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2"})
    EXPECT_EQ(symbols.count(versioned), 1u) << versioned;
  for (const char *plain :
       {"cuInit", "cuLaunchKernel", "cuLaunchKernelEx", "cuModuleLoadDataEx",
        "cuMemcpyAsync", "cuTensorMapEncodeTiled", "cuMemHostUnregister",
        "cuMemPoolCreate", "cuMemAllocFromPoolAsync", "cuMemFreeAsync"})
    EXPECT_EQ(symbols.count(plain), 1u) << plain;
  for (const std::string &symbol : symbols) {
    EXPECT_EQ(symbol.find("_ptsz"), std::string::npos) << symbol;
    EXPECT_EQ(symbol.find("_ptds"), std::string::npos) << symbol;
  }
}

TEST(CudaDriverTable, LoadsTheFakeDriver) {
  void *handle = nullptr;
  DriverApi api;
  std::string error;
  ASSERT_TRUE(loadDriver(MOE_FAKE_CUDA_LIBRARY, handle, api, error)) << error;
  EXPECT_NE(handle, nullptr);
  EXPECT_NE(api.cuMemAlloc, nullptr);
  EXPECT_NE(api.cuTensorMapEncodeTiled, nullptr);
  int count = 0;
  EXPECT_EQ(api.cuDeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 1);
  unloadDriver(handle);
}

TEST(CudaDriverTable, NamesAMissingLibrary) {
  void *handle = nullptr;
  DriverApi api;
  std::string error;
  EXPECT_FALSE(loadDriver("libmoe-no-such-driver.so.1", handle, api, error));
  EXPECT_EQ(handle, nullptr);
  EXPECT_EQ(error.rfind("moe-cuda-runtime: libmoe-no-such-driver.so.1 not "
                        "found: libmoe-no-such-driver.so.1: cannot open shared "
                        "object file",
                        0),
            0u)
      << error;
}

TEST(CudaDriverTable, NamesAMissingSymbol) {
  void *handle = nullptr;
  DriverApi api;
  std::string error;
  EXPECT_FALSE(loadDriver("libc.so.6", handle, api, error));
  EXPECT_EQ(handle, nullptr);
  EXPECT_EQ(error.rfind("moe-cuda-runtime: libc.so.6 lacks cuInit (driver "
                        "older than CUDA 12?): ",
                        0),
            0u)
      << error;
  EXPECT_EQ(api.cuInit, nullptr);
}

} // namespace
