//===- FiniteDifferenceTest.cpp - R_64 against finite differences ---------===//
//
// The fp64 backward (R_64) is the gradient of the fp64 forward: for every
// option of the op, every output of backward64() must match central finite
// differences of L = <dy, forward64(inputs)> on a sample of entries. This is
// the check that anchors both references (SPEC section 6): R_mx is judged by
// its distance to R_64, and every target by its distance to R_mx.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Model.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

using namespace moe::ref;

namespace {

struct FDCase {
  const char *name;
  LayerConfig cfg;
  int64_t emptyExperts = 0;
};

/// Names the case in test output instead of its bytes.
void PrintTo(const FDCase &c, std::ostream *os) { *os << c.name; }

/// T = 40, H = I = 32, E = 4, K = 2, B = 32: T*K = 80 is not a multiple of B,
/// so every expert's last block holds padding.
LayerConfig baseConfig() {
  LayerConfig cfg;
  cfg.T = 40;
  cfg.H = 32;
  cfg.I = 32;
  cfg.E = 4;
  cfg.K = 2;
  cfg.B = 32;
  return cfg;
}

/// Limits that clip a sizeable fraction of g and u (both ~ N(0, 1)).
ClampConfig clippingClamps() {
  ClampConfig clamp;
  clamp.gateLo = -1.0;
  clamp.gateHi = 0.75;
  clamp.upLo = -0.75;
  clamp.upHi = 1.0;
  return clamp;
}

std::vector<FDCase> fdCases() {
  std::vector<FDCase> cases;
  cases.push_back({"SwiGLU_OnI", baseConfig()});
  FDCase geglu{"GeGLU", baseConfig()};
  geglu.cfg.act = Activation::GeGLU;
  cases.push_back(geglu);
  FDCase onH{"OnH", baseConfig()};
  onH.cfg.affinity = AffinityPlacement::OnH;
  cases.push_back(onH);
  FDCase clamps{"Clamps", baseConfig()};
  clamps.cfg.clamp = clippingClamps();
  cases.push_back(clamps);
  FDCase bias{"Bias", baseConfig()};
  bias.cfg.bias = true;
  cases.push_back(bias);
  FDCase k1{"K1", baseConfig()};
  k1.cfg.K = 1;
  cases.push_back(k1);
  FDCase dense{"Dense", baseConfig()};
  dense.cfg.E = 1;
  dense.cfg.K = 1;
  dense.cfg.dense = true;
  cases.push_back(dense);
  FDCase empty{"EmptyExperts", baseConfig()};
  empty.emptyExperts = 2;
  cases.push_back(empty);
  FDCase odd{"T37_E3", baseConfig()};
  odd.cfg.T = 37;
  odd.cfg.E = 3;
  cases.push_back(odd);
  FDCase all{"GeGLU_OnH_Bias_Clamps", baseConfig()};
  all.cfg.act = Activation::GeGLU;
  all.cfg.affinity = AffinityPlacement::OnH;
  all.cfg.bias = true;
  all.cfg.clamp = clippingClamps();
  cases.push_back(all);
  return cases;
}

double loss(const LayerConfig &cfg, const LayerInputs &in) {
  std::vector<double> out = forward64(cfg, in);
  double sum = 0.0;
  for (size_t k = 0; k < out.size(); ++k)
    sum += in.dy[k] * out[k];
  return sum;
}

/// Compares `grad` with central differences of the loss in the sampled
/// entries of `param` (a member of `in`) and returns the norm-relative error
/// ||fd - grad|| / ||grad|| over the sample. Entry-wise relative error would
/// be dominated by entries whose gradient is (near) zero, such as clipped
/// elements and empty experts, where any finite difference is rounding
/// noise; the norm over the sample measures the error against the
/// gradient's own scale.
double sampledError(const LayerConfig &cfg, LayerInputs &in,
                    std::vector<double> &param, const std::vector<double> &grad,
                    bool routedOnly) {
  EXPECT_EQ(param.size(), grad.size());
  std::vector<size_t> candidates;
  double sumSq = 0.0;
  for (size_t k = 0; k < param.size(); ++k) {
    sumSq += param[k] * param[k];
    if (!routedOnly || param[k] != 0.0)
      candidates.push_back(k);
  }
  double rms = std::sqrt(sumSq / static_cast<double>(param.size()));
  const size_t kSamples = 20;
  double errSq = 0.0, refSq = 0.0;
  for (size_t s = 0; s < kSamples; ++s) {
    size_t k = candidates[(2 * s + 1) * candidates.size() / (2 * kSamples)];
    double v = param[k];
    // The step is relative to the entry's scale (never below the tensor's
    // RMS, so small entries are not stepped by a vanishing amount); the
    // difference of the two perturbed values, not 2*step, is the exact
    // denominator.
    double step = 1e-5 * std::max(std::fabs(v), rms);
    double up = v + step, down = v - step;
    param[k] = up;
    double lUp = loss(cfg, in);
    param[k] = down;
    double lDown = loss(cfg, in);
    param[k] = v;
    double fd = (lUp - lDown) / (up - down);
    errSq += (fd - grad[k]) * (fd - grad[k]);
    refSq += grad[k] * grad[k];
  }
  EXPECT_GT(refSq, 0.0) << "every sampled gradient entry is zero";
  return std::sqrt(errSq / refSq);
}

/// 1e-6 leaves two orders of magnitude over what a correct gradient gives
/// with this step (truncation ~1e-10, rounding ~1e-9 relative); a wrong
/// term in any formula shows up at 1e-3 or more.
constexpr double kTolerance = 1e-6;

class FiniteDifferenceTest : public ::testing::TestWithParam<FDCase> {};

TEST_P(FiniteDifferenceTest, Backward64MatchesCentralDifferences) {
  const FDCase &c = GetParam();
  const LayerConfig &cfg = c.cfg;
  LayerInputs in = makeInputs(cfg, 4242, c.emptyExperts);
  ASSERT_EQ(validate(cfg, in), "");
  LayerGrads grads = backward64(cfg, in);

  struct Output {
    const char *name;
    std::vector<double> *param;
    const std::vector<double> *grad;
    bool routedOnly;
  };
  std::vector<Output> outputs = {
      {"dx", &in.x, &grads.dx, false},
      {"da", &in.affinities, &grads.da, true},
      {"dwgu", &in.wgu, &grads.dwgu, false},
      {"dwd", &in.wd, &grads.dwd, false},
  };
  if (cfg.bias) {
    outputs.push_back({"dbgu", &in.bgu, &grads.dbgu, false});
    outputs.push_back({"dbd", &in.bd, &grads.dbd, false});
  }
  for (const Output &o : outputs) {
    double err = sampledError(cfg, in, *o.param, *o.grad, o.routedOnly);
    char text[32];
    std::snprintf(text, sizeof(text), "%.2e", err);
    RecordProperty(std::string(o.name) + "_rel_err", text);
    EXPECT_LE(err, kTolerance) << o.name;
  }
}

INSTANTIATE_TEST_SUITE_P(FiniteDifference, FiniteDifferenceTest,
                         ::testing::ValuesIn(fdCases()),
                         [](const ::testing::TestParamInfo<FDCase> &info) {
                           return std::string(info.param.name);
                         });

/// The check itself can fail: a dWd off by 0.1% (or computed without the
/// affinity) is far outside the tolerance.
TEST(FiniteDifferenceSanity, DetectsAWrongGradient) {
  LayerConfig cfg = baseConfig();
  LayerInputs in = makeInputs(cfg, 4242);
  LayerGrads grads = backward64(cfg, in);
  EXPECT_LE(sampledError(cfg, in, in.wd, grads.dwd, false), kTolerance);
  std::vector<double> scaled = grads.dwd;
  for (double &v : scaled)
    v *= 1.001;
  EXPECT_GT(sampledError(cfg, in, in.wd, scaled, false), 5e-4);
  LayerInputs unit = in;
  for (double &a : unit.affinities)
    a = a > 0.0 ? 1.0 : 0.0;
  EXPECT_GT(sampledError(cfg, in, in.wd, backward64(cfg, unit).dwd, false),
            1e-1);
}

} // namespace
