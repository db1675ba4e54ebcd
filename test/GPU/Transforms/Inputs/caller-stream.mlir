// The input and checks of moe-gpu-async-region{caller-stream}
// (moe-gpu-async-region.mlir runs it). The function gets the stream as a
// trailing !llvm.ptr argument and queues every gpu host op on it in
// program order, one token chain rooted at the stream: no stream created,
// no host synchronization, not even at the return. Host ops in between
// stay as they are; private functions are left alone.

// CHECK-LABEL: func.func @entry(
// CHECK-SAME:      %[[IN:[^:]*]]: memref<64xf32>, %[[STREAM:[^:]*]]: !llvm.ptr) {
// CHECK-NOT:     gpu.wait
// CHECK:         %[[T0:.*]] = builtin.unrealized_conversion_cast %[[STREAM]] : !llvm.ptr to !gpu.async.token
// CHECK:         %[[BUF:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<64xf32>
// CHECK:         %[[T2:.*]] = gpu.memcpy async [%[[T1]]] %[[BUF]], %[[IN]]
// CHECK:         memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK:         %[[T3:.*]] = gpu.launch_func async [%[[T2]]] @kernels::@k
// CHECK:         %[[T4:.*]] = gpu.memcpy async [%[[T3]]] %[[IN]], %[[BUF]]
// CHECK:         gpu.dealloc async [%[[T4]]] %[[BUF]]
// CHECK-NOT:     gpu.wait
// CHECK:         return
// CHECK-LABEL: func.func private @helper(
// CHECK-NEXT:    gpu.alloc ()
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%p: !llvm.ptr<1>) kernel {
      gpu.return
    }
  }
  func.func @entry(%in: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %buf = gpu.alloc () : memref<64xf32>
    gpu.memcpy %buf, %in : memref<64xf32>, memref<64xf32>
    %address = memref.extract_aligned_pointer_as_index %buf : memref<64xf32> -> index
    %i64 = arith.index_cast %address : index to i64
    %p = llvm.inttoptr %i64 : i64 to !llvm.ptr<1>
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%p : !llvm.ptr<1>)
    gpu.memcpy %in, %buf : memref<64xf32>, memref<64xf32>
    gpu.dealloc %buf : memref<64xf32>
    return
  }
  func.func private @helper() {
    %buf = gpu.alloc () : memref<64xf32>
    return
  }
}

// -----

// A call might touch device memory on the host, out of stream order.
func.func @calls() {
  // expected-error @below {{'func.call' op is a call, which may touch device memory on the host; moe-gpu-async-region cannot order it on the caller's stream}}
  call @elsewhere() : () -> ()
  return
}
func.func private @elsewhere()

// -----

func.func @nested(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @below {{'gpu.alloc' op is in a nested region; moe-gpu-async-region queues gpu ops of the function's top level only}}
    %buf = gpu.alloc () : memref<64xf32>
  }
  return
}

// -----

func.func @synchronizes() {
  // expected-error @below {{'gpu.wait' op synchronizes; with caller-stream the caller does}}
  gpu.wait
  return
}
