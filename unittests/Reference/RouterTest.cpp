//===- RouterTest.cpp - tests of the router forward and backward ----------===//
//
// Checks the top-k selection (order, ties), the scores of each mode on
// hand-computed cases, and routerBackward against hand-computed gradients
// and against central finite differences of routerForward in fp64.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Router.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

using namespace moe::ref;

namespace {

const RouterMode kModes[] = {RouterMode::TopKThenSoftmax,
                             RouterMode::SoftmaxThenTopK,
                             RouterMode::SoftmaxThenTopKRenorm};

/// The message of the std::invalid_argument `f` throws, or "" if none.
template <typename F> std::string invalidArgumentOf(F f) {
  try {
    f();
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  return "";
}

/// Elementwise |actual - expected| <= tol.
void expectNear(const std::vector<double> &actual,
                const std::vector<double> &expected, double tol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
}

/// Two tokens with exactly known softmaxes: exp(logits) = {1, 3, 2} and
/// {2, 1, 5}. The selections are {1, 2} and {2, 0}.
std::vector<double> handLogits() {
  return {0.0, std::log(3.0), std::log(2.0), std::log(2.0), 0.0, std::log(5.0)};
}

TEST(RouterForward, SelectionIsDescending) {
  std::vector<double> logits = {0.1,  0.9, 0.5, 0.7, //
                                -2.0, 3.0, 1.0, -0.5};
  RouterOutput out =
      routerForward(logits.data(), 2, 4, 3, RouterMode::TopKThenSoftmax);
  EXPECT_EQ(out.topkIdx, (std::vector<int32_t>{1, 3, 2, 1, 2, 3}));
}

TEST(RouterForward, TiesGoToTheLowerExpert) {
  std::vector<double> logits = {1.0, 3.0, 3.0, 1.0, 2.0};
  for (int64_t K = 1; K <= 5; ++K) {
    RouterOutput out =
        routerForward(logits.data(), 1, 5, K, RouterMode::SoftmaxThenTopK);
    std::vector<int32_t> expected = {1, 2, 4, 0, 3};
    expected.resize(K);
    EXPECT_EQ(out.topkIdx, expected) << "K=" << K;
  }
  std::vector<double> flat = {0.25, -1.0, 0.25, 0.25};
  RouterOutput out =
      routerForward(flat.data(), 1, 4, 2, RouterMode::TopKThenSoftmax);
  EXPECT_EQ(out.topkIdx, (std::vector<int32_t>{0, 2}));
  // Equal logits get equal scores.
  EXPECT_EQ(out.topkScores, (std::vector<double>{0.5, 0.5}));
}

TEST(RouterForward, HandScoresPerMode) {
  std::vector<double> logits = handLogits();
  std::vector<int32_t> idx = {1, 2, 2, 0};
  std::vector<std::vector<double>> expected = {
      {3.0 / 5, 2.0 / 5, 5.0 / 7, 2.0 / 7},
      {1.0 / 2, 1.0 / 3, 5.0 / 8, 1.0 / 4},
      {3.0 / 5, 2.0 / 5, 5.0 / 7, 2.0 / 7}};
  for (int m = 0; m < 3; ++m) {
    RouterOutput out = routerForward(logits.data(), 2, 3, 2, kModes[m]);
    EXPECT_EQ(out.topkIdx, idx) << "mode " << m;
    expectNear(out.topkScores, expected[m], 1e-15);
  }
}

TEST(RouterForward, StableForLargeLogits) {
  // exp(1000) overflows and exp(-1000) underflows to 0; subtracting the
  // maximum gives the scores of the shifted logits {2, 1, 0}.
  std::vector<double> shifted = {2.0, 1.0, 0.0};
  for (double offset : {998.0, -1002.0}) {
    std::vector<double> logits = {1000.0, 999.0, 998.0};
    for (double &l : logits)
      l += offset - 998.0;
    for (RouterMode mode : kModes) {
      RouterOutput big = routerForward(logits.data(), 1, 3, 2, mode);
      RouterOutput ref = routerForward(shifted.data(), 1, 3, 2, mode);
      ASSERT_EQ(big.topkIdx, ref.topkIdx);
      for (int k = 0; k < 2; ++k) {
        EXPECT_TRUE(std::isfinite(big.topkScores[k]));
        EXPECT_NEAR(big.topkScores[k], ref.topkScores[k], 1e-15);
      }
    }
  }
  // The sigmoid of 1, computed independently.
  std::vector<double> logits = {1000.0, 999.0, 998.0};
  RouterOutput out =
      routerForward(logits.data(), 1, 3, 2, RouterMode::TopKThenSoftmax);
  EXPECT_NEAR(out.topkScores[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
}

TEST(RouterForward, RejectsBadInput) {
  std::vector<double> logits = {0.5, 1.5, -0.5};
  EXPECT_THROW(
      routerForward(logits.data(), 1, 3, 0, RouterMode::TopKThenSoftmax),
      std::invalid_argument);
  EXPECT_THROW(
      routerForward(logits.data(), 1, 3, 4, RouterMode::TopKThenSoftmax),
      std::invalid_argument);
  logits[1] = std::nan("");
  std::string msg = invalidArgumentOf([&] {
    routerForward(logits.data(), 1, 3, 2, RouterMode::SoftmaxThenTopK);
  });
  EXPECT_NE(msg.find("logits[t=0, e=1]"), std::string::npos) << msg;
  logits[1] = INFINITY;
  EXPECT_THROW(
      routerForward(logits.data(), 1, 3, 2, RouterMode::SoftmaxThenTopK),
      std::invalid_argument);
}

TEST(RouterBackward, HandGradientsPerMode) {
  // dscores {1, -2} and {0.5, 1}; the gradients, derived by hand from the
  // formulas of SPEC section 3, sum to zero per token.
  std::vector<double> logits = handLogits();
  std::vector<int32_t> idx = {1, 2, 2, 0};
  std::vector<double> ds = {1.0, -2.0, 0.5, 1.0};
  std::vector<double> topkFirst = {0.0,        0.72, -0.72,
                                   5.0 / 49.0, 0.0,  -5.0 / 49.0};
  std::vector<std::vector<double>> expected = {
      topkFirst,
      {1.0 / 36, 7.0 / 12, -11.0 / 18, 7.0 / 64, -9.0 / 128, -5.0 / 128},
      topkFirst};
  for (int m = 0; m < 3; ++m) {
    SCOPED_TRACE("mode " + std::to_string(m));
    std::vector<double> dl = routerBackward(logits.data(), idx.data(),
                                            ds.data(), 2, 3, 2, kModes[m]);
    expectNear(dl, expected[m], 1e-15);
  }
}

/// Logits whose ranks are a random permutation with gaps of at least 0.3, so
/// that a finite-difference step cannot change the selection.
std::vector<double> separatedLogits(std::mt19937_64 &rng, int64_t T,
                                    int64_t E) {
  std::uniform_real_distribution<double> noise(0.0, 0.1);
  std::vector<double> logits(T * E);
  std::vector<int> rank(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e)
      rank[e] = static_cast<int>(e);
    std::shuffle(rank.begin(), rank.end(), rng);
    for (int64_t e = 0; e < E; ++e)
      logits[t * E + e] = 0.4 * rank[e] - 0.2 * E + noise(rng);
  }
  return logits;
}

TEST(RouterBackward, MatchesFiniteDifferences) {
  struct Shape {
    int64_t T, E, K;
  };
  const Shape shapes[] = {{4, 8, 2}, {3, 5, 5}, {3, 16, 4},
                          {3, 6, 1}, {2, 1, 1}, {2, 2, 1}};
  std::mt19937_64 rng(0x5eed0003);
  std::uniform_real_distribution<double> weight(-1.0, 1.0);
  const double h = 1e-5;
  for (const Shape &s : shapes) {
    std::vector<double> logits = separatedLogits(rng, s.T, s.E);
    std::vector<double> w(s.T * s.K);
    for (double &v : w)
      v = weight(rng);
    for (int m = 0; m < 3; ++m) {
      SCOPED_TRACE("T=" + std::to_string(s.T) + " E=" + std::to_string(s.E) +
                   " K=" + std::to_string(s.K) + " mode " + std::to_string(m));
      RouterOutput base =
          routerForward(logits.data(), s.T, s.E, s.K, kModes[m]);
      std::vector<double> dl =
          routerBackward(logits.data(), base.topkIdx.data(), w.data(), s.T, s.E,
                         s.K, kModes[m]);
      // L = sum w * scores; dL/dlogits by central differences.
      auto loss = [&](const std::vector<double> &l) {
        RouterOutput out = routerForward(l.data(), s.T, s.E, s.K, kModes[m]);
        EXPECT_EQ(out.topkIdx, base.topkIdx) << "selection flipped";
        double sum = 0.0;
        for (int64_t i = 0; i < s.T * s.K; ++i)
          sum += w[i] * out.topkScores[i];
        return sum;
      };
      for (int64_t t = 0; t < s.T; ++t) {
        double maxGrad = 0.0, maxErr = 0.0;
        for (int64_t e = 0; e < s.E; ++e) {
          std::vector<double> plus = logits, minus = logits;
          plus[t * s.E + e] += h;
          minus[t * s.E + e] -= h;
          double fd = (loss(plus) - loss(minus)) / (2 * h);
          maxGrad = std::max(maxGrad, std::abs(dl[t * s.E + e]));
          maxErr = std::max(maxErr, std::abs(fd - dl[t * s.E + e]));
        }
        // Relative to the token's largest gradient entry.
        EXPECT_LE(maxErr, 1e-6 * maxGrad) << "token " << t;
      }
    }
  }
}

TEST(RouterBackward, UnselectedLogitsGradient) {
  std::mt19937_64 rng(0x5eed0004);
  const int64_t T = 3, E = 7, K = 3;
  std::vector<double> logits = separatedLogits(rng, T, E);
  // Positive dscores make sum(dp_sel * p_sel) positive, so every unselected
  // logit of SoftmaxThenTopK gets a strictly negative gradient.
  std::uniform_real_distribution<double> pos(0.5, 1.5);
  std::vector<double> ds(T * K);
  for (double &v : ds)
    v = pos(rng);
  for (RouterMode mode : kModes) {
    RouterOutput out = routerForward(logits.data(), T, E, K, mode);
    std::vector<double> dl = routerBackward(logits.data(), out.topkIdx.data(),
                                            ds.data(), T, E, K, mode);
    for (int64_t t = 0; t < T; ++t) {
      double maxGrad = 0.0;
      for (int64_t e = 0; e < E; ++e)
        maxGrad = std::max(maxGrad, std::abs(dl[t * E + e]));
      ASSERT_GT(maxGrad, 1e-3);
      for (int64_t e = 0; e < E; ++e) {
        const int32_t *sel = out.topkIdx.data() + t * K;
        if (std::find(sel, sel + K, e) != sel + K)
          continue;
        double g = dl[t * E + e];
        switch (mode) {
        case RouterMode::TopKThenSoftmax:
          EXPECT_EQ(g, 0.0) << "t=" << t << " e=" << e;
          break;
        case RouterMode::SoftmaxThenTopK:
          EXPECT_LT(g, -1e-6 * maxGrad) << "t=" << t << " e=" << e;
          break;
        case RouterMode::SoftmaxThenTopKRenorm:
          // The renormalized scores equal softmax(logits[topk]) exactly, so
          // the formula's unselected gradient is zero up to rounding.
          EXPECT_LE(std::abs(g), 1e-14 * maxGrad) << "t=" << t << " e=" << e;
          break;
        }
      }
    }
  }
}

TEST(RouterBackward, RejectsBadIndices) {
  std::vector<double> logits = handLogits();
  std::vector<double> ds = {1.0, -2.0, 0.5, 1.0};
  std::vector<int32_t> outOfRange = {1, 2, 3, 0};
  std::string msg = invalidArgumentOf([&] {
    routerBackward(logits.data(), outOfRange.data(), ds.data(), 2, 3, 2,
                   RouterMode::SoftmaxThenTopK);
  });
  EXPECT_NE(msg.find("topkIdx[t=1, k=0]"), std::string::npos) << msg;
  std::vector<int32_t> repeated = {1, 2, 0, 0};
  msg = invalidArgumentOf([&] {
    routerBackward(logits.data(), repeated.data(), ds.data(), 2, 3, 2,
                   RouterMode::TopKThenSoftmax);
  });
  EXPECT_NE(msg.find("topkIdx[t=1, k=1]"), std::string::npos) << msg;
}

TEST(RouterGatherScoreGrad, HandValues) {
  std::vector<double> da = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  std::vector<int32_t> idx = {2, 0, 1, 2};
  std::vector<double> ds = gatherScoreGrad(da.data(), idx.data(), 2, 3, 2);
  EXPECT_EQ(ds, (std::vector<double>{0.3, 0.1, 0.5, 0.6}));
  std::vector<int32_t> bad = {2, 0, 1, -1};
  EXPECT_THROW(gatherScoreGrad(da.data(), bad.data(), 2, 3, 2),
               std::invalid_argument);
}

} // namespace
