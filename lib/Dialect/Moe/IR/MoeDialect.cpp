//===- MoeDialect.cpp - the moe dialect ---------------------------------===//
//
// Registers the dialect's ops and attributes.
//
//===----------------------------------------------------------------------===//
#include "moe/Dialect/Moe/IR/MoeDialect.h"
#include "moe/Dialect/Moe/IR/MoeOps.h"


using namespace mlir;
using namespace mlir::moe;

#include "moe/Dialect/Moe/IR/MoeOpsDialect.cpp.inc"

void MoeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "moe/Dialect/Moe/IR/MoeOps.cpp.inc"
      >();
  registerAttributes();
}
