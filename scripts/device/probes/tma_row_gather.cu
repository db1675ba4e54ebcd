// A probe of the H200 for the planned x / dy gather by their GEMMs
// (docs/sm90a-kernels.md, "The gather, as planned"): can the producer of a
// bf16-operands GEMM fill its 128-row A tile with 128 one-row TMA boxes, one
// per gathered row, instead of one 128-row box?
//
// It answers the two questions the plan leaves open, on the GPU:
//  1. Placement: a one-row box under the 128B swizzle, written at the
//     tile's row offset, must give the bytes a 128-row box gives (the
//     swizzle follows the shared-memory address), and a row past the end
//     must arrive as zeros (the padding slots).
//  2. Rate: the cycles a stage of the ring takes when thread 0 issues the
//     tile as one box, as 128 boxes, or when the 32 lanes of the producer
//     warp issue 4 boxes each. A GEMM stage of 128x256x64 bf16 MMAs takes
//     about 1050 cycles at the tensor-core rate; the gather pays only if a
//     stage of loads fits well inside that.
//
// Build here (no GPU needed), run on the device with .bundle carried:
//   nvcc -arch=sm_90a -O2 -std=c++17 -Xcompiler -static-libstdc++ \
//     -Xcompiler -static-libgcc -o .bundle/tma-row-gather \
//     scripts/device/probes/tma_row_gather.cu
//   bash .bundle/run-on-device.sh .bundle/tma-row-gather
// Exit status 0 when the placement checks pass.
#include "probe.h"

#include <vector>

namespace {

constexpr int kRows = 128;       // rows of a tile
constexpr int kRowBytes = 128;   // one 128B-swizzle panel: 64 bf16
constexpr int kTileBytes = kRows * kRowBytes;
constexpr int kStages = 4;       // the ring of the 128x256 GEMMs
constexpr int kSourceRows = 16384;



__device__ inline void barrierInit(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smemAddr(bar)),
               "r"(count));
}

__device__ inline void expectTx(uint64_t *bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
          smemAddr(bar)),
      "r"(bytes)
      : "memory");
}

__device__ inline void arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smemAddr(bar))
               : "memory");
}

__device__ inline void waitParity(uint64_t *bar, uint32_t parity) {
  asm volatile("{\n"
               ".reg .pred done;\n"
               "wait:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra wait;\n"
               "}\n" ::"r"(smemAddr(bar)),
               "r"(parity)
               : "memory");
}

/// Whether the phase of `bar` with `parity` has completed, waiting a while.
__device__ inline bool tryWait(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{\n"
               ".reg .pred p;\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p;\n"
               "}\n"
               : "=r"(done)
               : "r"(smemAddr(bar)), "r"(parity)
               : "memory");
  return done;
}

/// tryWait for at most about a second: false when the phase never completed
/// (a box whose bytes the barrier never saw).
__device__ inline bool waitBounded(uint64_t *bar, uint32_t parity) {
  for (long long start = clock64(); !tryWait(bar, parity);)
    if (clock64() - start > 2000000000ll)
      return false;
  return true;
}

/// One TMA box of `map` at (column 0, `row`) into `dst`, completing on `bar`.
__device__ inline void loadBox(void *dst, const CUtensorMap *map, int row,
                               uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier:"
               ":complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
                   smemAddr(dst)),
               "l"(map), "r"(0), "r"(row), "r"(smemAddr(bar))
               : "memory");
}

/// Question 1: tile A by one 128-row box at rows r0.., tile B by 128
/// one-row boxes of the same rows, then tile C by one-row boxes of rows past
/// the end. mismatches[0] counts bytes where A and B differ, mismatches[1]
/// the non-zero bytes of C, mismatches[2] the phases that never completed.
__global__ void placement(const __grid_constant__ CUtensorMap tile,
                          const __grid_constant__ CUtensorMap row, int r0,
                          int *mismatches) {
  extern __shared__ __align__(1024) uint8_t raw[];
  uint8_t *base = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint8_t *a = base, *b = base + kTileBytes, *c = base + 2 * kTileBytes;
  __shared__ uint64_t bar[2];
  if (threadIdx.x == 0) {
    barrierInit(&bar[0], 1);
    barrierInit(&bar[1], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  for (int i = threadIdx.x; i < kTileBytes; i += blockDim.x)
    c[i] = 0xff;
  __syncthreads();
  if (threadIdx.x == 0) {
    expectTx(&bar[0], 2 * kTileBytes);
    loadBox(a, &tile, r0, &bar[0]);
    for (int r = 0; r < kRows; ++r)
      loadBox(b + r * kRowBytes, &row, r0 + r, &bar[0]);
    // (The rows past the end apart, so that a box the barrier does not
    // count cannot hold up the first check.)
    expectTx(&bar[1], kTileBytes);
    for (int r = 0; r < kRows; ++r)
      loadBox(c + r * kRowBytes, &row, kSourceRows + r, &bar[1]);
  }
  bool first = waitBounded(&bar[0], 0);
  bool second = waitBounded(&bar[1], 0);
  if (threadIdx.x == 0)
    atomicAdd(&mismatches[2], !first + !second);
  for (int i = threadIdx.x; i < kTileBytes; i += blockDim.x) {
    if (first && a[i] != b[i])
      atomicAdd(&mismatches[0], 1);
    if (second && c[i] != 0)
      atomicAdd(&mismatches[1], 1);
  }
}

/// Question 2: `stages` stages through a kStages ring per CTA, each stage
/// one tile of 128 rows (mode 0: one box by thread 0; 1: 128 one-row boxes
/// by thread 0; 2: 4 one-row boxes by each lane of warp 0), the rows drawn
/// from `ids`. Warp 1 stands in for the consumers: it waits for each stage
/// and frees it. cycles[blockIdx.x] is the producer's clock over the loop.
__global__ void rate(const __grid_constant__ CUtensorMap tile,
                     const __grid_constant__ CUtensorMap row, const int *ids,
                     int mode, int stages, long long *cycles) {
  extern __shared__ __align__(1024) uint8_t raw[];
  uint8_t *ring = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  __shared__ uint64_t full[kStages], empty[kStages];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrierInit(&full[s], 1);
      barrierInit(&empty[s], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {
    long long start = clock64();
    for (int t = 0; t < stages; ++t) {
      int s = t % kStages;
      uint32_t phase = (t / kStages) & 1;
      if (t >= kStages)
        waitParity(&empty[s], phase ^ 1);
      uint8_t *dst = ring + s * kTileBytes;
      // A tile's rows: kRows consecutive ids of this CTA's stretch.
      const int *tileIds =
          ids + (static_cast<long long>(blockIdx.x) * stages + t) * kRows %
                    (kSourceRows * 4);
      if (mode == 0) {
        if (lane == 0) {
          expectTx(&full[s], kTileBytes);
          loadBox(dst, &tile, (tileIds[0] / kRows) * kRows, &full[s]);
        }
      } else if (mode == 1) {
        if (lane == 0) {
          expectTx(&full[s], kTileBytes);
          for (int r = 0; r < kRows; ++r)
            loadBox(dst + r * kRowBytes, &row, tileIds[r], &full[s]);
        }
      } else {
        int mine[kRows / 32];
        for (int i = 0; i < kRows / 32; ++i)
          mine[i] = tileIds[lane + 32 * i];
        if (lane == 0)
          expectTx(&full[s], kTileBytes);
        __syncwarp();
        for (int i = 0; i < kRows / 32; ++i)
          loadBox(dst + (lane + 32 * i) * kRowBytes, &row, mine[i], &full[s]);
      }
    }
    if (lane == 0)
      cycles[blockIdx.x] = clock64() - start;
  } else if (warp == 1 && lane == 0) {
    for (int t = 0; t < stages; ++t) {
      int s = t % kStages;
      waitParity(&full[s], (t / kStages) & 1);
      arrive(&empty[s]);
    }
  }
}

CUtensorMap makeMap(void *base, int boxRows) {
  CUtensorMap map;
  cuuint64_t dims[2] = {kRowBytes / 2, kSourceRows};
  cuuint64_t strides[1] = {kRowBytes};
  cuuint32_t box[2] = {kRowBytes / 2, static_cast<cuuint32_t>(boxRows)};
  cuuint32_t elementStrides[2] = {1, 1};
  CHECK_CU(encodeTiled()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box,
      elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

} // namespace

int main() {
  CHECK_RT(cudaFree(nullptr));
  int sms = 0;
  CHECK_RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  // Source rows of distinct, non-zero bytes.
  std::vector<uint16_t> host(static_cast<size_t>(kSourceRows) * 64);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = static_cast<uint16_t>(0x0101 + i * 2654435761u % 0xfefe);
  void *source;
  CHECK_RT(cudaMalloc(&source, host.size() * 2));
  CHECK_RT(cudaMemcpy(source, host.data(), host.size() * 2,
                      cudaMemcpyHostToDevice));
  CUtensorMap tileMap = makeMap(source, kRows), rowMap = makeMap(source, 1);

  int *mismatches;
  CHECK_RT(cudaMalloc(&mismatches, 3 * sizeof(int)));
  int failures = 0;
  int smemPlacement = 3 * kTileBytes + 1024;
  CHECK_RT(cudaFuncSetAttribute(placement,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                smemPlacement));
  // Tile origins on and off a multiple of 8 rows (the swizzle's period).
  for (int r0 : {0, 128, 8, 3, 1001}) {
    CHECK_RT(cudaMemset(mismatches, 0, 3 * sizeof(int)));
    placement<<<1, 256, smemPlacement>>>(tileMap, rowMap, r0, mismatches);
    CHECK_RT(cudaDeviceSynchronize());
    int got[3];
    CHECK_RT(cudaMemcpy(got, mismatches, sizeof got, cudaMemcpyDeviceToHost));
    bool pass = got[0] == 0 && got[1] == 0 && got[2] == 0;
    failures += !pass;
    std::printf("placement rows %4d..: one-row boxes vs one box: %d bytes "
                "differ; rows past the end: %d non-zero bytes; %d phases "
                "never completed: %s\n",
                r0, got[0], got[1], got[2], pass ? "PASS" : "FAIL");
  }

  // Gathered ids: a permutation of 4 copies of the source rows (each token
  // in K = 4 slots, as routing does), so rows of a tile are scattered.
  std::vector<int> ids(static_cast<size_t>(kSourceRows) * 4);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int>((i * 7919u) % kSourceRows);
  int *deviceIds;
  CHECK_RT(cudaMalloc(&deviceIds, ids.size() * sizeof(int)));
  CHECK_RT(cudaMemcpy(deviceIds, ids.data(), ids.size() * sizeof(int),
                      cudaMemcpyHostToDevice));
  long long *cycles;
  CHECK_RT(cudaMalloc(&cycles, sms * sizeof(long long)));
  int smemRate = kStages * kTileBytes + 1024;
  CHECK_RT(cudaFuncSetAttribute(
      rate, cudaFuncAttributeMaxDynamicSharedMemorySize, smemRate));
  const int stages = 512;
  const char *names[3] = {"one 128-row box, thread 0",
                          "128 one-row boxes, thread 0",
                          "4 one-row boxes a lane, warp 0"};
  std::printf("\n%-32s %14s %12s\n", "stage of 128 rows x 128 B",
              "cycles/stage", "GB/s (all)");
  for (int mode = 0; mode < 3; ++mode) {
    for (int pass = 0; pass < 2; ++pass) { // the first run warms up
      cudaEvent_t begin, end;
      CHECK_RT(cudaEventCreate(&begin));
      CHECK_RT(cudaEventCreate(&end));
      CHECK_RT(cudaEventRecord(begin));
      rate<<<sms, 64, smemRate>>>(tileMap, rowMap, deviceIds, mode, stages,
                                  cycles);
      CHECK_RT(cudaEventRecord(end));
      CHECK_RT(cudaEventSynchronize(end));
      float ms = 0;
      CHECK_RT(cudaEventElapsedTime(&ms, begin, end));
      std::vector<long long> got(sms);
      CHECK_RT(cudaMemcpy(got.data(), cycles, sms * sizeof(long long),
                          cudaMemcpyDeviceToHost));
      long long worst = 0;
      for (long long c : got)
        worst = c > worst ? c : worst;
      if (pass == 1)
        std::printf("%-32s %14.0f %12.0f\n", names[mode],
                    double(worst) / stages,
                    double(sms) * stages * kTileBytes / (ms * 1e6));
    }
  }
  std::printf("\nplacement: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
