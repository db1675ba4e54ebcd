// RUN: moe-opt %s -split-input-file -moe-results-in-place | FileCheck %s

// A result computed in a buffer of its own, then copied: the kernel writes
// the out-parameter, and the copy, the buffer and its free go away. Through
// an expand_shape (the weight gradient [E, H, 2I] computed as [E, H, 2 I])
// the buffer becomes the inverse collapse_shape of the argument.

// CHECK-LABEL: func.func @direct(
// CHECK-SAME:      %[[OUT:[^:]*]]: memref<4xf32>)
// CHECK-NEXT:    call @k(%[[OUT]])
// CHECK-NEXT:    return
func.func private @k(memref<4xf32>)
func.func @direct(%out: memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  call @k(%a) : (memref<4xf32>) -> ()
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  return
}

// CHECK-LABEL: func.func @expanded(
// CHECK-SAME:      %[[OUT:[^:]*]]: memref<2x3x2x4xf32>)
// CHECK-NEXT:    %[[V:.*]] = memref.collapse_shape %[[OUT]] {{\[}}[0], [1], [2, 3]] : memref<2x3x2x4xf32> into memref<2x3x8xf32>
// CHECK-NEXT:    call @k3(%[[V]])
// CHECK-NEXT:    return
func.func private @k3(memref<2x3x8xf32>)
func.func @expanded(%out: memref<2x3x2x4xf32>) {
  %a = memref.alloc() : memref<2x3x8xf32>
  call @k3(%a) : (memref<2x3x8xf32>) -> ()
  %e = memref.expand_shape %a [[0], [1], [2, 3]] output_shape [2, 3, 2, 4]
      : memref<2x3x8xf32> into memref<2x3x2x4xf32>
  memref.copy %e, %out : memref<2x3x2x4xf32> to memref<2x3x2x4xf32>
  memref.dealloc %a : memref<2x3x8xf32>
  return
}

// -----

// Left alone: the buffer is read after the copy; the out-parameter has a
// second use; the source is an argument, not a buffer of the function.

// CHECK-LABEL: func.func @read_after(
// CHECK:         memref.alloc
// CHECK:         memref.copy
// CHECK:         call @k(
// CHECK:         memref.dealloc
func.func private @k(memref<4xf32>)
func.func @read_after(%out: memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  call @k(%a) : (memref<4xf32>) -> ()
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  call @k(%a) : (memref<4xf32>) -> ()
  memref.dealloc %a : memref<4xf32>
  return
}

// CHECK-LABEL: func.func @out_used_twice(
// CHECK:         memref.alloc
// CHECK:         memref.copy
func.func @out_used_twice(%out: memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  call @k(%a) : (memref<4xf32>) -> ()
  call @k(%out) : (memref<4xf32>) -> ()
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  return
}

// CHECK-LABEL: func.func @from_argument(
// CHECK:         memref.copy
func.func @from_argument(%in: memref<4xf32>, %out: memref<4xf32>) {
  memref.copy %in, %out : memref<4xf32> to memref<4xf32>
  return
}
