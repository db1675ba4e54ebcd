//===- Passes.h - GPU-side transforms of the lowered moe IR -----*- C++ -*-===//
//
// The passes of moe/GPU/Transforms/Passes.td: launch lowering, loop shape,
// device buffers and streams of the GPU pipelines.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_GPU_TRANSFORMS_PASSES_H
#define MOE_GPU_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir::moe {

#define GEN_PASS_DECL
#include "moe/GPU/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "moe/GPU/Transforms/Passes.h.inc"

} // namespace mlir::moe

#endif // MOE_GPU_TRANSFORMS_PASSES_H
