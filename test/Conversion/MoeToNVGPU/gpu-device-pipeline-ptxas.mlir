// ptxas accepts the sm_90a MX block GEMM as the H200 prototype had it: no
// spills, no stack, and no C75xx warning (C7508: setmaxnreg ignored; C7514 /
// C7520: wgmma serialized).
// REQUIRES: ptxas
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s

// CHECK-NOT:   warning
// CHECK:       Compiling entry function 'mx_block_matmul_0' for 'sm_90a'
// CHECK-NOT:   warning
// CHECK:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// CHECK-NOT:   warning
