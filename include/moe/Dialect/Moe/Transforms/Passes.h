//===- Passes.h - moe dialect transformations ---------------------*- C++ -*-===//
//
// Declarations of the passes in Passes.td.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_TRANSFORMS_PASSES_H
#define MOE_DIALECT_MOE_TRANSFORMS_PASSES_H

#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir::moe {

#define GEN_PASS_DECL
#include "moe/Dialect/Moe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "moe/Dialect/Moe/Transforms/Passes.h.inc"

} // namespace mlir::moe

#endif // MOE_DIALECT_MOE_TRANSFORMS_PASSES_H
