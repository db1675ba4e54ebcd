// RUN: moe-opt %s -pass-pipeline="builtin.module(func.func(moe-gpu-async-region))" | FileCheck %s
// RUN: moe-opt %S/Inputs/caller-stream.mlir -split-input-file -verify-diagnostics -pass-pipeline="builtin.module(func.func(moe-gpu-async-region{caller-stream}))" | FileCheck %S/Inputs/caller-stream.mlir

// The public function's gpu host ops become asynchronous on one stream,
// with a host synchronization before the call (an op with side effects)
// and at the return; the private launch function, which threads its own
// stream, is left as it is.

// CHECK-LABEL: func.func @entry(
// CHECK:         %[[T0:.*]] = gpu.wait async
// CHECK:         %[[BUF:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<64xf32>
// CHECK:         %[[T2:.*]] = gpu.memcpy async [%[[T1]]] %[[BUF]], %{{.*}}
// CHECK:         gpu.wait [%[[T2]]]
// CHECK-NEXT:    call @launch(%[[BUF]])
// CHECK:         gpu.dealloc async
// CHECK:         gpu.wait [%{{.*}}]
// CHECK-NEXT:    return
// CHECK-LABEL: func.func private @launch(
// CHECK-NEXT:    %[[S:.*]] = gpu.wait async
// CHECK-NEXT:    gpu.wait [%[[S]]]
// CHECK-NEXT:    return
func.func @entry(%in: memref<64xf32>) {
  %buf = gpu.alloc () : memref<64xf32>
  gpu.memcpy %buf, %in : memref<64xf32>, memref<64xf32>
  call @launch(%buf) : (memref<64xf32>) -> ()
  gpu.dealloc %buf : memref<64xf32>
  return
}
func.func private @launch(%buf: memref<64xf32>) {
  %s = gpu.wait async
  gpu.wait [%s]
  return
}
