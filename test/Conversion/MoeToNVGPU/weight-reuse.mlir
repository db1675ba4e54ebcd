// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse > %t.small.mlir
// RUN: moe-opt %t.small.mlir --moe-gpu-kernel-config="weight-reuse=2 round-reuse=0" | FileCheck %s --check-prefix=TWO
// RUN: moe-opt %t.small.mlir --moe-gpu-kernel-config="weight-reuse=1 round-reuse=0" | FileCheck %s --check-prefix=NONE
// RUN: moe-opt %t.small.mlir --moe-gpu-kernel-config="weight-reuse=0" | FileCheck %s --check-prefix=NONE
// RUN: moe-opt %t.small.mlir -convert-moe-to-nvgpu="weight-reuse=2 round-reuse=0" | FileCheck %s
// RUN: %moe_obj/bin/moe-run --layer T=1024,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse > %t.big.mlir
// RUN: moe-opt %t.big.mlir --moe-gpu-kernel-config="round-reuse=0" | FileCheck %s --check-prefix=TWO
// RUN: %moe_obj/bin/moe-run --layer T=1280,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="round-reuse=0" | FileCheck %s --check-prefix=NONE
// RUN: moe-opt %t.big.mlir --moe-gpu-kernel-config="weight-reuse=4 round-reuse=0" | FileCheck %s --check-prefix=NONE
// RUN: moe-opt %t.big.mlir --moe-gpu-kernel-config="weight-reuse=5 round-reuse=0" | FileCheck %s --check-prefix=TWO
// RUN: moe-opt %t.big.mlir --moe-gpu-kernel-config="weight-reuse=5 persistent-gemms=false round-reuse=0" | FileCheck %s --check-prefix=NONE
// RUN: not %moe_obj/bin/moe-run --target=sm90a --layer T=256,H=256,I=128,E=2,K=2,B=128 --compile-only --weight-reuse=65 2>&1 | FileCheck %s --check-prefix=FLAG

// weight-reuse (default 5): the block GEMMs whose rhs is a bf16
// weight rounded along K compute their transposed products (swap-weights'
// kernels: the weight rounded in the consumers' registers, once per tile
// of two blocks of its expert) where each weight element would be rounded
// at most N times. The estimate: the routing layout's data blocks (all but
// the E - 1 spare ones) over the experts, one block more for an expert's
// partial last one, in tiles of 2 * B slots. T=256, K=2, E=2: 5 blocks, 4
// of data, (4 + 2) * 128 / 2 = 384 slots an expert: 2 roundings. T=1024:
// 17 blocks, (16 + 2) * 128 / 2 = 1152 slots: 5, as shape 1. The default
// bound, 5: T=1024 swaps, T=1280 (21 blocks, 1408 slots an expert: 6) does
// not. The producers of the recompute's and P1's copy their slot rows of x
// and dy through the token ids (rhs_gather: swap-gather, the default;
// swap-weights.mlir has the copies' form); P2's [dg | du] comes by TMA.
// TWO:       moe.block_matmul {{.*}}registers = [56, 224], lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, rhs_gather = true, tma_store = 2>
// TWO:       moe.block_matmul {{.*}}registers = [56, 224], persistent = true, round_lhs = true, swap_operands = true, rhs_gather = true, tma_store = 2>
// TWO:       moe.block_matmul {{.*}}registers = [40, 232], persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// Beyond the bound (and not beside one CTA per tile) the block GEMMs keep
// their configs.
// NONE-NOT:  moe.block_matmul {{.*}}swap_operands

// convert-moe-to-nvgpu makes the same choice for GEMMs without a config:
// each block GEMM takes its expert's weight as stored ([E, N, K] bf16), and
// no operand kernel rounds a weight; x and dy are rounded along H once per
// token for the block GEMMs, which gather their slot rows, and along the
// slots for the expert GEMMs; no gathered copy is written.
// CHECK:       call @mx_operand_0_launch({{.*}}) : (memref<256x256xbf16>, memref<256x256xbf16>)
// CHECK:       call @block_matmul_1_launch({{.*}}) : (memref<2x256x256xbf16>, memref<256x256xbf16>, memref<5xi32>, memref<640xi32>,
// CHECK:       call @mx_operand_2_launch({{.*}}) : (memref<256x256xbf16>, memref<256x256xbf16>)
// CHECK:       call @block_matmul_3_launch({{.*}}) : (memref<2x128x256xbf16>, memref<256x256xbf16>, memref<5xi32>, memref<640xi32>,
// CHECK:       call @act_bwd_operands_4_launch
// CHECK:       call @block_matmul_5_launch({{.*}}) : (memref<2x256x256xbf16>, memref<640x256xbf16>,
// CHECK:       call @mx_operand_6_launch({{.*}}) : (memref<256x256xbf16>, memref<640xi32>, memref<640x256xbf16>)
// CHECK:       call @expert_matmul_7_launch
// CHECK:       call @mx_operand_8_launch({{.*}}) : (memref<256x256xbf16>, memref<640xi32>, memref<640x256xbf16>)
// CHECK:       call @expert_matmul_9_launch
// CHECK-NOT:   call @mx_operand

// FLAG: moe-run: error: invalid value '65' for --weight-reuse (expected an integer in [0, 64])
