//===- RoutingTest.cpp - tests of the blocked routing layout --------------===//
//
// Checks numBlocks against hand-computed values, buildRouting against
// hand-written layouts, the worst case that needs exactly numBlocks blocks,
// and random routings against the contract; verifyRouting gets one test per
// failure it reports.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Routing.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <random>
#include <stdexcept>

using namespace moe::ref;

namespace {

/// The message of the std::invalid_argument `f` throws, or "" if none.
template <typename F> std::string invalidArgumentOf(F f) {
  try {
    f();
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  return "";
}

/// True when `text` contains `part`; failures print both.
::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << part << "\"";
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Checks everything the contract says about buildRouting's result for the
/// selection `topk` [T,K]: the size is numBlocks, verifyRouting accepts it,
/// every routed (t, e) pair sits in exactly one slot of an e block and
/// nothing else does, each expert has ceil(count/B) blocks, and the blocks
/// beyond those are expert E-1 padding. Together with verifyRouting's order
/// rules this pins the layout down completely.
void expectCanonical(const Routing &r, const std::vector<int32_t> &topk,
                     int64_t T, int64_t K, int64_t E, int64_t B) {
  int64_t n = numBlocks(T, K, E, B);
  ASSERT_EQ(static_cast<int64_t>(r.blockToExpert.size()), n);
  ASSERT_EQ(static_cast<int64_t>(r.tokenPositionToId.size()), n * B);
  ASSERT_EQ(verifyRouting(r, T, E, B), "");

  std::vector<int> expected(T * E, 0), found(T * E, 0);
  std::vector<int64_t> count(E, 0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      ++expected[t * E + topk[t * K + k]];
      ++count[topk[t * K + k]];
    }
  }
  for (int64_t slot = 0; slot < n * B; ++slot) {
    int32_t id = r.tokenPositionToId[slot];
    if (id >= 0)
      ++found[id * E + r.blockToExpert[slot / B]];
  }
  EXPECT_EQ(found, expected);

  int64_t used = 0;
  std::vector<int64_t> blocksOf(E, 0);
  for (int64_t e = 0; e < E; ++e)
    used += ceilDiv(count[e], B);
  ASSERT_LE(used, n);
  for (int64_t b = 0; b < used; ++b)
    ++blocksOf[r.blockToExpert[b]];
  for (int64_t e = 0; e < E; ++e)
    EXPECT_EQ(blocksOf[e], ceilDiv(count[e], B)) << "expert " << e;
  for (int64_t b = used; b < n; ++b) {
    EXPECT_EQ(r.blockToExpert[b], E - 1) << "spare block " << b;
    for (int64_t i = 0; i < B; ++i)
      EXPECT_EQ(r.tokenPositionToId[b * B + i], -1) << "spare block " << b;
  }
}

/// A random selection [T,K]: each row draws K distinct experts from a
/// random subset of at least K experts, so that some experts stay empty.
std::vector<int32_t> randomTopk(std::mt19937_64 &rng, int64_t T, int64_t K,
                                int64_t E) {
  std::vector<int32_t> experts(E);
  for (int64_t e = 0; e < E; ++e)
    experts[e] = static_cast<int32_t>(e);
  std::shuffle(experts.begin(), experts.end(), rng);
  int64_t active = K + static_cast<int64_t>(rng() % (E - K + 1));
  std::vector<int32_t> topk(T * K);
  std::vector<int32_t> pool;
  for (int64_t t = 0; t < T; ++t) {
    pool.assign(experts.begin(), experts.begin() + active);
    for (int64_t k = 0; k < K; ++k) {
      int64_t j = k + static_cast<int64_t>(rng() % (active - k));
      std::swap(pool[k], pool[j]);
      topk[t * K + k] = pool[k];
    }
  }
  return topk;
}

TEST(RoutingNumBlocks, HandValues) {
  // ceil((10 - 2) / 4) + 2.
  EXPECT_EQ(numBlocks(5, 2, 3, 4), 4);
  // E = 1, K = 1: plain ceil(T / B), and at least one block.
  EXPECT_EQ(numBlocks(8, 1, 1, 4), 2);
  EXPECT_EQ(numBlocks(9, 1, 1, 4), 3);
  EXPECT_EQ(numBlocks(1, 1, 1, 128), 1);
  EXPECT_EQ(numBlocks(0, 1, 1, 128), 1);
  EXPECT_EQ(numBlocks(0, 0, 1, 1), 1);
  // Exact multiple, then one pair more: 72 - 8 = 64 = 4 * 16.
  EXPECT_EQ(numBlocks(36, 2, 9, 16), 12);
  EXPECT_EQ(numBlocks(72, 1, 9, 16), 12);
  EXPECT_EQ(numBlocks(73, 1, 9, 16), 13);
  // T*K = E-1: the ceil term is exactly 0.
  EXPECT_EQ(numBlocks(3, 1, 4, 128), 3);
  // T*K < E-1: the real ceiling of a negative numerator, ceil(-9/4) = -2
  // and ceil(-5/4) = -1 (a truncating (n+B-1)/B would give -1 and 0).
  EXPECT_EQ(numBlocks(1, 1, 11, 4), 8);
  EXPECT_EQ(numBlocks(2, 1, 8, 4), 6);
  EXPECT_EQ(numBlocks(0, 4, 8, 128), 7);
  EXPECT_EQ(numBlocks(2, 1, 200, 32), 193);
  // E = 2 with no pairs: E-1 = 1 block.
  EXPECT_EQ(numBlocks(0, 1, 2, 128), 1);
  // A production shape: 32768 - 127 = 32641 -> 256 blocks, + 127.
  EXPECT_EQ(numBlocks(4096, 8, 128, 128), 383);
  // B = 1: every pair its own block.
  EXPECT_EQ(numBlocks(5, 2, 3, 1), 10);
}

TEST(RoutingNumBlocks, RejectsBadShapes) {
  EXPECT_THROW(numBlocks(5, 2, 3, 0), std::invalid_argument);
  EXPECT_THROW(numBlocks(5, 2, 0, 4), std::invalid_argument);
  EXPECT_THROW(numBlocks(-1, 2, 3, 4), std::invalid_argument);
  EXPECT_THROW(numBlocks(5, -1, 3, 4), std::invalid_argument);
}

TEST(RoutingBuild, HandLayoutTopTwo) {
  // T=5, K=2, E=3, B=4. Expert 0: tokens 0,1,3,4 (one full block); expert 1:
  // token 2; expert 2: every token (two blocks). 4 blocks = numBlocks.
  std::vector<int32_t> topk = {2, 0, 0, 2, 2, 1, 0, 2, 2, 0};
  Routing r = buildRouting(topk.data(), 5, 2, 3, 4);
  std::vector<int32_t> ids = {0, 1,  3,  4,  //
                              2, -1, -1, -1, //
                              0, 1,  2,  3,  //
                              4, -1, -1, -1};
  std::vector<int32_t> experts = {0, 1, 2, 2};
  EXPECT_EQ(r.tokenPositionToId, ids);
  EXPECT_EQ(r.blockToExpert, experts);
}

TEST(RoutingBuild, HandLayoutEmptyExpertsAndSpareBlock) {
  // T=5, K=1, E=4, B=2: experts 1 and 2 get nothing and no block; expert 3
  // needs 2 blocks; numBlocks = ceil(2/2) + 3 = 4, so one spare block.
  std::vector<int32_t> topk = {3, 0, 3, 3, 0};
  Routing r = buildRouting(topk.data(), 5, 1, 4, 2);
  std::vector<int32_t> ids = {1, 4, 0, 2, 3, -1, -1, -1};
  std::vector<int32_t> experts = {0, 3, 3, 3};
  EXPECT_EQ(r.tokenPositionToId, ids);
  EXPECT_EQ(r.blockToExpert, experts);
}

TEST(RoutingBuild, HandLayoutSpareBlockOfEmptyLastExpert) {
  // T=3, K=1, E=3, B=2: expert 2 has no tokens, yet owns the spare block.
  std::vector<int32_t> topk = {1, 0, 1};
  Routing r = buildRouting(topk.data(), 3, 1, 3, 2);
  std::vector<int32_t> ids = {1, -1, 0, 2, -1, -1};
  std::vector<int32_t> experts = {0, 1, 2};
  EXPECT_EQ(r.tokenPositionToId, ids);
  EXPECT_EQ(r.blockToExpert, experts);
}

TEST(RoutingBuild, HandLayoutDenseIdentity) {
  // E = 1, K = 1 is the identity routing with a padded last block.
  std::vector<int32_t> topk = {0, 0, 0, 0, 0};
  Routing r = buildRouting(topk.data(), 5, 1, 1, 2);
  std::vector<int32_t> ids = {0, 1, 2, 3, 4, -1};
  std::vector<int32_t> experts = {0, 0, 0};
  EXPECT_EQ(r.tokenPositionToId, ids);
  EXPECT_EQ(r.blockToExpert, experts);
}

TEST(RoutingBuild, NoTokens) {
  Routing r = buildRouting(nullptr, 0, 2, 3, 4);
  EXPECT_EQ(r.tokenPositionToId, std::vector<int32_t>(8, -1));
  EXPECT_EQ(r.blockToExpert, (std::vector<int32_t>{2, 2}));
}

TEST(RoutingBuild, HandWorstCaseTopTwo) {
  // T=6, K=2, E=3, B=4: counts 1, 5, 6 waste 3, 3 and 2 slots, so the 12
  // pairs need all ceil(10/4) + 2 = 5 blocks.
  std::vector<int32_t> topk = {0, 2, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2};
  Routing r = buildRouting(topk.data(), 6, 2, 3, 4);
  std::vector<int32_t> ids = {0, -1, -1, -1, //
                              1, 2,  3,  4,  //
                              5, -1, -1, -1, //
                              0, 1,  2,  3,  //
                              4, 5,  -1, -1};
  std::vector<int32_t> experts = {0, 1, 1, 2, 2};
  EXPECT_EQ(r.tokenPositionToId, ids);
  EXPECT_EQ(r.blockToExpert, experts);
}

TEST(RoutingBuild, AdversarialReachesNumBlocks) {
  // Experts 0..E-2 hold 1 + B*j tokens each (each wastes B-1 slots), the
  // last expert holds the rest: every one of the numBlocks blocks is used.
  // K = 1 places the counts freely; K = 2 adds expert E-1 to every row.
  std::mt19937_64 rng(0x5eed0001);
  for (int iter = 0; iter < 200; ++iter) {
    int64_t E = 2 + static_cast<int64_t>(rng() % 9);
    int64_t B = 1 + static_cast<int64_t>(rng() % 8);
    int64_t K = 1 + static_cast<int64_t>(rng() % 2);
    std::vector<int32_t> chosen;
    for (int64_t e = 0; e + 1 < E; ++e) {
      int64_t c = 1 + B * static_cast<int64_t>(rng() % 3);
      chosen.insert(chosen.end(), c, static_cast<int32_t>(e));
    }
    if (K == 1) {
      int64_t last = static_cast<int64_t>(rng() % (3 * B));
      chosen.insert(chosen.end(), last, static_cast<int32_t>(E - 1));
    }
    std::shuffle(chosen.begin(), chosen.end(), rng);
    int64_t T = static_cast<int64_t>(chosen.size());
    std::vector<int32_t> topk;
    for (int32_t e : chosen) {
      topk.push_back(e);
      if (K == 2)
        topk.push_back(static_cast<int32_t>(E - 1));
    }
    Routing r = buildRouting(topk.data(), T, K, E, B);
    SCOPED_TRACE("E=" + std::to_string(E) + " B=" + std::to_string(B) +
                 " K=" + std::to_string(K) + " T=" + std::to_string(T));
    expectCanonical(r, topk, T, K, E, B);
    // No spare block: the last block holds a token.
    int64_t n = numBlocks(T, K, E, B);
    EXPECT_NE(r.tokenPositionToId[(n - 1) * B], -1);
  }
}

TEST(RoutingBuild, AdversarialFewerPairsThanExperts) {
  // T*K < E-1: each routed expert wastes a block's worth; numBlocks =
  // ceil((3 - 7) / 4) + 7 = 6 still covers them and the rest is spare.
  std::vector<int32_t> topk = {4, 1, 6};
  Routing r = buildRouting(topk.data(), 3, 1, 8, 4);
  ASSERT_EQ(r.blockToExpert, (std::vector<int32_t>{1, 4, 6, 7, 7, 7}));
  expectCanonical(r, topk, 3, 1, 8, 4);
}

TEST(RoutingBuild, RandomRoutingsMeetTheContract) {
  std::mt19937_64 rng(0x5eed0002);
  const int64_t blockSizes[] = {1, 2, 3, 4, 8, 32};
  for (int iter = 0; iter < 300; ++iter) {
    int64_t E = 1 + static_cast<int64_t>(rng() % 9);
    int64_t K = 1 + static_cast<int64_t>(rng() % std::min<int64_t>(E, 4));
    int64_t T = static_cast<int64_t>(rng() % 61);
    int64_t B = blockSizes[rng() % 6];
    std::vector<int32_t> topk = randomTopk(rng, T, K, E);
    SCOPED_TRACE("E=" + std::to_string(E) + " B=" + std::to_string(B) +
                 " K=" + std::to_string(K) + " T=" + std::to_string(T));
    Routing r = buildRouting(topk.data(), T, K, E, B);
    expectCanonical(r, topk, T, K, E, B);

    // The order of experts within a row does not matter.
    std::vector<int32_t> permuted = topk;
    for (int64_t t = 0; t < T; ++t)
      std::shuffle(permuted.begin() + t * K, permuted.begin() + (t + 1) * K,
                   rng);
    Routing again = buildRouting(permuted.data(), T, K, E, B);
    EXPECT_EQ(again.tokenPositionToId, r.tokenPositionToId);
    EXPECT_EQ(again.blockToExpert, r.blockToExpert);
  }
}

TEST(RoutingBuild, RejectsBadIndices) {
  std::vector<int32_t> outOfRange = {0, 1, 2, 3};
  std::string msg =
      invalidArgumentOf([&] { buildRouting(outOfRange.data(), 2, 2, 3, 4); });
  EXPECT_TRUE(contains(msg, "t=1, k=1"));
  EXPECT_TRUE(contains(msg, "outside [0, 3)"));

  std::vector<int32_t> negative = {0, 1, -1, 2};
  msg = invalidArgumentOf([&] { buildRouting(negative.data(), 2, 2, 3, 4); });
  EXPECT_TRUE(contains(msg, "t=1, k=0"));

  // Token 1 repeats expert 0; token 0 using expert 0 too is fine.
  std::vector<int32_t> duplicate = {0, 2, 1, 0, 0};
  msg = invalidArgumentOf([&] { buildRouting(duplicate.data(), 1, 5, 3, 4); });
  EXPECT_TRUE(contains(msg, "t=0, k=3"));
  EXPECT_TRUE(contains(msg, "repeats topkIdx[t=0, k=0]"));
  std::vector<int32_t> rows = {0, 2, 1, 0, 2, 2};
  msg = invalidArgumentOf([&] { buildRouting(rows.data(), 3, 2, 3, 4); });
  EXPECT_TRUE(contains(msg, "t=2, k=1"));

  EXPECT_THROW(buildRouting(rows.data(), 3, 2, 3, 0), std::invalid_argument);
}

TEST(RoutingMaskedAffinities, HandValues) {
  std::vector<int32_t> topk = {2, 0, 1, 2};
  std::vector<double> scores = {0.75, 0.25, 0.625, 0.375};
  std::vector<double> a = maskedAffinities(topk.data(), scores.data(), 2, 2, 3);
  std::vector<double> expected = {0.25, 0.0, 0.75, 0.0, 0.625, 0.375};
  EXPECT_EQ(a, expected);

  std::vector<int32_t> bad = {2, 2, 1, 0};
  std::string msg = invalidArgumentOf(
      [&] { maskedAffinities(bad.data(), scores.data(), 2, 2, 3); });
  EXPECT_TRUE(contains(msg, "t=0, k=1"));
}

/// A valid layout to break: T=5, E=4, B=2, as in the hand test with a
/// spare block.
Routing validLayout() {
  Routing r;
  r.tokenPositionToId = {1, 4, 0, 2, 3, -1, -1, -1};
  r.blockToExpert = {0, 3, 3, 3};
  return r;
}

TEST(RoutingVerify, AcceptsValidLayouts) {
  EXPECT_EQ(verifyRouting(validLayout(), 5, 4, 2), "");
  // A token in two experts (K = 2) and a padded expert followed by another.
  Routing r;
  r.tokenPositionToId = {0, 1, 3, 4, 2, -1, -1, -1, //
                         0, 1, 2, 3, 4, -1, -1, -1};
  r.blockToExpert = {0, 1, 2, 2};
  EXPECT_EQ(verifyRouting(r, 5, 3, 4), "");
}

TEST(RoutingVerify, RejectsSizeMismatch) {
  Routing r = validLayout();
  r.tokenPositionToId.pop_back();
  EXPECT_TRUE(contains(verifyRouting(r, 5, 4, 2), "size mismatch"));
  // Right for B = 2, wrong for B = 3.
  EXPECT_TRUE(contains(verifyRouting(validLayout(), 5, 4, 3), "size"));
}

TEST(RoutingVerify, RejectsBadShape) {
  EXPECT_TRUE(contains(verifyRouting(validLayout(), 5, 4, 0), "bad shape"));
  EXPECT_TRUE(contains(verifyRouting(validLayout(), 5, 0, 2), "bad shape"));
}

TEST(RoutingVerify, RejectsExpertOutOfRange) {
  Routing r = validLayout();
  r.blockToExpert[3] = 4;
  std::string msg = verifyRouting(r, 5, 4, 2);
  EXPECT_TRUE(contains(msg, "block 3:"));
  EXPECT_TRUE(contains(msg, "outside [0, 4)"));
  r = validLayout();
  r.blockToExpert[0] = -1;
  EXPECT_TRUE(contains(verifyRouting(r, 5, 4, 2), "block 0:"));
}

TEST(RoutingVerify, RejectsDecreasingExperts) {
  Routing r = validLayout();
  r.blockToExpert[2] = 2;
  std::string msg = verifyRouting(r, 5, 4, 2);
  EXPECT_TRUE(contains(msg, "block 2:"));
  EXPECT_TRUE(contains(msg, "must not decrease"));
}

TEST(RoutingVerify, RejectsTokenIdOutOfRange) {
  Routing r = validLayout();
  r.tokenPositionToId[3] = 5;
  std::string msg = verifyRouting(r, 5, 4, 2);
  EXPECT_TRUE(contains(msg, "slot 3 (block 1)"));
  EXPECT_TRUE(contains(msg, "outside [-1, 5)"));
  r = validLayout();
  r.tokenPositionToId[0] = -2;
  EXPECT_TRUE(contains(verifyRouting(r, 5, 4, 2), "slot 0 (block 0)"));
}

TEST(RoutingVerify, RejectsDescendingTokens) {
  // Within a block.
  Routing r = validLayout();
  std::swap(r.tokenPositionToId[2], r.tokenPositionToId[3]);
  std::string msg = verifyRouting(r, 5, 4, 2);
  EXPECT_TRUE(contains(msg, "slot 3 (block 1)"));
  EXPECT_TRUE(contains(msg, "strictly ascend"));
  // Across two blocks of one expert.
  r = validLayout();
  r.tokenPositionToId[4] = 1;
  EXPECT_TRUE(contains(verifyRouting(r, 5, 4, 2), "slot 4 (block 2)"));
}

TEST(RoutingVerify, RejectsTokenTwiceInOneExpert) {
  Routing r = validLayout();
  r.tokenPositionToId[4] = 2;
  std::string msg = verifyRouting(r, 5, 4, 2);
  EXPECT_TRUE(contains(msg, "slot 4 (block 2)"));
  EXPECT_TRUE(contains(msg, "token 2"));
}

TEST(RoutingVerify, RejectsPaddingBeforeTokens) {
  // Padding inside a block, then a token in the next block of the expert.
  Routing r = validLayout();
  r.tokenPositionToId[3] = -1;
  std::string msg = verifyRouting(r, 5, 4, 2);
  EXPECT_TRUE(contains(msg, "slot 4 (block 2)"));
  EXPECT_TRUE(contains(msg, "follows padding"));
  // Padding first in a block, token after it.
  r = validLayout();
  r.tokenPositionToId = {1, 4, 0, 2, -1, 3, -1, -1};
  EXPECT_TRUE(contains(verifyRouting(r, 5, 4, 2), "slot 5 (block 2)"));
}

} // namespace
