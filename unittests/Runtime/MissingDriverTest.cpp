//===- MissingDriverTest.cpp - The runtime without a driver ---------------===//
//
// What CPU-only machines see: every mgpu* entry point fails without a crash,
// pointer results are null, and the one recorded error names the library
// and dlopen's reason, printed once.
//
//===----------------------------------------------------------------------===//

#include "moe/Runtime/CudaRuntime.h"

#include "CudaRuntimeTesting.h"

#include <gtest/gtest.h>

#include <string>

namespace {

constexpr const char *kMissing = "libmoe-missing-driver.so.1";

class CudaRuntimeMissingDriver : public ::testing::Test {
protected:
  void SetUp() override { moe::cudart::setDriverLibraryForTesting(kMissing); }
};

std::string lastError() {
  const char *error = moeCudaRuntimeGetLastError();
  return error ? error : "";
}

/// Calls every entry point once with arguments that would be valid with a
/// driver; returns how many returned a non-null pointer.
int callEveryEntryPoint() {
  char image[] = "PTX";
  int64_t box[2] = {8, 8};
  struct {
    void *allocated, *aligned;
    int64_t offset, sizes[2], strides[2];
  } memref = {image, image, 0, {8, 8}, {8, 1}};
  int nonNull = 0;
  nonNull += mgpuModuleLoad(image, sizeof(image)) != nullptr;
  nonNull += mgpuModuleLoadJIT(image, 2) != nullptr;
  nonNull += mgpuModuleGetFunction(image, "k") != nullptr;
  mgpuLaunchKernel(image, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  mgpuLaunchClusterKernel(image, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr,
                          nullptr);
  nonNull += mgpuStreamCreate() != nullptr;
  mgpuStreamSynchronize(image);
  mgpuStreamWaitEvent(image, image);
  nonNull += mgpuEventCreate() != nullptr;
  mgpuEventRecord(image, image);
  mgpuEventSynchronize(image);
  nonNull += mgpuMemAlloc(64, nullptr, 0) != nullptr;
  nonNull += mgpuMemAlloc(64, nullptr, 1) != nullptr;
  mgpuMemcpy(image, image, 2, nullptr);
  mgpuMemset32(image, 0, 1, nullptr);
  mgpuMemset16(image, 0, 1, nullptr);
  mgpuMemHostRegisterMemRef(2, &memref, 1);
  mgpuMemHostUnregisterMemRef(2, &memref, 1);
  mgpuSetDefaultDevice(0);
  nonNull +=
      mgpuTensorMapEncodeTiledMemref(2, &memref, 0, 0, 0, 0, 0, box) != nullptr;
  mgpuEventDestroy(image);
  mgpuStreamDestroy(image);
  mgpuMemFree(image, nullptr);
  mgpuModuleUnload(image);
  return nonNull;
}

TEST_F(CudaRuntimeMissingDriver, IsNotAvailableAndRecordsNothingForIt) {
  EXPECT_EQ(moeCudaRuntimeIsAvailable(), 0);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0);
  EXPECT_EQ(moeCudaRuntimeGetLastError(), nullptr);
}

TEST_F(CudaRuntimeMissingDriver, EveryEntryPointFailsWithTheLoaderMessage) {
  char image[] = "unchanged";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(callEveryEntryPoint(), 0);
  mgpuMemcpy(image, const_cast<char *>("overwritten"), 9, nullptr);
  const std::string printed = ::testing::internal::GetCapturedStderr();

  EXPECT_EQ(moeCudaRuntimeHasError(), 1);
  const std::string expected =
      std::string("moe-cuda-runtime: ") + kMissing + " not found: " + kMissing +
      ": cannot open shared object file: No such file or directory (no "
      "NVIDIA driver here: running GPU code needs one; compiling it does "
      "not, e.g. moe-run --compile-only)";
  EXPECT_EQ(lastError(), expected);
  EXPECT_EQ(printed, expected + "\n");
  EXPECT_STREQ(image, "unchanged");

  MoeCudaRuntimeStats stats;
  moeCudaRuntimeGetStats(&stats);
  EXPECT_EQ(stats.modules + stats.streams + stats.events + stats.allocations +
                stats.hostRegistrations + stats.tensorMaps + stats.launches,
            0);
  // Work entry points are no-ops once an error is recorded; the five release
  // entry points still try (to give back what a failed run holds) and fail
  // again, silently.
  EXPECT_EQ(stats.suppressedErrors, 5);
}

TEST_F(CudaRuntimeMissingDriver, FailsAgainAfterTheErrorIsCleared) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  moeCudaRuntimeClearError();
  EXPECT_EQ(moeCudaRuntimeHasError(), 0);
  EXPECT_EQ(moeCudaRuntimeGetLastError(), nullptr);
  EXPECT_EQ(mgpuEventCreate(), nullptr);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(moeCudaRuntimeHasError(), 1);
  EXPECT_EQ(lastError().rfind("moe-cuda-runtime: libmoe-missing-driver.so.1 "
                              "not found: ",
                              0),
            0u);
}

TEST_F(CudaRuntimeMissingDriver, ResetIsHarmless) {
  moeCudaRuntimeReset();
  EXPECT_EQ(moeCudaRuntimeHasError(), 0);
  MoeCudaRuntimeStats stats;
  moeCudaRuntimeGetStats(&stats);
  EXPECT_EQ(stats.suppressedErrors, 0);
}

} // namespace
