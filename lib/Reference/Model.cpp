//===- Model.cpp - reference forward and backward of the MoE layer --------===//
//
// The fp64 forward that the finite-difference checks differentiate, the two
// backward references of SPEC section 6 and the distance every comparison
// uses:
//   backward64()  R_64: unquantized fp64, per routed slot.
//   backwardMX()  R_mx: per expert, the slots of its blocks as matrices (a
//                 padding slot is a zero row), every rounding of
//                 docs/numerics.md, GEMMs in fp64 on dequantized operands.
//
// Both backward references walk the blocked routing layout, never the
// affinity matrix, so they see exactly the pairs a compiled kernel sees.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Model.h"

#include "moe/Reference/BF16.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace moe::ref;

namespace {

/// The slots of one expert: the B slots of each of its blocks, concatenated
/// in block order. Slot m lies in block blocks[m / B] at position m % B.
struct ExpertSlots {
  std::vector<int32_t> token; ///< token id per slot, -1 for padding
  std::vector<int64_t> blocks;
};

} // namespace

/// Groups the blocks of the layout by expert (blocks of one expert are
/// contiguous in a valid layout; scanning keeps block order either way).
static std::vector<ExpertSlots> expertSlots(const LayerConfig &cfg,
                                            const Routing &routing) {
  std::vector<ExpertSlots> slots(cfg.E);
  int64_t numBlocks = static_cast<int64_t>(routing.blockToExpert.size());
  for (int64_t n = 0; n < numBlocks; ++n) {
    ExpertSlots &s = slots[routing.blockToExpert[n]];
    s.blocks.push_back(n);
    s.token.insert(s.token.end(), routing.tokenPositionToId.begin() + n * cfg.B,
                   routing.tokenPositionToId.begin() + (n + 1) * cfg.B);
  }
  return slots;
}

static double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

/// sqrt(2/pi), the constant of the tanh approximation of gelu.
static const double kGeluC = std::sqrt(2.0 / 3.14159265358979323846);
static constexpr double kGeluA = 0.044715;

/// act(g): silu for SwiGLU, the tanh approximation of gelu for GeGLU.
static double activation(Activation act, double g) {
  if (act == Activation::SwiGLU)
    return g * sigmoid(g);
  double t = std::tanh(kGeluC * (g + kGeluA * g * g * g));
  return 0.5 * g * (1.0 + t);
}

/// act'(g), differentiated by hand from activation().
static double activationDerivative(Activation act, double g) {
  if (act == Activation::SwiGLU) {
    double s = sigmoid(g);
    return s * (1.0 + g * (1.0 - s));
  }
  double t = std::tanh(kGeluC * (g + kGeluA * g * g * g));
  return 0.5 * (1.0 + t) +
         0.5 * g * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * kGeluA * g * g);
}

static double clampValue(double v, const std::optional<double> &lo,
                         const std::optional<double> &hi) {
  if (lo)
    v = std::max(v, *lo);
  if (hi)
    v = std::min(v, *hi);
  return v;
}

/// The clamp's gradient mask: strict inequalities on the clamped value, so
/// an element sitting on a limit gets zero gradient.
static bool insideClamp(double v, const std::optional<double> &lo,
                        const std::optional<double> &hi) {
  return (!lo || v > *lo) && (!hi || v < *hi);
}

/// The fp32 clamp of R_mx: limits rounded to fp32, comparisons in fp32.
static float clampValueF32(float v, const std::optional<double> &lo,
                           const std::optional<double> &hi) {
  if (lo)
    v = std::max(v, static_cast<float>(*lo));
  if (hi)
    v = std::min(v, static_cast<float>(*hi));
  return v;
}

static bool insideClampF32(float v, const std::optional<double> &lo,
                           const std::optional<double> &hi) {
  return (!lo || v > static_cast<float>(*lo)) &&
         (!hi || v < static_cast<float>(*hi));
}

/// Clamped g|u of token t under expert e, recomputed in fp64 from x, Wgu and
/// (when on) bgu: gu[0, I) = g, gu[I, 2I) = u.
static void gateUp64(const LayerConfig &cfg, const LayerInputs &in, int64_t e,
                     int64_t t, std::vector<double> &gu) {
  int64_t twoI = 2 * cfg.I;
  gu.assign(twoI, 0.0);
  const double *xRow = &in.x[t * cfg.H];
  const double *w = &in.wgu[e * cfg.H * twoI];
  for (int64_t h = 0; h < cfg.H; ++h) {
    double xv = xRow[h];
    const double *wRow = w + h * twoI;
    for (int64_t j = 0; j < twoI; ++j)
      gu[j] += xv * wRow[j];
  }
  if (cfg.bias)
    for (int64_t j = 0; j < twoI; ++j)
      gu[j] += in.bgu[e * twoI + j];
  for (int64_t i = 0; i < cfg.I; ++i) {
    gu[i] = clampValue(gu[i], cfg.clamp.gateLo, cfg.clamp.gateHi);
    gu[cfg.I + i] = clampValue(gu[cfg.I + i], cfg.clamp.upLo, cfg.clamp.upHi);
  }
}

std::vector<double> moe::ref::forward64(const LayerConfig &cfg,
                                        const LayerInputs &in) {
  std::vector<double> out(cfg.T * cfg.H, 0.0);
  std::vector<ExpertSlots> slots = expertSlots(cfg, in.routing);
  std::vector<double> gu, h(cfg.I), y(cfg.H);
  for (int64_t e = 0; e < cfg.E; ++e) {
    for (int32_t t : slots[e].token) {
      if (t < 0)
        continue;
      gateUp64(cfg, in, e, t, gu);
      for (int64_t i = 0; i < cfg.I; ++i)
        h[i] = activation(cfg.act, gu[i]) * gu[cfg.I + i];
      if (cfg.bias)
        std::copy_n(&in.bd[e * cfg.H], cfg.H, y.begin());
      else
        std::fill(y.begin(), y.end(), 0.0);
      const double *wd = &in.wd[e * cfg.I * cfg.H];
      for (int64_t i = 0; i < cfg.I; ++i)
        for (int64_t j = 0; j < cfg.H; ++j)
          y[j] += h[i] * wd[i * cfg.H + j];
      double a = in.affinities[t * cfg.E + e];
      for (int64_t j = 0; j < cfg.H; ++j)
        out[t * cfg.H + j] += a * y[j];
    }
  }
  return out;
}

/// Zero-filled gradient arrays of the op's shapes.
static LayerGrads zeroGrads(const LayerConfig &cfg) {
  LayerGrads grads;
  grads.dx.assign(cfg.T * cfg.H, 0.0);
  grads.da.assign(cfg.T * cfg.E, 0.0);
  grads.dwgu.assign(cfg.E * cfg.H * 2 * cfg.I, 0.0);
  grads.dwd.assign(cfg.E * cfg.I * cfg.H, 0.0);
  if (cfg.bias) {
    grads.dbgu.assign(cfg.E * 2 * cfg.I, 0.0);
    grads.dbd.assign(cfg.E * cfg.H, 0.0);
  }
  return grads;
}

/// The [cols, rows] transpose of a row-major [rows, cols] matrix, so that
/// products with a transposed operand run as row-times-matrix loops.
template <typename Elem>
static std::vector<Elem> transposed(const Elem *m, int64_t rows, int64_t cols) {
  std::vector<Elem> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c * rows + r] = m[r * cols + c];
  return out;
}

LayerGrads moe::ref::backward64(const LayerConfig &cfg, const LayerInputs &in) {
  LayerGrads grads = zeroGrads(cfg);
  std::vector<ExpertSlots> slots = expertSlots(cfg, in.routing);
  int64_t H = cfg.H, I = cfg.I, twoI = 2 * I;
  std::vector<double> gu(twoI), dA(I), h(I), dgu(twoI);
  for (int64_t e = 0; e < cfg.E; ++e) {
    // Wgu[e]^T [2I, H] and Wd[e]^T [H, I] turn P2 and P1 into sums of
    // scaled rows.
    std::vector<double> wguT = transposed(&in.wgu[e * H * twoI], H, twoI);
    std::vector<double> wdT = transposed(&in.wd[e * I * H], I, H);
    double *dwgu = &grads.dwgu[e * H * twoI];
    double *dwd = &grads.dwd[e * I * H];
    const ExpertSlots &s = slots[e];
    for (int64_t m = 0; m < static_cast<int64_t>(s.token.size()); ++m) {
      int64_t t = s.token[m];
      if (t < 0)
        continue;
      if (cfg.checkpoint) {
        const double *ckpt =
            &in.checkpoint[s.blocks[m / cfg.B] * 2 * I * cfg.B];
        for (int64_t j = 0; j < twoI; ++j)
          gu[j] = ckpt[j * cfg.B + m % cfg.B];
      } else {
        gateUp64(cfg, in, e, t, gu);
      }
      const double *dy = &in.dy[t * H];
      const double *x = &in.x[t * H];
      double a = in.affinities[t * cfg.E + e];

      // P1 and the affinity gradient.
      std::fill(dA.begin(), dA.end(), 0.0);
      for (int64_t j = 0; j < H; ++j)
        for (int64_t i = 0; i < I; ++i)
          dA[i] += dy[j] * wdT[j * I + i];
      double da = 0.0;
      for (int64_t i = 0; i < I; ++i) {
        h[i] = activation(cfg.act, gu[i]) * gu[I + i];
        da += dA[i] * h[i];
      }
      if (cfg.bias)
        for (int64_t j = 0; j < H; ++j)
          da += dy[j] * in.bd[e * H + j];
      grads.da[t * cfg.E + e] = da;

      for (int64_t i = 0; i < I; ++i) {
        double g = gu[i], u = gu[I + i], dh = a * dA[i];
        dgu[i] = insideClamp(g, cfg.clamp.gateLo, cfg.clamp.gateHi)
                     ? dh * u * activationDerivative(cfg.act, g)
                     : 0.0;
        dgu[I + i] = insideClamp(u, cfg.clamp.upLo, cfg.clamp.upHi)
                         ? dh * activation(cfg.act, g)
                         : 0.0;
      }

      // P2, P3, P4 and the bias gradients.
      double *dx = &grads.dx[t * H];
      for (int64_t k = 0; k < twoI; ++k)
        for (int64_t j = 0; j < H; ++j)
          dx[j] += dgu[k] * wguT[k * H + j];
      for (int64_t j = 0; j < H; ++j) {
        double *dRow = dwgu + j * twoI;
        for (int64_t k = 0; k < twoI; ++k)
          dRow[k] += x[j] * dgu[k];
      }
      for (int64_t i = 0; i < I; ++i) {
        double ah = a * h[i];
        for (int64_t j = 0; j < H; ++j)
          dwd[i * H + j] += ah * dy[j];
      }
      if (cfg.bias) {
        for (int64_t k = 0; k < twoI; ++k)
          grads.dbgu[e * twoI + k] += dgu[k];
        for (int64_t j = 0; j < H; ++j)
          grads.dbd[e * H + j] += a * dy[j];
      }
    }
  }
  return grads;
}

/// Q(M, axis) of docs/numerics.md on a row-major [rows, cols] matrix: MX
/// quantize-dequantize along `axis`, or bf16 rounding when quant is none.
static std::vector<float> quantized(std::vector<float> m, int64_t rows,
                                    int64_t cols, int axis,
                                    const QuantConfig &quant) {
  if (!quant.enabled) {
    for (float &v : m)
      v = roundToBF16(v);
    return m;
  }
  quantizeDequantize(m.data(), m.data(), rows, cols, axis, quant.elem,
                     quant.rule);
  return m;
}

static std::vector<float> toF32(const std::vector<double> &acc) {
  return std::vector<float>(acc.begin(), acc.end());
}

/// fp32(A[M,K] . B[K,N]) for the rows of A that hold a token (the rows of
/// padding slots stay zero: they are never written), summed in fp64.
static std::vector<float> gemmRows(const std::vector<float> &a,
                                   const std::vector<float> &b,
                                   const std::vector<int32_t> &token, int64_t K,
                                   int64_t N) {
  int64_t M = static_cast<int64_t>(token.size());
  std::vector<double> acc(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m) {
    if (token[m] < 0)
      continue;
    double *cRow = &acc[m * N];
    for (int64_t k = 0; k < K; ++k) {
      double av = a[m * K + k];
      const float *bRow = &b[k * N];
      for (int64_t n = 0; n < N; ++n)
        cRow[n] += av * bRow[n];
    }
  }
  return toF32(acc);
}

/// fp32(A[S,M]^T . B[S,N]), the contraction over the S slots, summed in
/// fp64. Padding slots are zero rows of both operands, so skipping them
/// leaves every sum unchanged.
static std::vector<float> gemmSlots(const std::vector<float> &a,
                                    const std::vector<float> &b,
                                    const std::vector<int32_t> &token,
                                    int64_t M, int64_t N) {
  std::vector<double> acc(M * N, 0.0);
  for (size_t s = 0; s < token.size(); ++s) {
    if (token[s] < 0)
      continue;
    const float *bRow = &b[s * N];
    for (int64_t m = 0; m < M; ++m) {
      double av = a[s * M + m];
      double *cRow = &acc[m * N];
      for (int64_t n = 0; n < N; ++n)
        cRow[n] += av * bRow[n];
    }
  }
  return toF32(acc);
}

static std::vector<float> roundedBF16(const double *v, int64_t n) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = roundToBF16(v[i]);
  return out;
}

/// Rows of `src` ([*, cols], already rounded) gathered for the slots of one
/// expert; padding slots are zero rows.
static std::vector<float> gatherRows(const std::vector<float> &src,
                                     const std::vector<int32_t> &token,
                                     int64_t cols) {
  std::vector<float> out(token.size() * cols, 0.0f);
  for (size_t m = 0; m < token.size(); ++m)
    if (token[m] >= 0)
      std::copy_n(&src[token[m] * cols], cols, &out[m * cols]);
  return out;
}

LayerGrads moe::ref::backwardMX(const LayerConfig &cfg, const LayerInputs &in) {
  LayerGrads grads = zeroGrads(cfg);
  std::vector<ExpertSlots> slots = expertSlots(cfg, in.routing);
  int64_t H = cfg.H, I = cfg.I, twoI = 2 * I, B = cfg.B;
  const QuantConfig &q = cfg.quant;
  const ClampConfig &clamp = cfg.clamp;

  // Inputs in their storage types (docs/numerics.md, Inputs).
  std::vector<float> x = roundedBF16(in.x.data(), cfg.T * H);
  std::vector<float> dy = roundedBF16(in.dy.data(), cfg.T * H);
  std::vector<float> dxAcc(cfg.T * H, 0.0f);

  for (int64_t e = 0; e < cfg.E; ++e) {
    const std::vector<int32_t> &token = slots[e].token;
    int64_t M = static_cast<int64_t>(token.size());
    if (M == 0)
      continue;
    std::vector<float> wgu = roundedBF16(&in.wgu[e * H * twoI], H * twoI);
    std::vector<float> wd = roundedBF16(&in.wd[e * I * H], I * H);
    std::vector<float> xE = gatherRows(x, token, H);
    std::vector<float> dyE = gatherRows(dy, token, H);
    std::vector<float> a(M, 0.0f);
    for (int64_t m = 0; m < M; ++m)
      if (token[m] >= 0)
        a[m] = static_cast<float>(in.affinities[token[m] * cfg.E + e]);

    // g|u per slot, [M, 2I]: from the checkpoint or the forward's MX GEMM.
    std::vector<float> gu(M * twoI, 0.0f);
    if (cfg.checkpoint) {
      for (int64_t m = 0; m < M; ++m) {
        if (token[m] < 0)
          continue;
        const double *ckpt = &in.checkpoint[slots[e].blocks[m / B] * twoI * B];
        for (int64_t j = 0; j < twoI; ++j)
          gu[m * twoI + j] = roundToBF16(ckpt[j * B + m % B]);
      }
    } else {
      gu = gemmRows(quantized(xE, M, H, 1, q), quantized(wgu, H, twoI, 0, q),
                    token, H, twoI);
      if (cfg.bias)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < twoI; ++j)
            gu[m * twoI + j] += roundToBF16(in.bgu[e * twoI + j]);
    }

    // P1: dA [M, I] contracts over H.
    std::vector<float> dA = gemmRows(
        quantized(dyE, M, H, 1, q),
        transposed(quantized(wd, I, H, 1, q).data(), I, H), token, H, I);

    // Elementwise backward of the clamp and the gated activation, in fp32.
    std::vector<float> hE(M * I, 0.0f), dgu(M * twoI, 0.0f);
    for (int64_t m = 0; m < M; ++m) {
      if (token[m] < 0)
        continue;
      double daSum = 0.0;
      for (int64_t i = 0; i < I; ++i) {
        float g = clampValueF32(gu[m * twoI + i], clamp.gateLo, clamp.gateHi);
        float u = clampValueF32(gu[m * twoI + I + i], clamp.upLo, clamp.upHi);
        float s = static_cast<float>(activation(cfg.act, g));
        float sp = static_cast<float>(activationDerivative(cfg.act, g));
        float dAv = dA[m * I + i];
        float h = s * u;
        float dh = a[m] * dAv;
        hE[m * I + i] = h;
        daSum += static_cast<double>(dAv) * h;
        if (insideClampF32(g, clamp.gateLo, clamp.gateHi))
          dgu[m * twoI + i] = (dh * u) * sp;
        if (insideClampF32(u, clamp.upLo, clamp.upHi))
          dgu[m * twoI + I + i] = dh * s;
      }
      if (cfg.bias)
        for (int64_t j = 0; j < H; ++j)
          daSum += static_cast<double>(dyE[m * H + j]) *
                   roundToBF16(in.bd[e * H + j]);
      grads.da[token[m] * cfg.E + e] = static_cast<float>(daSum);
    }

    // P2: c [M, H] contracts over 2I; dx sums experts in ascending order.
    std::vector<float> c =
        gemmRows(quantized(dgu, M, twoI, 1, q),
                 transposed(quantized(wgu, H, twoI, 1, q).data(), H, twoI),
                 token, twoI, H);
    for (int64_t m = 0; m < M; ++m) {
      if (token[m] < 0)
        continue;
      float *acc = &dxAcc[token[m] * H];
      for (int64_t j = 0; j < H; ++j) {
        float sum = acc[j] + c[m * H + j];
        acc[j] =
            cfg.dxAccumulate == DxAccumulate::BF16 ? roundToBF16(sum) : sum;
      }
    }

    // P3 and P4 contract over the slots; 32-slot blocks never straddle
    // experts because B is a multiple of 32.
    std::vector<float> dwgu =
        gemmSlots(quantized(xE, M, H, 0, q), quantized(dgu, M, twoI, 0, q),
                  token, H, twoI);
    std::vector<float> scaledDy(M * H);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < H; ++j)
        scaledDy[m * H + j] = a[m] * dyE[m * H + j];
    std::vector<float> dwd;
    if (cfg.affinity == AffinityPlacement::OnI) {
      std::vector<float> scaledH(M * I);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < I; ++i)
          scaledH[m * I + i] = a[m] * hE[m * I + i];
      dwd = gemmSlots(quantized(scaledH, M, I, 0, q),
                      quantized(dyE, M, H, 0, q), token, I, H);
    } else {
      dwd = gemmSlots(quantized(hE, M, I, 0, q),
                      quantized(scaledDy, M, H, 0, q), token, I, H);
    }
    for (int64_t k = 0; k < H * twoI; ++k)
      grads.dwgu[e * H * twoI + k] =
          cfg.weightGradBF16 ? roundToBF16(dwgu[k]) : dwgu[k];
    for (int64_t k = 0; k < I * H; ++k)
      grads.dwd[e * I * H + k] =
          cfg.weightGradBF16 ? roundToBF16(dwd[k]) : dwd[k];

    if (cfg.bias) {
      for (int64_t k = 0; k < twoI; ++k) {
        double sum = 0.0;
        for (int64_t m = 0; m < M; ++m)
          sum += dgu[m * twoI + k];
        grads.dbgu[e * twoI + k] = static_cast<float>(sum);
      }
      for (int64_t j = 0; j < H; ++j) {
        double sum = 0.0;
        for (int64_t m = 0; m < M; ++m)
          sum += scaledDy[m * H + j];
        grads.dbd[e * H + j] = static_cast<float>(sum);
      }
    }
  }

  for (int64_t k = 0; k < cfg.T * H; ++k)
    grads.dx[k] = cfg.dxF32 ? dxAcc[k] : roundToBF16(dxAcc[k]);
  return grads;
}

double moe::ref::relativeFrobenius(const std::vector<double> &a,
                                   const std::vector<double> &b) {
  if (a.size() != b.size())
    return std::numeric_limits<double>::quiet_NaN();
  double diff = 0.0, ref = 0.0;
  for (size_t k = 0; k < a.size(); ++k) {
    if (std::isnan(a[k]) || std::isnan(b[k]))
      return std::numeric_limits<double>::quiet_NaN();
    double d = a[k] - b[k];
    diff += d * d;
    ref += b[k] * b[k];
  }
  if (diff == 0.0)
    return 0.0;
  if (ref == 0.0)
    return std::numeric_limits<double>::infinity();
  return std::sqrt(diff / ref);
}

const char *moe::ref::toString(Activation act) {
  return act == Activation::SwiGLU ? "swiglu" : "geglu";
}

const char *moe::ref::toString(AffinityPlacement aff) {
  return aff == AffinityPlacement::OnI ? "on_i" : "on_h";
}

bool moe::ref::parseActivation(const std::string &name, Activation &act) {
  if (name == "swiglu")
    act = Activation::SwiGLU;
  else if (name == "geglu")
    act = Activation::GeGLU;
  else
    return false;
  return true;
}

bool moe::ref::parseAffinity(const std::string &name, AffinityPlacement &aff) {
  if (name == "on_i")
    aff = AffinityPlacement::OnI;
  else if (name == "on_h")
    aff = AffinityPlacement::OnH;
  else
    return false;
  return true;
}
