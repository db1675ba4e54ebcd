// A probe for issue 9's GEMM-share gate (docs/sm90a-kernels.md,
// "Twenty-fifth session"): can a memory-bound MX rounding stream (the
// weight operand kernels' work: bf16 in, bf16 MX values out, a 32-element
// block per lane quad along the contiguous axis) run in a third warpgroup
// of a GEMM CTA beside the tensor cores, so that its time hides under the
// GEMM's, or does it slow the wgmmas (register-file ports, issue slots) or
// itself crawl?
//
// One CTA per SM, 384 threads: warpgroups 0 and 1 run wgmma m64n256k16
// (both operands resident in shared memory, a 128x256x64 K tile = 1024
// cycles of MMAs, as rs_wgmma_overlap's SS mode with no ALU work),
// warpgroup 2 streams `src` to `dst` in 16-byte lanes (8 loads in flight a
// thread), each quad's 32 elements rounded as the operand kernels' bit path
// rounds them (MXRounding.h, e4m3, RCEIL: amax by max.NaN.xorsign.abs, two
// quad shuffles, the misfit vote, the threshold, five instructions a bf16
// pair). Each role's time comes from %globaltimer (first start to last stop
// over the CTAs). Variants: 8 loads in flight with the launch's 168
// registers a thread (the compiler takes 154), then the split a GEMM with
// a producer could give (setmaxnreg: 216 for the MMA warpgroups, 72 for
// the stream) with 8 and with 4 loads in flight. Rows of each: the GEMM
// alone, the stream alone, then both (the first variant at three stream
// sizes); columns: the GEMM's cycles a K tile, the stream's GB/s (read +
// written), and the kernel's time against the two alone run back to back.
// Not modelled: the GEMM's own operand traffic (its TMA loads, ~1.3 TB/s
// in the recompute GEMM at shape 1).
//
// Build here (no GPU needed), run on the device with .bundle carried:
//   nvcc -gencode arch=compute_90a,code=sm_90a -O2 -std=c++17 \
//     -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
//     -o .bundle/side-stream-overlap \
//     scripts/device/probes/side_stream_overlap.cu
//   bash .bundle/run-on-device.sh .bundle/side-stream-overlap
#include "wgmma_probe.h"

#include <algorithm>
#include <vector>

namespace {

constexpr int kGemmThreads = 256, kSideThreads = 128;
constexpr int kThreads = kGemmThreads + kSideThreads;
constexpr int kARows = 128, kBRows = 256, kRowBytes = 128; // K tile 64 bf16
constexpr int kSmem = 200 * 1024;                         // one CTA per SM
// setmaxnreg's split of the 384 threads' 168 registers (launch bounds):
// the MMA warpgroups at 216, the stream at 72, as a GEMM whose producer
// streams beside its copies would give them (docs/sm90a-kernels.md).
constexpr int kMmaRegisters = 216, kStreamRegisters = 72;

__device__ inline uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// One 16-byte lane of a quad's 32-element block: the amax over the quad,
// the misfit vote (a block that does not fit sends the warp to a plain
// copy here: the probe's data never takes it), the bit rounding.
__device__ inline uint4 roundLane(uint4 v) {
  uint32_t a = pairAmax(Words<4>{{v.x, v.y, v.z, v.w}});
  a = maxU16x2(a, __byte_perm(a, a, 0x1032));
  a = maxU16x2(a, __shfl_xor_sync(0xFFFFFFFFu, a, 1));
  a = maxU16x2(a, __shfl_xor_sync(0xFFFFFFFFu, a, 2));
  if (__any_sync(0xFFFFFFFFu, misfit(Words<1>{{a}})))
    return v;
  uint32_t bound = threshold(a);
  return make_uint4(roundPair(v.x, bound), roundPair(v.y, bound),
                    roundPair(v.z, bound), roundPair(v.w, bound));
}

struct Times {
  unsigned long long gemmStart, gemmStop, sideStart, sideStop;
};

// `tiles` K tiles of MMAs in warpgroups 0-1 (none where 0), `chunks`
// 16-byte lanes of the stream in warpgroup 2 (none where 0), InFlight
// loads of 16 bytes a stream thread in flight; Split: the registers
// split by setmaxnreg (kMmaRegisters, kStreamRegisters), else each thread
// keeps the launch's share.
template <int InFlight, bool Split>
__global__ void __launch_bounds__(kThreads, 1)
    overlap(int tiles, const uint4 *__restrict__ src, uint4 *__restrict__ dst,
            long long chunks, Times *times, float *sink) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char *a = raw, *b = raw + kARows * kRowBytes;
  for (int i = threadIdx.x; i < (kARows + kBRows) * kRowBytes / 4;
       i += kThreads)
    reinterpret_cast<uint32_t *>(raw)[i] = 0x3c003c00u ^ (i & 0x00070007u);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  int group = threadIdx.x / 128;
  if (Split) {
    if (group < 2)
      asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kMmaRegisters));
    else
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(
          kStreamRegisters));
  }
  if (group < 2) {
    if (tiles == 0)
      return;
    uint64_t descA = descriptor(smemAddr(a) + group * 64 * kRowBytes);
    uint64_t descB = descriptor(smemAddr(b));
    float d[128];
    unsigned long long start = globalTimer();
    for (int t = 0; t < tiles; ++t) {
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int i = 0; i < 128; ++i)
        pin(d[i]);
#pragma unroll
      for (int step = 0; step < 4; ++step)
        wgmmaSS(d, descA + 2 * step, descB + 2 * step, t + step > 0);
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
#pragma unroll
      for (int i = 0; i < 128; ++i)
        pin(d[i]);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
    for (int i = 0; i < 128; ++i)
      pin(d[i]);
    unsigned long long stop = globalTimer();
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < 128; ++i)
      total += d[i];
    sink[blockIdx.x * kGemmThreads + threadIdx.x] = total;
    if (threadIdx.x == 0) {
      atomicMin(&times->gemmStart, start);
      atomicMax(&times->gemmStop, stop);
    }
    return;
  }
  if (chunks == 0)
    return;
  // The stream: lane i of the grid's side threads takes chunks i, i + n,
  // i + 2 n, ..., InFlight of them loaded before any is rounded.
  long long n = (long long)gridDim.x * kSideThreads;
  long long i0 = (long long)blockIdx.x * kSideThreads + (threadIdx.x - 256);
  unsigned long long start = globalTimer();
  for (long long base = i0; base < chunks; base += InFlight * n) {
    uint4 v[InFlight];
#pragma unroll
    for (int j = 0; j < InFlight; ++j) {
      long long i = base + j * n;
      v[j] = i < chunks ? __ldg(src + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < InFlight; ++j) {
      long long i = base + j * n;
      uint4 r = roundLane(v[j]);
      if (i < chunks)
        dst[i] = r;
    }
  }
  unsigned long long stop = globalTimer();
  if (threadIdx.x == 256) {
    atomicMin(&times->sideStart, start);
    atomicMax(&times->sideStop, stop);
  }
}

} // namespace

int main() {
  int sms = 0, clockKHz = 0;
  CHECK_RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK_RT(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, 0));
  using Kernel = void (*)(int, const uint4 *, uint4 *, long long, Times *,
                         float *);
  struct Variant {
    const char *name;
    Kernel kernel;
  };
  const Variant variants[] = {
      {"8 in flight, 168 each", overlap<8, false>},
      {"8 in flight, 216/72", overlap<8, true>},
      {"4 in flight, 216/72", overlap<4, true>},
  };
  for (const Variant &v : variants)
    CHECK_RT(cudaFuncSetAttribute(
        v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const long long maxBytes = 2ll << 30; // src and dst each
  const long long maxChunks = maxBytes / 16;
  uint4 *src, *dst;
  Times *times;
  float *sink;
  CHECK_RT(cudaMalloc(&src, maxBytes));
  CHECK_RT(cudaMalloc(&dst, maxBytes));
  CHECK_RT(cudaMalloc(&times, sizeof(Times)));
  CHECK_RT(cudaMalloc(&sink, sms * kGemmThreads * sizeof(float)));
  {
    // bf16 values of exponents 120..135 (every block fits the bit path).
    std::vector<uint32_t> host(maxBytes / 4);
    for (size_t i = 0; i < host.size(); ++i) {
      uint32_t h = uint32_t(i * 2654435761u);
      auto lane = [](uint32_t r) {
        return ((120 + (r & 15)) << 7) | ((r >> 4) & 0x7F) | (r & 0x800) << 4;
      };
      host[i] = lane(h) | lane(h >> 12) << 16;
    }
    CHECK_RT(cudaMemcpy(src, host.data(), maxBytes, cudaMemcpyHostToDevice));
  }
  cudaEvent_t e0, e1;
  CHECK_RT(cudaEventCreate(&e0));
  CHECK_RT(cudaEventCreate(&e1));
  struct Result {
    double kernelMs, gemmMs, sideMs;
  };
  auto run = [&](Kernel kernel, int tiles, long long chunks) {
    Result best{1e30, 0, 0};
    for (int rep = 0; rep < 3; ++rep) {
      Times init{~0ull, 0, ~0ull, 0};
      CHECK_RT(cudaMemcpy(times, &init, sizeof(init), cudaMemcpyHostToDevice));
      CHECK_RT(cudaEventRecord(e0));
      kernel<<<sms, kThreads, kSmem>>>(tiles, src, dst, chunks, times, sink);
      CHECK_RT(cudaEventRecord(e1));
      CHECK_RT(cudaGetLastError());
      CHECK_RT(cudaDeviceSynchronize());
      float ms = 0;
      CHECK_RT(cudaEventElapsedTime(&ms, e0, e1));
      Times got;
      CHECK_RT(cudaMemcpy(&got, times, sizeof(got), cudaMemcpyDeviceToHost));
      if (ms < best.kernelMs)
        best = {ms, tiles ? (got.gemmStop - got.gemmStart) * 1e-6 : 0,
                chunks ? (got.sideStop - got.sideStart) * 1e-6 : 0};
    }
    return best;
  };
  // GEMM cycles a K tile at the base clock, from the role's time (the clock
  // under load may differ: the "alone" row is the reference).
  const int tiles = 4000;
  auto cyclesPerTile = [&](double ms) {
    return ms * 1e-3 * clockKHz * 1e3 / tiles;
  };
  std::printf("side stream beside wgmma: %d CTAs of 2 MMA warpgroups "
              "(128x256x64 K tiles) + 1 stream warpgroup\n",
              sms);
  std::printf("%-22s %-9s %9s %10s %9s %9s %9s %9s\n", "variant", "row",
              "stream MB", "cyc/Ktile", "GEMM ms", "strm ms", "strm GB/s",
              "kernel ms");
  for (const Variant &v : variants) {
    Result gemm = run(v.kernel, tiles, 0);
    std::printf("%-22s %-9s %9s %10.0f %9.3f %9s %9s %9.3f\n", v.name, "GEMM",
                "-", cyclesPerTile(gemm.gemmMs), gemm.gemmMs, "-", "-",
                gemm.kernelMs);
    // (The first variant at three sizes, the others at the largest.)
    for (long long mb : {512ll, 1024ll, 2048ll}) {
      if (&v != variants && mb != 2048)
        continue;
      long long chunks = std::min(maxChunks, mb * (1ll << 20) / 16);
      Result side = run(v.kernel, 0, chunks);
      Result both = run(v.kernel, tiles, chunks);
      double bytes = 2.0 * chunks * 16;
      std::printf("%-22s %-9s %9lld %10s %9s %9.3f %9.0f %9.3f\n", v.name,
                  "stream", mb, "-", "-", side.sideMs,
                  bytes / side.sideMs * 1e-6, side.kernelMs);
      std::printf("%-22s %-9s %9lld %10.0f %9.3f %9.3f %9.0f %9.3f  (apart: "
                  "%.3f)\n",
                  v.name, "both", mb, cyclesPerTile(both.gemmMs), both.gemmMs,
                  both.sideMs, bytes / both.sideMs * 1e-6, both.kernelMs,
                  gemm.kernelMs + side.kernelMs);
      std::fflush(stdout);
    }
  }
  return checkSink(sink, sms * kGemmThreads);
}
