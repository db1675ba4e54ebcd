// RUN: moe-opt %s -moe-host-pipeline \
// RUN: | %mlir_runner -e main -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s

// The calling convention keeps inputs read only. @square's result has the
// type of its input, so the elementwise lowering would compute it in the
// input's buffer if bufferization were allowed to write there; the caller's
// buffer must still hold 1..4 after the call.

func.func private @printMemrefF32(memref<*xf32>)

func.func @square(%a: tensor<4xf32>) -> tensor<4xf32> {
  %b = arith.mulf %a, %a : tensor<4xf32>
  return %b : tensor<4xf32>
}

// CHECK: [1, 4, 9, 16]
// CHECK: [1, 2, 3, 4]
func.func @main() {
  %values = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %buffer = memref.alloca() : memref<4xf32>
  %init = bufferization.to_buffer %values : tensor<4xf32> to memref<4xf32>
  memref.copy %init, %buffer : memref<4xf32> to memref<4xf32>
  %input = bufferization.to_tensor %buffer restrict : memref<4xf32> to tensor<4xf32>
  %squares = call @square(%input) : (tensor<4xf32>) -> tensor<4xf32>
  %out = bufferization.to_buffer %squares : tensor<4xf32> to memref<4xf32>
  %u0 = memref.cast %out : memref<4xf32> to memref<*xf32>
  call @printMemrefF32(%u0) : (memref<*xf32>) -> ()
  %u1 = memref.cast %buffer : memref<4xf32> to memref<*xf32>
  call @printMemrefF32(%u1) : (memref<*xf32>) -> ()
  return
}
