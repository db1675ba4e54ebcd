//===- moe-cuda-smoke.cpp - Smoke test of the mgpu* CUDA runtime ----------===//
//
// Drives libmoe_cuda_runtime through its mgpu* entry points the way
// JIT-compiled host code does, with hand-written PTX (SmokeKernels.ptx), no
// MLIR. Each check prints PASS or FAIL, and the last line is the verdict:
//
//   vadd         JIT load, streams, events, memset poison, launch, copy back
//   cluster      cluster launch with 64 KiB of dynamic shared memory (opt-in)
//   managed      host-shared (managed) allocation read by a kernel
//   host-register  page-locking a strided host memref, copies into it
//   tma-3d-bf16  TMA box loads through mgpuTensorMapEncodeTiledMemref from a
//   tma-5d-u8    padded, offset memref (interior and out-of-bounds boxes)
//   tma-cache    the same arguments give the same cached descriptor
//   errors       an invalid launch is recorded, later calls are no-ops
//   reset        moeCudaRuntimeReset releases everything
//
// Without libcuda the first call fails, the runtime's message is printed and
// the verdict is FAIL (exit code 1). `--emit-ptx` prints the embedded PTX.
//
//===----------------------------------------------------------------------===//

#include "moe/Runtime/CudaRuntime.h"

#include "SmokeKernels.inc"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

/// A ranked memref descriptor as gpu-to-llvm lays it out, for rank `Rank`.
template <int Rank> struct MemRef {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

int failures = 0;

/// Prints one check's verdict, with the runtime's error when one is recorded.
bool report(const char *check, bool passed, const std::string &why = "") {
  const char *error = moeCudaRuntimeGetLastError();
  if (error)
    passed = false;
  std::printf("%-14s %s", check, passed ? "PASS" : "FAIL");
  if (!passed && !why.empty())
    std::printf(" (%s)", why.c_str());
  if (!passed && error)
    std::printf(" [%s]", error);
  std::printf("\n");
  if (!passed)
    ++failures;
  return passed;
}

struct Kernels {
  void *jitModule = nullptr;
  void *module = nullptr;
  void *vadd = nullptr;
  void *tma3 = nullptr;
  void *tma5 = nullptr;
};

/// Loads the PTX twice, once through each loader entry point.
bool loadKernels(Kernels &kernels) {
  kernels.jitModule =
      mgpuModuleLoadJIT(const_cast<char *>(kSmokeKernelsPtx), 3);
  kernels.module = mgpuModuleLoad(const_cast<char *>(kSmokeKernelsPtx),
                                  int64_t(sizeof(kSmokeKernelsPtx)));
  kernels.vadd = mgpuModuleGetFunction(kernels.jitModule, "vadd");
  kernels.tma3 = mgpuModuleGetFunction(kernels.module, "tma_load_3d");
  kernels.tma5 = mgpuModuleGetFunction(kernels.module, "tma_load_5d");
  return report("load", kernels.vadd && kernels.tma3 && kernels.tma5);
}

/// c = a + b on device, with the copies on a second stream ordered after the
/// kernel by an event, and c poisoned first so unwritten elements show.
void checkVectorAdd(const Kernels &kernels) {
  constexpr uint32_t n = 1000;
  std::vector<float> a(n), b(n), c(n, 0.0f);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = float(i) * 0.5f;
    b[i] = 1000.0f - float(i);
  }
  const int64_t bytes = n * sizeof(float);
  void *compute = mgpuStreamCreate();
  void *copy = mgpuStreamCreate();
  void *da = mgpuMemAlloc(bytes, compute, 0);
  void *db = mgpuMemAlloc(bytes, compute, 0);
  void *dc = mgpuMemAlloc(bytes, compute, 0);
  mgpuMemcpy(da, a.data(), bytes, compute);
  mgpuMemcpy(db, b.data(), bytes, compute);
  mgpuMemset32(dc, int32_t(0x7fc00bad), n, compute);
  uint32_t count = n;
  void *params[] = {&da, &db, &dc, &count};
  mgpuLaunchKernel(kernels.vadd, (n + 127) / 128, 1, 1, 128, 1, 1, 0, compute,
                   params, nullptr, 4);
  void *done = mgpuEventCreate();
  mgpuEventRecord(done, compute);
  mgpuStreamWaitEvent(copy, done);
  mgpuMemcpy(c.data(), dc, bytes, copy);
  mgpuEventSynchronize(done);
  mgpuStreamSynchronize(copy);
  uint32_t wrong = 0;
  for (uint32_t i = 0; i < n; ++i)
    wrong += c[i] != a[i] + b[i];
  mgpuEventDestroy(done);
  mgpuMemFree(da, compute);
  mgpuMemFree(db, compute);
  mgpuMemFree(dc, compute);
  mgpuStreamDestroy(copy);
  mgpuStreamDestroy(compute);
  report("vadd", wrong == 0, std::to_string(wrong) + " of 1000 wrong");
}

/// The same kernel launched in clusters of two blocks, opted into 64 KiB of
/// dynamic shared memory; memset16 checks the 16-bit fill on the way.
void checkClusterLaunch(const Kernels &kernels) {
  constexpr uint32_t n = 512;
  void *stream = mgpuStreamCreate();
  const int64_t bytes = n * sizeof(float);
  void *da = mgpuMemAlloc(bytes, stream, 0);
  void *dc = mgpuMemAlloc(bytes, stream, 0);
  // 0x3f80 0x3f80 is 1.00388...f; the kernel doubles it exactly.
  mgpuMemset16(da, int16_t(0x3f80), 2 * n, stream);
  uint32_t count = n;
  void *params[] = {&da, &da, &dc, &count};
  mgpuLaunchClusterKernel(kernels.vadd, 2, 1, 1, 4, 1, 1, 128, 1, 1, 64 * 1024,
                          stream, params, nullptr);
  std::vector<float> c(n);
  mgpuMemcpy(c.data(), dc, bytes, stream);
  mgpuStreamSynchronize(stream);
  float one;
  const uint32_t pattern = 0x3f803f80u;
  std::memcpy(&one, &pattern, sizeof(one));
  uint32_t wrong = 0;
  for (float value : c)
    wrong += value != one + one;
  mgpuMemFree(da, stream);
  mgpuMemFree(dc, stream);
  mgpuStreamDestroy(stream);
  report("cluster", wrong == 0, std::to_string(wrong) + " of 512 wrong");
}

/// Managed memory written by the host, read and written by a kernel.
void checkManagedMemory(const Kernels &kernels) {
  constexpr uint32_t n = 256;
  auto *a = static_cast<float *>(mgpuMemAlloc(n * sizeof(float), nullptr, 1));
  auto *c = static_cast<float *>(mgpuMemAlloc(n * sizeof(float), nullptr, 1));
  if (!a || !c) {
    report("managed", false, "allocation failed");
    return;
  }
  for (uint32_t i = 0; i < n; ++i)
    a[i] = float(3 * i);
  void *stream = mgpuStreamCreate();
  uint32_t count = n;
  void *params[] = {&a, &a, &c, &count};
  mgpuLaunchKernel(kernels.vadd, 2, 1, 1, 128, 1, 1, 0, stream, params, nullptr,
                   4);
  mgpuStreamSynchronize(stream);
  uint32_t wrong = 0;
  for (uint32_t i = 0; i < n; ++i)
    wrong += c[i] != float(6 * i);
  mgpuMemFree(a, stream);
  mgpuMemFree(c, stream);
  mgpuStreamDestroy(stream);
  report("managed", wrong == 0, std::to_string(wrong) + " of 256 wrong");
}

/// Registers a strided 2-D view of a host array and copies device data
/// into the rows it spans.
void checkHostRegister() {
  std::vector<int32_t> host(64 * 40, -1);
  MemRef<2> view = {host.data(), host.data(), 64, {20, 16}, {64, 1}};
  mgpuMemHostRegisterMemRef(2, &view, sizeof(int32_t));
  void *stream = mgpuStreamCreate();
  void *device = mgpuMemAlloc(16 * sizeof(int32_t), stream, 0);
  mgpuMemset32(device, 1234567, 16, stream);
  mgpuMemcpy(host.data() + 64 * 5, device, 16 * sizeof(int32_t), stream);
  mgpuStreamSynchronize(stream);
  mgpuMemHostUnregisterMemRef(2, &view, sizeof(int32_t));
  uint32_t wrong = 0;
  for (int i = 0; i < 64 * 40; ++i)
    wrong += host[i] != ((i >= 320 && i < 336) ? 1234567 : -1);
  mgpuMemFree(device, stream);
  mgpuStreamDestroy(stream);
  report("host-register", wrong == 0, std::to_string(wrong) + " wrong");
}

/// Loads one box with `kernel` from `map` at `coords` (tensor-map order) and
/// compares it with the box cut out of `host` by memref indexing; `Rank`
/// memref dimensions, elements of `elementBytes` bytes.
template <int Rank>
bool loadAndCompareBox(void *kernel, void *map, const MemRef<Rank> &memref,
                       const std::vector<uint8_t> &host, int64_t elementBytes,
                       const int64_t (&box)[Rank],
                       const uint32_t (&coords)[Rank]) {
  int64_t boxElements = 1;
  for (int64_t extent : box)
    boxElements *= extent;
  const uint32_t boxBytes = uint32_t(boxElements * elementBytes);
  std::vector<uint8_t> expected(boxBytes, 0);
  for (int64_t linear = 0; linear < boxElements; ++linear) {
    int64_t rest = linear;
    int64_t source = memref.offset;
    bool inBounds = true;
    for (int d = Rank - 1; d >= 0; --d) {
      const int64_t index = coords[Rank - 1 - d] + rest % box[d];
      rest /= box[d];
      inBounds &= index < memref.sizes[d];
      source += index * memref.strides[d];
    }
    if (inBounds)
      std::memcpy(&expected[linear * elementBytes],
                  &host[source * elementBytes], elementBytes);
  }
  void *stream = mgpuStreamCreate();
  void *out = mgpuMemAlloc(boxBytes, stream, 0);
  mgpuMemset32(out, int32_t(0xdeadbeef), boxBytes / 4, stream);
  std::vector<void *> params = {&map, &out, const_cast<uint32_t *>(&boxBytes)};
  for (const uint32_t &coord : coords)
    params.push_back(const_cast<uint32_t *>(&coord));
  mgpuLaunchKernel(kernel, 1, 1, 1, 128, 1, 1, 0, stream, params.data(),
                   nullptr, int64_t(params.size()));
  std::vector<uint8_t> got(boxBytes, 0xff);
  mgpuMemcpy(got.data(), out, boxBytes, stream);
  mgpuStreamSynchronize(stream);
  mgpuMemFree(out, stream);
  mgpuStreamDestroy(stream);
  return got == expected;
}

/// A device buffer holding `host` and a memref view into it.
template <int Rank> struct DeviceTensor {
  void *buffer = nullptr;
  MemRef<Rank> memref;
};

template <int Rank>
DeviceTensor<Rank> uploadTensor(const std::vector<uint8_t> &host,
                                int64_t offset, const int64_t (&sizes)[Rank],
                                const int64_t (&strides)[Rank]) {
  DeviceTensor<Rank> tensor;
  tensor.buffer = mgpuMemAlloc(int64_t(host.size()), nullptr, 0);
  void *stream = mgpuStreamCreate();
  mgpuMemcpy(tensor.buffer, const_cast<uint8_t *>(host.data()),
             int64_t(host.size()), stream);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
  tensor.memref.allocated = tensor.buffer;
  tensor.memref.aligned = tensor.buffer;
  tensor.memref.offset = offset;
  for (int d = 0; d < Rank; ++d) {
    tensor.memref.sizes[d] = sizes[d];
    tensor.memref.strides[d] = strides[d];
  }
  return tensor;
}

/// Byte pattern that differs between neighbouring elements and rows.
std::vector<uint8_t> patternBytes(size_t count) {
  std::vector<uint8_t> bytes(count);
  for (size_t i = 0; i < count; ++i)
    bytes[i] = uint8_t((i * 37 + i / 251 + 11) & 0xff);
  return bytes;
}

/// Rank 3, 2-byte elements (BFLOAT16), rows padded to 48 elements and planes
/// to 256, viewed from an offset of 8 elements: the layout upstream's stride
/// computation gets wrong.
void checkTensorMap3d(const Kernels &kernels) {
  const int64_t sizes[3] = {3, 5, 40};
  const int64_t strides[3] = {256, 48, 1};
  const int64_t offset = 8;
  const std::vector<uint8_t> host = patternBytes(2 * (offset + 3 * 256));
  DeviceTensor<3> tensor = uploadTensor(host, offset, sizes, strides);
  int64_t box[3] = {2, 4, 16};
  void *map = mgpuTensorMapEncodeTiledMemref(3, &tensor.memref, /*BFLOAT16=*/9,
                                             0, 0, 0, 0, box);
  bool interior = map && loadAndCompareBox(kernels.tma3, map, tensor.memref,
                                           host, 2, box, {8, 1, 1});
  // Crosses the inner and middle edges: the zero fill must start at 40 / 5.
  bool edge = map && loadAndCompareBox(kernels.tma3, map, tensor.memref, host,
                                       2, box, {32, 3, 0});
  mgpuMemFree(tensor.buffer, nullptr);
  report("tma-3d-bf16", interior && edge,
         std::string(interior ? "" : "interior box differs ") +
             (edge ? "" : "edge box differs"));
}

/// Rank 5, 1-byte elements (UINT8), every stride padded.
void checkTensorMap5d(const Kernels &kernels) {
  const int64_t sizes[5] = {2, 3, 2, 4, 64};
  const int64_t strides[5] = {2048, 672, 336, 80, 1};
  const int64_t offset = 32;
  const std::vector<uint8_t> host = patternBytes(offset + 2 * 2048);
  DeviceTensor<5> tensor = uploadTensor(host, offset, sizes, strides);
  int64_t box[5] = {1, 2, 2, 2, 32};
  void *map = mgpuTensorMapEncodeTiledMemref(5, &tensor.memref, /*UINT8=*/0, 0,
                                             0, 0, 0, box);
  bool interior = map && loadAndCompareBox(kernels.tma5, map, tensor.memref,
                                           host, 1, box, {16, 1, 0, 1, 1});
  bool edge = map && loadAndCompareBox(kernels.tma5, map, tensor.memref, host,
                                       1, box, {48, 3, 1, 2, 1});
  mgpuMemFree(tensor.buffer, nullptr);
  report("tma-5d-u8", interior && edge,
         std::string(interior ? "" : "interior box differs ") +
             (edge ? "" : "edge box differs"));
}

/// Equal arguments hit the cache, a different box builds a new descriptor.
void checkTensorMapCache() {
  moeCudaRuntimeReset();
  void *buffer = mgpuMemAlloc(64 * 64 * 2, nullptr, 0);
  MemRef<2> memref = {buffer, buffer, 0, {64, 64}, {64, 1}};
  int64_t box[2] = {64, 64};
  int64_t otherBox[2] = {32, 64};
  void *first = mgpuTensorMapEncodeTiledMemref(2, &memref, 6, 0, 3, 0, 0, box);
  void *again = mgpuTensorMapEncodeTiledMemref(2, &memref, 6, 0, 3, 0, 0, box);
  void *other =
      mgpuTensorMapEncodeTiledMemref(2, &memref, 6, 0, 3, 0, 0, otherBox);
  MoeCudaRuntimeStats stats;
  moeCudaRuntimeGetStats(&stats);
  mgpuMemFree(buffer, nullptr);
  report("tma-cache",
         first && first == again && other && other != first &&
             stats.tensorMaps == 2 && stats.tensorMapEncodes == 2 &&
             stats.tensorMapCacheHits == 1,
         "encodes " + std::to_string(stats.tensorMapEncodes) + ", hits " +
             std::to_string(stats.tensorMapCacheHits));
}

/// A block of 2048 threads is refused by the driver: the error is recorded
/// with the call's name, and the next work call does nothing.
void checkErrorPath(const Kernels &kernels) {
  std::printf("(the next error is provoked on purpose)\n");
  std::fflush(stdout);
  void *stream = mgpuStreamCreate();
  void *buffer = mgpuMemAlloc(1024, stream, 0);
  uint32_t count = 256;
  void *params[] = {&buffer, &buffer, &buffer, &count};
  mgpuLaunchKernel(kernels.vadd, 1, 1, 1, 2048, 1, 1, 0, stream, params,
                   nullptr, 4);
  const char *error = moeCudaRuntimeGetLastError();
  const std::string text = error ? error : "";
  const bool named =
      text.find("mgpuLaunchKernel: cuLaunchKernel failed with "
                "CUDA_ERROR_INVALID_VALUE") != std::string::npos &&
      text.find("kernel 'vadd'") != std::string::npos;
  const bool inert = mgpuMemAlloc(1024, stream, 0) == nullptr;
  moeCudaRuntimeClearError();
  mgpuMemFree(buffer, stream);
  mgpuStreamDestroy(stream);
  report("errors", named && inert,
         named ? "a call after the error did work" : "message: " + text);
}

/// Leaves a stream, an event, an allocation and a descriptor behind, as a
/// run can; Reset must release them all.
void checkReset() {
  void *stream = mgpuStreamCreate();
  mgpuEventCreate();
  void *buffer = mgpuMemAlloc(4096, stream, 0);
  MemRef<1> memref = {buffer, buffer, 0, {1024}, {1}};
  int64_t box[1] = {256};
  mgpuTensorMapEncodeTiledMemref(1, &memref, 7, 0, 0, 0, 0, box);
  MoeCudaRuntimeStats before, after;
  moeCudaRuntimeGetStats(&before);
  moeCudaRuntimeReset();
  moeCudaRuntimeGetStats(&after);
  report("reset",
         before.streams >= 1 && before.events >= 1 && before.allocations >= 1 &&
             before.tensorMaps >= 1 && after.streams == 0 &&
             after.events == 0 && after.allocations == 0 &&
             after.tensorMaps == 0,
         "held after reset: " + std::to_string(after.streams) + " streams, " +
             std::to_string(after.allocations) + " allocations");
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::strcmp(argv[1], "--emit-ptx") == 0) {
    std::fputs(kSmokeKernelsPtx, stdout);
    return 0;
  }
  if (argc != 1) {
    std::fprintf(stderr, "usage: moe-cuda-smoke [--emit-ptx]\n");
    return 2;
  }
  Kernels kernels;
  if (loadKernels(kernels)) {
    checkVectorAdd(kernels);
    checkClusterLaunch(kernels);
    checkManagedMemory(kernels);
    checkHostRegister();
    checkTensorMap3d(kernels);
    checkTensorMap5d(kernels);
    checkTensorMapCache();
    checkErrorPath(kernels);
    checkReset();
  }
  mgpuModuleUnload(kernels.module);
  mgpuModuleUnload(kernels.jitModule);
  MoeCudaRuntimeStats stats;
  moeCudaRuntimeGetStats(&stats);
  if (stats.modules != 0) {
    std::printf("%-14s FAIL (%" PRId64 " modules still loaded)\n", "unload",
                stats.modules);
    ++failures;
  }
  std::printf("moe-cuda-smoke: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
