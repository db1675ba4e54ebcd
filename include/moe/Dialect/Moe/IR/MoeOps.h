//===- MoeOps.h - ops of the moe dialect --------------------------*- C++ -*-===//
//
// Declares moe.blockwise_bwd and moe.route.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_IR_MOEOPS_H
#define MOE_DIALECT_MOE_IR_MOEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "moe/Dialect/Moe/IR/MoeDialect.h"

#define GET_OP_CLASSES
#include "moe/Dialect/Moe/IR/MoeOps.h.inc"

namespace mlir::moe {

/// N = ceil((T*K - (E-1)) / B) + E - 1 (at least 1): the number of blocks
/// of the routing layout, the worst case over all routings of T tokens to K
/// of E experts in blocks of B slots.
int64_t computeNumBlocks(int64_t T, int64_t K, int64_t E, int64_t B);

/// True for the MX element types (f8E4M3FN, f8E5M2).
bool isMXElementType(Type type);

} // namespace mlir::moe

#endif // MOE_DIALECT_MOE_IR_MOEOPS_H
