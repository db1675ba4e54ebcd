//===- MoeDialect.h - the moe dialect -----------------------------*- C++ -*-===//
//
// Declares the dialect, its enums and its attributes.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_IR_MOEDIALECT_H
#define MOE_DIALECT_MOE_IR_MOEDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "moe/Dialect/Moe/IR/MoeOpsDialect.h.inc"

#include "moe/Dialect/Moe/IR/MoeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "moe/Dialect/Moe/IR/MoeAttrs.h.inc"

#endif // MOE_DIALECT_MOE_IR_MOEDIALECT_H
