//===- FakeDriverTest.cpp - The runtime against a recording libcuda -------===//
//
// Runs the mgpu* entry points against FakeCuda (host memory for device
// memory, counted handles, injectable failures): the driver calls made, the
// exact error messages, the sticky error, what Reset releases, the tensor-map
// cache and the launch opt-ins. After every test the fake holds no pushed
// context, i.e. every entry point restored the caller's context.
//
//===----------------------------------------------------------------------===//

#include "moe/Runtime/CudaRuntime.h"

#include "CudaRuntimeTesting.h"
#include "FakeCuda.h"

#include <cuda.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

template <int Rank> struct MemRef {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

std::string lastError() {
  const char *error = moeCudaRuntimeGetLastError();
  return error ? error : "";
}

MoeCudaRuntimeStats stats() {
  MoeCudaRuntimeStats out;
  moeCudaRuntimeGetStats(&out);
  return out;
}

class CudaRuntimeFakeDriver : public ::testing::Test {
protected:
  void SetUp() override {
    moe::cudart::setDriverLibraryForTesting(MOE_FAKE_CUDA_LIBRARY);
    fakeCudaReset();
    baseline = fakeCudaLive();
    ::testing::internal::CaptureStderr();
  }

  void TearDown() override {
    printed = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(fakeCudaContextDepth(), 0);
  }

  /// The fake's live objects minus those at the start of the test.
  FakeLiveObjects held() {
    FakeLiveObjects now = fakeCudaLive();
    return {now.modules - baseline.modules,
            now.streams - baseline.streams,
            now.events - baseline.events,
            now.allocations - baseline.allocations,
            now.hostRegistrations - baseline.hostRegistrations,
            now.pools - baseline.pools};
  }

  /// Loads a module and looks up kernel `name` in it.
  void *function(const char *name) {
    char image[] = "ptx";
    module = mgpuModuleLoadJIT(image, 2);
    return mgpuModuleGetFunction(module, name);
  }

  FakeLiveObjects baseline = {};
  void *module = nullptr;
  std::string printed;
};

TEST_F(CudaRuntimeFakeDriver, IsAvailable) {
  EXPECT_EQ(moeCudaRuntimeIsAvailable(), 1);
}

TEST_F(CudaRuntimeFakeDriver, CopiesAndFillsThroughTheDriver) {
  void *stream = mgpuStreamCreate();
  ASSERT_NE(stream, nullptr);
  auto *device = static_cast<uint32_t *>(mgpuMemAlloc(64, stream, 0));
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(stats().allocations, 1);
  EXPECT_EQ(stats().allocatedBytes, 64);

  mgpuMemset32(device, int32_t(0x89abcdef), 16, stream);
  mgpuMemset16(device + 2, int16_t(0x1234), 4, stream);
  uint32_t host[16] = {};
  mgpuMemcpy(host, device, sizeof(host), stream);
  mgpuStreamSynchronize(stream);
  EXPECT_EQ(host[0], 0x89abcdefu);
  EXPECT_EQ(host[1], 0x89abcdefu);
  EXPECT_EQ(host[2], 0x12341234u);
  EXPECT_EQ(host[3], 0x12341234u);
  EXPECT_EQ(host[4], 0x89abcdefu);
  EXPECT_EQ(host[15], 0x89abcdefu);
  EXPECT_EQ(fakeCudaCalls("cuMemAllocFromPoolAsync"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemcpyAsync"), 1);

  mgpuMemFree(device, stream);
  mgpuStreamDestroy(stream);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0) << lastError();
  EXPECT_EQ(stats().allocations, 0);
  EXPECT_EQ(stats().streams, 0);
  EXPECT_EQ(held().allocations, 0);
  EXPECT_EQ(held().streams, 0);
}

/// The index of the first call of `symbol` in the fake's log, or -1.
int firstCall(const char *symbol) {
  for (int i = 0; i < fakeCudaCallCount(); ++i)
    if (std::string(fakeCudaCallAt(i).symbol) == symbol)
      return i;
  return -1;
}

TEST_F(CudaRuntimeFakeDriver, MemoryOnAStreamIsStreamOrderedFromAPool) {
  void *stream = mgpuStreamCreate();
  void *first = mgpuMemAlloc(1024, stream, 0);
  void *second = mgpuMemAlloc(64, stream, 0);
  ASSERT_NE(first, nullptr) << lastError();
  ASSERT_NE(second, nullptr) << lastError();
  // One pool for the context, keeping all freed memory cached.
  EXPECT_EQ(fakeCudaCalls("cuMemPoolCreate"), 1);
  EXPECT_EQ(fakeCudaLastReleaseThreshold(), UINT64_MAX);
  EXPECT_EQ(held().pools, 1);
  EXPECT_EQ(fakeCudaCalls("cuMemAllocFromPoolAsync"), 2);
  int alloc = firstCall("cuMemAllocFromPoolAsync");
  ASSERT_GE(alloc, 0);
  EXPECT_EQ(fakeCudaCallAt(alloc).stream, reinterpret_cast<uintptr_t>(stream));
  EXPECT_EQ(stats().allocatedBytes, 1088);

  // Freed in stream order: no host synchronization, no cuMemFree.
  mgpuMemFree(first, stream);
  mgpuMemFree(second, stream);
  EXPECT_EQ(fakeCudaCalls("cuMemFreeAsync"), 2);
  int release = firstCall("cuMemFreeAsync");
  ASSERT_GE(release, 0);
  EXPECT_EQ(fakeCudaCallAt(release).stream,
            reinterpret_cast<uintptr_t>(stream));
  EXPECT_EQ(fakeCudaCalls("cuStreamSynchronize"), 0);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 0);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 0);
  EXPECT_EQ(held().allocations, 0);

  // Without a stream: cuMemAlloc, and cuMemFree after the device is done.
  void *plain = mgpuMemAlloc(64, nullptr, 0);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 1);
  mgpuMemFree(plain, nullptr);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 1);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 0);
  // Pool memory freed without a stream: cuMemFree does not wait for the
  // device then, so the runtime does.
  void *pooled = mgpuMemAlloc(64, stream, 0);
  mgpuMemFree(pooled, nullptr);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 2);
  mgpuStreamDestroy(stream);
  EXPECT_EQ(fakeCudaCalls("cuMemPoolCreate"), 1);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0) << lastError();
}

TEST_F(CudaRuntimeFakeDriver, PoolFailuresAreRecorded) {
  void *stream = mgpuStreamCreate();
  fakeCudaFailNext("cuMemAllocFromPoolAsync", CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(mgpuMemAlloc(1 << 20, stream, 0), nullptr);
  EXPECT_EQ(lastError(),
            "moe-cuda-runtime: mgpuMemAlloc: cuMemAllocFromPoolAsync failed "
            "with CUDA_ERROR_OUT_OF_MEMORY (out of memory): 1048576 bytes");
  moeCudaRuntimeClearError();
  mgpuStreamDestroy(stream);
  EXPECT_EQ(held().allocations, 0);
}

TEST_F(CudaRuntimeFakeDriver, EmptyTransfersNeedNoDriver) {
  EXPECT_EQ(mgpuMemAlloc(0, nullptr, 0), nullptr);
  mgpuMemcpy(nullptr, nullptr, 0, nullptr);
  mgpuMemset32(nullptr, 0, 0, nullptr);
  mgpuMemFree(nullptr, nullptr);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0) << lastError();
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 0);
  EXPECT_EQ(fakeCudaCalls("cuMemcpyAsync"), 0);
}

TEST_F(CudaRuntimeFakeDriver, ManagedMemoryForHostShared) {
  void *shared = mgpuMemAlloc(32, nullptr, 1);
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(fakeCudaCalls("cuMemAllocManaged"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 0);
  mgpuMemFree(shared, nullptr);
  EXPECT_EQ(held().allocations, 0);
}

TEST_F(CudaRuntimeFakeDriver, DriverFailureIsRecordedWithNameAndText) {
  fakeCudaFailNext("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(mgpuMemAlloc(64, nullptr, 0), nullptr);
  const std::string expected =
      "moe-cuda-runtime: mgpuMemAlloc: cuMemAlloc_v2 failed with "
      "CUDA_ERROR_OUT_OF_MEMORY (out of memory): 64 bytes";
  EXPECT_EQ(moeCudaRuntimeHasError(), 1);
  EXPECT_EQ(lastError(), expected);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), expected + "\n");
  ::testing::internal::CaptureStderr();
}

TEST_F(CudaRuntimeFakeDriver, UnknownResultsAreNamedByNumber) {
  // 1000: no CUresult has that value, but it is inside the enum's range
  // (0..1023), so holding it in a CUresult is defined behaviour.
  fakeCudaFailNext("cuStreamCreate", 1000);
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuStreamCreate: cuStreamCreate "
                         "failed with CUresult 1000 (no description)");
}

TEST_F(CudaRuntimeFakeDriver, AnErrorStopsAllLaterWork) {
  void *kernel = function("k");
  void *stream = mgpuStreamCreate();
  fakeCudaFailNext("cuStreamSynchronize", CUDA_ERROR_ILLEGAL_ADDRESS);
  mgpuStreamSynchronize(stream);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuStreamSynchronize: "
                         "cuStreamSynchronize failed with "
                         "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access "
                         "was encountered)");

  char host[] = "unchanged";
  mgpuMemcpy(host, const_cast<char *>("overwrite"), 9, stream);
  EXPECT_STREQ(host, "unchanged");
  mgpuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr, 0);
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  EXPECT_EQ(mgpuEventCreate(), nullptr);
  EXPECT_EQ(mgpuMemAlloc(16, stream, 0), nullptr);
  char image[] = "ptx";
  EXPECT_EQ(mgpuModuleLoad(image, 4), nullptr);
  EXPECT_EQ(fakeCudaCalls("cuMemcpyAsync"), 0);
  EXPECT_EQ(fakeCudaCalls("cuLaunchKernel"), 0);
  EXPECT_EQ(fakeCudaCalls("cuStreamCreate"), 1);
  EXPECT_EQ(fakeCudaCalls("cuEventCreate"), 0);
  EXPECT_EQ(fakeCudaCalls("cuModuleLoadDataEx"), 1);

  moeCudaRuntimeClearError();
  EXPECT_EQ(moeCudaRuntimeHasError(), 0);
  void *again = mgpuStreamCreate();
  EXPECT_NE(again, nullptr);
  mgpuStreamDestroy(again);
  mgpuStreamDestroy(stream);
  mgpuModuleUnload(module);
  EXPECT_EQ(held().streams, 0);
  EXPECT_EQ(held().modules, 0);
}

TEST_F(CudaRuntimeFakeDriver, FirstErrorWinsAndIsPrintedOnce) {
  fakeCudaFailNext("cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(mgpuEventCreate(), nullptr);
  int local = 0;
  mgpuMemFree(&local, nullptr);
  mgpuStreamDestroy(&local);
  const std::string first = "moe-cuda-runtime: mgpuEventCreate: cuEventCreate "
                            "failed with CUDA_ERROR_OUT_OF_MEMORY (out of "
                            "memory)";
  EXPECT_EQ(lastError(), first);
  EXPECT_EQ(stats().suppressedErrors, 2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), first + "\n");
  ::testing::internal::CaptureStderr();
  moeCudaRuntimeClearError();
  EXPECT_EQ(stats().suppressedErrors, 0);
}

// A host that reports errors itself (the JIT) turns the printing off: the
// error is recorded all the same.
TEST_F(CudaRuntimeFakeDriver, ErrorPrintingCanBeTurnedOff) {
  moeCudaRuntimeSetErrorPrinting(0);
  fakeCudaFailNext("cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(mgpuEventCreate(), nullptr);
  moeCudaRuntimeSetErrorPrinting(1);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuEventCreate: cuEventCreate "
                         "failed with CUDA_ERROR_OUT_OF_MEMORY (out of "
                         "memory)");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ::testing::internal::CaptureStderr();
  moeCudaRuntimeClearError();
}

// The toolkit's stub libcuda cannot name its own result: the runtime does
// (issue 13: "cuInit failed with CUresult 34 (no description)").
TEST_F(CudaRuntimeFakeDriver, StubLibraryResultIsExplained) {
  moeCudaRuntimeSetErrorPrinting(0);
  fakeCudaFailNext("cuStreamCreate", CUDA_ERROR_STUB_LIBRARY);
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  moeCudaRuntimeSetErrorPrinting(1);
  EXPECT_EQ(lastError(),
            "moe-cuda-runtime: mgpuStreamCreate: cuStreamCreate failed with "
            "CUDA_ERROR_STUB_LIBRARY (the CUDA toolkit's stub libcuda was "
            "loaded instead of the NVIDIA driver's; put the driver's "
            "libcuda.so.1 first on the library path)");
  moeCudaRuntimeClearError();
}

TEST_F(CudaRuntimeFakeDriver, ReleaseStillWorksAfterAnError) {
  void *stream = mgpuStreamCreate();
  void *event = mgpuEventCreate();
  void *buffer = mgpuMemAlloc(128, stream, 0);
  void *kernel = function("k");
  ASSERT_NE(kernel, nullptr);
  fakeCudaFailNext("cuLaunchKernel", CUDA_ERROR_INVALID_VALUE);
  mgpuLaunchKernel(kernel, 2, 1, 1, 64, 1, 1, 0, stream, nullptr, nullptr, 0);
  const std::string error = lastError();
  EXPECT_EQ(error, "moe-cuda-runtime: mgpuLaunchKernel: cuLaunchKernel failed "
                   "with CUDA_ERROR_INVALID_VALUE (invalid argument): kernel "
                   "'k', grid (2, 1, 1), block (64, 1, 1), 0 bytes of dynamic "
                   "shared memory");
  mgpuMemFree(buffer, stream);
  mgpuEventDestroy(event);
  mgpuStreamDestroy(stream);
  mgpuModuleUnload(module);
  EXPECT_EQ(lastError(), error);
  EXPECT_EQ(held().allocations, 0);
  EXPECT_EQ(held().events, 0);
  EXPECT_EQ(held().streams, 0);
  EXPECT_EQ(held().modules, 0);
  EXPECT_EQ(stats().allocations + stats().events + stats().streams +
                stats().modules,
            0);
}

TEST_F(CudaRuntimeFakeDriver, UnknownHandlesAreErrors) {
  int local = 0;
  mgpuMemFree(&local, nullptr);
  EXPECT_NE(lastError().find("mgpuMemFree: "), std::string::npos);
  EXPECT_NE(lastError().find(" was not allocated by mgpuMemAlloc or is freed "
                             "already"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 0);
  moeCudaRuntimeClearError();

  void *stream = mgpuStreamCreate();
  mgpuStreamDestroy(stream);
  mgpuStreamDestroy(stream);
  EXPECT_NE(lastError().find("mgpuStreamDestroy: "), std::string::npos);
  EXPECT_NE(lastError().find(" was not created by mgpuStreamCreate or is "
                             "destroyed already"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(fakeCudaCalls("cuStreamDestroy_v2"), 1);
}

TEST_F(CudaRuntimeFakeDriver, ModuleLoadsPassTheJitOptionsAndLog) {
  char ptx[] = "ptx";
  void *jit = mgpuModuleLoadJIT(ptx, 3);
  EXPECT_NE(jit, nullptr);
  EXPECT_EQ(fakeCudaLastOptLevel(), 3);
  void *binary = mgpuModuleLoad(ptx, 4);
  EXPECT_NE(binary, nullptr);
  EXPECT_EQ(fakeCudaLastOptLevel(), -1);
  EXPECT_EQ(stats().modules, 2);

  char bad[] = "BAD ptx";
  EXPECT_EQ(mgpuModuleLoadJIT(bad, 2), nullptr);
  EXPECT_EQ(lastError(),
            "moe-cuda-runtime: mgpuModuleLoadJIT: cuModuleLoadDataEx failed "
            "with CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed): JIT "
            "log:\nptxas fatal   : Unexpected token 'BAD'");
  moeCudaRuntimeClearError();

  EXPECT_EQ(mgpuModuleLoadJIT(ptx, 5), nullptr);
  EXPECT_NE(lastError().find("or optimization level 5 (0-4)"),
            std::string::npos)
      << lastError();
  moeCudaRuntimeClearError();

  mgpuModuleUnload(jit);
  mgpuModuleUnload(binary);
  EXPECT_EQ(stats().modules, 0);
  EXPECT_EQ(held().modules, 0);
}

TEST_F(CudaRuntimeFakeDriver, GetFunctionNamesTheKernel) {
  EXPECT_EQ(function("missing"), nullptr);
  EXPECT_EQ(lastError(),
            "moe-cuda-runtime: mgpuModuleGetFunction: cuModuleGetFunction "
            "failed with CUDA_ERROR_NOT_FOUND (named symbol not found): "
            "kernel 'missing'");
  moeCudaRuntimeClearError();
  mgpuModuleUnload(module);
}

TEST_F(CudaRuntimeFakeDriver, LaunchOptsIntoLargeSharedMemoryOnce) {
  void *kernel = function("k");
  void *stream = mgpuStreamCreate();
  uint32_t count = 7;
  void *params[] = {&count};
  mgpuLaunchKernel(kernel, 3, 2, 1, 128, 1, 1, 100000, stream, params, nullptr,
                   1);
  EXPECT_EQ(fakeCudaLastSmemAttribute(), 100000);
  EXPECT_EQ(fakeCudaCalls("cuFuncSetAttribute"), 1);
  FakeLaunch launch = fakeCudaLastLaunch();
  EXPECT_EQ(launch.function, reinterpret_cast<uintptr_t>(kernel));
  EXPECT_EQ(launch.grid[0], 3u);
  EXPECT_EQ(launch.grid[1], 2u);
  EXPECT_EQ(launch.grid[2], 1u);
  EXPECT_EQ(launch.block[0], 128u);
  EXPECT_EQ(launch.smem, 100000u);
  EXPECT_EQ(launch.stream, reinterpret_cast<uintptr_t>(stream));

  mgpuLaunchKernel(kernel, 3, 2, 1, 128, 1, 1, 90000, stream, params, nullptr,
                   1);
  mgpuLaunchKernel(kernel, 3, 2, 1, 128, 1, 1, 48 * 1024, stream, params,
                   nullptr, 1);
  EXPECT_EQ(fakeCudaCalls("cuFuncSetAttribute"), 1);
  mgpuLaunchKernel(kernel, 3, 2, 1, 128, 1, 1, 120000, stream, params, nullptr,
                   1);
  EXPECT_EQ(fakeCudaCalls("cuFuncSetAttribute"), 2);
  EXPECT_EQ(fakeCudaLastSmemAttribute(), 120000);
  EXPECT_EQ(fakeCudaCalls("cuLaunchKernel"), 4);
  EXPECT_EQ(stats().launches, 4);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0) << lastError();
  mgpuStreamDestroy(stream);
  mgpuModuleUnload(module);
}

TEST_F(CudaRuntimeFakeDriver, LaunchRejectsShapesTheDriverCannotTake) {
  void *kernel = function("k");
  mgpuLaunchKernel(kernel, 0, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuLaunchKernel: kernel 'k': "
                         "invalid launch shape grid (0, 1, 1) block (128, 1, "
                         "1)");
  moeCudaRuntimeClearError();
  mgpuLaunchKernel(kernel, int64_t(1) << 32, 1, 1, 128, 1, 1, 0, nullptr,
                   nullptr, nullptr, 0);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuLaunchKernel: kernel 'k': "
                         "invalid launch shape grid (4294967296, 1, 1) block "
                         "(128, 1, 1)");
  moeCudaRuntimeClearError();
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuLaunchKernel: null function "
                         "(did mgpuModuleGetFunction fail?)");
  moeCudaRuntimeClearError();
  mgpuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 2);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuLaunchKernel: 2 kernel "
                         "arguments but no argument array");
  moeCudaRuntimeClearError();
  EXPECT_EQ(fakeCudaCalls("cuLaunchKernel"), 0);
  mgpuModuleUnload(module);
}

TEST_F(CudaRuntimeFakeDriver, ClusterLaunchPassesTheClusterShape) {
  void *kernel = function("k");
  mgpuLaunchClusterKernel(kernel, 2, 1, 1, 4, 2, 1, 128, 1, 1, 0, nullptr,
                          nullptr, nullptr);
  FakeLaunch launch = fakeCudaLastLaunch();
  EXPECT_EQ(launch.cluster[0], 2u);
  EXPECT_EQ(launch.cluster[1], 1u);
  EXPECT_EQ(launch.cluster[2], 1u);
  EXPECT_EQ(launch.grid[0], 4u);
  EXPECT_EQ(launch.grid[1], 2u);
  EXPECT_EQ(fakeCudaCalls("cuFuncSetAttribute"), 0);

  // Sixteen blocks per cluster need the non-portable opt-in, once.
  mgpuLaunchClusterKernel(kernel, 16, 1, 1, 32, 1, 1, 128, 1, 1, 0, nullptr,
                          nullptr, nullptr);
  mgpuLaunchClusterKernel(kernel, 16, 1, 1, 32, 1, 1, 128, 1, 1, 0, nullptr,
                          nullptr, nullptr);
  EXPECT_EQ(fakeCudaCalls("cuFuncSetAttribute"), 1);
  EXPECT_EQ(fakeCudaCalls("cuLaunchKernelEx"), 3);

  mgpuLaunchClusterKernel(kernel, 3, 1, 1, 4, 1, 1, 128, 1, 1, 0, nullptr,
                          nullptr, nullptr);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuLaunchClusterKernel: kernel "
                         "'k': cluster (3, 1, 1) does not divide grid (4, 1, "
                         "1)");
  EXPECT_EQ(fakeCudaCalls("cuLaunchKernelEx"), 3);
  moeCudaRuntimeClearError();
  mgpuModuleUnload(module);
}

TEST_F(CudaRuntimeFakeDriver, TensorMapIsEncodedOnceAndCopiedToTheDevice) {
  // bf16, rows padded to 48 elements, planes to 320, offset 8 elements.
  void *buffer = mgpuMemAlloc(2 * (8 + 4 * 320), nullptr, 0);
  ASSERT_NE(buffer, nullptr);
  MemRef<3> memref = {buffer, buffer, 8, {4, 6, 40}, {320, 48, 1}};
  int64_t box[3] = {2, 3, 8};
  void *map = mgpuTensorMapEncodeTiledMemref(
      3, &memref, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 0,
      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0, box);
  ASSERT_NE(map, nullptr) << lastError();

  FakeTensorMapCall call = fakeCudaLastTensorMap();
  EXPECT_EQ(call.dataType, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(call.rank, 3u);
  EXPECT_EQ(call.globalAddress, static_cast<char *>(buffer) + 16);
  EXPECT_EQ(call.globalDim[0], 40u);
  EXPECT_EQ(call.globalDim[1], 6u);
  EXPECT_EQ(call.globalDim[2], 4u);
  EXPECT_EQ(call.globalStrides[0], 96u);
  EXPECT_EQ(call.globalStrides[1], 640u);
  EXPECT_EQ(call.boxDim[0], 8u);
  EXPECT_EQ(call.boxDim[1], 3u);
  EXPECT_EQ(call.boxDim[2], 2u);
  EXPECT_EQ(call.elementStrides[0], 1u);
  EXPECT_EQ(call.elementStrides[2], 1u);
  EXPECT_EQ(call.l2Promotion, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);

  // The device copy holds the encoded descriptor (serial 1, the address).
  uint64_t copied[2];
  std::memcpy(copied, map, sizeof(copied));
  EXPECT_EQ(copied[0], 1u);
  EXPECT_EQ(copied[1], reinterpret_cast<uintptr_t>(buffer) + 16);

  void *again = mgpuTensorMapEncodeTiledMemref(
      3, &memref, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 0,
      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0, box);
  EXPECT_EQ(again, map);
  int64_t otherBox[3] = {1, 3, 8};
  void *other = mgpuTensorMapEncodeTiledMemref(
      3, &memref, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 0,
      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0,
      otherBox);
  EXPECT_NE(other, nullptr);
  EXPECT_NE(other, map);
  EXPECT_EQ(fakeCudaCalls("cuTensorMapEncodeTiled"), 2);
  // Each new descriptor waits for its copy (launches run on non-blocking
  // streams); a cache hit does not.
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 2);
  MoeCudaRuntimeStats counted = stats();
  EXPECT_EQ(counted.tensorMaps, 2);
  EXPECT_EQ(counted.tensorMapEncodes, 2);
  EXPECT_EQ(counted.tensorMapCacheHits, 1);
  // The buffer and two descriptor copies.
  EXPECT_EQ(held().allocations, 3);
  EXPECT_EQ(counted.allocations, 1);

  mgpuMemFree(buffer, nullptr);
  moeCudaRuntimeReset();
  EXPECT_EQ(held().allocations, 0);
  counted = stats();
  EXPECT_EQ(counted.tensorMaps, 0);
  EXPECT_EQ(counted.tensorMapEncodes, 0);
  EXPECT_EQ(counted.tensorMapCacheHits, 0);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0) << lastError();
}

TEST_F(CudaRuntimeFakeDriver, TensorMapOnTheCallStreamIsUploadedInOrder) {
  void *stream = mgpuStreamCreate();
  void *buffer = mgpuMemAlloc(4096, stream, 0);
  MemRef<2> memref = {buffer, buffer, 0, {32, 128}, {128, 1}};
  int64_t box[2] = {16, 64};
  moeCudaRuntimeSetCallStream(stream);
  fakeCudaReset();
  void *map = mgpuTensorMapEncodeTiledMemref(
      2, &memref, CU_TENSOR_MAP_DATA_TYPE_UINT8, 0, 0, 0, 0, box);
  ASSERT_NE(map, nullptr) << lastError();
  // From the pool, uploaded on the call stream: no allocation outside the
  // pool, no synchronization.
  EXPECT_EQ(fakeCudaCalls("cuMemAllocFromPoolAsync"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemcpyHtoDAsync_v2"), 1);
  int upload = firstCall("cuMemcpyHtoDAsync_v2");
  ASSERT_GE(upload, 0);
  EXPECT_EQ(fakeCudaCallAt(upload).stream, reinterpret_cast<uintptr_t>(stream));
  for (const char *symbol : {"cuMemAlloc_v2", "cuMemcpyHtoD_v2",
                             "cuCtxSynchronize", "cuStreamSynchronize"})
    EXPECT_EQ(fakeCudaCalls(symbol), 0) << symbol;
  uint64_t copied[2];
  std::memcpy(copied, map, sizeof(copied));
  EXPECT_EQ(copied[1], reinterpret_cast<uintptr_t>(buffer));
  EXPECT_EQ(mgpuTensorMapEncodeTiledMemref(
                2, &memref, CU_TENSOR_MAP_DATA_TYPE_UINT8, 0, 0, 0, 0, box),
            map);
  EXPECT_EQ(stats().tensorMapCacheHits, 1);

  fakeCudaFailNext("cuMemcpyHtoDAsync_v2", CUDA_ERROR_ILLEGAL_ADDRESS);
  int64_t otherBox[2] = {8, 64};
  EXPECT_EQ(mgpuTensorMapEncodeTiledMemref(2, &memref,
                                           CU_TENSOR_MAP_DATA_TYPE_UINT8, 0, 0,
                                           0, 0, otherBox),
            nullptr);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuTensorMapEncodeTiledMemref: "
                         "cuMemcpyHtoDAsync_v2 failed with "
                         "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory "
                         "access was encountered): tensor map");
  moeCudaRuntimeClearError();

  // Reset synchronizes, frees the copy and forgets the call stream: the
  // next descriptor is uploaded synchronously.
  moeCudaRuntimeReset();
  EXPECT_EQ(held().allocations, 0);
  buffer = mgpuMemAlloc(4096, nullptr, 0);
  memref = {buffer, buffer, 0, {32, 128}, {128, 1}};
  fakeCudaReset();
  EXPECT_NE(mgpuTensorMapEncodeTiledMemref(
                2, &memref, CU_TENSOR_MAP_DATA_TYPE_UINT8, 0, 0, 0, 0, box),
            nullptr);
  EXPECT_EQ(fakeCudaCalls("cuMemcpyHtoD_v2"), 1);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemcpyHtoDAsync_v2"), 0);
  moeCudaRuntimeReset();
  EXPECT_EQ(held().allocations, 0);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0) << lastError();
}

TEST_F(CudaRuntimeFakeDriver, TensorMapArgumentErrorsAreRecorded) {
  void *buffer = mgpuMemAlloc(4096, nullptr, 0);
  MemRef<2> memref = {buffer, buffer, 0, {16, 50}, {50, 1}};
  int64_t box[2] = {8, 16};
  EXPECT_EQ(mgpuTensorMapEncodeTiledMemref(
                2, &memref, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 0, 0, 0, 0, box),
            nullptr);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuTensorMapEncodeTiledMemref: "
                         "memref dimension 0 has a stride of 100 bytes, not a "
                         "multiple of 16");
  EXPECT_EQ(fakeCudaCalls("cuTensorMapEncodeTiled"), 0);
  moeCudaRuntimeClearError();
  mgpuMemFree(buffer, nullptr);
}

TEST_F(CudaRuntimeFakeDriver, TensorMapDriverFailureDescribesTheArguments) {
  void *buffer = mgpuMemAlloc(4096, nullptr, 0);
  MemRef<3> memref = {buffer, buffer, 0, {4, 6, 40}, {320, 48, 1}};
  int64_t box[3] = {2, 3, 8};
  fakeCudaFailNext("cuTensorMapEncodeTiled", CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(mgpuTensorMapEncodeTiledMemref(
                3, &memref, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 0, 1, 0, 0, box),
            nullptr);
  const std::string error = lastError();
  EXPECT_EQ(error.rfind("moe-cuda-runtime: mgpuTensorMapEncodeTiledMemref: "
                        "cuTensorMapEncodeTiled failed with "
                        "CUDA_ERROR_INVALID_VALUE (invalid argument): data "
                        "type 9, rank 3, address 0x",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find(", dims [40, 6, 4], byte strides [96, 640], box [8, "
                       "3, 2], interleave 0, swizzle 1"),
            std::string::npos)
      << error;
  EXPECT_EQ(stats().tensorMaps, 0);
  moeCudaRuntimeClearError();
  mgpuMemFree(buffer, nullptr);
  EXPECT_EQ(held().allocations, 0);
}

TEST_F(CudaRuntimeFakeDriver, ResetReleasesWhatARunLeftBehind) {
  // gpu-to-llvm joins tokens through events on fresh streams and never
  // destroys the streams it joined; a failed run leaves more behind.
  char image[] = "ptx";
  void *kept = mgpuModuleLoadJIT(image, 2);
  mgpuStreamCreate();
  void *stream = mgpuStreamCreate();
  void *event = mgpuEventCreate();
  mgpuEventRecord(event, stream);
  mgpuMemAlloc(256, stream, 0);
  mgpuMemAlloc(512, nullptr, 1);
  std::vector<float> host(64);
  MemRef<1> view = {host.data(), host.data(), 0, {64}, {1}};
  mgpuMemHostRegisterMemRef(1, &view, sizeof(float));
  MoeCudaRuntimeStats before = stats();
  EXPECT_EQ(before.modules, 1);
  EXPECT_EQ(before.streams, 2);
  EXPECT_EQ(before.events, 1);
  EXPECT_EQ(before.allocations, 2);
  EXPECT_EQ(before.allocatedBytes, 768);
  EXPECT_EQ(before.hostRegistrations, 1);

  moeCudaRuntimeReset();
  MoeCudaRuntimeStats after = stats();
  EXPECT_EQ(after.streams + after.events + after.allocations +
                after.allocatedBytes + after.hostRegistrations,
            0);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 1);
  FakeLiveObjects remaining = held();
  EXPECT_EQ(remaining.streams + remaining.events + remaining.allocations +
                remaining.hostRegistrations,
            0);
  // Modules belong to the JIT-compiled code, which unloads them itself.
  EXPECT_EQ(after.modules, 1);
  EXPECT_EQ(remaining.modules, 1);
  mgpuModuleUnload(kept);
  EXPECT_EQ(held().modules, 0);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0) << lastError();
}

TEST_F(CudaRuntimeFakeDriver, HostRegisterSpansTheStridedMemref) {
  std::vector<int32_t> host(64 * 40);
  MemRef<2> view = {host.data(), host.data(), 64, {20, 16}, {64, 1}};
  mgpuMemHostRegisterMemRef(2, &view, sizeof(int32_t));
  // From element 64 to element 64 + 19 * 64 + 15, inclusive.
  EXPECT_EQ(fakeCudaLastHostRegisterBytes(), (19 * 64 + 16) * 4);
  EXPECT_EQ(held().hostRegistrations, 1);
  mgpuMemHostUnregisterMemRef(2, &view, sizeof(int32_t));
  EXPECT_EQ(held().hostRegistrations, 0);

  MemRef<2> empty = {host.data(), host.data(), 0, {0, 16}, {16, 1}};
  mgpuMemHostRegisterMemRef(2, &empty, sizeof(int32_t));
  mgpuMemHostUnregisterMemRef(2, &empty, sizeof(int32_t));
  EXPECT_EQ(fakeCudaCalls("cuMemHostRegister_v2"), 1);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0) << lastError();
}

TEST_F(CudaRuntimeFakeDriver, DefaultDeviceSelectsTheContext) {
  mgpuSetDefaultDevice(3);
  EXPECT_EQ(moeCudaRuntimeHasError(), 0);
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  EXPECT_EQ(lastError(), "moe-cuda-runtime: mgpuStreamCreate: cuDeviceGet "
                         "failed with CUDA_ERROR_INVALID_DEVICE (invalid "
                         "device ordinal): device 3");
  moeCudaRuntimeClearError();
  mgpuSetDefaultDevice(-1);
  EXPECT_EQ(lastError(),
            "moe-cuda-runtime: mgpuSetDefaultDevice: invalid device -1");
  moeCudaRuntimeClearError();
  mgpuSetDefaultDevice(0);
  void *stream = mgpuStreamCreate();
  EXPECT_NE(stream, nullptr);
  mgpuStreamDestroy(stream);
}

} // namespace
