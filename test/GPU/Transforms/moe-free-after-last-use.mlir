// RUN: moe-opt %s -moe-free-after-last-use | FileCheck %s

// Each dealloc moves to just after the last op that uses its buffer or a
// value derived from it: %b through a view read by the second call, %a
// through a pointer extracted in a loop. A dealloc of an argument stays.

// CHECK-LABEL: func.func @f(
// CHECK:         %[[A:.*]] = memref.alloc() : memref<16xf32>
// CHECK:         %[[B:.*]] = memref.alloc() : memref<16xf32>
// CHECK:         %[[V:.*]] = memref.subview %[[B]]
// CHECK:         call @k(%[[A]])
// CHECK-NEXT:    scf.for
// CHECK:           memref.extract_aligned_pointer_as_index %[[A]]
// CHECK:         }
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    call @k4(%[[V]])
// CHECK-NEXT:    memref.dealloc %[[B]]
// CHECK-NEXT:    call @k(%[[C:[^)]*]])
// CHECK-NEXT:    memref.dealloc %[[C]]
// CHECK-NEXT:    return
func.func private @k(memref<16xf32>)
func.func private @k4(memref<4xf32, strided<[1], offset: 4>>)
func.func private @use(index)
func.func @f(%c: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  %v = memref.subview %b[4] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 4>>
  call @k(%a) : (memref<16xf32>) -> ()
  scf.for %i = %c0 to %c2 step %c1 {
    %p = memref.extract_aligned_pointer_as_index %a : memref<16xf32> -> index
    func.call @use(%p) : (index) -> ()
  }
  call @k4(%v) : (memref<4xf32, strided<[1], offset: 4>>) -> ()
  call @k(%c) : (memref<16xf32>) -> ()
  memref.dealloc %a : memref<16xf32>
  memref.dealloc %b : memref<16xf32>
  memref.dealloc %c : memref<16xf32>
  return
}
