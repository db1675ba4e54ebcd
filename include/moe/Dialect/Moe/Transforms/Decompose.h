//===- Decompose.h - decomposition of moe.blockwise_bwd ---------*- C++ -*-===//
//
// The rewrite behind moe-decompose-bwd, exposed as a pattern so that other
// drivers (a pipeline's own pattern set, a test pass) can apply it too.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_TRANSFORMS_DECOMPOSE_H
#define MOE_DIALECT_MOE_TRANSFORMS_DECOMPOSE_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::moe {

/// Adds the pattern that rewrites every moe.blockwise_bwd into the
/// phase-level ops (gathers, MX quantizations, the GEMMs of the
/// recomputation and of P1..P4, the activation backward and the reductions)
/// that compute R_mx of docs/numerics.md.
void populateDecomposeBwdPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe

#endif // MOE_DIALECT_MOE_TRANSFORMS_DECOMPOSE_H
