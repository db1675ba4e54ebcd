//===- Gemm.cpp - moe-run's standalone GEMM mode --------------------------===//
//
// The GEMM description, its module, seeded inputs and the sampled exact
// reference (Gemm.h). The reference quantizes with lib/Reference's MX
// numerics, the definition every lowering is checked against.
//
//===----------------------------------------------------------------------===//
#include "Gemm.h"

#include "moe/Reference/BF16.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace moe::run {
namespace {

/// The largest size of one dimension: every tensor's element count then
/// fits 2^62, and its bytes the generated code's index type.
constexpr int64_t kMaxDim = int64_t(1) << 31;

std::string mxType(const GemmDesc &d) {
  return d.elem == ref::MXElem::E4M3 ? "f8E4M3FN" : "f8E5M2";
}

std::string tensor(std::initializer_list<int64_t> shape,
                   const std::string &element) {
  std::string out = "tensor<";
  for (int64_t size : shape)
    out += std::to_string(size) + "x";
  return out + element + ">";
}

/// splitmix64: the same stream on every platform and standard library.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1).
  double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }
  /// N(0, 1) by Box-Muller (one value per pair of draws: simple, and the
  /// inputs' generation is not what is measured).
  double normal() {
    double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
};

/// `count` N(0, 1) values rounded to bf16, as bit patterns: chunk c of
/// 2^20 elements from stream (seed, c), the chunks spread over the
/// machine's cores (operands of billions of elements at the reference
/// shapes).
std::vector<uint16_t> bf16Normal(int64_t count, uint64_t seed) {
  constexpr int64_t kChunk = int64_t(1) << 20;
  std::vector<uint16_t> out(count);
  int64_t chunks = (count + kChunk - 1) / kChunk;
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c = next++; c < chunks; c = next++) {
      Random random{seed * 0x2545F4914F6CDD1Dull + uint64_t(c) * 0x9E37ull};
      for (int64_t i = c * kChunk; i < std::min(count, (c + 1) * kChunk); ++i)
        out[i] = ref::bf16FromFloat(ref::roundToBF16(random.normal()));
    }
  };
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<int64_t>(threads, chunks); ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
  return out;
}

/// Q(M, axis) of the operand `rows` x `cols` at bf16 bits `x` with row
/// stride `stride`: MX quantize + dequantize, or the bf16 values themselves
/// for quant=none.
std::vector<float> qdq(const GemmDesc &d, const uint16_t *x, int64_t rows,
                       int64_t cols, int axis, int64_t stride = -1) {
  if (stride < 0)
    stride = cols;
  std::vector<float> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = ref::floatFromBF16(x[r * stride + c]);
  if (d.quantized)
    ref::quantizeDequantize(out.data(), out.data(), rows, cols, axis, d.elem,
                            d.rule);
  return out;
}

/// Up to `count` distinct values spread over [0, n).
std::vector<int64_t> spread(int64_t n, int64_t count) {
  std::vector<int64_t> out;
  count = std::min(count, n);
  for (int64_t j = 0; j < count; ++j)
    out.push_back(count == 1 ? 0 : j * (n - 1) / (count - 1));
  return out;
}

} // namespace

double GemmDesc::flops() const {
  return 2.0 * double(M) * double(N) * double(K);
}

std::string GemmDesc::toString() const {
  std::ostringstream os;
  os << "M=" << M << ",N=" << N << ",K=" << K << ",G=" << G << ",B=" << B
     << ",kind=" << (kind == Kind::Block ? "block" : "expert")
     << ",quant=" << (quantized ? ref::toString(elem) : "none")
     << ",rule=" << ref::toString(rule);
  return os.str();
}

std::string parseGemmDesc(const std::string &spec, GemmDesc &d) {
  d = GemmDesc();
  bool haveM = false, haveN = false, haveK = false;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      return "'" + item + "' in --gemm '" + spec + "' is not KEY=VALUE";
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto size = [&](int64_t &out, int64_t min) -> std::string {
      bool digits = !value.empty() && value.size() <= 12 &&
                    value.find_first_not_of("0123456789") == std::string::npos;
      int64_t v = digits ? std::strtoll(value.c_str(), nullptr, 10) : -1;
      if (!digits || v < min || v > kMaxDim)
        return key + "=" + value + " in --gemm: expected an integer in [" +
               std::to_string(min) + ", 2^31]";
      out = v;
      return std::string();
    };
    std::string error;
    if (key == "M")
      error = size(d.M, 1), haveM = true;
    else if (key == "N")
      error = size(d.N, 1), haveN = true;
    else if (key == "K")
      error = size(d.K, 1), haveK = true;
    else if (key == "G")
      error = size(d.G, 1);
    else if (key == "B")
      error = size(d.B, 1);
    else if (key == "kind") {
      if (value == "block")
        d.kind = GemmDesc::Kind::Block;
      else if (value == "expert")
        d.kind = GemmDesc::Kind::Expert;
      else
        error = "kind=" + value + " in --gemm: expected block or expert";
    } else if (key == "quant") {
      d.quantized = value != "none";
      if (d.quantized && !ref::parseMXElem(value, d.elem))
        error = "quant=" + value + " in --gemm: expected e4m3, e5m2 or none";
    } else if (key == "rule") {
      if (!ref::parseScaleRule(value, d.rule))
        error = "rule=" + value +
                " in --gemm: expected rceil, floor or floor_alt";
    } else {
      error = "unknown key '" + key + "' in --gemm '" + spec +
              "' (keys: M N K G B kind quant rule)";
    }
    if (!error.empty())
      return error;
  }
  if (!haveM || !haveN || !haveK)
    return "--gemm '" + spec + "' needs M, N and K";
  bool block = d.kind == GemmDesc::Kind::Block;
  // Rows (block) or slots (expert) come in whole blocks.
  int64_t blocked = block ? d.M : d.K;
  if (blocked % d.B)
    return std::string(block ? "M" : "K") + " = " + std::to_string(blocked) +
           " is not a multiple of B = " + std::to_string(d.B);
  if (d.quantized && (block ? d.K : d.B) % 32)
    return block ? "K = " + std::to_string(d.K) +
                       " is not a multiple of 32 (the MX block)"
                 : "B = " + std::to_string(d.B) +
                       " is not a multiple of 32 (an MX block of slots "
                       "must not straddle two groups)";
  // Every operand within 2^40 bytes (moe-run holds it in host memory too),
  // computed in doubles: the products of 2^31-sized dimensions overflow.
  double M = double(d.M), N = double(d.N), K = double(d.K), G = double(d.G);
  const std::pair<const char *, double> operands[] = {
      {"A", M * K * 2},
      {"B", block ? G * N * K * 2 : K * N * 2},
      {"C", block ? M * N * 4 : G * M * N * 4}};
  for (const auto &[name, bytes] : operands)
    if (bytes > std::ldexp(1.0, 40)) {
      std::ostringstream os;
      os << "--gemm '" << spec << "': operand " << name << " would take "
         << bytes << " bytes, more than 2^40";
      return os.str();
    }
  return std::string();
}

std::string gemmToMLIR(const GemmDesc &d, const std::string &config) {
  const int64_t blocks = (d.kind == GemmDesc::Kind::Block ? d.M : d.K) / d.B;
  const std::string bf16 = "bf16", f32 = "f32", e8m0 = "f8E8M0FNU";
  const std::string blockTy = tensor({blocks}, "i32");
  std::ostringstream os;
  std::string aTy, bTy, cTy;
  int aAxis, bAxis;
  std::string aScaleTy, bScaleTy;
  if (d.kind == GemmDesc::Kind::Block) {
    aTy = tensor({d.M, d.K}, "");
    bTy = tensor({d.G, d.N, d.K}, "");
    cTy = tensor({d.M, d.N}, f32);
    aAxis = 1, bAxis = 2;
    aScaleTy = tensor({d.M, d.K / 32}, e8m0);
    bScaleTy = tensor({d.G, d.N, d.K / 32}, e8m0);
  } else {
    aTy = tensor({d.K, d.M}, "");
    bTy = tensor({d.K, d.N}, "");
    cTy = tensor({d.G, d.M, d.N}, f32);
    aAxis = 0, bAxis = 0;
    aScaleTy = tensor({d.K / 32, d.M}, e8m0);
    bScaleTy = tensor({d.K / 32, d.N}, e8m0);
  }
  // The element type goes last: "tensor<MxKx" + type + ">".
  auto typed = [](const std::string &ty, const std::string &element) {
    return ty.substr(0, ty.size() - 1) + element + ">";
  };
  os << "// moe-run --gemm " << d.toString() << "\n"
     << "func.func @moe_gemm(%a: " << typed(aTy, bf16)
     << ", %b: " << typed(bTy, bf16) << ", %blocks: " << blockTy << ") -> "
     << cTy << " {\n";
  std::string lhs, rhs;
  if (d.quantized) {
    std::string mx = "#moe.mx<" + mxType(d) + ", block = 32, rule = " +
                     ref::toString(d.rule) + ">";
    os << "  %aq, %as = moe.mx_quantize %a {axis = " << aAxis
       << " : i64, quant = " << mx << "} : " << typed(aTy, bf16) << " -> "
       << typed(aTy, mxType(d)) << ", " << aScaleTy << "\n";
    os << "  %bq, %bs = moe.mx_quantize %b {axis = " << bAxis
       << " : i64, quant = " << mx << "} : " << typed(bTy, bf16) << " -> "
       << typed(bTy, mxType(d)) << ", " << bScaleTy << "\n";
    lhs = "%aq : " + typed(aTy, mxType(d)) + " scales %as : " + aScaleTy;
    rhs = "%bq : " + typed(bTy, mxType(d)) + " scales %bs : " + bScaleTy;
  } else {
    lhs = "%a : " + typed(aTy, bf16);
    rhs = "%b : " + typed(bTy, bf16);
  }
  os << "  %c = moe."
     << (d.kind == GemmDesc::Kind::Block ? "block_matmul" : "expert_matmul")
     << " lhs(" << lhs << ") rhs(" << rhs << ") experts(%blocks : " << blockTy
     << ") {block_size = " << d.B << " : i64"
     << (config.empty() ? "" : ", moe.gemm_config = " + config) << "} -> "
     << cTy << "\n"
     << "  return %c : " << cTy << "\n}\n";
  return os.str();
}

GemmInputs makeGemmInputs(const GemmDesc &d, uint64_t seed) {
  GemmInputs in;
  bool block = d.kind == GemmDesc::Kind::Block;
  in.a = bf16Normal(block ? d.M * d.K : d.K * d.M, 2 * seed + 1);
  in.b = bf16Normal(block ? d.G * d.N * d.K : d.K * d.N, 2 * seed + 2);
  // Contiguous groups, ascending, as the routing layout has its experts.
  int64_t blocks = (block ? d.M : d.K) / d.B;
  for (int64_t i = 0; i < blocks; ++i)
    in.blocks.push_back(static_cast<int32_t>(i * d.G / blocks));
  return in;
}

std::vector<GemmSample> gemmReference(const GemmDesc &d,
                                      const GemmInputs &in) {
  std::vector<GemmSample> out;
  if (d.kind == GemmDesc::Kind::Block) {
    std::vector<int64_t> cachedGroup;
    std::vector<std::vector<float>> cachedWeight;
    for (int64_t row : spread(d.M, 16)) {
      int64_t g = in.blocks[row / d.B];
      std::vector<float> a = qdq(d, &in.a[row * d.K], 1, d.K, 1);
      size_t slot = 0;
      while (slot < cachedGroup.size() && cachedGroup[slot] != g)
        ++slot;
      if (slot == cachedGroup.size()) {
        cachedGroup.push_back(g);
        cachedWeight.push_back(qdq(d, &in.b[g * d.N * d.K], d.N, d.K, 1));
      }
      const std::vector<float> &w = cachedWeight[slot];
      GemmSample sample{row * d.N, std::vector<double>(d.N)};
      for (int64_t n = 0; n < d.N; ++n) {
        double sum = 0;
        for (int64_t k = 0; k < d.K; ++k)
          sum += double(a[k]) * double(w[n * d.K + k]);
        sample.values[n] = sum;
      }
      out.push_back(std::move(sample));
    }
    return out;
  }
  // Expert GEMMs: 4 rows of up to 4 groups, each over the group's slots.
  int64_t blocks = static_cast<int64_t>(in.blocks.size());
  for (int64_t g : spread(d.G, 4)) {
    int64_t first = 0;
    while (first < blocks && in.blocks[first] < g)
      ++first;
    int64_t last = first;
    while (last < blocks && in.blocks[last] == g)
      ++last;
    int64_t s0 = first * d.B, slots = (last - first) * d.B;
    std::vector<float> bq = qdq(d, &in.b[s0 * d.N], slots, d.N, 0);
    for (int64_t m : spread(d.M, 4)) {
      std::vector<float> aq = qdq(d, &in.a[s0 * d.M + m], slots, 1, 0, d.M);
      GemmSample sample{(g * d.M + m) * d.N, std::vector<double>(d.N, 0.0)};
      for (int64_t s = 0; s < slots; ++s)
        for (int64_t n = 0; n < d.N; ++n)
          sample.values[n] += double(aq[s]) * double(bq[s * d.N + n]);
      out.push_back(std::move(sample));
    }
  }
  return out;
}

} // namespace moe::run
