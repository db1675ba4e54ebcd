// RUN: moe-opt %s -moe-gpu-loop-shape -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s -moe-gpu-loop-shape=block=128 -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=B128
// RUN: not moe-opt %s -moe-gpu-loop-shape=block=100 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: moe-gpu-loop-shape: block 100 is not a multiple of 32 in [32, 1024]

// A 64 x 96 nest becomes one dimension of 6144 tiled by 256 threads (128
// with block=128); the indices come back from the linear one, row-major,
// so consecutive threads store consecutive columns. A loop of 40 gets one
// block of 64 threads. A loop with a reduction is left as it is.

// 6144 is a multiple of 256, so no thread is out of range and there is
// no guard; the indices come from unsigned 32-bit division and remainder.
// CHECK-LABEL: func.func @shape(
// CHECK:         %[[T:.*]] = arith.muli %{{.*}}, %c256 : index
// CHECK:         scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%c6144) step (%[[T]]) {
// CHECK:           scf.parallel (%[[L:.*]]) = (%{{.*}}) to (%[[T]]) step (%{{.*}}) {
// CHECK-NEXT:        %[[LIN:.*]] = arith.addi %[[L]], %[[B]] : index
// CHECK-NEXT:        %[[L32:.*]] = arith.index_castui %[[LIN]] : index to i32
// CHECK-NEXT:        %[[C96:.*]] = arith.constant 96 : i32
// CHECK-NEXT:        %[[J32:.*]] = arith.remui %[[L32]], %[[C96]] : i32
// CHECK-NEXT:        %[[I32:.*]] = arith.divui %[[L32]], %[[C96]] : i32
// CHECK-NEXT:        %[[J:.*]] = arith.index_castui %[[J32]] : i32 to index
// CHECK-NEXT:        %[[I:.*]] = arith.index_castui %[[I32]] : i32 to index
// CHECK-NEXT:        memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]] : memref<64x96xf32>
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

// -----

// 65536 x 65536 iterations do not fit in i32: 64-bit division. Lower
// bounds and steps other than 0 and 1 map back onto the original indices.
// CHECK-LABEL: func.func @wide(
// CHECK:         %[[LIN:.*]] = arith.addi
// CHECK-NEXT:    %[[L64:.*]] = arith.index_castui %[[LIN]] : index to i64
// CHECK-NEXT:    %[[C:.*]] = arith.constant 65536 : i64
// CHECK-NEXT:    %[[J64:.*]] = arith.remui %[[L64]], %[[C]] : i64
// CHECK-NEXT:    %[[I64:.*]] = arith.divui %[[L64]], %[[C]] : i64
// CHECK-NEXT:    %[[J:.*]] = arith.index_castui %[[J64]] : i64 to index
// CHECK-NEXT:    %[[I:.*]] = arith.index_castui %[[I64]] : i64 to index
// CHECK-NEXT:    memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]] : memref<65536x65536xi8>
// CHECK-LABEL: func.func @strided(
// CHECK:         %[[P:.*]] = arith.index_castui %{{.*}} : i32 to index
// CHECK:         %[[S:.*]] = arith.muli %[[P]], %c2{{.*}} : index
// CHECK:         %[[K:.*]] = arith.addi %[[S]], %c4{{.*}} : index
// CHECK:         memref.store %{{.*}}, %{{.*}}[%{{.*}}, %[[K]]] : memref<8x16xf32>
func.func @wide(%x: memref<65536x65536xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 65536 : index
  %v = arith.constant 7 : i8
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %n) step (%c1, %c1) {
    memref.store %v, %x[%i, %j] : memref<65536x65536xi8>
    scf.reduce
  }
  return
}
func.func @strided(%x: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i, %k) = (%c0, %c4) to (%c8, %c16) step (%c1, %c2) {
    memref.store %f, %x[%i, %k] : memref<8x16xf32>
    scf.reduce
  }
  return
}

// -----

// Bounds that are not constants: the upstream collapse (signed division
// in index arithmetic).
// CHECK-LABEL: func.func @dynamic(
// CHECK:         arith.remsi
// CHECK:         arith.divsi
func.func @dynamic(%x: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %n) step (%c1, %c1) {
    memref.store %f, %x[%i, %j] : memref<?x?xf32>
    scf.reduce
  }
  return
}
