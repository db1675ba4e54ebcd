// RUN: moe-opt %s -convert-moe-to-linalg | FileCheck %s
// RUN: moe-opt %s -moe-host-pipeline -o /dev/null

// The host calling convention marks the tensor arguments of functions with
// a body read only; a declaration with tensor arguments is left alone (the
// bufferization rejects the attribute on external functions), so a module
// holding one goes through the whole host pipeline.

// CHECK-LABEL: func.func private @renumber(tensor<128xi32>) -> tensor<128xi32>
// CHECK-LABEL: func.func @f(
// CHECK-SAME:      %{{.*}}: tensor<128xi32> {bufferization.writable = false}
func.func private @renumber(tensor<128xi32>) -> tensor<128xi32>
func.func @f(%t: tensor<128xi32>) -> tensor<128xi32> {
  %r = call @renumber(%t) : (tensor<128xi32>) -> tensor<128xi32>
  return %r : tensor<128xi32>
}
