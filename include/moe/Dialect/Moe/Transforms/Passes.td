//===- Passes.td - moe dialect transformations -------------*- tablegen -*-===//
//
// The passes that rewrite moe IR within the dialect: the decomposition of the
// composite op into phase-level ops and the formation of kernel regions.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_TRANSFORMS_PASSES_TD
#define MOE_DIALECT_MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeDecomposeBwd : Pass<"moe-decompose-bwd"> {
  let summary = "Decompose moe.blockwise_bwd into phase-level ops";
  let description = [{
    Rewrites every `moe.blockwise_bwd` into the slot-space ops of the
    decomposed form: row gathers, the recomputation of g and u (or the
    unpacked checkpoint), the four GEMMs P1..P4 as `moe.block_matmul` /
    `moe.expert_matmul`, every operand's MX quantization made explicit as
    `moe.mx_quantize` on the axis its GEMM contracts (SPEC section 5), the
    gated activation backward with clamp masks, the affinity-gradient
    reduction, the dx scatter-add and the bias reductions. The result
    computes exactly what docs/numerics.md specifies for R_mx.
  }];
  let dependentDialects = [
    "::mlir::moe::MoeDialect", "::mlir::arith::ArithDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def MoeFuse : Pass<"moe-fuse"> {
  let summary = "Group each GEMM with its prologue and epilogue into a kernel region";
  let description = [{
    Forms one `moe.fused` region per GEMM of the decomposed form, moving in
    the producers of its operands (row gathers, slot affinities, scalings,
    quantizations of activations) and the consumers of its result (the
    activation backward, the affinity-gradient reduction and both MX
    quantizations of [dg|du] after P1; the dx scatter-add after P2). This is
    the form the GPU lowering consumes; the host lowering inlines it.
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

#endif // MOE_DIALECT_MOE_TRANSFORMS_PASSES_TD
