// A probe of the H200 for the cluster pair that would halve the weight
// roundings of the transposed block GEMMs (docs/sm90a-kernels.md,
// "Twenty-third session"): two CTAs of a cluster round one MX block each of
// every weight K tile and send each other their 8 rounded words a thread
// through distributed shared memory. Does that exchange fit inside a K
// tile (about 2000 cycles of MMAs for a 128x256x64 tile), or does it stall
// the pair as the multicast pair of `cluster-gemms` was stalled?
//
// Each CTA has 256 threads (the two consumer warpgroups); every thread of
// rank r writes 32 bytes into the peer's exchange buffer (two buffers,
// alternating by K tile) with st.shared::cluster, then arrives remotely on
// the peer's "full" barrier; it waits on its own "full" barrier for the
// peer's 32 bytes, reads them, and arrives remotely on the peer's "empty"
// barrier, on which the peer waits before it overwrites that buffer. The
// work of a K tile is a dependent FMA chain of W steps (~4 W cycles). Modes:
//   0  the work alone (the baseline)
//   1  send, work, wait and read, in each K tile
//   2  skewed: K tile t + 1's words sent before tile t's are awaited
// It prints the cycles a K tile takes in each mode for several W, and
// checks every word received (exit status 0 when all arrive right).
//
// Build here (no GPU needed), run on the device with .bundle carried:
//   nvcc -arch=sm_90a -O2 -std=c++17 -Xcompiler -static-libstdc++ \
//     -Xcompiler -static-libgcc -o .bundle/dsmem-exchange \
//     scripts/device/probes/dsmem_exchange.cu
//   bash .bundle/run-on-device.sh .bundle/dsmem-exchange
#include "probe.h"

#include <cooperative_groups.h>

#include <vector>

namespace {

constexpr int kThreads = 256;
constexpr int kWords = 8; // the rounded words of one MX block a thread

struct Shared {
  uint4 exchange[2][kThreads][kWords / 4];
  uint64_t full[2], empty[2];
};

__device__ inline uint32_t peerAddress(const void *local, uint32_t peer) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(smemAddr(local)), "r"(peer));
  return remote;
}

__device__ inline void remoteArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::
                   "r"(bar)
               : "memory");
}

__device__ inline void waitParity(uint64_t *bar, uint32_t parity) {
  asm volatile("{\n"
               ".reg .pred done;\n"
               "wait:\n"
               "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, "
               "[%0], %1;\n"
               "@!done bra wait;\n"
               "}" ::"r"(smemAddr(bar)),
               "r"(parity)
               : "memory");
}

__device__ inline uint32_t expected(uint32_t rank, int t, int thread, int w) {
  return (rank << 31) ^ (uint32_t(t) << 12) ^ (uint32_t(thread) << 3) ^
         uint32_t(w);
}

__global__ void __cluster_dims__(2, 1, 1)
    exchange(int mode, int tiles, int work, unsigned long long *cycles,
             unsigned *errors, float *sink) {
  extern __shared__ __align__(16) unsigned char raw[];
  Shared &s = *reinterpret_cast<Shared *>(raw);
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  uint32_t rank = cluster.block_rank(), peer = rank ^ 1;
  int thread = threadIdx.x;
  if (thread == 0) {
    for (int p = 0; p < 2; ++p) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(
                       smemAddr(&s.full[p])),
                   "r"(kThreads));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(
                       smemAddr(&s.empty[p])),
                   "r"(kThreads));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster.sync();
  uint32_t peerFull[2], peerEmpty[2], peerSlot[2];
  for (int p = 0; p < 2; ++p) {
    peerFull[p] = peerAddress(&s.full[p], peer);
    peerEmpty[p] = peerAddress(&s.empty[p], peer);
    peerSlot[p] = peerAddress(&s.exchange[p][thread][0], peer);
  }
  // Tile t's words into the peer's buffer t % 2, once the peer has read
  // what tile t - 2 put there.
  auto send = [&](int t) {
    int p = t & 1;
    if (t >= 2)
      waitParity(&s.empty[p], ((t >> 1) + 1) & 1);
    for (int q = 0; q < kWords / 4; ++q)
      asm volatile(
          "st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(
              peerSlot[p] + 16 * q),
          "r"(expected(rank, t, thread, 4 * q)),
          "r"(expected(rank, t, thread, 4 * q + 1)),
          "r"(expected(rank, t, thread, 4 * q + 2)),
          "r"(expected(rank, t, thread, 4 * q + 3))
          : "memory");
    remoteArrive(peerFull[p]);
  };
  unsigned bad = 0;
  auto receive = [&](int t) {
    int p = t & 1;
    waitParity(&s.full[p], (t >> 1) & 1);
    for (int q = 0; q < kWords / 4; ++q) {
      uint4 v = s.exchange[p][thread][q];
      bad += (v.x != expected(peer, t, thread, 4 * q)) +
             (v.y != expected(peer, t, thread, 4 * q + 1)) +
             (v.z != expected(peer, t, thread, 4 * q + 2)) +
             (v.w != expected(peer, t, thread, 4 * q + 3));
    }
    remoteArrive(peerEmpty[p]);
  };
  float x = thread;
  __syncthreads();
  unsigned long long start = clock64();
  if (mode == 2)
    send(0);
  for (int t = 0; t < tiles; ++t) {
    if (mode == 1)
      send(t);
    if (mode == 2 && t + 1 < tiles)
      send(t + 1);
    for (int i = 0; i < work; ++i)
      x = fmaf(x, 1.0001f, 0.5f);
    if (mode != 0)
      receive(t);
  }
  __syncthreads();
  unsigned long long stop = clock64();
  // Neither CTA leaves while the other may still write into it.
  cluster.sync();
  if (bad)
    atomicAdd(errors, bad);
  if (thread == 0)
    cycles[blockIdx.x] = stop - start;
  if (x == -1.0f)
    *sink = x;
}

} // namespace

int main() {
  int ctas = 0;
  CHECK_RT(cudaDeviceGetAttribute(&ctas, cudaDevAttrMultiProcessorCount, 0));
  ctas &= ~1;
  const int tiles = 512;
  size_t smem = sizeof(Shared);
  CHECK_RT(cudaFuncSetAttribute(exchange,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                int(smem)));
  unsigned long long *cycles;
  unsigned *errors;
  float *sink;
  CHECK_RT(cudaMalloc(&cycles, ctas * sizeof(unsigned long long)));
  CHECK_RT(cudaMalloc(&errors, sizeof(unsigned)));
  CHECK_RT(cudaMalloc(&sink, sizeof(float)));
  CHECK_RT(cudaMemset(errors, 0, sizeof(unsigned)));
  std::vector<unsigned long long> host(ctas);
  std::printf("%d CTAs in clusters of 2, %d K tiles, cycles a K tile "
              "(mean over the CTAs):\n",
              ctas, tiles);
  std::printf("%8s %12s %12s %12s\n", "work", "work alone", "exchange",
              "skewed");
  for (int work : {0, 128, 256, 512}) {
    std::printf("%8d", work);
    for (int mode = 0; mode < 3; ++mode) {
      exchange<<<ctas, kThreads, smem>>>(mode, tiles, work, cycles, errors,
                                         sink);
      CHECK_RT(cudaGetLastError());
      CHECK_RT(cudaDeviceSynchronize());
      CHECK_RT(cudaMemcpy(host.data(), cycles, ctas * sizeof(*cycles),
                          cudaMemcpyDeviceToHost));
      double sum = 0;
      for (unsigned long long c : host)
        sum += double(c);
      std::printf(" %12.1f", sum / ctas / tiles);
    }
    std::printf("\n");
  }
  unsigned bad = 0;
  CHECK_RT(cudaMemcpy(&bad, errors, sizeof(bad), cudaMemcpyDeviceToHost));
  std::printf("words received wrong: %u\n", bad);
  return bad ? 1 : 0;
}
