// Host driver for the MLIR-generated exact-MXFP8 GEMM kernels (CUDA driver API only).
//
//   C[M,N] (f32) = sum_kb sa[m,kb] * sb[n,kb] * sum_{k in kb} qa[m,k] * qb[n,k]
//
// Loads a cubin (or PTX) with cuModuleLoadData, builds the two TMA descriptors with
// cuTensorMapEncodeTiled (copied to device memory: the kernels take a pointer), launches with
// cuLaunchKernel, checks against a CPU reference in double and times with CUDA events.
//
// usage: driver --module out/mxgemm_fp8.cubin --kernel mxgemm_fp8 --smem BYTES
//               [--M 4096 --N 4096 --K 4096] [--iters 20] [--warmup 3] [--tol 1e-5]
//               [--seed 1] [--check-rows R] (R = 0: all rows) [--smin 117 --smax 137]
//               [--sb-min A --sb-max B] (sb range if different from sa's) [--no-time]
//               [--threads 384] [--qexp-min 0 --qexp-max 15] (e4m3 exponent fields drawn)
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

static void check(CUresult r, const char* what, int line) {
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* str = nullptr;
    cuGetErrorName(r, &name);
    cuGetErrorString(r, &str);
    std::fprintf(stderr, "FAIL: %s (line %d): %s: %s\n", what, line, name ? name : "?",
                 str ? str : "?");
    std::exit(2);
  }
}
#define CK(x) check((x), #x, __LINE__)

// e4m3fn decode (no infinities; 0x7F / 0xFF are NaN and never generated here)
static double e4m3_to_double(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 0xF, m = b & 7;
  double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -v : v;
}

struct Args {
  std::string module = "out/mxgemm_fp8.cubin";
  std::string kernel = "mxgemm_fp8";
  int smem = 0;
  int M = 1024, N = 1024, K = 4096;
  int iters = 20, warmup = 3;
  double tol = 1e-5;
  unsigned seed = 1;
  int check_rows = -1;  // -1: automatic
  int smin = 117, smax = 137;      // E8M0 range of sa (and of sb unless --sb-min/--sb-max)
  int sbmin = -1, sbmax = -1;
  int threads = 384;                // block size (the .info file of the kernel says)
  int qemin = 0, qemax = 15;        // e4m3 exponent-field range of the random codes
  bool time = true;
};

static Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", k.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    if (k == "--module") a.module = next();
    else if (k == "--kernel") a.kernel = next();
    else if (k == "--smem") a.smem = std::atoi(next());
    else if (k == "--M") a.M = std::atoi(next());
    else if (k == "--N") a.N = std::atoi(next());
    else if (k == "--K") a.K = std::atoi(next());
    else if (k == "--iters") a.iters = std::atoi(next());
    else if (k == "--warmup") a.warmup = std::atoi(next());
    else if (k == "--tol") a.tol = std::atof(next());
    else if (k == "--seed") a.seed = (unsigned)std::atoi(next());
    else if (k == "--check-rows") a.check_rows = std::atoi(next());
    else if (k == "--smin") a.smin = std::atoi(next());
    else if (k == "--smax") a.smax = std::atoi(next());
    else if (k == "--sb-min") a.sbmin = std::atoi(next());
    else if (k == "--sb-max") a.sbmax = std::atoi(next());
    else if (k == "--no-time") a.time = false;
    else if (k == "--threads") a.threads = std::atoi(next());
    else if (k == "--qexp-min") a.qemin = std::atoi(next());
    else if (k == "--qexp-max") a.qemax = std::atoi(next());
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(1);
    }
  }
  if (a.M % 128 || a.N % 128 || a.K % 128 || a.M <= 0 || a.N <= 0 || a.K <= 0) {
    std::fprintf(stderr, "M, N, K must be positive multiples of 128\n");
    std::exit(1);
  }
  return a;
}

static std::vector<char> read_file(const std::string& p) {
  FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", p.c_str());
    std::exit(1);
  }
  std::vector<char> d;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) d.insert(d.end(), buf, buf + n);
  std::fclose(f);
  d.push_back(0);  // PTX must be NUL-terminated; harmless for a cubin
  return d;
}

// 2-D uint8 tensor [rows, K] (K contiguous), box 128 x 128 bytes, 128B swizzle
static CUtensorMap make_tmap(CUdeviceptr base, int rows, int K) {
  CUtensorMap m;
  cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
  cuuint64_t strides[1] = {(cuuint64_t)K};
  cuuint32_t box[2] = {128, 128};
  cuuint32_t estr[2] = {1, 1};
  CK(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void*)base, dims, strides, box,
                            estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

template <class F>
static void parallel_for(int n, F f) {
  unsigned nt = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
  std::atomic<int> next{0};
  std::vector<std::thread> th;
  for (unsigned t = 0; t < nt; ++t)
    th.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < n;) f(i);
    });
  for (auto& t : th) t.join();
}

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  const int M = a.M, N = a.N, K = a.K, KB = K / 32;

  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  char devname[256];
  CK(cuDeviceGetName(devname, sizeof devname, dev));

  std::vector<char> image = read_file(a.module);
  CUmodule mod;
  CK(cuModuleLoadData(&mod, image.data()));
  CUfunction fn;
  CK(cuModuleGetFunction(&fn, mod, a.kernel.c_str()));
  CK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, a.smem));
  int nregs = 0;
  CK(cuFuncGetAttribute(&nregs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));

  // ---- inputs: random finite e4m3 codes (all magnitudes, both signs), random scales --------
  std::mt19937_64 rng(a.seed);
  auto gen_q = [&](std::vector<uint8_t>& v) {
    for (auto& x : v) {
      uint8_t b;
      do b = (uint8_t)(rng() & 0xFF);
      while ((b & 0x7F) == 0x7F || ((b >> 3) & 0xF) < a.qemin ||
             ((b >> 3) & 0xF) > a.qemax);  // skip NaN codes and exponents out of range
      x = b;
    }
  };
  std::vector<uint8_t> qa((size_t)M * K), qb((size_t)N * K), sa((size_t)M * KB),
      sb((size_t)N * KB);
  gen_q(qa);
  gen_q(qb);
  std::uniform_int_distribution<int> sda(a.smin, a.smax);
  std::uniform_int_distribution<int> sdb(a.sbmin >= 0 ? a.sbmin : a.smin,
                                         a.sbmax >= 0 ? a.sbmax : a.smax);
  for (auto& x : sa) x = (uint8_t)sda(rng);
  for (auto& x : sb) x = (uint8_t)sdb(rng);

  CUdeviceptr dqa, dqb, dsa, dsb, dC, dtA, dtB;
  CK(cuMemAlloc(&dqa, qa.size()));
  CK(cuMemAlloc(&dqb, qb.size()));
  CK(cuMemAlloc(&dsa, sa.size()));
  CK(cuMemAlloc(&dsb, sb.size()));
  CK(cuMemAlloc(&dC, (size_t)M * N * 4));
  CK(cuMemAlloc(&dtA, sizeof(CUtensorMap)));
  CK(cuMemAlloc(&dtB, sizeof(CUtensorMap)));
  CK(cuMemcpyHtoD(dqa, qa.data(), qa.size()));
  CK(cuMemcpyHtoD(dqb, qb.data(), qb.size()));
  CK(cuMemcpyHtoD(dsa, sa.data(), sa.size()));
  CK(cuMemcpyHtoD(dsb, sb.data(), sb.size()));
  CUtensorMap tA = make_tmap(dqa, M, K), tB = make_tmap(dqb, N, K);
  CK(cuMemcpyHtoD(dtA, &tA, sizeof tA));
  CK(cuMemcpyHtoD(dtB, &tB, sizeof tB));
  // poison C (0xFFFFFFFF is a NaN): every element must be written
  CK(cuMemsetD32(dC, 0xFFFFFFFFu, (size_t)M * N));

  void* params[] = {&dtA, &dtB, &dsa, &dsb, &dC, (void*)&M, (void*)&N, (void*)&K};
  auto launch = [&](CUstream s) {
    CK(cuLaunchKernel(fn, N / 128, M / 128, 1, a.threads, 1, 1, a.smem, s, params, nullptr));
  };
  launch(0);
  CK(cuCtxSynchronize());
  std::vector<float> C((size_t)M * N);
  CK(cuMemcpyDtoH(C.data(), dC, C.size() * 4));

  // ---- reference (double) on a subset of rows ----------------------------------------------
  int rows = a.check_rows;
  if (rows < 0) rows = ((double)M * N * K <= 8.6e9) ? M : 128;  // full check up to 1024x2048x4096
  if (rows == 0 || rows > M) rows = M;
  std::vector<int> rowlist(rows);
  const int stride = M / rows;  // rows spread over M, with varying offsets inside each stride
  for (int i = 0; i < rows; ++i) rowlist[i] = i * stride + (stride > 1 ? (i * 37) % stride : 0);
  double lut[256];
  for (int b = 0; b < 256; ++b) lut[b] = e4m3_to_double((uint8_t)b);
  std::vector<double> fb((size_t)N * K);
  for (size_t i = 0; i < fb.size(); ++i) fb[i] = lut[qb[i]];
  std::vector<double> err2(rows, 0.0), ref2(rows, 0.0);
  std::vector<long long> bad(rows, 0);
  parallel_for(rows, [&](int ri) {
    int m = rowlist[ri];
    std::vector<double> fa(K);
    for (int k = 0; k < K; ++k) fa[k] = lut[qa[(size_t)m * K + k]];
    double e2 = 0, r2 = 0;
    long long nb = 0;
    for (int n = 0; n < N; ++n) {
      const double* brow = &fb[(size_t)n * K];
      double acc = 0;
      for (int kb = 0; kb < KB; ++kb) {
        double s = 0;  // exact: <= 32 products of 4-bit-significand numbers
        for (int k = kb * 32; k < kb * 32 + 32; ++k) s += fa[k] * brow[k];
        acc += s * std::ldexp(1.0, (int)sa[(size_t)m * KB + kb] - 127) *
               std::ldexp(1.0, (int)sb[(size_t)n * KB + kb] - 127);
      }
      double g = C[(size_t)m * N + n];
      if (!std::isfinite(g)) ++nb;
      e2 += (g - acc) * (g - acc);
      r2 += acc * acc;
    }
    err2[ri] = e2;
    ref2[ri] = r2;
    bad[ri] = nb;
  });
  double E = 0, R = 0;
  long long nonfinite = 0;
  for (int i = 0; i < rows; ++i) E += err2[i], R += ref2[i], nonfinite += bad[i];
  // every element written (poison was NaN) and finite, over the whole output
  long long unwritten = 0;
  for (float x : C)
    if (!std::isfinite(x)) ++unwritten;
  double rel = std::sqrt(E / std::max(R, 1e-300));
  bool ok = unwritten == 0 && nonfinite == 0 && rel <= a.tol;

  // ---- timing -------------------------------------------------------------------------------
  double ms = 0, tflops = 0;
  if (a.time && a.iters > 0) {
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < a.warmup; ++i) launch(st);
    CUevent e0, e1;
    CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CK(cuEventRecord(e0, st));
    for (int i = 0; i < a.iters; ++i) launch(st);
    CK(cuEventRecord(e1, st));
    CK(cuEventSynchronize(e1));
    float tot = 0;
    CK(cuEventElapsedTime(&tot, e0, e1));
    ms = tot / a.iters;
    tflops = 2.0 * M * N * (double)K / (ms * 1e-3) / 1e12;
    CK(cuEventDestroy(e0));
    CK(cuEventDestroy(e1));
    CK(cuStreamDestroy(st));
    // the timed runs must reproduce the checked result bit for bit
    std::vector<float> C2(C.size());
    CK(cuMemcpyDtoH(C2.data(), dC, C2.size() * 4));
    if (std::memcmp(C.data(), C2.data(), C.size() * 4) != 0) {
      std::printf("  NOTE: repeated runs differ bitwise\n");
      ok = false;
    }
  }
  std::printf("RESULT kernel=%s M=%d N=%d K=%d regs=%d smem=%d rows_checked=%d rel_frob=%.3e "
              "unwritten=%lld ms=%.4f TFLOPS=%.1f %s  [%s]\n",
              a.kernel.c_str(), M, N, K, nregs, a.smem, rows, rel, unwritten, ms, tflops,
              ok ? "PASS" : "FAIL", devname);
  CK(cuMemFree(dqa));
  CK(cuMemFree(dqb));
  CK(cuMemFree(dsa));
  CK(cuMemFree(dsb));
  CK(cuMemFree(dC));
  CK(cuMemFree(dtA));
  CK(cuMemFree(dtB));
  CK(cuModuleUnload(mod));
  CK(cuDevicePrimaryCtxRelease(dev));
  return ok ? 0 : 3;
}
