// moe-gpu-split-kernel-modules: each kernel of a module of several gets a
// module of its own, <module>_<kernel> (renamed where the name is taken),
// with a copy of the module's other symbols and attributes; the launch
// records and gpu.launch_func ops follow. A module of one kernel stays.
// RUN: moe-opt %s --moe-gpu-split-kernel-modules | FileCheck %s

// CHECK-LABEL: func.func private @a_launch
// CHECK-SAME:    #moe.gpu_launch<kernel = @k_a::@a, grid = [1, 1, 1], block = [32, 1, 1], pointers = [0]>
// CHECK-LABEL: func.func private @b_launch
// CHECK-SAME:    #moe.gpu_launch<kernel = @k_b_0::@b, grid = [2, 1, 1], block = [64, 1, 1], dynamic_shared_memory = 1024, counters = 1, pointers = [0]>
// CHECK-LABEL: func.func @host
// CHECK:         gpu.launch_func @k_b_0::@b
// CHECK:         gpu.launch_func @one::@c
// CHECK:       func.func private @k_b()
// CHECK:       gpu.module @k_a [#nvvm.target<chip = "sm_90a">] {
// CHECK-NEXT:    llvm.mlir.global internal @table
// CHECK-NEXT:    gpu.func @helper
// CHECK:         gpu.func @a(
// CHECK-NOT:     gpu.func
// CHECK:       gpu.module @k_b_0 [#nvvm.target<chip = "sm_90a">] {
// CHECK-NEXT:    llvm.mlir.global internal @table
// CHECK-NEXT:    gpu.func @helper
// CHECK:         gpu.func @b(
// CHECK-NOT:     gpu.func
// CHECK:       gpu.module @one {
// CHECK-NEXT:    gpu.func @c(
// CHECK-NOT:   gpu.module @k {
module attributes {gpu.container_module} {
  func.func private @a_launch(memref<4xf32>) attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @k::@a, grid = [1, 1, 1], block = [32, 1, 1], pointers = [0]>}
  func.func private @b_launch(memref<4xf32>) attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @k::@b, grid = [2, 1, 1], block = [64, 1, 1], dynamic_shared_memory = 1024, counters = 1, pointers = [0]>}
  func.func @host(%arg0: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k::@b blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%arg0 : memref<4xf32>)
    gpu.launch_func @one::@c blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%arg0 : memref<4xf32>)
    return
  }
  // Takes the name the copy of @k's kernel @b would get.
  func.func private @k_b()
  gpu.module @k [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global internal @table(dense<[1, 2]> : vector<2xi32>) : vector<2xi32>
    gpu.func @helper(%arg0: f32) -> f32 {
      gpu.return %arg0 : f32
    }
    gpu.func @a(%arg0: memref<4xf32>) kernel {
      gpu.return
    }
    gpu.func @b(%arg0: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @one {
    gpu.func @c(%arg0: memref<4xf32>) kernel {
      gpu.return
    }
  }
}
