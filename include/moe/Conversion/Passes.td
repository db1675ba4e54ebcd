//===- Passes.td - conversions out of the moe dialect ------*- tablegen -*-===//
//
// Lowerings of moe ops to upstream dialects.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_PASSES_TD
#define MOE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoeToLinalg : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower moe phase-level ops to linalg, tensor, scf, arith and math";
  let description = [{
    The host (reference) lowering: inlines `moe.fused` regions and rewrites
    every slot-space op into destination-passing linalg / tensor / scf code
    on tensors, with the MX numerics built by the shared IR builders
    (moe/Dialect/Moe/Utils/MXBuilders.h), so that one-shot bufferization
    and the standard loop lowering take it to LLVM.
  }];
  let options = [
    Option<"readOnlyInputs", "read-only-inputs", "bool", /*default=*/"true",
           "Mark the tensor arguments of every func.func "
           "`bufferization.writable = false`, so that one-shot "
           "bufferization never writes into a caller's input buffer (it "
           "would, e.g., for an elementwise op whose result reuses an "
           "argument as its destination)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // MOE_CONVERSION_PASSES_TD
