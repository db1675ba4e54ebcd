// RUN: moe-opt %s -moe-gpu-device-buffers -verify-diagnostics

// With host arguments, an out-parameter that a kernel also reads would be
// read from host memory. (With device arguments it is device memory, which
// a kernel may read.)
// expected-error @below {{'func.func' op argument #0 is copied into and also used otherwise; moe-gpu-device-buffers expects an out-parameter to be written by memref.copy only}}
func.func @out_param_read(%out: memref<64xf32>, %tmp: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %out[%tx] : memref<64xf32>
    memref.store %v, %tmp[%tx] : memref<64xf32>
    gpu.terminator
  }
  memref.copy %tmp, %out : memref<64xf32> to memref<64xf32>
  return
}
