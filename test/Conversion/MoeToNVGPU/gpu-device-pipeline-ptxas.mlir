// ptxas accepts the sm_90a GEMM kernels: no spills, no stack, and no C75xx
// warning (C7508: setmaxnreg ignored; C7514 / C7520: wgmma serialized).
// Every MMA path on the block GEMM, and the kernels of the embedded example
// layer on the default path: the five GEMMs (recompute with a transposed
// weight, P1, P2, and P3 / P4 as expert GEMMs) and, with
// operands-both-axes=false, the ten operand kernels that round their
// operands one rounding each (rows and transposed columns, bf16 and f32
// sources).
// REQUIRES: ptxas
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa mma-path=fp8 round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.fp8.ptx
// RUN: %ptxas -arch=sm_90a -v %t.fp8.ptx -o %t.fp8.cubin 2>&1 | FileCheck %s --check-prefix=CHECK
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa mma-path=bf16 round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.bf16.ptx
// RUN: %ptxas -arch=sm_90a -v %t.bf16.ptx -o %t.bf16.cubin 2>&1 | FileCheck %s --check-prefix=CHECK
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.ops.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ops.ptx -o %t.ops.cubin 2>&1 | FileCheck %s --check-prefix=OPS
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa operands-both-axes=false round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin > %t.layer.log 2>&1
// RUN: FileCheck %s --check-prefix=LAYER < %t.layer.log
// RUN: FileCheck %s --check-prefix=SPILLS < %t.layer.log
// The same layer through moe-fuse with act-epilogue: P1's kernel (ping-pong) computes the
// activation backward of its region (the warpgroup prefetches its tile's
// g and u rows into L2 before its turn at the tensor cores; f32 sigmoid as
// the host lowering evaluates it, libdevice's expf and the IEEE reciprocal,
// the quad's butterfly sums of <dA, h>, [dg | du] and a * h stored as f32
// pairs), with no spills.
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root operands-both-axes=false act-epilogue=true round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.fused.ptx
// RUN: FileCheck %s --check-prefix=FUSED-PTX < %t.fused.ptx
// RUN: %ptxas -arch=sm_90a -v %t.fused.ptx -o %t.fused.cubin 2>&1 | FileCheck %s --check-prefix=FUSED

// operands-both-axes (the default; operands-both-axes.mlir): the kernel
// that writes both roundings of the gate/up weight (the amax of a lane quad
// by two butterfly shuffles), with the rest of the fused layer (x and dy
// rounded once per token for the recompute GEMM and P1, which gather them,
// lhs-gather.mlir, and along the slots by kernels of their own; P1 a plain
// GEMM, the activation backward's kernel writing [dg|du]'s two roundings,
// act-bwd-operands.mlir): twelve kernels, no spills, no warning.
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.both.ptx
// RUN: FileCheck %s --check-prefix=BOTH-PTX < %t.both.ptx
// RUN: %ptxas -arch=sm_90a -v %t.both.ptx -o %t.both.cubin > %t.both.log 2>&1
// RUN: FileCheck %s --check-prefix=BOTH < %t.both.log
// BOTH-PTX-LABEL: .entry mx_operand_1(
// BOTH-PTX:         shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
// BOTH-PTX:         shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
// BOTH-PTX:         cvt.rn.satfinite.e4m3x2.f32
// BOTH-PTX:         st.global.v4.b32
// BOTH-PTX:         bar.sync 0;
// BOTH-PTX:         st.global.b16
// BOTH-NOT:   warning
// BOTH-COUNT-12: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// BOTH-NOT:   bytes stack frame

// A 128x256 tile (moe-run --gemm with its --gemm-config): two consumer
// warpgroups of m64n256k16 wgmma, no spills.
// RUN: %moe_obj/bin/moe-run --gemm M=512,N=512,K=512,G=2 --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>" | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.wide.ptx
// RUN: FileCheck %s --check-prefix=WIDE-PTX < %t.wide.ptx
// RUN: %ptxas -arch=sm_90a -v %t.wide.ptx -o %t.wide.cubin 2>&1 | FileCheck %s --check-prefix=WIDE
// WIDE-PTX-LABEL: .entry block_matmul_2(
// WIDE-PTX:         wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// WIDE-NOT:   warning
// WIDE:       Compiling entry function 'block_matmul_2' for 'sm_90a'
// WIDE-NEXT:  Function properties for block_matmul_2
// WIDE-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

// The expert GEMM that reads both slot-major operands as stored
// (lhs_m_major, rhs_n_major; Inputs/expert-mn-major.mlir): transposed-A and
// transposed-B wgmma (imm-trans-a = imm-trans-b = 1), no spills.
// RUN: moe-opt %S/Inputs/expert-mn-major.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.mn.ptx
// RUN: FileCheck %s --check-prefix=MN-PTX < %t.mn.ptx
// RUN: %ptxas -arch=sm_90a -v %t.mn.ptx -o %t.mn.cubin 2>&1 | FileCheck %s --check-prefix=MN
// MN-PTX-LABEL: .entry expert_matmul_2(
// MN-PTX:         wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 1, 1;
// MN-NOT:   warning
// MN:       Compiling entry function 'expert_matmul_2' for 'sm_90a'
// MN-NEXT:  Function properties for expert_matmul_2
// MN-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

// FUSED-PTX-LABEL: .entry block_matmul_act_5(
// FUSED-PTX:         cp.async.bulk.prefetch.L2.global
// FUSED-PTX:         wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// FUSED-PTX:         wgmma.wait_group.sync.aligned 0
// FUSED-PTX:         ld.global.nc.v2.b32
// FUSED-PTX:         ex2.approx.ftz.f32
// FUSED-PTX:         rcp.rn.f32
// FUSED-PTX-NOT:     .f64
// FUSED-PTX:         st.global.v2.b32
// FUSED-PTX:         shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
// FUSED-PTX:         shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
// FUSED-PTX:         st.global.b32
// FUSED-PTX-LABEL: .entry mx_operand_6(
// FUSED-NOT:   warning
// FUSED:       Compiling entry function 'block_matmul_act_5' for 'sm_90a'
// FUSED-NEXT:  Function properties for block_matmul_act_5
// FUSED-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// FUSED-NOT:   warning

// CHECK-NOT:   warning
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'expert_matmul_14' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'expert_matmul_11' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'block_matmul_8' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'block_matmul_5' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'block_matmul_2' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER:       Compiling entry function 'mx_operand_0' for 'sm_90a'
// LAYER-NOT:   warning
// LAYER-NOT:   Compiling
// SPILLS-COUNT-15: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SPILLS-NOT:  bytes stack frame

// OPS-NOT:     warning
// OPS:         Compiling entry function 'block_matmul_2' for 'sm_90a'
// OPS-NOT:     warning
// OPS:         0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// OPS:         Compiling entry function 'mx_operand_1' for 'sm_90a'
// OPS:         0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// OPS:         Compiling entry function 'mx_operand_0' for 'sm_90a'
// OPS:         0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// OPS-NOT:     warning

// CHECK:       Compiling entry function 'mx_block_matmul_0' for 'sm_90a'
// CHECK-NOT:   warning
// CHECK:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// CHECK-NOT:   warning
