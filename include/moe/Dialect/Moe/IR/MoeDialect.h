//===- MoeDialect.h - the moe dialect -----------------------------*- C++ -*-===//
//
// Declares the dialect, its enums and its attributes, and the tensor-map
// argument of #moe.gpu_launch with what its array parameter needs to be
// parsed, printed, compared and hashed.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOE_IR_MOEDIALECT_H
#define MOE_DIALECT_MOE_IR_MOEDIALECT_H

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "moe/Dialect/Moe/IR/MoeOpsDialect.h.inc"

#include "moe/Dialect/Moe/IR/MoeEnums.h.inc"

namespace mlir::moe {

/// The discardable attribute of a GPU launch's host function that holds its
/// #moe.gpu_launch record: set by convert-moe-to-nvgpu, read and removed by
/// moe-lower-gpu-launches.
constexpr llvm::StringLiteral kGPULaunchAttrName = "moe.gpu_launch";

/// An argument of a kernel launch that the kernel takes as a TMA descriptor
/// of `type`, built over the argument's bytes: `index : type` in
/// #moe.gpu_launch.
struct TensorMapArg {
  int64_t index;
  nvgpu::TensorMapDescriptorType type;

  bool operator==(const TensorMapArg &other) const {
    return index == other.index && type == other.type;
  }
};

inline llvm::hash_code hash_value(const TensorMapArg &arg) {
  return llvm::hash_combine(arg.index, arg.type);
}

inline AsmPrinter &operator<<(AsmPrinter &printer, const TensorMapArg &arg) {
  return printer << arg.index << " : " << arg.type;
}

} // namespace mlir::moe

namespace mlir {

template <>
struct FieldParser<moe::TensorMapArg> {
  static FailureOr<moe::TensorMapArg> parse(AsmParser &parser) {
    moe::TensorMapArg arg;
    if (parser.parseInteger(arg.index) || parser.parseColon() ||
        parser.parseType(arg.type))
      return failure();
    return arg;
  }
};

} // namespace mlir

#define GET_ATTRDEF_CLASSES
#include "moe/Dialect/Moe/IR/MoeAttrs.h.inc"

#endif // MOE_DIALECT_MOE_IR_MOEDIALECT_H
