// RUN: moe-opt %s -moe-gpu-loop-shape -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s -moe-gpu-loop-shape=block=128 -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=B128
// RUN: not moe-opt %s -moe-gpu-loop-shape=block=100 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: moe-gpu-loop-shape: block 100 is not a multiple of 32 in [32, 1024]

// A 64 x 96 nest becomes one dimension of 6144 tiled by 256 threads (128
// with block=128); the indices come back from the linear one, row-major,
// so consecutive threads store consecutive columns. A loop of 40 gets one
// block of 64 threads. A loop with a reduction is left as it is.

// CHECK-LABEL: func.func @shape(
// CHECK:         %[[N:.*]] = arith.muli %{{.*}}, %c96
// CHECK:         %[[T:.*]] = arith.muli %{{.*}}, %c256 : index
// CHECK:         scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[N]]) step (%[[T]]) {
// CHECK:           scf.parallel (%[[L:.*]]) = (%{{.*}}) to (%[[T]]) step (%{{.*}}) {
// CHECK:             %[[LIN:.*]] = arith.addi %[[L]], %[[B]] : index
// CHECK:             %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %[[N]] : index
// CHECK:             scf.if
// CHECK:               %[[J:.*]] = arith.remsi %[[LIN]], %{{.*}} : index
// CHECK:               %[[I:.*]] = arith.divsi %[[LIN]], %{{.*}} : index
// CHECK:               memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]] : memref<64x96xf32>
// CHECK:         %[[T40:.*]] = arith.muli %{{.*}}, %c64{{.*}} : index
// CHECK:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%c40) step (%[[T40]]) {
// CHECK:           scf.parallel
// CHECK:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%c64) step (%c1) init
// CHECK-NOT:       scf.parallel
// CHECK:         return
// B128-LABEL:  func.func @shape(
// B128:          arith.muli %{{.*}}, %c128 : index
func.func @shape(%x: memref<64x96xf32>, %y: memref<40xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c40 = arith.constant 40 : index
  %c64 = arith.constant 64 : index
  %c96 = arith.constant 96 : index
  %f = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c96) step (%c1, %c1) {
    memref.store %f, %x[%i, %j] : memref<64x96xf32>
    scf.reduce
  }
  scf.parallel (%k) = (%c0) to (%c40) step (%c1) {
    memref.store %f, %y[%k] : memref<40xf32>
    scf.reduce
  }
  %sum = scf.parallel (%k) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
    scf.reduce(%f : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}
