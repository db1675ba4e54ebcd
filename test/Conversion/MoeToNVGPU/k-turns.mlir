// RUN: rm -rf %t.emit
// RUN: %moe_obj/bin/moe-run --target=sm90a --layer T=512,H=256,I=128,E=4,K=2,B=128 --compile-only --cache-dir "" --emit ptx %t.emit --gemm-config-at '0=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, tma_store = 2, k_turns = true>' --gemm-config-at '2=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, round_lhs = true, swap_operands = true, tma_store = 2, k_turns = true>' | FileCheck %s --check-prefix=EMIT
// RUN: FileCheck %s < %t.emit/moe_kernels_block_matmul_1.ptx
// RUN: FileCheck %s < %t.emit/moe_kernels_block_matmul_5.ptx
// RUN: FileCheck %s --check-prefix=NOTURNS < %t.emit/moe_kernels_block_matmul_3.ptx
// RUN: %moe_obj/bin/moe-run --layer T=512,H=256,I=128,E=4,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="k-turns=true" | FileCheck %s --check-prefix=CHOICE
// RUN: %moe_obj/bin/moe-run --layer T=8192,H=4096,I=1536,E=128,K=8,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="k-turns=true weight-reuse=0 round-reuse=0" | FileCheck %s --check-prefix=NOROUND
// RUN: %moe_obj/bin/moe-run --layer T=512,H=256,I=128,E=4,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config | FileCheck %s --check-prefix=NOROUND
// REQUIRES: ptxas
// RUN: %ptxas -arch=sm_90a -v %t.emit/moe_kernels_block_matmul_1.ptx -o %t.1.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %ptxas -arch=sm_90a -v %t.emit/moe_kernels_block_matmul_5.ptx -o %t.5.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config k_turns: the two consumer warpgroups of a tile take
// turns at the tensor cores each K tile, so that one rounds its next K
// tile (round_lhs) beside the other's MMAs. Warpgroup w waits on named
// barrier 8 + w (256 threads: its own 128 and the other's arrival) after
// its rounding and before its wgmmas, and passes the turn (bar.arrive on
// the other's) once they are committed, before it waits for the K tile
// before; warpgroup 0 arrives on its own barrier first and takes the last
// turn back after its tiles, so that every arrival is met. Here the
// transposed recompute (GEMM 0) and P2 (GEMM 2) take it by hand; P1 keeps
// the default's config.

// EMIT: compile: {{.*}}

// The k-turns choice (off by default) sets it on every GEMM that rounds
// its lhs in its registers: here all five (the transposed block GEMMs by
// weight-reuse, P3 and P4 by round-reuse), none where no GEMM rounds.
// CHOICE-COUNT-3: moe.block_matmul {{.*}}round_lhs = true, swap_operands = true, {{(rhs_gather = true, )?}}tma_store = 2, k_turns = true>
// CHOICE-COUNT-2: moe.expert_matmul {{.*}}round_lhs = true, {{.*}}k_turns = true>
// NOROUND-NOT: k_turns

// CHECK:       bar.arrive %r{{[0-9]+}}, 256;
// CHECK:       ldmatrix.sync.aligned
// CHECK:       fma.rn.bf16x2
// CHECK:       bar.sync {{.*}}%r{{[0-9]+}}, 256;
// CHECK-NEXT:  wgmma.fence.sync.aligned;
// CHECK:       wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK:       wgmma.commit_group.sync.aligned;
// CHECK-NEXT:  // begin inline asm
// CHECK-NEXT:  bar.arrive %r{{[0-9]+}}, 256;
// CHECK-NEXT:  // end inline asm
// CHECK-NEXT:  wgmma.wait_group.sync.aligned{{[[:space:]]+}}1;
// CHECK:       wgmma.wait_group.sync.aligned{{[[:space:]]+}}0;
// CHECK:       bar.sync {{.*}}8, 256;
// CHECK:       ret;

// NOTURNS-NOT: bar.{{(sync|arrive).*}}, 256;

// PTXAS-NOT:   C75
// PTXAS:       Used {{[0-9]+}} registers
// PTXAS-NOT:   C75
