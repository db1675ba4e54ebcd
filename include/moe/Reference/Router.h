//===- Router.h - router forward and backward (top-k + softmax) --*- C++ -*-===//
//
// The router in front of the layer (SPEC section 3, SonicMoE's
// _topk_softmax_bwd): logits [T,E] -> top-k indices and scores [T,K], and the
// gradient of the logits from the gradient of the scores.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_REFERENCE_ROUTER_H
#define MOE_REFERENCE_ROUTER_H

#include <cstdint>
#include <vector>

namespace moe::ref {

enum class RouterMode {
  /// s = softmax(logits[topk]).
  TopKThenSoftmax,
  /// s = softmax(logits)[topk] (no renormalization).
  SoftmaxThenTopK,
  /// s = softmax(logits)[topk] / sum(softmax(logits)[topk]) (Qwen3 style).
  /// Equal to TopKThenSoftmax in exact arithmetic, so the unselected logits'
  /// gradient is zero up to rounding.
  SoftmaxThenTopKRenorm,
};

/// Top-k selection and scores of one router. Selection: the K largest logits
/// per token, ties to the lower expert index, listed by descending logit.
struct RouterOutput {
  std::vector<int32_t> topkIdx;   ///< [T,K]
  std::vector<double> topkScores; ///< [T,K]
};

/// Throws std::invalid_argument unless 1 <= K <= E and every logit is
/// finite.
RouterOutput routerForward(const double *logits, int64_t T, int64_t E,
                           int64_t K, RouterMode mode);

/// dlogits [T,E] from dscores [T,K] for the selection in `topkIdx`, with
/// the formulas of SPEC section 3 (fp64). Throws std::invalid_argument for
/// an index outside [0, E) or repeated within a token's row.
std::vector<double> routerBackward(const double *logits,
                                   const int32_t *topkIdx,
                                   const double *dScores, int64_t T, int64_t E,
                                   int64_t K, RouterMode mode);

/// dscores[t,k] = da[t*E + idx[t,k]]: the affinity gradient restricted to
/// the selection.
std::vector<double> gatherScoreGrad(const double *da, const int32_t *topkIdx,
                                    int64_t T, int64_t E, int64_t K);

} // namespace moe::ref

#endif // MOE_REFERENCE_ROUTER_H
