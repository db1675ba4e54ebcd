//===- KernelArith.h - i64 index arithmetic of the kernel builders -*- C++ -*-===//
//
// The index arithmetic the memory-bound kernel builders (MXOperandKernel.cpp,
// ActBwdKernel.cpp) emit: i64 constants, sums, products, unsigned quotients
// and remainders at the builder's insertion point. It is also the integer
// interface of the index templates the kernels share with their tests
// (lhsCodeByte, LhsCodeLayout.h). Private to this library.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LIB_CONVERSION_MOETONVGPU_KERNELARITH_H
#define MOE_LIB_CONVERSION_MOETONVGPU_KERNELARITH_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace mlir::moe {

class KernelArith {
public:
  KernelArith(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value i64(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value add(Value x, int64_t y) { return add(x, i64(y)); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value mul(Value x, int64_t y) { return mul(x, i64(y)); }
  Value divu(Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, i64(y));
  }
  Value remu(Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, i64(y));
  }
  /// The index templates' names (IntOps).
  Value div(Value x, int64_t y) { return divu(x, y); }
  Value rem(Value x, int64_t y) { return remu(x, y); }

protected:
  OpBuilder &b;
  Location loc;
};

} // namespace mlir::moe

#endif // MOE_LIB_CONVERSION_MOETONVGPU_KERNELARITH_H
