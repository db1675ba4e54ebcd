//===- LayerBuilder.h - layer descriptions and the IR -----------*- C++ -*-===//
//
// Internal to the MoeJIT library: builds the function of a LayerDesc with
// the MLIR C++ API, reads a LayerDesc back from an op, and names the op's
// operands and results (the names of the JIT signature and of moe-run's
// .npy files).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_JIT_LAYERBUILDER_H
#define MOE_LIB_JIT_LAYERBUILDER_H

#include "moe/Dialect/Moe/IR/MoeOps.h"
#include "moe/JIT/MoeJIT.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace moe::jit {

/// Builds `module { func.func @<function>(operands...) -> (results...) }`
/// holding one moe.blockwise_bwd with the layer's shapes and attributes.
/// Arguments are the op's operands in ODS order (optional ones only when
/// present), results the op's results. The module is not verified here.
mlir::OwningOpRef<mlir::ModuleOp> buildLayerModule(mlir::MLIRContext &context,
                                                   const LayerDesc &layer,
                                                   llvm::StringRef function);

/// The LayerDesc of a verified op, or why it has none (options that a
/// LayerDesc cannot express, such as dWgu and dWd of different dtypes).
Expected<LayerDesc> describeLayer(mlir::moe::BlockwiseBwdOp op);

/// The signature name of `value` when it is an operand of `op` ("x", "dy",
/// "affinities", "wgu", "wgu_scales", "wd", "wd_scales",
/// "token_position_to_id", "block_to_expert", "checkpoint", "bgu", "bd"),
/// else an empty string.
std::string operandName(mlir::moe::BlockwiseBwdOp op, mlir::Value value);

/// The signature name of `value` when it is a result of `op` ("dx", "da",
/// "dwgu", "dwd", "dbgu", "dbd"), else an empty string.
std::string resultName(mlir::moe::BlockwiseBwdOp op, mlir::Value value);

} // namespace moe::jit

#endif // MOE_LIB_JIT_LAYERBUILDER_H
