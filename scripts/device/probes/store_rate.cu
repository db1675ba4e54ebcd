// A probe of the H200 for the GEMMs' result stores (docs/results/
// 2026-12-04-epilogue-profile.md): at what rate can one SM write its f32
// tile to global memory, and is that rate the SM's own or the chip's?
//
// The GEMM epilogue (tma_store) stages each consumer warpgroup's 64 rows of
// the tile 32 columns (8 KB) at a time through shared memory and stores the
// chunk by TMA; stall sampling shows the warpgroups waiting for those
// stores to drain. This probe runs that epilogue alone, without MMAs, in
// CTAs of two warpgroups (one CTA per SM, like the persistent GEMMs), on
// all SMs and on a quarter, an eighth and a 33rd of them:
//   tma       the epilogue as built: st.shared.v2 of the fragment into a
//             128B-swizzled chunk buffer, fence.proxy.async, the leader's
//             cp.async.bulk.wait_group.read (buffers - 2), a named barrier,
//             the leader's cp.async.bulk.tensor store; 2 or 4 buffers
//   tma-bulk  the same stores with nothing to wait for: every chunk of a
//             warpgroup's tile from its own buffer (the TMA's own rate)
//   stg-frag  st.global.v2.f32 of the wgmma fragment (8 rows of 32 bytes a
//             warp instruction), the --register-stores path
//   stg-rows  st.global.v4.f32 of whole 512-byte row pieces (coalesced)
// It prints bytes per SM cycle per active SM, and the chip's GB/s. If a
// quarter of the SMs each write no faster than all of them do, the limit
// is the SM's path to L2, and only stores that overlap the next tile's
// MMAs can hide it.
//
// Build here (no GPU needed), run on the device with .bundle carried:
//   nvcc -arch=sm_90a -O2 -std=c++17 -Xcompiler -static-libstdc++ \
//     -Xcompiler -static-libgcc -o .bundle/store-rate \
//     scripts/device/probes/store_rate.cu
//   bash .bundle/run-on-device.sh .bundle/store-rate
#include "probe.h"

#include <vector>

namespace {

constexpr int kRows = 64;            // a consumer warpgroup's rows
constexpr int kTileColumns = 256;    // the tile's N
constexpr int kChunkColumns = 32;    // one 128-byte swizzled row
constexpr int kChunkBytes = kRows * kChunkColumns * 4;
constexpr int kChunks = kTileColumns / kChunkColumns;
constexpr int kWarpgroups = 2;
// The output: [rows, N] f32, N = 4096 columns, rows enough for every CTA's
// tiles to land on distinct addresses (1 GiB).
constexpr long long kN = 4096;
constexpr long long kOutRows = (1ll << 30) / (kN * 4);



/// The tile a CTA writes at step t: rows of 64 x kWarpgroups, 256 columns,
/// spread over the output so that no two (CTA, t) share a line.
__device__ inline void tileOrigin(int t, int tiles, long long &row,
                                  long long &col) {
  long long id = static_cast<long long>(blockIdx.x) * tiles + t;
  long long perRow = kN / kTileColumns;
  row = (id / perRow) * kRows * kWarpgroups % kOutRows;
  col = (id % perRow) * kTileColumns;
}

/// mode 0: tma with `buffers` chunk buffers; 1: tma-bulk (a buffer per
/// chunk, no waits but the last).
__global__ void tmaStores(const __grid_constant__ CUtensorMap out, int tiles,
                          int buffers, int mode, long long *cycles) {
  extern __shared__ __align__(1024) uint8_t raw[];
  uint8_t *base = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  int wg = threadIdx.x / 128, t128 = threadIdx.x % 128;
  int warp = t128 / 32, lane = t128 % 32, quad = lane % 4;
  int nbuf = mode == 1 ? kChunks : buffers;
  uint8_t *mine = base + wg * nbuf * kChunkBytes;
  bool leader = t128 == 0;
  // The thread's fragment rows r0, r0 + 8 of its warpgroup's 64.
  int r0 = warp * 16 + lane / 4;
  int phase = r0 % 8;
  float v = threadIdx.x;
  long long start = clock64();
  for (int t = 0; t < tiles; ++t) {
    long long row, col;
    tileOrigin(t, tiles, row, col);
    for (int c = 0; c < kChunks; ++c) {
      uint8_t *buffer = mine + (c % nbuf) * kChunkBytes;
      for (int jj = 0; jj < kChunkColumns / 8; ++jj) {
        int unit = (quad / 2 + 2 * jj) ^ phase;
        int inRow = unit * 16 + (quad % 2) * 8;
        for (int r = 0; r < 2; ++r) {
          uint32_t at = smemAddr(buffer + (r0 + 8 * r) * 128 + inRow);
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(at), "f"(v),
                       "f"(v + 1.0f)
                       : "memory");
        }
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      if (leader && mode == 0) {
        if (buffers == 2)
          asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        else
          asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory");
      }
      asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
      if (leader) {
        int x = static_cast<int>((col + c * kChunkColumns) * 4);
        int y = static_cast<int>(row + wg * kRows);
        asm volatile(
            "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group "
            "[%0, {%1, %2}], [%3];" ::"l"(&out),
            "r"(x), "r"(y), "r"(smemAddr(buffer))
            : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
    }
    if (mode == 1 && leader)
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    if (mode == 1)
      asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
  }
  if (leader)
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0)
    cycles[blockIdx.x] = clock64() - start;
}

/// mode 0: stg-frag; 1: stg-rows.
__global__ void globalStores(float *out, int tiles, int mode,
                             long long *cycles) {
  int wg = threadIdx.x / 128, t128 = threadIdx.x % 128;
  int warp = t128 / 32, lane = t128 % 32, quad = lane % 4;
  float v = threadIdx.x;
  long long start = clock64();
  for (int t = 0; t < tiles; ++t) {
    long long row, col;
    tileOrigin(t, tiles, row, col);
    row += wg * kRows;
    if (mode == 0) {
      // The fragment: rows r0, r0 + 8; column pairs 8 j + 2 q.
      int r0 = warp * 16 + lane / 4;
      for (int j = 0; j < kTileColumns / 8; ++j)
        for (int r = 0; r < 2; ++r) {
          float *p = out + (row + r0 + 8 * r) * kN + col + 8 * j + 2 * quad;
          asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(v),
                       "f"(v + 1.0f)
                       : "memory");
        }
    } else {
      // Each warp writes whole 1 KB rows of the tile, 16 bytes a lane.
      for (int r = warp; r < kRows; r += 4)
        for (int c = lane * 4; c < kTileColumns; c += 128) {
          float *p = out + (row + r) * kN + col + c;
          asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p),
                       "f"(v), "f"(v), "f"(v), "f"(v)
                       : "memory");
        }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0)
    cycles[blockIdx.x] = clock64() - start;
}

} // namespace

int main() {
  CHECK_RT(cudaFree(nullptr));
  int sms = 0, clockKHz = 0;
  CHECK_RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK_RT(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, 0));
  float *out;
  CHECK_RT(cudaMalloc(&out, kOutRows * kN * 4));
  // The result as the GEMMs map it: ui8 [rows, N * 4], a box of 64 rows of
  // 128 bytes, 128B swizzle.
  CUtensorMap map;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(kN * 4),
                        static_cast<cuuint64_t>(kOutRows)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(kN * 4)};
  cuuint32_t box[2] = {128, kRows};
  cuuint32_t elementStrides[2] = {1, 1};
  CHECK_CU(encodeTiled()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, out, dims,
                         strides, box, elementStrides,
                         CU_TENSOR_MAP_INTERLEAVE_NONE,
                         CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  long long *cycles;
  CHECK_RT(cudaMalloc(&cycles, sms * sizeof(long long)));
  // The GEMMs' shared memory (so one CTA per SM): 227 KB.
  int smem = 227 * 1024;
  CHECK_RT(cudaFuncSetAttribute(
      tmaStores, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK_RT(cudaFuncSetAttribute(
      globalStores, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int tiles = 64;
  const long long tileBytes = 1ll * kRows * kWarpgroups * kTileColumns * 4;
  std::printf("%-22s %6s %16s %12s %10s\n", "epilogue (128 KB tiles)", "CTAs",
              "B/cycle per SM", "GB/s (all)", "us/tile");
  struct Variant {
    const char *name;
    int kernel, mode, buffers;
  } variants[] = {{"tma, 2 buffers", 0, 0, 2},
                  {"tma, 4 buffers", 0, 0, 4},
                  {"tma-bulk", 0, 1, 0},
                  {"stg-frag", 1, 0, 0},
                  {"stg-rows", 1, 1, 0}};
  for (const Variant &v : variants) {
    for (int ctas : {sms, sms / 4, sms / 8, 4}) {
      for (int pass = 0; pass < 2; ++pass) { // the first run warms up
        cudaEvent_t begin, end;
        CHECK_RT(cudaEventCreate(&begin));
        CHECK_RT(cudaEventCreate(&end));
        CHECK_RT(cudaEventRecord(begin));
        if (v.kernel == 0)
          tmaStores<<<ctas, 128 * kWarpgroups, smem>>>(map, tiles, v.buffers,
                                                       v.mode, cycles);
        else
          globalStores<<<ctas, 128 * kWarpgroups, smem>>>(out, tiles, v.mode,
                                                          cycles);
        CHECK_RT(cudaEventRecord(end));
        CHECK_RT(cudaEventSynchronize(end));
        CHECK_RT(cudaGetLastError());
        float ms = 0;
        CHECK_RT(cudaEventElapsedTime(&ms, begin, end));
        std::vector<long long> got(ctas);
        CHECK_RT(cudaMemcpy(got.data(), cycles, ctas * sizeof(long long),
                            cudaMemcpyDeviceToHost));
        double mean = 0;
        for (long long c : got)
          mean += double(c) / ctas;
        if (pass == 1)
          std::printf("%-22s %6d %16.1f %12.0f %10.2f\n", v.name, ctas,
                      tiles * tileBytes / mean,
                      double(ctas) * tiles * tileBytes / (ms * 1e6),
                      mean / tiles / (clockKHz / 1e3));
      }
    }
  }
  return 0;
}
