//===- Router.cpp - router forward and backward (top-k + softmax) ---------===//
//
// The router in front of the layer, in fp64: top-k selection and scores in
// the three modes of Router.h, and the logit gradient of SPEC section 3
// (SonicMoE's _topk_softmax_bwd), against which the compiled router
// backward and the finite-difference tests are checked.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Router.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace moe::ref {

namespace {

/// Rejects shapes without a valid top-k selection.
void checkShape(int64_t T, int64_t E, int64_t K) {
  if (T < 0 || E < 1 || K < 1 || K > E) {
    std::ostringstream os;
    os << "bad router shape T=" << T << " E=" << E << " K=" << K
       << " (need T >= 0, E >= 1, 1 <= K <= E)";
    throw std::invalid_argument(os.str());
  }
}

/// Throws std::invalid_argument unless every selected index lies in [0, E)
/// and is distinct within its token's row; a repeated expert would make the
/// scatter into dlogits ambiguous.
void checkTopkIdx(const int32_t *topkIdx, int64_t T, int64_t E, int64_t K) {
  for (int64_t t = 0; t < T; ++t) {
    const int32_t *row = topkIdx + t * K;
    for (int64_t k = 0; k < K; ++k) {
      std::ostringstream os;
      if (row[k] < 0 || row[k] >= E) {
        os << "topkIdx[t=" << t << ", k=" << k << "] = " << row[k]
           << " is outside [0, " << E << ")";
        throw std::invalid_argument(os.str());
      }
      for (int64_t j = 0; j < k; ++j) {
        if (row[j] == row[k]) {
          os << "topkIdx[t=" << t << ", k=" << k << "] = " << row[k]
             << " repeats topkIdx[t=" << t << ", k=" << j << "]";
          throw std::invalid_argument(os.str());
        }
      }
    }
  }
}

/// Softmax over all E logits of one token. The maximum is subtracted first
/// so that exp never overflows; the result is the same in exact arithmetic.
std::vector<double> softmaxRow(const double *logits, int64_t E) {
  double m = *std::max_element(logits, logits + E);
  std::vector<double> p(E);
  double sum = 0.0;
  for (int64_t e = 0; e < E; ++e) {
    p[e] = std::exp(logits[e] - m);
    sum += p[e];
  }
  for (double &v : p)
    v /= sum;
  return p;
}

/// Softmax over the K selected logits of one token, max-subtracted.
std::vector<double> softmaxSelected(const double *logits, const int32_t *idx,
                                    int64_t K) {
  double m = logits[idx[0]];
  for (int64_t k = 1; k < K; ++k)
    m = std::max(m, logits[idx[k]]);
  std::vector<double> s(K);
  double sum = 0.0;
  for (int64_t k = 0; k < K; ++k) {
    s[k] = std::exp(logits[idx[k]] - m);
    sum += s[k];
  }
  for (double &v : s)
    v /= sum;
  return s;
}

/// The scores of one token in `mode` for the selection `idx`.
std::vector<double> scoresRow(const double *logits, const int32_t *idx,
                              int64_t E, int64_t K, RouterMode mode) {
  if (mode == RouterMode::TopKThenSoftmax)
    return softmaxSelected(logits, idx, K);
  std::vector<double> p = softmaxRow(logits, E);
  std::vector<double> s(K);
  double sum = 0.0;
  for (int64_t k = 0; k < K; ++k) {
    s[k] = p[idx[k]];
    sum += s[k];
  }
  if (mode == RouterMode::SoftmaxThenTopKRenorm)
    for (double &v : s)
      v /= sum;
  return s;
}

} // namespace

RouterOutput routerForward(const double *logits, int64_t T, int64_t E,
                           int64_t K, RouterMode mode) {
  checkShape(T, E, K);
  // A NaN would break the strict ordering the selection sorts by, and an
  // infinity turns the max-subtracted softmax into NaN.
  for (int64_t i = 0; i < T * E; ++i) {
    if (!std::isfinite(logits[i])) {
      std::ostringstream os;
      os << "logits[t=" << i / E << ", e=" << i % E << "] is not finite";
      throw std::invalid_argument(os.str());
    }
  }

  RouterOutput out;
  out.topkIdx.resize(T * K);
  out.topkScores.resize(T * K);
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    const double *row = logits + t * E;
    std::iota(order.begin(), order.end(), 0);
    // Descending logit, ties to the lower expert: a strict total order, so
    // the selection does not depend on the sort algorithm.
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [row](int32_t a, int32_t b) {
                        return row[a] > row[b] || (row[a] == row[b] && a < b);
                      });
    std::copy(order.begin(), order.begin() + K, out.topkIdx.begin() + t * K);
    std::vector<double> s =
        scoresRow(row, out.topkIdx.data() + t * K, E, K, mode);
    std::copy(s.begin(), s.end(), out.topkScores.begin() + t * K);
  }
  return out;
}

std::vector<double> routerBackward(const double *logits, const int32_t *topkIdx,
                                   const double *dScores, int64_t T, int64_t E,
                                   int64_t K, RouterMode mode) {
  checkShape(T, E, K);
  checkTopkIdx(topkIdx, T, E, K);
  std::vector<double> dLogits(T * E, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const double *row = logits + t * E;
    const int32_t *idx = topkIdx + t * K;
    const double *ds = dScores + t * K;
    double *dl = dLogits.data() + t * E;

    if (mode == RouterMode::TopKThenSoftmax) {
      // Softmax backward restricted to the selection; the other logits do
      // not reach the scores, so their gradient stays zero.
      std::vector<double> s = softmaxSelected(row, idx, K);
      double dot = 0.0;
      for (int64_t k = 0; k < K; ++k)
        dot += ds[k] * s[k];
      for (int64_t k = 0; k < K; ++k)
        dl[idx[k]] = s[k] * (ds[k] - dot);
      continue;
    }

    std::vector<double> p = softmaxRow(row, E);
    std::vector<double> dpSel(ds, ds + K);
    if (mode == RouterMode::SoftmaxThenTopKRenorm) {
      // s = p_sel / P with P = sum(p_sel): ds/dp_sel[j] = (delta - s) / P.
      double pSum = 0.0;
      for (int64_t k = 0; k < K; ++k)
        pSum += p[idx[k]];
      double dot = 0.0;
      for (int64_t k = 0; k < K; ++k)
        dot += ds[k] * (p[idx[k]] / pSum);
      for (int64_t k = 0; k < K; ++k)
        dpSel[k] = (ds[k] - dot) / pSum;
    }
    // Full softmax backward with dp zero off the selection.
    double dot = 0.0;
    for (int64_t k = 0; k < K; ++k)
      dot += dpSel[k] * p[idx[k]];
    for (int64_t e = 0; e < E; ++e)
      dl[e] = -p[e] * dot;
    for (int64_t k = 0; k < K; ++k)
      dl[idx[k]] = p[idx[k]] * (dpSel[k] - dot);
  }
  return dLogits;
}

std::vector<double> gatherScoreGrad(const double *da, const int32_t *topkIdx,
                                    int64_t T, int64_t E, int64_t K) {
  checkShape(T, E, K);
  checkTopkIdx(topkIdx, T, E, K);
  std::vector<double> dScores(T * K);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      dScores[t * K + k] = da[t * E + topkIdx[t * K + k]];
  return dScores;
}

} // namespace moe::ref
