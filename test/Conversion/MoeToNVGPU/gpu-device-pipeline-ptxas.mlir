// ptxas accepts the sm_90a MX GEMM kernels as the H200 prototype had them:
// no spills, no stack, and no C75xx warning (C7508: setmaxnreg ignored;
// C7514 / C7520: wgmma serialized). Both MMA paths on the block GEMM, and
// the five kernels of the embedded example layer (recompute with a
// transposed weight, P1, P2, and P3 / P4 as expert GEMMs) on the default
// path.
// REQUIRES: ptxas
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa mma-path=fp8" | %python %S/Inputs/extract-ptx.py > %t.fp8.ptx
// RUN: %ptxas -arch=sm_90a -v %t.fp8.ptx -o %t.fp8.cubin 2>&1 | FileCheck %s --check-prefix=CHECK
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa" | %python %S/Inputs/extract-ptx.py > %t.bf16.ptx
// RUN: %ptxas -arch=sm_90a -v %t.bf16.ptx -o %t.bf16.cubin 2>&1 | FileCheck %s --check-prefix=CHECK
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin 2>&1 | FileCheck %s --check-prefixes=CHECK,LAYER

// CHECK-NOT:   warning
// LAYER:       Compiling entry function 'mx_expert_matmul_4' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'mx_expert_matmul_3' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'mx_block_matmul_2' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'mx_block_matmul_1' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// LAYER-NOT:   warning
// CHECK:       Compiling entry function 'mx_block_matmul_0' for 'sm_90a'
// CHECK-NOT:   warning
// CHECK:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// CHECK-NOT:   warning
