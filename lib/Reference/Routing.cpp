//===- Routing.cpp - top-k routing to the blocked layout ------------------===//
//
// The deterministic builder of the blocked routing layout (SPEC section 4)
// that `moe.route` is specified by, the block count every routing fits in,
// the masked affinity matrix, and a checker for layouts that come from
// elsewhere (files, compiled code).
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Routing.h"

#include <cassert>
#include <sstream>
#include <stdexcept>

namespace moe::ref {

namespace {

/// Throws std::invalid_argument unless every index of the [T,K] selection
/// lies in [0, E) and no expert appears twice in one token's row. The
/// message names the offending token and k so a bad routing is easy to find.
void checkTopkIdx(const int32_t *topkIdx, int64_t T, int64_t K, int64_t E) {
  // seenAt[e] is the flat position (t*K + k) where expert e was last seen;
  // anything before the current row start is a previous token's.
  std::vector<int64_t> seenAt(E, -1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t pos = t * K + k;
      int32_t e = topkIdx[pos];
      if (e < 0 || e >= E) {
        std::ostringstream os;
        os << "topkIdx[t=" << t << ", k=" << k << "] = " << e
           << " is outside [0, " << E << ")";
        throw std::invalid_argument(os.str());
      }
      if (seenAt[e] >= t * K) {
        std::ostringstream os;
        os << "topkIdx[t=" << t << ", k=" << k << "] = " << e
           << " repeats topkIdx[t=" << t << ", k=" << seenAt[e] - t * K << "]";
        throw std::invalid_argument(os.str());
      }
      seenAt[e] = pos;
    }
  }
}

/// Rejects shapes no routing can have.
void checkShape(int64_t T, int64_t K, int64_t E, int64_t B) {
  if (T < 0 || K < 0 || E < 1 || B < 1) {
    std::ostringstream os;
    os << "bad routing shape T=" << T << " K=" << K << " E=" << E << " B=" << B
       << " (need T >= 0, K >= 0, E >= 1, B >= 1)";
    throw std::invalid_argument(os.str());
  }
}

} // namespace

int64_t numBlocks(int64_t T, int64_t K, int64_t E, int64_t B) {
  checkShape(T, K, E, B);
  // The contract's ceiling is the real one, also for a negative numerator
  // (fewer routed pairs than E-1): ceil(-r / B) = -floor(r / B). That N
  // still covers every routing, since at most T*K experts own a block.
  int64_t rest = T * K - (E - 1);
  int64_t ceilTerm = rest >= 0 ? (rest + B - 1) / B : -((-rest) / B);
  int64_t n = ceilTerm + E - 1;
  return n < 1 ? 1 : n;
}

Routing buildRouting(const int32_t *topkIdx, int64_t T, int64_t K, int64_t E,
                     int64_t B) {
  checkShape(T, K, E, B);
  checkTopkIdx(topkIdx, T, K, E);

  // Bucket the tokens per expert. Walking tokens in ascending id keeps each
  // bucket ascending, which is the order the layout requires.
  std::vector<std::vector<int32_t>> tokensOf(E);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      tokensOf[topkIdx[t * K + k]].push_back(static_cast<int32_t>(t));

  int64_t n = numBlocks(T, K, E, B);
  Routing routing;
  routing.tokenPositionToId.assign(n * B, -1);
  routing.blockToExpert.assign(n, static_cast<int32_t>(E - 1));

  int64_t block = 0;
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int32_t> &tokens = tokensOf[e];
    int64_t count = static_cast<int64_t>(tokens.size());
    int64_t blocks = (count + B - 1) / B;
    // Never out of range: with m non-empty experts holding S = T*K pairs,
    // sum ceil(c/B) = m + sum floor((c-1)/B) <= m + floor((S-m)/B)
    // = ceil((S-m+1)/B) + m - 1, which does not decrease in m and equals
    // numBlocks at m = E (and is at most S <= E-1 when S < E).
    assert(block + blocks <= n && "routing needs more than numBlocks blocks");
    for (int64_t i = 0; i < count; ++i)
      routing.tokenPositionToId[block * B + i] = tokens[i];
    for (int64_t b = 0; b < blocks; ++b)
      routing.blockToExpert[block + b] = static_cast<int32_t>(e);
    block += blocks;
  }
  return routing;
}

std::vector<double> maskedAffinities(const int32_t *topkIdx,
                                     const double *topkScores, int64_t T,
                                     int64_t K, int64_t E) {
  checkShape(T, K, E, /*B=*/1);
  checkTopkIdx(topkIdx, T, K, E);
  std::vector<double> a(T * E, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      a[t * E + topkIdx[t * K + k]] = topkScores[t * K + k];
  return a;
}

std::string verifyRouting(const Routing &routing, int64_t T, int64_t E,
                          int64_t B) {
  std::ostringstream os;
  if (T < 0 || E < 1 || B < 1) {
    os << "bad shape T=" << T << " E=" << E << " B=" << B;
    return os.str();
  }
  const std::vector<int32_t> &ids = routing.tokenPositionToId;
  const std::vector<int32_t> &experts = routing.blockToExpert;
  int64_t n = static_cast<int64_t>(experts.size());
  if (static_cast<int64_t>(ids.size()) != n * B) {
    os << "size mismatch: tokenPositionToId has " << ids.size()
       << " slots, expected " << n << " blocks * B=" << B << " = " << n * B;
    return os.str();
  }

  // State of the current expert's run of blocks: the last token seen in it
  // and whether padding has started.
  int32_t lastToken = -1;
  bool inPadding = false;
  for (int64_t b = 0; b < n; ++b) {
    int32_t e = experts[b];
    if (e < 0 || e >= E) {
      os << "block " << b << ": expert " << e << " is outside [0, " << E << ")";
      return os.str();
    }
    if (b > 0 && e < experts[b - 1]) {
      os << "block " << b << ": expert " << e << " follows expert "
         << experts[b - 1] << " (experts must not decrease)";
      return os.str();
    }
    if (b == 0 || e != experts[b - 1]) {
      lastToken = -1;
      inPadding = false;
    }
    for (int64_t i = 0; i < B; ++i) {
      int64_t slot = b * B + i;
      int32_t id = ids[slot];
      if (id < -1 || id >= T) {
        os << "slot " << slot << " (block " << b << "): token id " << id
           << " is outside [-1, " << T << ")";
        return os.str();
      }
      if (id == -1) {
        inPadding = true;
        continue;
      }
      if (inPadding) {
        os << "slot " << slot << " (block " << b << "): token " << id
           << " follows padding in the run of expert " << e;
        return os.str();
      }
      if (id <= lastToken) {
        os << "slot " << slot << " (block " << b << "): token " << id
           << " does not exceed the previous token " << lastToken
           << " of expert " << e << " (tokens must strictly ascend)";
        return os.str();
      }
      lastToken = id;
    }
  }
  return "";
}

} // namespace moe::ref
