// RUN: moe-opt %s -moe-gpu-device-buffers -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s -moe-gpu-device-buffers=host-arguments=0 -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=DEV

// The read argument gets a device copy at entry (freed before the
// return), the temporary buffer is a device buffer, and the copy into
// the out-parameter reads the device back to the host. The kernel body
// (inside gpu.launch) and private functions are left alone.

// CHECK-LABEL: func.func @layer(
// CHECK-SAME:      %[[IN:[^:]*]]: memref<256xf32>, %[[OUT:[^:]*]]: memref<256xf32>)
// CHECK:         %[[DIN:.*]] = gpu.alloc  () : memref<256xf32>
// CHECK:         gpu.memcpy  %[[DIN]], %[[IN]] : memref<256xf32>, memref<256xf32>
// CHECK:         %[[TMP:.*]] = gpu.alloc  () : memref<256xf32>
// CHECK:         gpu.launch
// CHECK:           memref.load %[[DIN]]
// CHECK:           memref.store %{{.*}}, %[[TMP]]
// CHECK:         gpu.memcpy  %[[OUT]], %[[TMP]] : memref<256xf32>, memref<256xf32>
// CHECK:         gpu.dealloc  %[[TMP]] : memref<256xf32>
// CHECK:         gpu.dealloc  %[[DIN]] : memref<256xf32>
// CHECK-NEXT:    return
// CHECK-LABEL: func.func private @helper(
// CHECK:         memref.alloc
//
// With device arguments nothing is copied at entry and the out-parameter
// copy stays on the device.
// DEV-LABEL: func.func @layer(
// DEV-SAME:      %[[IN:[^:]*]]: memref<256xf32>, %[[OUT:[^:]*]]: memref<256xf32>)
// DEV-NEXT:    arith.constant
// DEV-NEXT:    arith.constant
// DEV-NEXT:    %[[TMP:.*]] = gpu.alloc  () : memref<256xf32>
// DEV:         gpu.launch
// DEV:           memref.load %[[IN]]
// DEV:         gpu.memcpy  %[[OUT]], %[[TMP]] : memref<256xf32>, memref<256xf32>
// DEV-NEXT:    gpu.dealloc  %[[TMP]] : memref<256xf32>
// DEV-NEXT:    return
func.func @layer(%in: memref<256xf32>, %out: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %tmp = memref.alloc() : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %in[%tx] : memref<256xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %tmp[%tx] : memref<256xf32>
    gpu.terminator
  }
  memref.copy %tmp, %out : memref<256xf32> to memref<256xf32>
  memref.dealloc %tmp : memref<256xf32>
  return
}
func.func private @helper() -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  return %a : memref<4xf32>
}

// -----

// A result computed in its out-parameter (no memref.copy into it): with
// host arguments its device copy is copied back before the return.
// CHECK-LABEL: func.func @in_place(
// CHECK-SAME:      %[[IN:[^:]*]]: memref<64xf32>, %[[OUT:[^:]*]]: memref<64xf32>)
// CHECK:         %[[DIN:.*]] = gpu.alloc  () : memref<64xf32>
// CHECK:         gpu.memcpy  %[[DIN]], %[[IN]]
// CHECK:         %[[DOUT:.*]] = gpu.alloc  () : memref<64xf32>
// CHECK:         gpu.memcpy  %[[DOUT]], %[[OUT]]
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %[[DOUT]]
// CHECK:         gpu.memcpy  %[[OUT]], %[[DOUT]] : memref<64xf32>, memref<64xf32>
// CHECK-NOT:     gpu.memcpy
// CHECK:         gpu.dealloc  %[[DIN]]
// CHECK:         gpu.dealloc  %[[DOUT]]
// CHECK-NEXT:    return
// DEV-LABEL: func.func @in_place(
// DEV-NOT:     gpu.memcpy
// DEV:         return
func.func @in_place(%in: memref<64xf32>, %out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %in[%tx] : memref<64xf32>
    memref.store %v, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// A constant (a host global) read by a kernel gets a device copy where it
// is read, freed before the return.
// CHECK-LABEL: func.func @constant(
// CHECK:         %[[G:.*]] = memref.get_global @zeros : memref<64xi32>
// CHECK-NEXT:    %[[D:.*]] = gpu.alloc  () : memref<64xi32>
// CHECK-NEXT:    gpu.memcpy  %[[D]], %[[G]] : memref<64xi32>, memref<64xi32>
// CHECK:         gpu.launch
// CHECK:           memref.load %[[D]]
// CHECK:         gpu.dealloc  %[[D]] : memref<64xi32>
// CHECK-NEXT:    return
memref.global "private" constant @zeros : memref<64xi32> = dense<0>
func.func @constant(%out: memref<64xi32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %z = memref.get_global @zeros : memref<64xi32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %z[%tx] : memref<64xi32>
    memref.store %v, %out[%tx] : memref<64xi32>
    gpu.terminator
  }
  return
}

// -----

memref.global "private" constant @ones : memref<4xf32> = dense<1.0>
func.func @nested_constant(%c: i1, %out: memref<4xf32>) {
  scf.if %c {
    // expected-error @below {{'memref.get_global' op reads a global inside a region; moe-gpu-device-buffers copies globals to the device only at the function's top level}}
    %g = memref.get_global @ones : memref<4xf32>
    memref.copy %g, %out : memref<4xf32> to memref<4xf32>
  }
  return
}

// -----

// expected-error @below {{'func.func' op argument #0 is not a static memref with the identity layout}}
func.func @dynamic(%in: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %in[%c0] : memref<?xf32>
  return
}

// -----

func.func @host_loop(%in: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @below {{'memref.load' op accesses device memory on the host: the GPU mapping did not cover it}}
  %v = memref.load %in[%c0] : memref<8xf32>
  return
}

// -----

func.func @strided(%out: memref<8xf32>) {
  %a = memref.alloc() : memref<16xf32>
  %s = memref.subview %a[0] [8] [2] : memref<16xf32> to memref<8xf32, strided<[2]>>
  // expected-error @below {{'memref.copy' op copies a strided or dynamic memref, which cannot become one device copy}}
  memref.copy %s, %out : memref<8xf32, strided<[2]>> to memref<8xf32>
  memref.dealloc %a : memref<16xf32>
  return
}

// -----

// expected-error @below {{'func.func' op has more than one block; moe-gpu-device-buffers expects structured control flow}}
func.func @blocks(%in: memref<8xf32>) {
  cf.br ^next
^next:
  return
}

// -----

// A kernel launch with two results (a fused epilogue's) writes an
// out-parameter through its first result operand, which is not the call's
// last operand: the record's `results` = 2 marks it written, so it is
// copied back to the host before the return.
// CHECK-LABEL: func.func @two_results(
// CHECK-SAME:      %[[IN:[^:]*]]: memref<4xf32>, %[[OUT:[^:]*]]: memref<4xf32>)
// CHECK:         %[[DIN:.*]] = gpu.alloc  () : memref<4xf32>
// CHECK:         %[[DOUT:.*]] = gpu.alloc  () : memref<4xf32>
// CHECK:         call @k_launch(%[[DIN]], %[[DOUT]], %{{.*}})
// CHECK:         gpu.memcpy  %[[OUT]], %[[DOUT]] : memref<4xf32>, memref<4xf32>
// CHECK:         return
func.func private @k_launch(memref<4xf32>, memref<4xf32>, memref<2xf32>)
    attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @m::@k,
                  grid = [1, 1, 1], block = [128, 1, 1], pointers = [0, 1, 2],
                  results = 2>}
func.func @two_results(%in: memref<4xf32>, %out: memref<4xf32>) {
  %tmp = memref.alloc() : memref<2xf32>
  call @k_launch(%in, %out, %tmp) : (memref<4xf32>, memref<4xf32>, memref<2xf32>) -> ()
  memref.dealloc %tmp : memref<2xf32>
  return
}
