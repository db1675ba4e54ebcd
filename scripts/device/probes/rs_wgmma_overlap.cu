// A probe of the H200 for the transposed block GEMMs (docs/sm90a-kernels.md,
// "Twenty-fourth session"): does ALU work in the consumer warpgroups hide
// beside register-A wgmmas (the form `round_lhs` takes: the weight rounded
// in the A registers, then wgmma m64n256k16 with A from registers), as the
// cycle counts say it could (a 128x256x64 K tile is 1024 cycles of MMAs,
// its rounding ~300 instructions a thread), or does it add to them, as the
// swapped kernels' times suggest (+~500 cycles a K tile at T=8192)?
//
// One CTA per SM of two consumer warpgroups, both operands resident in
// shared memory (no TMA, no producer): for each K tile of 64, each thread
// loads its A fragments with ldmatrix (4 x4 loads, 16 registers), applies W
// steps of ALU work to them (per step and register one bf16x2 fma and one
// xor: 32 W instructions a thread), then issues the tile's four wgmma
// m64n256k16 and waits for the previous tile's (wait_group 1; two sets of A
// registers alternate, as round_lhs's unrolled loop). Modes:
//   RS  the worked registers are the wgmmas' A operand (round_lhs's form)
//   SS  the wgmmas read A from shared memory; the worked registers go to
//       a sink (the ALU work beside shared-memory wgmmas)
//   RSO RS with the warpgroups taking turns at the tensor cores each K
//       tile (named barriers, CUTLASS's ping-pong order within one tile):
//       warpgroup 1 issues its wgmmas after warpgroup 0's, so each
//       warpgroup's work runs beside the other's MMAs, not both at once
//   SSW the worked registers go back where ldmatrix read them (stmatrix,
//       two A tiles alternating), fence.proxy.async, a barrier of the
//       warpgroup, then shared-memory wgmmas on them: a tile rounded in
//       place, which two warpgroups could share
// It prints the cycles a K tile takes for each W in each mode (the MMAs
// alone: 1024 at the tensor cores' bf16 rate), then for the rounding
// `round_lhs` does instead of the W steps: the same instructions in the
// same dependent chain (lib/Conversion/MoeToNVGPU/MXRounding.h, e4m3,
// RCEIL): each block's amax (max.NaN.xorsign.abs down its 4 words, the
// lanes paired, two quad shuffles), the misfit test and its warp vote
// (a branch to a slow path no block here takes), the threshold, and the
// five instructions a bf16 pair.
//
// Build here (no GPU needed), run on the device with .bundle carried:
//   nvcc -gencode arch=compute_90a,code=sm_90a -O2 -std=c++17 \
//     -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
//     -o .bundle/rs-wgmma-overlap \
//     scripts/device/probes/rs_wgmma_overlap.cu
//   bash .bundle/run-on-device.sh .bundle/rs-wgmma-overlap
#include "wgmma_probe.h"

#include <vector>

namespace {

constexpr int kThreads = 256;
constexpr int kARows = 128, kBRows = 256, kRowBytes = 128; // K tile 64 bf16
constexpr int kSmem = 200 * 1024; // one CTA per SM

// The register-A wgmma (128 f32 accumulators a thread; scale-d from a
// register).
__device__ inline void wgmmaRS(float (&d)[128], uint32_t a0, uint32_t a1,
                               uint32_t a2, uint32_t a3, uint64_t descB,
                               int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      MOE_ACCUMULATORS
      "}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
      : MOE_ACCUMULATOR_OPERANDS
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(descB), "r"(scaleD));
}

__device__ inline void stmatrix4(const uint32_t (&r)[16], int step,
                                 uint32_t addr) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, "
               "%4};" ::"r"(addr),
               "r"(r[4 * step]), "r"(r[4 * step + 1]), "r"(r[4 * step + 2]),
               "r"(r[4 * step + 3])
               : "memory");
}

__device__ inline void ldmatrix4(uint32_t (&r)[16], int step, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
               "[%4];"
               : "=r"(r[4 * step]), "=r"(r[4 * step + 1]),
                 "=r"(r[4 * step + 2]), "=r"(r[4 * step + 3])
               : "r"(addr));
}

template <int W>
__device__ inline void work(uint32_t (&x)[16], uint32_t m, uint32_t c,
                            uint32_t key) {
#pragma unroll
  for (int s = 0; s < W; ++s) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      asm("fma.rn.bf16x2 %0, %0, %1, %2;" : "+r"(x[j]) : "r"(m), "r"(c));
      x[j] ^= key;
    }
  }
}

__device__ inline uint32_t permute(uint32_t a, uint32_t b, uint32_t sel) {
  return __byte_perm(a, b, sel);
}

// The rounding of a K tile's A fragments (words 4 s + i of k16 step s:
// i = 0, 2 row g, 1, 3 row g + 8; steps 0-1 block 0, 2-3 block 1): the
// instructions round_lhs's consumers run, in their order.
__device__ inline void roundTile(uint32_t (&x)[16], uint32_t one,
                                 uint32_t zero) {
  uint32_t amax[2];
  for (int blk = 0; blk < 2; ++blk) {
    uint32_t g = pairAmax(Words<4>{{x[8 * blk], x[8 * blk + 2], x[8 * blk + 4],
                                    x[8 * blk + 6]}});
    uint32_t g8 = pairAmax(Words<4>{{x[8 * blk + 1], x[8 * blk + 3],
                                     x[8 * blk + 5], x[8 * blk + 7]}});
    // Lane 0 row g's block, lane 1 row g + 8's, each the larger half.
    uint32_t pair = maxU16x2(permute(g, g8, 0x5410), permute(g, g8, 0x7632));
    pair = maxU16x2(pair, __shfl_xor_sync(0xFFFFFFFFu, pair, 1));
    amax[blk] = maxU16x2(pair, __shfl_xor_sync(0xFFFFFFFFu, pair, 2));
  }
  // mxBitsMisfit and the warp's vote.
  bool misfit = ::misfit(Words<2>{{amax[0], amax[1]}});
  if (__any_sync(0xFFFFFFFFu, misfit)) {
    // (The slow path: no block of the probe's data takes it.)
#pragma unroll
    for (int j = 0; j < 16; ++j)
      x[j] = fmaBf16x2(x[j], one, zero);
    return;
  }
  for (int blk = 0; blk < 2; ++blk) {
    uint32_t bound = threshold(amax[blk]);
    uint32_t rows[2] = {permute(bound, bound, 0x1010),
                        permute(bound, bound, 0x3232)};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      x[8 * blk + i] = roundPair(x[8 * blk + i], rows[i % 2]);
  }
}

enum Mode { RS, SS, SSW, RSO };

template <Mode M, int W>
__global__ void __launch_bounds__(kThreads, 1)
    overlap(int tiles, uint32_t m, uint32_t c, uint32_t key,
            unsigned long long *cycles, float *sink) {
  extern __shared__ __align__(1024) unsigned char raw[];
  // Two A tiles (SSW alternates them), then B.
  unsigned char *a = raw, *b = raw + 2 * kARows * kRowBytes;
  for (int i = threadIdx.x; i < (2 * kARows + kBRows) * kRowBytes / 4;
       i += kThreads)
    reinterpret_cast<uint32_t *>(raw)[i] = 0x3c003c00u ^ (i & 0x00070007u);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int group = warp / 4;
  // ldmatrix rows: the warp's 16 rows of its warpgroup's 64, 16-byte
  // chunks swizzled as the descriptor's layout.
  int row = group * 64 + (warp % 4) * 16 + lane % 16;
  uint32_t rowAddr = smemAddr(a) + row * kRowBytes;
  uint64_t descA = descriptor(smemAddr(a) + group * 64 * kRowBytes);
  // A tile 1's descriptor is 16 KB further (1024 in its 16-byte units).
  const uint64_t tileA = kARows * kRowBytes / 16;
  uint64_t descB = descriptor(smemAddr(b));
  // No initial value: the first wgmma's scale-d 0 starts the accumulators
  // (an instruction that wrote them would serialize the wgmmas, C7515).
  float d[128];
  uint32_t regs[2][16];
  uint32_t keep = 0;
  __syncthreads();
  long long start = clock64();
  for (int t = 0; t < tiles; t += 2) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      uint32_t(&x)[16] = regs[u];
      uint32_t tileAddr = rowAddr + (M == SSW ? u * kARows * kRowBytes : 0);
#pragma unroll
      for (int step = 0; step < 4; ++step) {
        int chunk = (2 * step + lane / 16) ^ (row % 8);
        ldmatrix4(x, step, tileAddr + chunk * 16);
      }
      if (W < 0)
        roundTile(x, m, c);
      else
        work<(W < 0 ? 0 : W)>(x, m, c, key);
      if (M == SSW) {
        // Tile u's last wgmmas (two K tiles back) are complete: the
        // wait_group 1 of the K tile before this one.
#pragma unroll
        for (int step = 0; step < 4; ++step) {
          int chunk = (2 * step + lane / 16) ^ (row % 8);
          stmatrix4(x, step, tileAddr + chunk * 16);
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(1 + group) : "memory");
      } else if (M == SS) {
#pragma unroll
        for (int j = 0; j < 16; ++j)
          keep ^= x[j];
      }
      // RSO: warpgroup g waits for its turn (barrier 3 + g), warpgroup 0's
      // first K tile excepted.
      if (M == RSO && (group == 1 || t + u > 0))
        asm volatile("bar.sync %0, 256;" ::"r"(3 + group) : "memory");
      fence();
#pragma unroll
      for (int i = 0; i < 128; ++i)
        pin(d[i]);
#pragma unroll
      for (int step = 0; step < 4; ++step) {
        int scale = t + u + step > 0;
        // A k16 step is 32 bytes along the row: 2 in the descriptor's units.
        if (M == RS || M == RSO)
          wgmmaRS(d, x[4 * step], x[4 * step + 1], x[4 * step + 2],
                  x[4 * step + 3], descB + 2 * step, scale);
        else
          wgmmaSS(d, descA + (M == SSW ? u * tileA : 0) + 2 * step,
                  descB + 2 * step, scale);
      }
      commit();
      if (M == RSO) // the other warpgroup's turn
        asm volatile("bar.arrive %0, 256;" ::"r"(4 - group) : "memory");
      waitGroup<1>();
#pragma unroll
      for (int i = 0; i < 128; ++i)
        pin(d[i]);
      // The other set's wgmmas are complete: its registers may change now.
#pragma unroll
      for (int j = 0; j < 16; ++j)
        pin(regs[1 - u][j]);
    }
  }
  // RSO: warpgroup 0 takes warpgroup 1's last turn (every arrive met).
  if (M == RSO && group == 0)
    asm volatile("bar.sync 3, 256;" ::: "memory");
  waitGroup<0>();
#pragma unroll
  for (int i = 0; i < 128; ++i)
    pin(d[i]);
  long long stop = clock64();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < 128; ++i)
    total += d[i];
  sink[blockIdx.x * kThreads + threadIdx.x] = total + float(keep & 1);
  if (threadIdx.x == 0)
    cycles[blockIdx.x] = stop - start;
}

using Kernel = void (*)(int, uint32_t, uint32_t, uint32_t,
                        unsigned long long *, float *);

template <Mode M, int... Ws>
void table(std::vector<Kernel> &out, std::integer_sequence<int, Ws...>) {
  (out.push_back(&overlap<M, Ws>), ...);
}

} // namespace

int main() {
  // (-1: the rounding, not W steps.)
  using Steps = std::integer_sequence<int, 0, 2, 4, 6, 8, 10, 12, 16, 20, -1>;
  const int steps[] = {0, 2, 4, 6, 8, 10, 12, 16, 20, -1};
  std::vector<Kernel> rs, ss, ssw, rso;
  table<RS>(rs, Steps{});
  table<SS>(ss, Steps{});
  table<SSW>(ssw, Steps{});
  table<RSO>(rso, Steps{});
  int sms = 0;
  CHECK_RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned long long *cycles;
  float *sink;
  CHECK_RT(cudaMalloc(&cycles, sms * sizeof(unsigned long long)));
  CHECK_RT(cudaMalloc(&sink, sms * kThreads * sizeof(float)));
  const int tiles = 2000;
  // bf16x2 1.0 and 0.0: the work keeps the values (finite sums).
  const uint32_t one = 0x3f803f80u, zero = 0, key = 0;
  auto run = [&](Kernel k) {
    CHECK_RT(cudaFuncSetAttribute(
        k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      k<<<sms, kThreads, kSmem>>>(tiles, one, zero, key, cycles, sink);
      CHECK_RT(cudaGetLastError());
      CHECK_RT(cudaDeviceSynchronize());
      std::vector<unsigned long long> got(sms);
      CHECK_RT(cudaMemcpy(got.data(), cycles, sms * sizeof(got[0]),
                          cudaMemcpyDeviceToHost));
      double sum = 0;
      for (unsigned long long c : got)
        sum += double(c);
      best = std::min(best, sum / sms / tiles);
    }
    return best;
  };
  std::printf("cycles a 128x256x64 K tile takes (MMAs alone: 1024), %d CTAs\n",
              sms);
  std::printf("%6s %14s %10s %10s %10s %10s\n", "steps", "ALU instr/thr",
              "RS", "SS", "SSW", "RSO");
  for (size_t i = 0; i < rs.size(); ++i) {
    if (steps[i] < 0)
      std::printf("%21s", "the rounding");
    else
      std::printf("%6d %14d", steps[i], 32 * steps[i]);
    std::printf(" %10.0f %10.0f %10.0f %10.0f\n", run(rs[i]), run(ss[i]),
                run(ssw[i]), run(rso[i]));
    std::fflush(stdout);
  }
  return checkSink(sink, sms * kThreads);
}
