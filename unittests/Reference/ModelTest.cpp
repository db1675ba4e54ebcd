//===- ModelTest.cpp - tests of the layer references R_64 and R_mx --------===//
//
// R_64 is checked against hand-written loops on a tiny case (and against
// finite differences in FiniteDifferenceTest.cpp). R_mx is checked bit for
// bit against the numerics table of docs/numerics.md written out as plain
// loops on a dense case, exactly where a rounding can be isolated (dx
// accumulation, output types, dbd), and against R_64 with distance bands
// per quantization. The option matrix (placement, checkpoint, clamps, bias,
// empty experts, odd shapes) is covered for both references, and so are
// validate() and makeInputs().
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Model.h"

#include "moe/Reference/BF16.h"
#include "moe/Reference/MX.h"
#include "moe/Reference/Routing.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <utility>

using namespace moe::ref;

namespace {

LayerConfig shape(int64_t T, int64_t H, int64_t I, int64_t E, int64_t K,
                  int64_t B) {
  LayerConfig cfg;
  cfg.T = T;
  cfg.H = H;
  cfg.I = I;
  cfg.E = E;
  cfg.K = K;
  cfg.B = B;
  return cfg;
}

/// The shape of the distance tests: 192 routed pairs over 4 experts, bias
/// on so that every output exists.
LayerConfig distanceConfig() {
  LayerConfig cfg = shape(96, 64, 64, 4, 2, 32);
  cfg.bias = true;
  return cfg;
}

bool isBF16(double v) {
  return static_cast<float>(v) == v && roundToBF16(static_cast<float>(v)) == v;
}

bool isF32(double v) { return static_cast<float>(v) == v; }

/// The six outputs of a run, in the order of outputsOf().
const char *const kOutputNames[] = {"dx", "da", "dwgu", "dwd", "dbgu", "dbd"};

/// The six outputs of one run, by name, for loops over outputs.
std::vector<std::pair<const char *, const std::vector<double> *>>
outputsOf(const LayerGrads &g) {
  return {{kOutputNames[0], &g.dx},   {kOutputNames[1], &g.da},
          {kOutputNames[2], &g.dwgu}, {kOutputNames[3], &g.dwd},
          {kOutputNames[4], &g.dbgu}, {kOutputNames[5], &g.dbd}};
}

/// Relative Frobenius distance of every output of `mx` from `r64`.
std::vector<double> distances(const LayerGrads &mx, const LayerGrads &r64) {
  std::vector<double> d;
  auto a = outputsOf(mx), b = outputsOf(r64);
  for (size_t k = 0; k < a.size(); ++k)
    d.push_back(relativeFrobenius(*a[k].second, *b[k].second));
  return d;
}

/// Every element of `v` equals the matching element of `w` (bit for bit
/// for the non-NaN values the references produce).
::testing::AssertionResult sameValues(const std::vector<double> &v,
                                      const std::vector<double> &w) {
  if (v.size() != w.size())
    return ::testing::AssertionFailure()
           << "sizes " << v.size() << " and " << w.size();
  for (size_t k = 0; k < v.size(); ++k)
    if (v[k] != w[k])
      return ::testing::AssertionFailure()
             << "element " << k << ": " << v[k] << " vs " << w[k];
  return ::testing::AssertionSuccess();
}

size_t countNonZero(const std::vector<double> &v, size_t begin, size_t end) {
  size_t n = 0;
  for (size_t k = begin; k < end; ++k)
    n += v[k] != 0.0;
  return n;
}

//===----------------------------------------------------------------------===//
// R_mx against R_64.
//===----------------------------------------------------------------------===//

/// quant = none keeps bf16 operands: dx, dWgu and dWd see bf16 roundings of
/// the intermediate operands (and dx its bf16 output), about 2^-9 relative.
/// da, dbgu and dbd take no rounded operand (da's GEMMs read the bf16
/// inputs themselves, the bias gradients are sums of fp32 values), so only
/// fp32 roundings separate them from R_64.
TEST(ModelDistance, QuantNoneIsBF16Close) {
  LayerConfig cfg = distanceConfig();
  cfg.quant.enabled = false;
  LayerInputs in = makeInputs(cfg, 1);
  std::vector<double> d = distances(backwardMX(cfg, in), backward64(cfg, in));
  EXPECT_GT(d[0], 1.5e-3);
  EXPECT_LT(d[0], 3.5e-3);
  for (int k : {2, 3}) {
    EXPECT_GT(d[k], 1e-3) << kOutputNames[k];
    EXPECT_LT(d[k], 3e-3) << kOutputNames[k];
  }
  for (int k : {1, 4, 5}) {
    EXPECT_GT(d[k], 0.0) << kOutputNames[k];
    EXPECT_LT(d[k], 1e-6) << kOutputNames[k];
  }
}

struct BandCase {
  const char *name;
  MXElem elem;
  ScaleRule rule;
  double lo, hi;
};

void PrintTo(const BandCase &c, std::ostream *os) { *os << c.name; }

class ModelDistanceBand : public ::testing::TestWithParam<BandCase> {};

/// MXFP8 sits 5e-2..1e-1 from R_64 for e4m3 (3 mantissa bits; the errors
/// of the chained quantized GEMMs, recompute included, compound), twice
/// that for e5m2; dbd is a sum of fp32 products of inputs, so it sees no
/// quantization.
TEST_P(ModelDistanceBand, EveryOutputWithinBand) {
  const BandCase &c = GetParam();
  LayerConfig cfg = distanceConfig();
  cfg.quant.elem = c.elem;
  cfg.quant.rule = c.rule;
  LayerInputs in = makeInputs(cfg, 1);
  std::vector<double> d = distances(backwardMX(cfg, in), backward64(cfg, in));
  for (int k = 0; k < 5; ++k) {
    EXPECT_GT(d[k], c.lo) << kOutputNames[k];
    EXPECT_LT(d[k], c.hi) << kOutputNames[k];
  }
  EXPECT_LT(d[5], 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Model, ModelDistanceBand,
    ::testing::Values(
        BandCase{"E4M3_RCeil", MXElem::E4M3, ScaleRule::RCeil, 4e-2, 1e-1},
        BandCase{"E4M3_Floor", MXElem::E4M3, ScaleRule::Floor, 4e-2, 1.1e-1},
        BandCase{"E4M3_FloorAlt", MXElem::E4M3, ScaleRule::FloorAlt, 4e-2,
                 1e-1},
        BandCase{"E5M2_RCeil", MXElem::E5M2, ScaleRule::RCeil, 8e-2, 2e-1},
        BandCase{"E5M2_Floor", MXElem::E5M2, ScaleRule::Floor, 8e-2, 2e-1}),
    [](const ::testing::TestParamInfo<BandCase> &info) {
      return std::string(info.param.name);
    });

/// The scale rule and the element type reach every quantized output.
/// FLOOR picks a scale up to 2x smaller than RCEIL (elements above
/// elem_max saturate: large differences); FLOOR_ALT one up to 2x larger
/// (only elements in the subnormal range change: about 1e-6).
TEST(ModelDistance, RuleAndElementChangeTheResult) {
  LayerConfig cfg = distanceConfig();
  LayerInputs in = makeInputs(cfg, 1);
  auto run = [&](MXElem elem, ScaleRule rule) {
    LayerConfig c = cfg;
    c.quant.elem = elem;
    c.quant.rule = rule;
    return backwardMX(c, in);
  };
  LayerGrads rceil = run(MXElem::E4M3, ScaleRule::RCeil);
  LayerGrads floor = run(MXElem::E4M3, ScaleRule::Floor);
  LayerGrads floorAlt = run(MXElem::E4M3, ScaleRule::FloorAlt);
  LayerGrads e5m2 = run(MXElem::E5M2, ScaleRule::RCeil);
  for (int k = 0; k < 5; ++k) {
    const char *name = kOutputNames[k];
    const std::vector<double> &ref = *outputsOf(rceil)[k].second;
    EXPECT_GT(relativeFrobenius(*outputsOf(floor)[k].second, ref), 1e-2)
        << name;
    EXPECT_GT(relativeFrobenius(*outputsOf(floorAlt)[k].second, ref), 0.0)
        << name;
    EXPECT_LT(relativeFrobenius(*outputsOf(floorAlt)[k].second, ref), 1e-4)
        << name;
    EXPECT_GT(relativeFrobenius(*outputsOf(e5m2)[k].second, ref), 5e-2) << name;
  }
}

//===----------------------------------------------------------------------===//
// R_mx by hand: the numerics table on one dense expert.
//===----------------------------------------------------------------------===//

/// Q(M, axis) of docs/numerics.md.
std::vector<float> quantize(std::vector<float> m, int64_t rows, int64_t cols,
                            int axis, const QuantConfig &quant) {
  if (!quant.enabled) {
    for (float &v : m)
      v = roundToBF16(v);
    return m;
  }
  quantizeDequantize(m.data(), m.data(), rows, cols, axis, quant.elem,
                     quant.rule);
  return m;
}

constexpr double kPi = 3.14159265358979323846;

/// act and act' in forms other than the library's: silu as a quotient,
/// gelu_tanh through 0.5 (1 + tanh z) = sigmoid(2z).
double handAct(Activation act, double g) {
  if (act == Activation::SwiGLU)
    return g / (1.0 + std::exp(-g));
  double z = std::sqrt(2.0 / kPi) * (g + 0.044715 * g * g * g);
  return g / (1.0 + std::exp(-2.0 * z));
}

double handActDerivative(Activation act, double g) {
  if (act == Activation::SwiGLU) {
    double en = std::exp(-g);
    return (1.0 + en + g * en) / ((1.0 + en) * (1.0 + en));
  }
  double c = std::sqrt(2.0 / kPi);
  double z = c * (g + 0.044715 * g * g * g);
  double sig = 1.0 / (1.0 + std::exp(-2.0 * z));
  return sig + g * sig * (1.0 - sig) * 2.0 * c * (1.0 + 3.0 * 0.044715 * g * g);
}

struct MXCase {
  const char *name;
  Activation act;
  AffinityPlacement affinity;
  QuantConfig quant;
  bool checkpoint;
};

void PrintTo(const MXCase &c, std::ostream *os) { *os << c.name; }

class ModelMXFormulas : public ::testing::TestWithParam<MXCase> {};

/// One dense expert, T = 50 tokens in two blocks of 32 (14 padding slots),
/// bias and clamps on: every row of the numerics table written out as plain
/// loops over [slots, features] matrices, in the summation order a direct
/// reading gives. R_mx must reproduce it bit for bit; each quantization
/// axis and each fp32 rounding is visible in some output.
TEST_P(ModelMXFormulas, DenseCaseMatchesNumericsTable) {
  const MXCase &mc = GetParam();
  const int64_t T = 50, S = 64, H = 64, I = 32, J = 2 * I;
  LayerConfig cfg = shape(T, H, I, 1, 1, 32);
  cfg.dense = true;
  cfg.bias = true;
  cfg.act = mc.act;
  cfg.affinity = mc.affinity;
  cfg.quant = mc.quant;
  cfg.checkpoint = mc.checkpoint;
  cfg.clamp.gateLo = -1.25;
  cfg.clamp.gateHi = 1.0;
  cfg.clamp.upLo = -1.0;
  cfg.clamp.upHi = 1.5;
  LayerInputs in = makeInputs(cfg, 47);
  ASSERT_EQ(validate(cfg, in), "");
  const QuantConfig &q = cfg.quant;

  // Slot s holds token s (s < T), padding after.
  std::vector<float> x(S * H, 0.0f), dy(S * H, 0.0f), a(S, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    a[t] = static_cast<float>(in.affinities[t]);
    for (int64_t h = 0; h < H; ++h) {
      x[t * H + h] = static_cast<float>(in.x[t * H + h]);
      dy[t * H + h] = static_cast<float>(in.dy[t * H + h]);
    }
  }
  std::vector<float> wgu(in.wgu.begin(), in.wgu.end()); // [H, 2I]
  std::vector<float> wd(in.wd.begin(), in.wd.end());    // [I, H]

  // g|u: recomputed with the forward's GEMM, or read from the checkpoint.
  std::vector<float> gu(S * J, 0.0f);
  std::vector<float> xH = quantize(x, S, H, 1, q);
  std::vector<float> wguH = quantize(wgu, H, J, 0, q);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < J; ++j) {
      if (mc.checkpoint) {
        gu[t * J + j] =
            static_cast<float>(in.checkpoint[((t / 32) * J + j) * 32 + t % 32]);
        continue;
      }
      double sum = 0.0;
      for (int64_t h = 0; h < H; ++h)
        sum += static_cast<double>(xH[t * H + h]) * wguH[h * J + j];
      gu[t * J + j] = static_cast<float>(sum) + static_cast<float>(in.bgu[j]);
    }

  // P1.
  std::vector<float> dyH = quantize(dy, S, H, 1, q);
  std::vector<float> wdH = quantize(wd, I, H, 1, q);
  std::vector<float> dA(S * I, 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      double sum = 0.0;
      for (int64_t h = 0; h < H; ++h)
        sum += static_cast<double>(dyH[t * H + h]) * wdH[i * H + h];
      dA[t * I + i] = static_cast<float>(sum);
    }

  // Elementwise, fp32.
  std::vector<float> hv(S * I, 0.0f), dgu(S * J, 0.0f);
  std::vector<double> da(T);
  for (int64_t t = 0; t < T; ++t) {
    double sum = 0.0;
    for (int64_t i = 0; i < I; ++i) {
      float g = std::min(std::max(gu[t * J + i], -1.25f), 1.0f);
      float u = std::min(std::max(gu[t * J + I + i], -1.0f), 1.5f);
      float s = static_cast<float>(handAct(mc.act, g));
      float sp = static_cast<float>(handActDerivative(mc.act, g));
      float h = s * u;
      float dh = a[t] * dA[t * I + i];
      hv[t * I + i] = h;
      sum += static_cast<double>(dA[t * I + i]) * h;
      dgu[t * J + i] = (g > -1.25f && g < 1.0f) ? (dh * u) * sp : 0.0f;
      dgu[t * J + I + i] = (u > -1.0f && u < 1.5f) ? dh * s : 0.0f;
    }
    for (int64_t h = 0; h < H; ++h)
      sum += static_cast<double>(dy[t * H + h]) * in.bd[h];
    da[t] = static_cast<float>(sum);
  }

  // P2 (one expert: dx is c rounded to bf16).
  std::vector<float> dguJ = quantize(dgu, S, J, 1, q);
  std::vector<float> wguJ = quantize(wgu, H, J, 1, q);
  std::vector<double> dx(T * H);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double sum = 0.0;
      for (int64_t j = 0; j < J; ++j)
        sum += static_cast<double>(dguJ[t * J + j]) * wguJ[h * J + j];
      dx[t * H + h] = roundToBF16(static_cast<float>(sum));
    }

  // P3 and P4 over the slots, padding included as zero rows.
  auto slotGemm = [&](const std::vector<float> &l, int64_t m,
                      const std::vector<float> &r, int64_t n) {
    std::vector<float> ls = quantize(l, S, m, 0, q);
    std::vector<float> rs = quantize(r, S, n, 0, q);
    std::vector<double> out(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t k = 0; k < n; ++k) {
        double sum = 0.0;
        for (int64_t s = 0; s < S; ++s)
          sum += static_cast<double>(ls[s * m + i]) * rs[s * n + k];
        out[i * n + k] = static_cast<float>(sum);
      }
    return out;
  };
  std::vector<float> ah(S * I), ady(S * H);
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t i = 0; i < I; ++i)
      ah[s * I + i] = a[s] * hv[s * I + i];
    for (int64_t h = 0; h < H; ++h)
      ady[s * H + h] = a[s] * dy[s * H + h];
  }
  std::vector<double> dwgu = slotGemm(x, H, dgu, J);
  std::vector<double> dwd = mc.affinity == AffinityPlacement::OnI
                                ? slotGemm(ah, I, dy, H)
                                : slotGemm(hv, I, ady, H);

  std::vector<double> dbgu(J), dbd(H);
  for (int64_t j = 0; j < J; ++j) {
    double sum = 0.0;
    for (int64_t s = 0; s < S; ++s)
      sum += dgu[s * J + j];
    dbgu[j] = static_cast<float>(sum);
  }
  for (int64_t h = 0; h < H; ++h) {
    double sum = 0.0;
    for (int64_t s = 0; s < S; ++s)
      sum += ady[s * H + h];
    dbd[h] = static_cast<float>(sum);
  }

  LayerGrads mx = backwardMX(cfg, in);
  EXPECT_TRUE(sameValues(mx.dx, dx));
  EXPECT_TRUE(sameValues(mx.da, da));
  EXPECT_TRUE(sameValues(mx.dwgu, dwgu));
  EXPECT_TRUE(sameValues(mx.dwd, dwd));
  EXPECT_TRUE(sameValues(mx.dbgu, dbgu));
  EXPECT_TRUE(sameValues(mx.dbd, dbd));
}

QuantConfig quantOf(bool enabled, MXElem elem, ScaleRule rule) {
  QuantConfig q;
  q.enabled = enabled;
  q.elem = elem;
  q.rule = rule;
  return q;
}

INSTANTIATE_TEST_SUITE_P(
    Model, ModelMXFormulas,
    ::testing::Values(
        MXCase{"SwiGLU_OnI_E4M3_RCeil", Activation::SwiGLU,
               AffinityPlacement::OnI,
               quantOf(true, MXElem::E4M3, ScaleRule::RCeil), false},
        MXCase{"GeGLU_OnH_E5M2_Floor", Activation::GeGLU,
               AffinityPlacement::OnH,
               quantOf(true, MXElem::E5M2, ScaleRule::Floor), false},
        MXCase{"SwiGLU_OnH_None", Activation::SwiGLU, AffinityPlacement::OnH,
               quantOf(false, MXElem::E4M3, ScaleRule::RCeil), false},
        MXCase{"GeGLU_OnI_E4M3_FloorAlt_Checkpoint", Activation::GeGLU,
               AffinityPlacement::OnI,
               quantOf(true, MXElem::E4M3, ScaleRule::FloorAlt), true}),
    [](const ::testing::TestParamInfo<MXCase> &info) {
      return std::string(info.param.name);
    });

//===----------------------------------------------------------------------===//
// R_64 by hand.
//===----------------------------------------------------------------------===//

/// Two tokens through one dense expert with bias and clamps, every formula
/// of SPEC section 3 written out again with the raw index arithmetic of
/// the layouts, and silu' in a different (quotient) form.
TEST(ModelHand, TinyDenseCaseMatchesHandLoops) {
  const int T = 2, H = 32, I = 32;
  LayerConfig cfg = shape(T, H, I, 1, 1, 32);
  cfg.dense = true;
  cfg.bias = true;
  cfg.clamp.gateHi = 1.0;
  cfg.clamp.upLo = -1.0;
  LayerInputs in = makeInputs(cfg, 11);
  ASSERT_EQ(validate(cfg, in), "");
  const std::vector<double> &x = in.x, &dy = in.dy, &wgu = in.wgu, &wd = in.wd,
                            &bgu = in.bgu, &bd = in.bd;

  std::vector<double> dx(T * H, 0.0), da(T, 0.0), dwgu(H * 2 * I, 0.0),
      dwd(I * H, 0.0), dbgu(2 * I, 0.0), dbd(H, 0.0);
  int gateClipped = 0, upClipped = 0;
  for (int t = 0; t < T; ++t) {
    double a = in.affinities[t];
    double s[I], u[I], dA[I], dg[I], du[I], hv[I];
    for (int i = 0; i < I; ++i) {
      double g = bgu[i];
      u[i] = bgu[I + i];
      for (int h = 0; h < H; ++h) {
        g += x[t * H + h] * wgu[(h * 2 + 0) * I + i];
        u[i] += x[t * H + h] * wgu[(h * 2 + 1) * I + i];
      }
      bool gateOpen = g < 1.0;
      bool upOpen = u[i] > -1.0;
      g = gateOpen ? g : 1.0;
      u[i] = upOpen ? u[i] : -1.0;
      gateClipped += !gateOpen;
      upClipped += !upOpen;
      double en = std::exp(-g);
      s[i] = g / (1.0 + en);
      double sp = (1.0 + en + g * en) / ((1.0 + en) * (1.0 + en));
      hv[i] = s[i] * u[i];
      dA[i] = 0.0;
      for (int h = 0; h < H; ++h)
        dA[i] += dy[t * H + h] * wd[i * H + h];
      dg[i] = gateOpen ? a * dA[i] * u[i] * sp : 0.0;
      du[i] = upOpen ? a * dA[i] * s[i] : 0.0;
      da[t] += dA[i] * hv[i];
    }
    for (int h = 0; h < H; ++h) {
      da[t] += dy[t * H + h] * bd[h];
      dbd[h] += a * dy[t * H + h];
      for (int i = 0; i < I; ++i) {
        dx[t * H + h] +=
            dg[i] * wgu[(h * 2 + 0) * I + i] + du[i] * wgu[(h * 2 + 1) * I + i];
        dwgu[(h * 2 + 0) * I + i] += x[t * H + h] * dg[i];
        dwgu[(h * 2 + 1) * I + i] += x[t * H + h] * du[i];
        dwd[i * H + h] += a * hv[i] * dy[t * H + h];
      }
    }
    for (int i = 0; i < I; ++i) {
      dbgu[i] += dg[i];
      dbgu[I + i] += du[i];
    }
  }
  EXPECT_GT(gateClipped, 2);
  EXPECT_GT(upClipped, 2);

  LayerGrads r64 = backward64(cfg, in);
  LayerGrads want;
  want.dx = dx;
  want.da = da;
  want.dwgu = dwgu;
  want.dwd = dwd;
  want.dbgu = dbgu;
  want.dbd = dbd;
  auto got = outputsOf(r64), expected = outputsOf(want);
  for (size_t k = 0; k < got.size(); ++k) {
    const std::vector<double> &v = *got[k].second, &w = *expected[k].second;
    ASSERT_EQ(v.size(), w.size()) << got[k].first;
    double scale = 0.0;
    for (double e : w)
      scale = std::max(scale, std::fabs(e));
    ASSERT_GT(scale, 0.0) << got[k].first;
    for (size_t j = 0; j < v.size(); ++j)
      EXPECT_NEAR(v[j], w[j], 1e-13 * scale) << got[k].first << "[" << j << "]";
  }

  // R_mx without quantization stays at bf16 distance from the hand values.
  LayerConfig none = cfg;
  none.quant.enabled = false;
  LayerGrads mx = backwardMX(none, in);
  EXPECT_LT(relativeFrobenius(mx.dx, dx), 4e-3);
  EXPECT_LT(relativeFrobenius(mx.dwgu, dwgu), 4e-3);
  EXPECT_LT(relativeFrobenius(mx.dwd, dwd), 4e-3);
  EXPECT_LT(relativeFrobenius(mx.da, da), 1e-6);
}

//===----------------------------------------------------------------------===//
// Options.
//===----------------------------------------------------------------------===//

/// The fp64 forward's clamped g and u in the checkpoint layout [N,2,I,B],
/// unrounded, computed here from the SPEC formulas.
std::vector<double> exactCheckpoint(const LayerConfig &cfg,
                                    const LayerInputs &in) {
  int64_t H = cfg.H, I = cfg.I, B = cfg.B;
  int64_t N = cfg.numBlocks();
  std::vector<double> ckpt(N * 2 * I * B, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    int64_t e = in.routing.blockToExpert[n];
    for (int64_t b = 0; b < B; ++b) {
      int64_t t = in.routing.tokenPositionToId[n * B + b];
      if (t < 0)
        continue;
      for (int64_t half = 0; half < 2; ++half)
        for (int64_t i = 0; i < I; ++i) {
          double v = cfg.bias ? in.bgu[(e * 2 + half) * I + i] : 0.0;
          for (int64_t h = 0; h < H; ++h)
            v += in.x[t * H + h] * in.wgu[((e * H + h) * 2 + half) * I + i];
          const std::optional<double> &lo =
              half == 0 ? cfg.clamp.gateLo : cfg.clamp.upLo;
          const std::optional<double> &hi =
              half == 0 ? cfg.clamp.gateHi : cfg.clamp.upHi;
          if (lo)
            v = std::max(v, *lo);
          if (hi)
            v = std::min(v, *hi);
          ckpt[((n * 2 + half) * I + i) * B + b] = v;
        }
    }
  }
  return ckpt;
}

/// With an unrounded checkpoint R_64 is the recompute path to the last bits
/// (clamps included: the checkpoint holds clamped values and the masks read
/// them). makeInputs rounds it to bf16, which moves R_64 by about 2^-9,
/// except where a value rounds onto a clamp limit: the strict mask then
/// drops its gradient, as a kernel reading that checkpoint would.
TEST(ModelCheckpoint, MatchesRecomputeUpToItsRounding) {
  LayerConfig cfg = shape(64, 64, 64, 4, 2, 32);
  cfg.bias = true;
  cfg.clamp.gateLo = -1.5;
  cfg.clamp.gateHi = 1.0;
  cfg.clamp.upLo = -1.0;
  cfg.clamp.upHi = 1.25;
  cfg.checkpoint = true;
  LayerInputs in = makeInputs(cfg, 3);
  ASSERT_EQ(validate(cfg, in), "");
  LayerConfig recompute = cfg;
  recompute.checkpoint = false;
  LayerInputs noCkpt = in;
  noCkpt.checkpoint.clear();
  LayerGrads r64 = backward64(recompute, noCkpt);

  // makeInputs stored the forward's values rounded to bf16, padding zero.
  LayerInputs exact = in;
  exact.checkpoint = exactCheckpoint(cfg, in);
  ASSERT_EQ(in.checkpoint.size(), exact.checkpoint.size());
  for (size_t k = 0; k < in.checkpoint.size(); ++k)
    ASSERT_EQ(in.checkpoint[k], roundToBF16(exact.checkpoint[k])) << k;

  std::vector<double> dExact = distances(backward64(cfg, exact), r64);
  for (int k = 0; k < 5; ++k)
    EXPECT_LT(dExact[k], 1e-13) << kOutputNames[k];

  // The exact checkpoint with the values that round onto a limit moved
  // there: the same masks as the rounded one, so only rounding separates
  // the two.
  LayerInputs snapped = exact;
  size_t onLimit = 0;
  for (size_t k = 0; k < in.checkpoint.size(); ++k) {
    bool gate = k / (cfg.I * cfg.B) % 2 == 0;
    double lo = gate ? *cfg.clamp.gateLo : *cfg.clamp.upLo;
    double hi = gate ? *cfg.clamp.gateHi : *cfg.clamp.upHi;
    double r = in.checkpoint[k];
    if ((r == lo || r == hi) && exact.checkpoint[k] != r) {
      snapped.checkpoint[k] = r;
      ++onLimit;
    }
  }
  EXPECT_GT(onLimit, 0u);
  LayerGrads rounded = backward64(cfg, in);
  std::vector<double> dRounded = distances(rounded, backward64(cfg, snapped));
  for (int k = 0; k < 5; ++k) {
    EXPECT_GT(dRounded[k], 1e-4) << kOutputNames[k];
    EXPECT_LT(dRounded[k], 4e-3) << kOutputNames[k];
  }
  EXPECT_EQ(dRounded[5], 0.0) << "dbd does not depend on g or u";
  EXPECT_GT(relativeFrobenius(rounded.dwgu, r64.dwgu), 5e-3);

  // R_mx reads the same checkpoint: without the recompute GEMM it sits
  // closer to R_64 on the same checkpoint than the recompute path does.
  LayerGrads mxCkpt = backwardMX(cfg, in);
  LayerGrads mxRecompute = backwardMX(recompute, noCkpt);
  std::vector<double> dCkpt = distances(mxCkpt, rounded);
  std::vector<double> dRecompute = distances(mxRecompute, r64);
  for (int k = 0; k < 4; ++k) {
    const char *name = kOutputNames[k];
    EXPECT_GT(dCkpt[k], 3e-2) << name;
    EXPECT_LT(dCkpt[k], dRecompute[k]) << name;
  }
}

TEST(ModelAffinity, PlacementChangesOnlyTheMXDownGradient) {
  LayerConfig onI = distanceConfig();
  LayerConfig onH = onI;
  onH.affinity = AffinityPlacement::OnH;
  LayerInputs in = makeInputs(onI, 5);
  LayerGrads r64I = backward64(onI, in), r64H = backward64(onH, in);
  LayerGrads mxI = backwardMX(onI, in), mxH = backwardMX(onH, in);
  auto a = outputsOf(r64I), b = outputsOf(r64H);
  auto c = outputsOf(mxI), d = outputsOf(mxH);
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(sameValues(*a[k].second, *b[k].second)) << a[k].first;
    if (k != 3) {
      EXPECT_TRUE(sameValues(*c[k].second, *d[k].second)) << c[k].first;
    }
  }
  // a is quantized with h (on_i) or with dy (on_h): different numbers at
  // the MX distance from each other.
  EXPECT_GT(relativeFrobenius(mxH.dwd, mxI.dwd), 2e-2);
  EXPECT_LT(relativeFrobenius(mxH.dwd, mxI.dwd), 1e-1);
  EXPECT_LT(relativeFrobenius(mxH.dwd, r64I.dwd), 1e-1);
}

TEST(ModelEmptyExperts, GetNoGradients) {
  LayerConfig cfg = shape(64, 64, 32, 4, 2, 32);
  cfg.bias = true;
  LayerInputs in = makeInputs(cfg, 7, 2);
  ASSERT_EQ(validate(cfg, in), "");
  // Expert 2 has no block; expert 3 only the spare blocks, all padding.
  const Routing &r = in.routing;
  for (size_t n = 0; n < r.blockToExpert.size(); ++n) {
    EXPECT_NE(r.blockToExpert[n], 2);
    if (r.blockToExpert[n] != 3)
      continue;
    for (int64_t b = 0; b < cfg.B; ++b)
      EXPECT_EQ(r.tokenPositionToId[n * cfg.B + b], -1);
  }
  ASSERT_EQ(r.blockToExpert.back(), 3);

  int64_t H = cfg.H, I = cfg.I, E = cfg.E;
  for (const LayerGrads &g : {backward64(cfg, in), backwardMX(cfg, in)}) {
    for (int64_t e = 0; e < E; ++e) {
      size_t wgu = countNonZero(g.dwgu, e * H * 2 * I, (e + 1) * H * 2 * I);
      size_t wd = countNonZero(g.dwd, e * I * H, (e + 1) * I * H);
      size_t bgu = countNonZero(g.dbgu, e * 2 * I, (e + 1) * 2 * I);
      size_t bdn = countNonZero(g.dbd, e * H, (e + 1) * H);
      size_t da = 0;
      for (int64_t t = 0; t < cfg.T; ++t)
        da += g.da[t * E + e] != 0.0;
      if (e >= 2) {
        EXPECT_EQ(wgu + wd + bgu + bdn + da, 0u) << "expert " << e;
      } else {
        EXPECT_GT(wgu, static_cast<size_t>(H * I)) << "expert " << e;
        EXPECT_GT(wd, static_cast<size_t>(H * I / 2)) << "expert " << e;
        EXPECT_GT(da, 16u) << "expert " << e;
      }
    }
  }
}

struct ShapeCase {
  const char *name;
  LayerConfig cfg;
};

void PrintTo(const ShapeCase &c, std::ostream *os) { *os << c.name; }

class ModelShapes : public ::testing::TestWithParam<ShapeCase> {};

/// Both references on the shapes the contract singles out: finite
/// everywhere, zero da off the routed pairs, every token's dx written, and
/// R_mx at the e4m3 distance from R_64.
TEST_P(ModelShapes, BothReferencesAgree) {
  const LayerConfig &cfg = GetParam().cfg;
  LayerInputs in = makeInputs(cfg, 9);
  ASSERT_EQ(validate(cfg, in), "");
  LayerGrads r64 = backward64(cfg, in), mx = backwardMX(cfg, in);
  for (const LayerGrads *g : {&r64, &mx}) {
    for (auto &[name, v] : outputsOf(*g))
      for (double e : *v)
        ASSERT_TRUE(std::isfinite(e)) << name;
    for (int64_t k = 0; k < cfg.T * cfg.E; ++k)
      if (in.affinities[k] == 0.0) {
        EXPECT_EQ(g->da[k], 0.0) << k;
      }
    for (int64_t t = 0; t < cfg.T; ++t)
      EXPECT_GT(countNonZero(g->dx, t * cfg.H, (t + 1) * cfg.H),
                static_cast<size_t>(cfg.H / 2))
          << "token " << t;
  }
  std::vector<double> d = distances(mx, r64);
  for (int k = 0; k < 4; ++k) {
    EXPECT_GT(d[k], 4e-2) << kOutputNames[k];
    EXPECT_LT(d[k], 1e-1) << kOutputNames[k];
  }
}

std::vector<ShapeCase> shapeCases() {
  LayerConfig dense = shape(50, 64, 32, 1, 1, 32);
  dense.dense = true;
  return {{"TKNotMultipleOfB", shape(37, 64, 32, 4, 2, 32)},
          {"K1", shape(64, 64, 32, 4, 1, 32)},
          {"Dense", dense},
          {"B64", shape(70, 32, 64, 3, 2, 64)},
          {"K4", shape(40, 32, 32, 6, 4, 32)}};
}

INSTANTIATE_TEST_SUITE_P(Model, ModelShapes, ::testing::ValuesIn(shapeCases()),
                         [](const ::testing::TestParamInfo<ShapeCase> &info) {
                           return std::string(info.param.name);
                         });

/// dWgu[e][:, 0, i] is x (x) dg[:, i]; with one token, a clipped g makes the
/// whole column zero, in both references.
TEST(ModelClamp, ClipsAFractionAndMasksTheGradient) {
  LayerConfig wide = shape(128, 64, 64, 4, 2, 32);
  wide.clamp.gateLo = -1.5;
  wide.clamp.gateHi = 1.0;
  wide.clamp.upLo = -1.0;
  wide.clamp.upHi = 1.25;
  wide.checkpoint = true;
  LayerInputs in = makeInputs(wide, 13);
  int64_t routedGate = 0, clippedGate = 0, clippedUp = 0;
  for (size_t n = 0; n < in.routing.blockToExpert.size(); ++n)
    for (int64_t b = 0; b < wide.B; ++b) {
      if (in.routing.tokenPositionToId[n * wide.B + b] < 0)
        continue;
      for (int64_t i = 0; i < wide.I; ++i) {
        double g = in.checkpoint[((n * 2 + 0) * wide.I + i) * wide.B + b];
        double u = in.checkpoint[((n * 2 + 1) * wide.I + i) * wide.B + b];
        ++routedGate;
        clippedGate += g == -1.5 || g == 1.0;
        clippedUp += u == -1.0 || u == 1.25;
      }
    }
  // N(0,1) pre-activations: P(g < -1.5 or g > 1) = 0.23, P(u < -1 or
  // u > 1.25) = 0.27.
  double gateFraction = static_cast<double>(clippedGate) / routedGate;
  double upFraction = static_cast<double>(clippedUp) / routedGate;
  EXPECT_GT(gateFraction, 0.18);
  EXPECT_LT(gateFraction, 0.28);
  EXPECT_GT(upFraction, 0.22);
  EXPECT_LT(upFraction, 0.32);

  LayerConfig one = shape(1, 32, 64, 1, 1, 32);
  one.dense = true;
  one.clamp.gateLo = -0.5;
  one.clamp.gateHi = 0.5;
  one.clamp.upLo = -0.5;
  one.clamp.upHi = 0.5;
  one.checkpoint = true;
  LayerInputs single = makeInputs(one, 17);
  int64_t H = one.H, I = one.I, B = one.B;
  for (bool mx : {false, true}) {
    LayerGrads g = mx ? backwardMX(one, single) : backward64(one, single);
    int64_t clipped = 0;
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t i = 0; i < I; ++i) {
        double v = single.checkpoint[(half * I + i) * B];
        bool isClipped = v == -0.5 || v == 0.5;
        clipped += isClipped;
        size_t nonZero = 0;
        for (int64_t h = 0; h < H; ++h)
          nonZero += g.dwgu[(h * 2 + half) * I + i] != 0.0;
        if (isClipped) {
          EXPECT_EQ(nonZero, 0u)
              << "mx " << mx << " half " << half << " i " << i;
        } else {
          EXPECT_GT(nonZero, static_cast<size_t>(H / 2))
              << "mx " << mx << " half " << half << " i " << i;
        }
      }
    EXPECT_GT(clipped, 2 * I / 4);
    EXPECT_LT(clipped, 2 * I * 3 / 4);
  }
}

TEST(ModelBias, BiasGradients) {
  LayerConfig cfg = shape(64, 64, 64, 4, 2, 32);
  cfg.bias = true;
  LayerInputs in = makeInputs(cfg, 19);
  LayerGrads r64 = backward64(cfg, in), mx = backwardMX(cfg, in);
  int64_t H = cfg.H, E = cfg.E;
  // dbd[e] = sum over routed t of a[t,e] dy[t]; R_mx forms fp32(a*dy) and
  // sums in fp64 in slot order, which is ascending token order.
  for (int64_t e = 0; e < E; ++e)
    for (int64_t j = 0; j < H; ++j) {
      double exact = 0.0, mxSum = 0.0;
      for (int64_t t = 0; t < cfg.T; ++t) {
        double a = in.affinities[t * E + e];
        exact += a * in.dy[t * H + j];
        mxSum += static_cast<float>(a) * static_cast<float>(in.dy[t * H + j]);
      }
      EXPECT_NEAR(r64.dbd[e * H + j], exact, 1e-13);
      EXPECT_EQ(mx.dbd[e * H + j], static_cast<float>(mxSum));
    }
  // dbgu is the slot sum of [dg|du]: in R_mx, of the fp32 values that also
  // feed the quantized GEMMs, so it carries their distance.
  EXPECT_GT(relativeFrobenius(mx.dbgu, r64.dbgu), 3e-2);
  EXPECT_LT(relativeFrobenius(mx.dbgu, r64.dbgu), 1e-1);
  for (double v : mx.dbgu)
    EXPECT_TRUE(isF32(v));

  LayerConfig off = cfg;
  off.bias = false;
  LayerInputs noBias = makeInputs(off, 19);
  EXPECT_TRUE(backward64(off, noBias).dbgu.empty());
  EXPECT_TRUE(backwardMX(off, noBias).dbd.empty());
}

/// c[t,e] of one expert alone: the same slots, with only expert e routed
/// (K = 1) and an fp32 dx, which then holds c itself. Every step of R_mx up
/// to P2 is per slot, so these are the addends of the full run.
std::vector<double> expertContribution(const LayerConfig &cfg,
                                       const LayerInputs &in, int32_t e) {
  LayerConfig one = cfg;
  one.K = 1;
  one.dxF32 = true;
  LayerInputs alone = in;
  alone.topkIdx.assign(cfg.T, e);
  alone.routing = buildRouting(alone.topkIdx.data(), cfg.T, 1, cfg.E, cfg.B);
  for (int64_t t = 0; t < cfg.T; ++t)
    for (int64_t other = 0; other < cfg.E; ++other)
      if (other != e)
        alone.affinities[t * cfg.E + other] = 0.0;
  EXPECT_EQ(validate(one, alone), "");
  return backwardMX(one, alone).dx;
}

TEST(ModelDx, AccumulationAndOutputType) {
  LayerConfig cfg = shape(64, 64, 32, 2, 2, 32);
  LayerInputs in = makeInputs(cfg, 21);
  std::vector<double> c0 = expertContribution(cfg, in, 0);
  std::vector<double> c1 = expertContribution(cfg, in, 1);

  LayerConfig f32 = cfg;
  f32.dxF32 = true;
  LayerConfig accBF16 = cfg;
  accBF16.dxAccumulate = DxAccumulate::BF16;
  std::vector<double> dxF32 = backwardMX(f32, in).dx;
  std::vector<double> dxBF16 = backwardMX(cfg, in).dx;
  std::vector<double> dxAccBF16 = backwardMX(accBF16, in).dx;
  size_t notBF16 = 0, accDiffers = 0;
  for (size_t k = 0; k < dxF32.size(); ++k) {
    ASSERT_TRUE(isF32(c0[k]) && isF32(c1[k]));
    float sum = static_cast<float>(c0[k]) + static_cast<float>(c1[k]);
    float acc = roundToBF16(static_cast<float>(c0[k]));
    acc = roundToBF16(acc + static_cast<float>(c1[k]));
    EXPECT_EQ(dxF32[k], sum) << k;
    EXPECT_EQ(dxBF16[k], roundToBF16(sum)) << k;
    EXPECT_EQ(dxAccBF16[k], acc) << k;
    EXPECT_TRUE(isBF16(dxBF16[k])) << k;
    notBF16 += !isBF16(dxF32[k]);
    accDiffers += dxAccBF16[k] != dxBF16[k];
  }
  EXPECT_GT(notBF16, dxF32.size() * 9 / 10);
  // Rounding the partial sum costs a bf16 ulp in a few percent of elements.
  EXPECT_GT(accDiffers, dxF32.size() / 50);
  EXPECT_LT(accDiffers, dxF32.size() / 2);
}

TEST(ModelDx, WeightGradientsInBF16) {
  LayerConfig cfg = distanceConfig();
  LayerConfig bf16 = cfg;
  bf16.weightGradBF16 = true;
  LayerInputs in = makeInputs(cfg, 23);
  LayerGrads f = backwardMX(cfg, in), b = backwardMX(bf16, in);
  size_t notBF16 = 0;
  for (size_t k = 0; k < f.dwgu.size(); ++k) {
    EXPECT_EQ(b.dwgu[k], roundToBF16(static_cast<float>(f.dwgu[k])));
    notBF16 += !isBF16(f.dwgu[k]);
  }
  for (size_t k = 0; k < f.dwd.size(); ++k)
    EXPECT_EQ(b.dwd[k], roundToBF16(static_cast<float>(f.dwd[k])));
  EXPECT_GT(notBF16, f.dwgu.size() * 9 / 10);
  EXPECT_TRUE(sameValues(b.dx, f.dx));
  EXPECT_TRUE(sameValues(b.da, f.da));
  EXPECT_TRUE(sameValues(b.dbgu, f.dbgu));
  for (double v : f.da)
    EXPECT_TRUE(isF32(v));
}

//===----------------------------------------------------------------------===//
// validate() and makeInputs().
//===----------------------------------------------------------------------===//

struct BadCase {
  const char *what;
  std::function<void(LayerConfig &, LayerInputs &)> mutate;
  std::string message;
};

TEST(ModelValidate, RejectsEachBadCase) {
  LayerConfig base = shape(40, 32, 32, 4, 2, 32);
  base.bias = true;
  base.checkpoint = true;
  LayerInputs good = makeInputs(base, 29);
  ASSERT_EQ(validate(base, good), "");
  ASSERT_EQ(base.numBlocks(), 6);
  // Token 0 is routed to expert e0 and not to expert notE0.
  int32_t e0 = good.topkIdx[0];
  int32_t notE0 = 0;
  while (notE0 == good.topkIdx[0] || notE0 == good.topkIdx[1])
    ++notE0;

  using C = LayerConfig;
  using In = LayerInputs;
  std::vector<BadCase> cases = {
      {"T", [](C &c, In &) { c.T = 0; },
       "T, H, I, E, K and B must be positive"},
      {"B", [](C &c, In &) { c.B = -32; },
       "T, H, I, E, K and B must be positive"},
      {"H", [](C &c, In &) { c.H = 48; }, "H = 48 is not a multiple of 32"},
      {"I", [](C &c, In &) { c.I = 40; }, "I = 40 is not a multiple of 32"},
      {"B32", [](C &c, In &) { c.B = 48; }, "B = 48 is not a multiple of 32"},
      {"K", [](C &c, In &) { c.K = 5; }, "K = 5 exceeds E = 4"},
      {"dense", [](C &c, In &) { c.dense = true; },
       "dense mode requires E = 1 and K = 1"},
      {"gate clamp",
       [](C &c, In &) {
         c.clamp.gateLo = 1.0;
         c.clamp.gateHi = 1.0;
       },
       "gate clamp needs gate_lo < gate_hi"},
      {"up clamp",
       [](C &c, In &) {
         c.clamp.upLo = 2.0;
         c.clamp.upHi = -1.0;
       },
       "up clamp needs up_lo < up_hi"},
      {"x", [](C &, In &in) { in.x.pop_back(); },
       "x has 1279 values, expected T*H = 1280"},
      {"dy", [](C &, In &in) { in.dy.push_back(0.5); },
       "dy has 1281 values, expected T*H = 1280"},
      {"affinities", [](C &, In &in) { in.affinities.pop_back(); },
       "affinities has 159 values, expected T*E = 160"},
      {"wgu", [](C &, In &in) { in.wgu.pop_back(); },
       "wgu has 8191 values, expected E*H*2*I = 8192"},
      {"wd", [](C &, In &in) { in.wd.pop_back(); },
       "wd has 4095 values, expected E*I*H = 4096"},
      {"bgu", [](C &, In &in) { in.bgu.pop_back(); },
       "bgu has 255 values, expected E*2*I = 256"},
      {"bd", [](C &, In &in) { in.bd.clear(); },
       "bd has 0 values, expected E*H = 128"},
      {"bias off", [](C &c, In &) { c.bias = false; },
       "bgu must be empty when bias is off, it has 256 values"},
      {"checkpoint", [](C &, In &in) { in.checkpoint.pop_back(); },
       "checkpoint has 12287 values, expected N*2*I*B = 12288"},
      {"checkpoint off", [](C &c, In &) { c.checkpoint = false; },
       "checkpoint must be empty when checkpoint is off, it has 12288 "
       "values"},
      {"blocks", [](C &, In &in) { in.routing.blockToExpert.push_back(3); },
       "block_to_expert has 7 blocks, expected N = 6"},
      {"slots", [](C &, In &in) { in.routing.tokenPositionToId.pop_back(); },
       "token_position_to_id has 191 values, expected N*B = 192"},
      {"routed zero", [e0](C &, In &in) { in.affinities[e0] = 0.0; },
       "affinity of routed pair (0, " + std::to_string(e0) +
           ") must be positive and finite, got 0"},
      {"routed nan", [e0](C &, In &in) { in.affinities[e0] = std::nan(""); },
       "affinity of routed pair (0, " + std::to_string(e0) +
           ") must be positive and finite, got nan"},
      {"not routed", [notE0](C &, In &in) { in.affinities[notE0] = 0.25; },
       "affinity of non-routed pair (0, " + std::to_string(notE0) +
           ") must be 0, got 0.25"},
  };
  for (const BadCase &c : cases) {
    LayerConfig cfg = base;
    LayerInputs in = good;
    c.mutate(cfg, in);
    EXPECT_EQ(validate(cfg, in), c.message) << c.what;
  }

  // A layout the routing verifier rejects: two tokens of a block swapped.
  LayerInputs swapped = good;
  std::swap(swapped.routing.tokenPositionToId[0],
            swapped.routing.tokenPositionToId[1]);
  EXPECT_EQ(validate(base, swapped).rfind("invalid routing: ", 0), 0u)
      << validate(base, swapped);

  // More experts per token than K: a K = 2 layout with the same N as K = 1.
  LayerConfig two = shape(8, 32, 32, 2, 2, 32);
  LayerInputs twoIn = makeInputs(two, 31);
  two.K = 1;
  ASSERT_EQ(two.numBlocks(), 2);
  EXPECT_EQ(validate(two, twoIn),
            "token 0 is routed to 2 experts, more than K = 1");

  // Dense mode routes every token.
  LayerConfig dense = shape(40, 32, 32, 1, 1, 32);
  dense.dense = true;
  LayerInputs denseIn = makeInputs(dense, 37);
  ASSERT_EQ(validate(dense, denseIn), "");
  denseIn.routing.tokenPositionToId[39] = -1;
  denseIn.affinities[39] = 0.0;
  EXPECT_EQ(validate(dense, denseIn),
            "dense mode routes every token, token 39 is not routed");
}

::testing::AssertionResult sameInputs(const LayerInputs &a,
                                      const LayerInputs &b) {
  std::vector<std::pair<const char *, std::pair<const std::vector<double> *,
                                                const std::vector<double> *>>>
      tensors = {{"x", {&a.x, &b.x}},
                 {"dy", {&a.dy, &b.dy}},
                 {"affinities", {&a.affinities, &b.affinities}},
                 {"wgu", {&a.wgu, &b.wgu}},
                 {"wd", {&a.wd, &b.wd}},
                 {"bgu", {&a.bgu, &b.bgu}},
                 {"bd", {&a.bd, &b.bd}},
                 {"checkpoint", {&a.checkpoint, &b.checkpoint}}};
  for (auto &[name, pair] : tensors) {
    ::testing::AssertionResult same = sameValues(*pair.first, *pair.second);
    if (!same)
      return ::testing::AssertionFailure() << name << ": " << same.message();
  }
  if (a.routing.tokenPositionToId != b.routing.tokenPositionToId ||
      a.routing.blockToExpert != b.routing.blockToExpert ||
      a.topkIdx != b.topkIdx)
    return ::testing::AssertionFailure() << "routing differs";
  return ::testing::AssertionSuccess();
}

TEST(ModelInputs, DeterministicPerSeed) {
  LayerConfig cfg = shape(64, 32, 32, 4, 2, 32);
  cfg.bias = true;
  cfg.checkpoint = true;
  LayerInputs a = makeInputs(cfg, 5), b = makeInputs(cfg, 5);
  LayerInputs c = makeInputs(cfg, 6);
  EXPECT_TRUE(sameInputs(a, b));
  EXPECT_FALSE(sameValues(a.x, c.x));
  EXPECT_FALSE(sameValues(a.dy, c.dy));
  EXPECT_FALSE(sameValues(a.wgu, c.wgu));
  EXPECT_FALSE(sameValues(a.wd, c.wd));
  EXPECT_FALSE(sameValues(a.bgu, c.bgu));
  EXPECT_FALSE(sameValues(a.bd, c.bd));
  EXPECT_FALSE(sameValues(a.affinities, c.affinities));
  EXPECT_NE(a.topkIdx, c.topkIdx);
  // Each tensor has its own stream: options leave the others unchanged.
  LayerConfig plain = shape(64, 32, 32, 4, 2, 32);
  LayerInputs p = makeInputs(plain, 5);
  p.bgu = a.bgu;
  p.bd = a.bd;
  p.checkpoint = a.checkpoint;
  EXPECT_TRUE(sameInputs(a, p));
}

/// Mean and variance of `v` against N(0, var): 4-5 standard errors wide.
void expectNormal(const std::vector<double> &v, double var, const char *name) {
  double n = static_cast<double>(v.size()), sum = 0.0, sumSq = 0.0;
  for (double e : v) {
    sum += e;
    sumSq += e * e;
  }
  double mean = sum / n;
  EXPECT_LT(std::fabs(mean), 4.5 * std::sqrt(var / n)) << name;
  EXPECT_NEAR(sumSq / n / var, 1.0, 4.5 * std::sqrt(2.0 / n)) << name;
}

TEST(ModelInputs, DistributionsAndStorageTypes) {
  LayerConfig cfg = shape(256, 64, 64, 4, 2, 32);
  cfg.bias = true;
  LayerInputs in = makeInputs(cfg, 41);
  ASSERT_EQ(validate(cfg, in), "");
  expectNormal(in.x, 1.0, "x");
  expectNormal(in.dy, 1.0, "dy");
  expectNormal(in.wgu, 1.0 / 64, "wgu");
  expectNormal(in.wd, 1.0 / 64, "wd");
  for (const std::vector<double> *v :
       {&in.x, &in.dy, &in.wgu, &in.wd, &in.bgu, &in.bd})
    for (double e : *v)
      ASSERT_TRUE(isBF16(e));
  // Softmax over the selected logits: K positive fp32 scores summing to 1,
  // the larger first.
  for (int64_t t = 0; t < cfg.T; ++t) {
    double sum = 0.0;
    int64_t positive = 0;
    for (int64_t e = 0; e < cfg.E; ++e) {
      double a = in.affinities[t * cfg.E + e];
      ASSERT_TRUE(isF32(a));
      sum += a;
      positive += a > 0.0;
    }
    EXPECT_EQ(positive, cfg.K);
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_GE(in.affinities[t * cfg.E + in.topkIdx[t * cfg.K]],
              in.affinities[t * cfg.E + in.topkIdx[t * cfg.K + 1]]);
  }

  // Dense: identity routing, affinities a sigmoid of normal draws.
  LayerConfig dense = shape(40, 32, 32, 1, 1, 32);
  dense.dense = true;
  LayerInputs d = makeInputs(dense, 43);
  ASSERT_EQ(validate(dense, d), "");
  for (int64_t s = 0; s < 64; ++s)
    EXPECT_EQ(d.routing.tokenPositionToId[s], s < 40 ? s : -1);
  double lo = 1.0, hi = 0.0;
  for (double a : d.affinities) {
    lo = std::min(lo, a);
    hi = std::max(hi, a);
  }
  EXPECT_GT(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_GT(hi - lo, 0.3);

  EXPECT_THROW(makeInputs(cfg, 41, 3), std::invalid_argument);
  EXPECT_THROW(makeInputs(shape(8, 48, 32, 2, 1, 32), 41),
               std::invalid_argument);
}

TEST(ModelUtil, RelativeFrobeniusAndNames) {
  EXPECT_DOUBLE_EQ(relativeFrobenius({3.0, 4.0}, {0.0, 4.0}), 0.75);
  EXPECT_EQ(relativeFrobenius({1.0, -2.0}, {1.0, -2.0}), 0.0);
  EXPECT_EQ(relativeFrobenius({0.0}, {0.0}), 0.0);
  EXPECT_EQ(relativeFrobenius({1.0}, {0.0}), INFINITY);
  EXPECT_TRUE(std::isnan(relativeFrobenius({NAN}, {1.0})));
  EXPECT_TRUE(std::isnan(relativeFrobenius({1.0}, {NAN})));

  for (Activation act : {Activation::SwiGLU, Activation::GeGLU}) {
    Activation parsed =
        act == Activation::SwiGLU ? Activation::GeGLU : Activation::SwiGLU;
    EXPECT_TRUE(parseActivation(toString(act), parsed));
    EXPECT_EQ(parsed, act);
  }
  for (AffinityPlacement aff :
       {AffinityPlacement::OnI, AffinityPlacement::OnH}) {
    AffinityPlacement parsed = aff == AffinityPlacement::OnI
                                   ? AffinityPlacement::OnH
                                   : AffinityPlacement::OnI;
    EXPECT_TRUE(parseAffinity(toString(aff), parsed));
    EXPECT_EQ(parsed, aff);
  }
  EXPECT_STREQ(toString(Activation::GeGLU), "geglu");
  EXPECT_STREQ(toString(AffinityPlacement::OnH), "on_h");
  Activation act;
  AffinityPlacement aff;
  EXPECT_FALSE(parseActivation("SwiGLU", act));
  EXPECT_FALSE(parseAffinity("on_x", aff));
}

} // namespace
