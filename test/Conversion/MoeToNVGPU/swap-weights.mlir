// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128,bias=on --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="swap-weights=true swap-gather=true round-reuse=0" > %t.config.mlir
// RUN: FileCheck %s --check-prefix=CONFIG < %t.config.mlir
// RUN: moe-opt %t.config.mlir -convert-moe-to-nvgpu="round-reuse=0" | FileCheck %s
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128,bias=on --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="swap-weights=true swap-gather=false round-reuse=0" > %t.copies.mlir
// RUN: FileCheck %s --check-prefix=COPIES-CONFIG < %t.copies.mlir
// RUN: moe-opt %t.copies.mlir -convert-moe-to-nvgpu="swap-gather=false round-reuse=0" | FileCheck %s --check-prefix=COPIES
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128,bias=on --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="swap-weights=true lhs-gather=false round-reuse=0" | FileCheck %s --check-prefix=NOGATHER
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="swap-weights=true persistent-gemms=false round-reuse=0" | FileCheck %s --check-prefix=DEFAULT
// RUN: not %moe_obj/bin/moe-run --target=sm90a --layer T=256,H=256,I=128,E=2,K=2,B=128,quant=none --compile-only --gemm-config-at '0=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>' 2>&1 | FileCheck %s --check-prefix=RAW
// RUN: not %moe_obj/bin/moe-run --target=sm90a --layer T=256,H=256,I=128,E=2,K=2,B=128 --compile-only --gemm-config-at '2=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, rhs_gather = true, tma_store = 2>' 2>&1 | FileCheck %s --check-prefix=UNGATHERED
// RUN: not %moe_obj/bin/moe-run --target=sm90a --layer T=256,H=256,I=128,E=2,K=2,B=128 --compile-only --gemm-config-at '4=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, rhs_gather = true, tma_store = 2>' 2>&1 | FileCheck %s --check-prefix=EXPERT
// REQUIRES: ptxas
// RUN: moe-opt %t.config.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root swap-weights=true swap-gather=true round-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config swap_operands of block GEMMs (moe-gpu-kernel-config
// swap-weights; weight-reuse takes them by default where each weight
// element is rounded at most 5 times, docs/sm90a-kernels.md): the
// recompute, P1 and P2 compute their transposed products, the raw bf16 weight of each
// tile's expert their lhs, rounded along K in the consumers' A registers
// (round_lhs: M-major for the recompute's [E, H, 2I] weight, K-major for
// P1's [E, I, H] and P2's), the slot rows of two blocks of that expert
// their 256-column rhs: with swap-gather (the default), copied from the token rows
// rounded once (rhs_gather) where the GEMM gathers them (x, dy), by TMA
// for P2's [dg | du]. The expert GEMMs keep their configs. rhs_gather's producer
// holds its 16 rows' token ids across the tile: 56 producer registers
// (kRhsGatherProducerRegisters; none spilled, PTXAS).
// CONFIG:     moe.block_matmul {{.*}}registers = [56, 224], lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, rhs_gather = true, tma_store = 2>
// CONFIG:     moe.block_matmul {{.*}}registers = [56, 224], persistent = true, round_lhs = true, swap_operands = true, rhs_gather = true, tma_store = 2>
// CONFIG:     moe.block_matmul {{.*}}registers = [40, 232], persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// CONFIG-NOT: swap_operands

// With swap-gather=false (moe-run --swap-slot-copies) or without
// lhs-gather the slot rows come rounded by their operand kernel: x's and
// dy's each write the gathered rows rounded along H, which the transposed
// product reads by TMA, and along the slots for P3 / P4
// (operands-both-axes).
// COPIES-CONFIG:     moe.block_matmul {{.*}}registers = [40, 232], lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// COPIES-CONFIG:     moe.block_matmul {{.*}}registers = [40, 232], persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// COPIES-CONFIG:     moe.block_matmul {{.*}}registers = [40, 232], persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// COPIES-CONFIG-NOT: rhs_gather
// COPIES:       call @mx_operand_0_launch({{.*}}) : (memref<256x256xbf16>, memref<640xi32>, memref<640x256xbf16>, memref<640x256xbf16>) -> ()
// COPIES:       call @block_matmul_1_launch({{.*}}) : (memref<2x256x256xbf16>, memref<640x256xbf16>, memref<5xi32>, memref<2x256xbf16>, memref<640xi32>, memref<640x256xf32>) -> ()
// COPIES:       call @mx_operand_2_launch({{.*}}) : (memref<256x256xbf16>, memref<640xi32>, memref<640x256xbf16>, memref<640x256xbf16>) -> ()
// COPIES:       call @block_matmul_3_launch
// COPIES:       call @act_bwd_operands_4_launch
// COPIES:       call @block_matmul_5_launch
// COPIES:       call @expert_matmul_6_launch
// COPIES:       call @expert_matmul_7_launch
// COPIES-NOT:   call @mx_operand
// NOGATHER:     moe.block_matmul {{.*}}lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// NOGATHER-NOT: rhs_gather

// Not beside one CTA per tile (the pairs of blocks are counted by each
// persistent CTA): the default configs.
// DEFAULT-NOT: swap_operands

// What a config set by hand cannot have: a transposed product of a weight
// that no mx_quantize rounds (quant=none), rhs_gather of slot rows that
// are not gathered (P2's [dg | du]), or of an expert GEMM.
// RAW:        error: 'moe.block_matmul' op swap_operands needs a rhs that an mx_quantize along K makes of a bf16 weight
// UNGATHERED: error: 'moe.block_matmul' op rhs_gather needs a lhs that an mx_quantize along its last axis makes of gathered rows
// EXPERT:     error: 'moe.expert_matmul' op rhs_gather needs a block GEMM's transposed product with token ids whose rhs is token rows, tile rows a multiple of 16 per producer warpgroup

// No operand kernel rounds a weight: the only ones left round x and dy
// along H per token and along the slots (P3, P4). Each block GEMM takes
// the weight as stored (argument 0), the recompute's bias [E, 2I], and
// stores its [slots, N] result by TMA boxes of 32 slot rows x 32 f32; its
// grid is the SMs or the most tiles there can be (2 M tiles x 4 pairs).
// CHECK:       call @mx_operand_0_launch
// CHECK:       call @block_matmul_1_launch({{.*}}) : (memref<2x256x256xbf16>, memref<256x256xbf16>, memref<5xi32>, memref<2x256xbf16>, memref<640xi32>, memref<640x256xf32>) -> ()
// CHECK:       call @mx_operand_2_launch
// CHECK:       call @block_matmul_3_launch({{.*}}) : (memref<2x128x256xbf16>, memref<256x256xbf16>, memref<5xi32>, memref<640xi32>, memref<640x128xf32>) -> ()
// CHECK:       call @act_bwd_operands_4_launch
// CHECK:       call @block_matmul_5_launch({{.*}}) : (memref<2x256x256xbf16>, memref<640x256xbf16>, memref<5xi32>, memref<640xi32>, memref<640x256xf32>) -> ()
// CHECK:       call @mx_operand_6_launch
// CHECK:       call @expert_matmul_7_launch
// CHECK:       call @mx_operand_8_launch
// CHECK:       call @expert_matmul_9_launch
// CHECK-NOT:   call @mx_operand
// CHECK:       func.func private @block_matmul_1_launch({{.*}}) attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@block_matmul_1, grid = [8, 1, 1], {{.*}}tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>, 5 : !nvgpu.tensormap.descriptor<tensor = memref<32x128xi8, 3>, {{.*}}>], counters = 1, pointers = [1, 2, 3, 4]>}
// CHECK:       func.func private @block_matmul_3_launch({{.*}}) attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@block_matmul_3, grid = [4, 1, 1], {{.*}}tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, {{.*}}>, 4 : !nvgpu.tensormap.descriptor<tensor = memref<32x128xi8, 3>, {{.*}}>], counters = 1, pointers = [1, 2, 3]>}
// CHECK:       func.func private @block_matmul_5_launch({{.*}}) attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@block_matmul_5, grid = [8, 1, 1], {{.*}}tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, {{.*}}>, 1 : !nvgpu.tensormap.descriptor<tensor = memref<256x128xi8, 3>, {{.*}}>, 4 : !nvgpu.tensormap.descriptor<tensor = memref<32x128xi8, 3>, {{.*}}>], counters = 1, pointers = [2, 3]>}

// The recompute: the weight's 64-column boxes of each K tile by TMA, x's
// slot rows by cp.async, the weight rounded on the bits after
// ldmatrix.trans (two fma.rn.bf16x2 a pair), the register-A wgmma over
// 256 slot columns with a K-major B, and the second block's chunks stored
// only when the expert has it (predicated TMA stores).
// PTX-LABEL:   .entry block_matmul_1(
// PTX-DAG:     cp.async.cg.shared.global
// PTX-DAG:     cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-DAG:     ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-DAG:     fma.rn.bf16x2
// PTX-DAG:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{.*}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 0;
// PTX-DAG:     @%p{{[0-9]+}} cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
// P1: the K-major weight by ldmatrix without .trans.
// PTX-LABEL:   .entry block_matmul_3(
// PTX-NOT:     ldmatrix.sync.aligned.m8n8.x4.trans
// PTX-DAG:     cp.async.cg.shared.global
// PTX-DAG:     ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-DAG:     fma.rn.bf16x2
// PTX-DAG:     @%p{{[0-9]+}} cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
// PTX-LABEL:   .entry act_bwd_operands_4(
// P2: [dg | du]'s slot rows by TMA, no copies.
// PTX-LABEL:   .entry block_matmul_5(
// PTX-NOT:     cp.async.cg.shared.global
// PTX-DAG:     ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-DAG:     fma.rn.bf16x2
// PTX-LABEL:   .entry mx_operand_6(

// PTXAS-NOT:   C7512
// PTXAS:       Compiling entry function 'block_matmul_5' for 'sm_90a'
// PTXAS-NEXT:  Function properties for block_matmul_5
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS:       Compiling entry function 'block_matmul_3' for 'sm_90a'
// PTXAS-NEXT:  Function properties for block_matmul_3
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS:       Compiling entry function 'block_matmul_1' for 'sm_90a'
// PTXAS-NEXT:  Function properties for block_matmul_1
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
