//===- Routing.h - top-k routing to the blocked layout -----------*- C++ -*-===//
//
// The blocked routing layout of SPEC section 4 (the NKI contract) and the
// deterministic builder that `moe.route` is specified by.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_REFERENCE_ROUTING_H
#define MOE_REFERENCE_ROUTING_H

#include <cstdint>
#include <string>
#include <vector>

namespace moe::ref {

/// N = ceil((T*K - (E-1)) / B) + E - 1, at least 1: the worst case over all
/// routings, since an expert wastes at most B-1 slots of its last block.
int64_t numBlocks(int64_t T, int64_t K, int64_t E, int64_t B);

/// The blocked layout: slot -> token id (-1 = padding), block -> expert.
struct Routing {
  std::vector<int32_t> tokenPositionToId; ///< [N*B]
  std::vector<int32_t> blockToExpert;     ///< [N]
};

/// Builds the blocked layout from top-k expert indices [T,K] (row-major).
/// Experts in ascending order; each expert's tokens in ascending token id
/// fill consecutive blocks from its first block; an expert without tokens
/// gets no block; spare blocks at the end belong to expert E-1 and hold only
/// padding. Indices must be in [0, E) and distinct within a token's row;
/// otherwise throws std::invalid_argument naming the token and k. Shapes
/// with T < 0, K < 0, E < 1 or B < 1 throw it too, here and in numBlocks.
Routing buildRouting(const int32_t *topkIdx, int64_t T, int64_t K, int64_t E,
                     int64_t B);

/// Masked affinities [T*E]: a[t*E + idx[t,k]] = scores[t,k], zero elsewhere.
/// Rejects indices like buildRouting does.
std::vector<double> maskedAffinities(const int32_t *topkIdx,
                                     const double *topkScores, int64_t T,
                                     int64_t K, int64_t E);

/// Checks a layout against the contract for T tokens, E experts and block
/// size B: sizes, ids in range, expert order, token order within an expert,
/// no token twice per expert, padding only at the end of an expert's run.
/// Returns an empty string when valid, else a message naming the slot/block.
std::string verifyRouting(const Routing &routing, int64_t T, int64_t E,
                          int64_t B);

} // namespace moe::ref

#endif // MOE_REFERENCE_ROUTING_H
