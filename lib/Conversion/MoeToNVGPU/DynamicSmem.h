//===- DynamicSmem.h - the kernels' dynamic shared memory --------*- C++ -*-===//
//
// The dynamic shared memory of a kernel module's kernels (the GEMMs' TMA
// rings, the activation-backward kernel's tiles): one public zero-size
// array that becomes `.extern .shared .align 1024 .b8 moe_dynamic_smem[]`,
// viewed at the size a launch gives it. (MLIR 22: gpu.dynamic_shared_memory
// becomes a 1-byte static array; MXGemmSm90.cpp's header has the rest.)
// Private to this library.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_CONVERSION_MOETONVGPU_DYNAMICSMEM_H
#define MOE_LIB_CONVERSION_MOETONVGPU_DYNAMICSMEM_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {

/// Name of the dynamic shared memory array in the gpu.module.
constexpr StringLiteral kDynamicSmem = "moe_dynamic_smem";

/// memref<bytes x i8> in shared memory (address space 3).
inline MemRefType dynamicSmemType(MLIRContext *ctx, int64_t bytes) {
  return MemRefType::get({bytes}, IntegerType::get(ctx, 8),
                         MemRefLayoutAttrInterface(),
                         IntegerAttr::get(IntegerType::get(ctx, 64), 3));
}

/// Declares the array at the end of `module`, once per module.
inline void declareDynamicSmem(OpBuilder &b, Location loc,
                               gpu::GPUModuleOp module) {
  if (SymbolTable::lookupSymbolIn(module, kDynamicSmem))
    return;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  memref::GlobalOp::create(b, loc, kDynamicSmem,
                           /*sym_visibility=*/StringAttr(),
                           dynamicSmemType(b.getContext(), 0),
                           /*initial_value=*/Attribute(), /*constant=*/false,
                           b.getI64IntegerAttr(1024));
}

/// A view of the first `bytes` of the array, in a kernel of the module.
inline Value dynamicSmemView(OpBuilder &b, Location loc, int64_t bytes) {
  MLIRContext *ctx = b.getContext();
  Value raw = memref::GetGlobalOp::create(b, loc, dynamicSmemType(ctx, 0),
                                          kDynamicSmem);
  return memref::ReinterpretCastOp::create(
      b, loc, dynamicSmemType(ctx, bytes), raw, /*offset=*/0,
      ArrayRef<int64_t>{bytes}, ArrayRef<int64_t>{1});
}

} // namespace mlir::moe

#endif // MOE_LIB_CONVERSION_MOETONVGPU_DYNAMICSMEM_H
