// The wgmma and MX bit-rounding pieces the wgmma probes share
// (rs_wgmma_overlap.cu, side_stream_overlap.cu): the m64n256k16 bf16 wgmma
// with both operands in shared memory, its descriptor and fences, and the
// bit rounding as the kernels emit it: the templates of
// include/moe/Conversion/MoeToNVGPU/MXBitRounding.h over the same PTX word
// operations (e4m3, RCEIL).
#ifndef MOE_SCRIPTS_DEVICE_PROBES_WGMMA_PROBE_H
#define MOE_SCRIPTS_DEVICE_PROBES_WGMMA_PROBE_H

#include "probe.h"

#include "../../../include/moe/Conversion/MoeToNVGPU/MXBitRounding.h"

#include <vector>

// The 128 accumulators of a wgmma m64n256k16 (f32): their operand list
// in the PTX text and their constraints.
#define MOE_ACCUMULATORS \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define MOE_ACCUMULATOR_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// (scale-d from a register.)
__device__ inline void wgmmaSS(float (&d)[128], uint64_t descA, uint64_t descB,
                               int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      MOE_ACCUMULATORS
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : MOE_ACCUMULATOR_OPERANDS
      : "l"(descA), "l"(descB), "r"(scaleD));
}

// A K-major operand with the 128-byte swizzle: 8-row groups 1024 bytes
// apart (the layout TMA writes and the GEMM kernels read).
__device__ inline uint64_t descriptor(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) |
         (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

__device__ inline void fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ inline void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ inline void waitGroup() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving reads or writes of the registers of a
// wgmma in flight across this point (CUTLASS's warpgroup_fence_operand).
__device__ inline void pin(float &x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ inline void pin(uint32_t &x) {
  asm volatile("" : "+r"(x)::"memory");
}

#define MOE_OP2(name, text)                                                    \
  __device__ inline uint32_t name(uint32_t a, uint32_t b) {                   \
    uint32_t r;                                                                \
    asm(text : "=r"(r) : "r"(a), "r"(b));                                      \
    return r;                                                                  \
  }
MOE_OP2(absMaxNaN, "max.NaN.xorsign.abs.bf16x2 %0, %1, %2;")
MOE_OP2(absMax, "max.xorsign.abs.bf16x2 %0, %1, %2;")
MOE_OP2(maxU16x2, "max.u16x2 %0, %1, %2;")
MOE_OP2(minU16x2, "min.u16x2 %0, %1, %2;")
#undef MOE_OP2
__device__ inline uint32_t fmaBf16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
__device__ inline uint32_t andOr(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

// The bit rounding's word operations as the kernels' PTX
// (MXRounding.cpp's IRWordOps), for the templates of MXBitRounding.h.
struct ProbeOps {
  __device__ uint32_t c(uint32_t v) { return v; }
  __device__ uint32_t add(uint32_t x, uint32_t y) { return x + y; }
  __device__ uint32_t sub(uint32_t x, uint32_t y) { return x - y; }
  __device__ uint32_t band(uint32_t x, uint32_t y) { return x & y; }
  __device__ uint32_t bor(uint32_t x, uint32_t y) { return x | y; }
  __device__ uint32_t andOr(uint32_t x, uint32_t y, uint32_t z) {
    return ::andOr(x, y, z);
  }
  __device__ uint32_t max16x2(uint32_t x, uint32_t y) { return maxU16x2(x, y); }
  __device__ uint32_t min16x2(uint32_t x, uint32_t y) { return minU16x2(x, y); }
  __device__ uint32_t absMax(uint32_t x, uint32_t y) { return ::absMax(x, y); }
  __device__ uint32_t absMaxNaN(uint32_t x, uint32_t y) {
    return ::absMaxNaN(x, y);
  }
  __device__ uint32_t fmaBf16x2(uint32_t x, uint32_t y, uint32_t z) {
    return ::fmaBf16x2(x, y, z);
  }
  __device__ uint32_t swapLanes(uint32_t x) {
    return __byte_perm(x, x, 0x1032);
  }
  __device__ uint32_t low16(uint32_t x) { return x & 0xFFFFu; }
  __device__ bool isNonzero(uint32_t x) { return x != 0; }
  __device__ bool ult(uint32_t x, uint32_t y) { return x < y; }
  __device__ bool orB(bool x, bool y) { return x || y; }
};

// The probes round e4m3 blocks (RCEIL).
constexpr mlir::moe::MXBitRounding kRounding = mlir::moe::kMXBitRoundingE4M3;

// mxThresholdPair.
__device__ inline uint32_t threshold(uint32_t amax) {
  ProbeOps o;
  return mlir::moe::mxThresholdPair(o, amax, kRounding);
}

// mxRoundPairBits.
__device__ inline uint32_t roundPair(uint32_t word, uint32_t bound) {
  ProbeOps o;
  return mlir::moe::mxRoundPairBits(o, word, bound, kRounding);
}

// A view of N words for mxPairAmaxBits and mxBitsMisfit.
template <int N> struct Words {
  uint32_t w[N];
  __device__ int size() const { return N; }
  __device__ uint32_t operator[](int i) const { return w[i]; }
};

// mxPairAmaxBits of N words, and mxBitsMisfit of N amax pairs.
template <int N> __device__ inline uint32_t pairAmax(const Words<N> &words) {
  ProbeOps o;
  return mlir::moe::mxPairAmaxBits(o, words);
}
template <int N> __device__ inline bool misfit(const Words<N> &amaxPairs) {
  ProbeOps o;
  return mlir::moe::mxBitsMisfit(o, amaxPairs, kRounding);
}

/// Exit status 1 after a line saying so where one of the `count` sums the
/// MMA threads left in `sink` is NaN (the accumulators kept finite values),
/// else 0.
inline int checkSink(const float *sink, size_t count) {
  std::vector<float> host(count);
  CHECK_RT(cudaMemcpy(host.data(), sink, count * sizeof(float),
                      cudaMemcpyDeviceToHost));
  for (float v : host)
    if (!(v == v)) {
      std::printf("FAIL: a NaN accumulator\n");
      return 1;
    }
  return 0;
}

#endif // MOE_SCRIPTS_DEVICE_PROBES_WGMMA_PROBE_H
