// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse > %t.small.mlir
// RUN: moe-opt %t.small.mlir --moe-gpu-kernel-config="weight-reuse=0" | FileCheck %s --check-prefix=SMALL
// RUN: moe-opt %t.small.mlir --moe-gpu-kernel-config="round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %t.small.mlir --moe-gpu-kernel-config="weight-reuse=0" | moe-opt -convert-moe-to-nvgpu="weight-reuse=0" | FileCheck %s
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=512,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse > %t.wide.mlir
// RUN: moe-opt %t.wide.mlir --moe-gpu-kernel-config="weight-reuse=0" | FileCheck %s --check-prefix=WIDE
// RUN: moe-opt %t.wide.mlir --moe-gpu-kernel-config="round-reuse=4 weight-reuse=0" | FileCheck %s --check-prefix=WIDE4
// RUN: not %moe_obj/bin/moe-run --target=sm90a --layer T=256,H=256,I=128,E=2,K=2,B=128 --compile-only --round-reuse=65 2>&1 | FileCheck %s --check-prefix=FLAG
// REQUIRES: ptxas
// RUN: moe-opt %t.small.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.small.ptx
// RUN: %ptxas -arch=sm_90a -v %t.small.ptx -o %t.small.cubin > %t.small.log 2>&1
// RUN: FileCheck %s --check-prefix=PTXAS < %t.small.log
// RUN: FileCheck %s --check-prefix=CLEAN < %t.small.log

// round-reuse (default 3): an expert GEMM rounds its slot-gathered operand
// in its consumers' registers where each element would be rounded at most
// that many times, once per tile along the GEMM's other dimension. Here
// P3's x (N = 2I = 256: one tile) is its round_lhs, and P4's dy (M = I =
// 128: one tile of the transposed product) the lhs of its transposed
// product.
// SMALL:     moe.expert_matmul {{.*}}persistent = true, round_lhs = true, tma_store = 2>
// SMALL:     moe.expert_matmul {{.*}}persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// OFF:       moe.expert_matmul {{.*}}lhs_m_major = true, persistent = true, tma_store = 2>
// OFF:       moe.expert_matmul {{.*}}lhs_m_major = true, persistent = true, tma_store = 2>

// So no operand kernel rounds x or dy along the slots: the operand
// kernels are x's and dy's roundings per token and the weights'.
// CHECK:       call @mx_operand_0_launch
// CHECK:       call @block_matmul_2_launch
// CHECK:       call @act_bwd_operands_6_launch
// CHECK-NOT:   call @mx_operand
// CHECK:       call @expert_matmul_8_launch
// CHECK-NOT:   call @mx_operand
// CHECK:       call @expert_matmul_9_launch

// I = 512: P3's x would be rounded 4 times (2I = 1024), beyond 3; P4's
// dy twice. round-reuse=4 takes both.
// WIDE:      moe.expert_matmul {{.*}}lhs_m_major = true, persistent = true, tma_store = 2>
// WIDE:      moe.expert_matmul {{.*}}persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// WIDE4:     moe.expert_matmul {{.*}}persistent = true, round_lhs = true, tma_store = 2>
// WIDE4:     moe.expert_matmul {{.*}}persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>

// FLAG: moe-run: error: invalid value '65' for --round-reuse (expected an integer in [0, 64])

// The default kernels of the layer pass ptxas without spills and without
// serialized wgmmas.
// PTXAS-DAG: Compiling entry function 'expert_matmul_8' for 'sm_90a'
// PTXAS-DAG: Compiling entry function 'expert_matmul_9' for 'sm_90a'
// CLEAN-NOT: C7512
// CLEAN-NOT: {{[1-9][0-9]*}} bytes spill
