// #moe.gemm_config raster_m = G (moe-gpu-kernel-config sets 16 on dense
// products of more tiles than SMs, moe-gpu-kernel-config.mlir): the output
// tiles are taken in bands of G M tiles, the M tile fastest within a band,
// then the N tile, band after band, so that the tiles in flight at a time
// share fewer operand panels in L2 (8192^3 in bands of 16: 1.327 ms against
// 1.562 walking N fastest, docs/results/2026-12-02-raster-and-power.md).
// The order itself is
// rasterTile (MXGemmEmitter.h), checked on integers by KernelIndexingTest:
// every tile once, in bands. Left out (1), the kernels are unchanged.
// A block GEMM of 10 x 8 tiles of 128x128 (the last band of 4 holds 2 M
// tiles), one CTA per tile and persistent; an expert GEMM of 3 x 2 tiles per
// expert in bands of 2.
// RUN: %moe_obj/bin/moe-run --gemm M=1280,N=1024,K=256,G=1 --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], raster_m = 4>" > %t.grid.mlir
// RUN: moe-opt %t.grid.mlir --convert-moe-to-nvgpu | FileCheck %s --check-prefix=GRID
// RUN: %moe_obj/bin/moe-run --gemm M=1280,N=1024,K=256,G=1 --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true, raster_m = 4>" > %t.persistent.mlir
// RUN: moe-opt %t.persistent.mlir --convert-moe-to-nvgpu | FileCheck %s --check-prefix=PERSISTENT
// RUN: %moe_obj/bin/moe-run --gemm M=384,N=256,K=1024,G=4,kind=expert --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, raster_m = 2>" > %t.expert.mlir
// RUN: moe-opt %t.expert.mlir --convert-moe-to-nvgpu | FileCheck %s --check-prefix=EXPERT
// REQUIRES: ptxas
// RUN: moe-opt %t.grid.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa" | %python %S/Inputs/extract-ptx.py > %t.grid.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.grid.ptx
// RUN: %ptxas -arch=sm_90a -v %t.grid.ptx -o %t.grid.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: moe-opt %t.persistent.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa" | %python %S/Inputs/extract-ptx.py > %t.persistent.ptx
// RUN: %ptxas -arch=sm_90a -v %t.persistent.ptx -o %t.persistent.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: moe-opt %t.expert.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa" | %python %S/Inputs/extract-ptx.py > %t.expert.ptx
// RUN: %ptxas -arch=sm_90a -v %t.expert.ptx -o %t.expert.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// One CTA per tile: the grid's (x, y) is position y * 8 + x of the order;
// band = t / 32 (4 M tiles x 8 N tiles), its first M tile 4 * band, its
// rows min(10 - first, 4); the M tile first + (t % 32) % rows, the N tile
// (t % 32) / rows.
// GRID-LABEL:  gpu.func @block_matmul_2(
// GRID:          %[[X:.*]] = gpu.block_id  x
// GRID:          %[[Y:.*]] = gpu.block_id  y
// GRID:          %[[YN:.*]] = arith.muli %{{.*}}, %c8_i32
// GRID:          %[[T:.*]] = arith.addi %[[YN]], %{{.*}} : i32
// GRID:          %[[BAND:.*]] = arith.divui %[[T]], %c32_i32
// GRID:          %[[FIRST:.*]] = arith.muli %[[BAND]], %c4_i32
// GRID:          %[[IN:.*]] = arith.remui %[[T]], %c32_i32
// GRID:          %[[LEFT:.*]] = arith.subi %c10_i32, %[[FIRST]]
// GRID:          %[[ROWS:.*]] = arith.minui %[[LEFT]], %c4_i32
// GRID:          %[[ROW:.*]] = arith.remui %[[IN]], %[[ROWS]]
// GRID:          %[[M:.*]] = arith.addi %[[FIRST]], %[[ROW]]
// GRID:          arith.muli %[[M]], %c128_i32
// GRID:          %[[N:.*]] = arith.divui %[[IN]], %[[ROWS]]
// GRID:          arith.muli %[[N]], %c128_i32

// Persistent: the tile id from the counter, taken modulo the 80 tiles,
// through the same order.
// PERSISTENT-LABEL: gpu.func @block_matmul_2(
// PERSISTENT:       llvm.atomicrmw add
// PERSISTENT:       %[[W:.*]] = arith.remui %{{.*}}, %c80_i32
// PERSISTENT:       arith.divui %[[W]], %c32_i32
// PERSISTENT:       arith.minui %{{.*}}, %c4_i32

// An expert GEMM: the expert is tile id / 6, its tile the id modulo 6 in
// bands of 2 of its 3 M tiles.
// EXPERT-LABEL:  gpu.func @expert_matmul_2(
// EXPERT:          %[[EW:.*]] = arith.remui %{{.*}}, %c6_i32
// EXPERT:          arith.divui %[[EW]], %c4_i32
// EXPERT:          arith.minui %{{.*}}, %c2_i32
// EXPERT:          arith.divui %{{.*}}, %c6_i32

// PTX-LABEL:   .entry block_matmul_2(
// PTX:           mov.u32 {{%r[0-9]+}}, %ctaid.x;
// PTX:           mov.u32 {{%r[0-9]+}}, %ctaid.y;
// PTX:           min.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 4;

// PTXAS:       Function properties for {{block|expert}}_matmul_2
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
