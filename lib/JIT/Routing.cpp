//===- Routing.cpp - the input helpers of the JIT API ---------------------===//
//
// buildRouting, maskedAffinities and quantizeMX of MoeJIT.h: the reference
// model's builders (lib/Reference/Routing.cpp, which moe.route is
// specified by, and lib/Reference/MX.cpp, the MX numerics) behind the
// API's argument checks. The checks come first because the reference
// throws on bad input and this library is built without exceptions.
//
//===----------------------------------------------------------------------===//
#include "moe/JIT/MoeJIT.h"

#include "moe/Reference/MX.h"
#include "moe/Reference/Routing.h"

#include <string>
#include <vector>

namespace moe::jit {

namespace {

/// The errors buildRouting and maskedAffinities share; empty when the
/// arguments are valid.
std::string checkTopK(const char *api, const int32_t *topkIdx, int64_t T,
                      int64_t K, int64_t E) {
  std::string prefix = std::string(api) + ": ";
  if (T < 0 || K < 0)
    return prefix + "T = " + std::to_string(T) + " and K = " +
           std::to_string(K) + " must not be negative";
  if (E < 1)
    return prefix + "E = " + std::to_string(E) + " must be positive";
  if (T > 0 && K > 0 && !topkIdx)
    return prefix + "null top-k indices";
  std::vector<int64_t> lastRow(E, -1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      int32_t e = topkIdx[t * K + k];
      std::string where = "token " + std::to_string(t) + ", k = " +
                          std::to_string(k) + ": expert " + std::to_string(e);
      if (e < 0 || e >= E)
        return prefix + where + " is outside [0, " + std::to_string(E) + ")";
      if (lastRow[e] == t)
        return prefix + where + " appears twice in the token's row";
      lastRow[e] = t;
    }
  return std::string();
}

} // namespace

Expected<RoutingLayout> buildRouting(const int32_t *topkIdx, int64_t T,
                                     int64_t K, int64_t E, int64_t B) {
  if (std::string error = checkTopK("buildRouting", topkIdx, T, K, E);
      !error.empty())
    return Status::error(error);
  if (B < 1)
    return Status::error("buildRouting: B = " + std::to_string(B) +
                         " must be positive");
  ::moe::ref::Routing routing =
      ::moe::ref::buildRouting(topkIdx, T, K, E, B);
  return RoutingLayout{std::move(routing.tokenPositionToId),
                       std::move(routing.blockToExpert)};
}

Expected<std::vector<float>> maskedAffinities(const int32_t *topkIdx,
                                              const float *topkScores,
                                              int64_t T, int64_t K,
                                              int64_t E) {
  if (std::string error = checkTopK("maskedAffinities", topkIdx, T, K, E);
      !error.empty())
    return Status::error(error);
  if (T > 0 && K > 0 && !topkScores)
    return Status::error("maskedAffinities: null top-k scores");
  std::vector<double> scores(topkScores, topkScores + T * K);
  std::vector<double> masked =
      ::moe::ref::maskedAffinities(topkIdx, scores.data(), T, K, E);
  return std::vector<float>(masked.begin(), masked.end());
}

Expected<MXQuantized> quantizeMX(const float *values, int64_t rows,
                                 int64_t cols, Quant quant, ScaleRule rule) {
  if (quant == Quant::None)
    return Status::error("quantizeMX: quant none has no MX codes");
  if (rows < 0 || cols < 0 || cols % 32)
    return Status::error("quantizeMX: [" + std::to_string(rows) + ", " +
                         std::to_string(cols) +
                         "] must have non-negative sizes and a multiple of "
                         "32 columns");
  if (rows > 0 && cols > 0 && !values)
    return Status::error("quantizeMX: null values");
  ::moe::ref::MXElem elem = quant == Quant::E4M3 ? ::moe::ref::MXElem::E4M3
                                                 : ::moe::ref::MXElem::E5M2;
  ::moe::ref::ScaleRule refRule =
      rule == ScaleRule::RCeil   ? ::moe::ref::ScaleRule::RCeil
      : rule == ScaleRule::Floor ? ::moe::ref::ScaleRule::Floor
                                 : ::moe::ref::ScaleRule::FloorAlt;
  ::moe::ref::MXMatrix m = ::moe::ref::quantizeMatrix(
      values, rows, cols, /*axis=*/1, elem, refRule);
  return MXQuantized{std::move(m.codes), std::move(m.scales)};
}

} // namespace moe::jit
