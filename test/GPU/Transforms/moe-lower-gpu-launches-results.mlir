// RUN: moe-opt %s -moe-lower-gpu-launches | FileCheck %s

// A kernel with two outputs (a fused epilogue's): the record's last
// `results` = 2 arguments are not copied in, and both are copied back after
// the launch, in argument order.

// CHECK-LABEL: func.func private @k_launch(
// CHECK-SAME:      %[[IN:[^:]*]]: memref<4xf32>, %[[O1:[^:]*]]: memref<8xf32>, %[[O2:[^:]*]]: memref<2xf32>) {
// CHECK:         %[[DIN:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] () : memref<16xi8>
// CHECK:         gpu.memcpy async {{.*}}, %[[IN]]
// CHECK:         %[[D1:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] () : memref<32xi8>
// CHECK-NOT:     gpu.memcpy
// CHECK:         %[[D2:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] () : memref<8xi8>
// CHECK-NOT:     gpu.memcpy
// CHECK:         gpu.launch_func
// CHECK:         %[[V1:.*]] = memref.view %[[D1]]
// CHECK:         gpu.memcpy async [%{{.*}}] %[[O1]], %[[V1]]
// CHECK:         %[[V2:.*]] = memref.view %[[D2]]
// CHECK:         gpu.memcpy async [%{{.*}}] %[[O2]], %[[V2]]
// CHECK-COUNT-3: gpu.dealloc async
// CHECK:         gpu.wait [%{{.*}}]

module attributes {gpu.container_module} {
  func.func @f(%in: memref<4xf32>, %o1: memref<8xf32>, %o2: memref<2xf32>) {
    call @k_launch(%in, %o1, %o2) : (memref<4xf32>, memref<8xf32>, memref<2xf32>) -> ()
    return
  }
  func.func private @k_launch(memref<4xf32>, memref<8xf32>, memref<2xf32>)
      attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @m::@k,
                    grid = [1, 1, 1], block = [128, 1, 1],
                    pointers = [0, 1, 2], results = 2>}
  gpu.module @m {
    gpu.func @k(%a: !llvm.ptr<1>, %b: !llvm.ptr<1>, %c: !llvm.ptr<1>) kernel {
      gpu.return
    }
  }
}
