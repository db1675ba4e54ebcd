// P1's kernel with a 128x256 tile set by hand (#moe.gemm_config on the
// block GEMM of its moe.fused region; the table keeps 128x128 for P1: it
// measured 1.74x slower at 128x256, docs/results/2026-12-02-p1-tile-variants.md).
// The f32 epilogue loads g and u 16 column pairs at a time, so next to the
// 128 accumulator registers of m64n256 the kernel does not spill.
// Layer T=512 H=384 I=256 E=2 K=1 B=128: 640 slots, P1's result 640 x 256.
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --layer T=512,H=384,I=256,E=2,K=1,B=128 --print-layer-ir > %t.mlir
// RUN: moe-opt %t.mlir --moe-decompose-bwd --moe-fuse | sed -e 's/{block_size = 128 : i64} -> tensor<640x256xf32>/{block_size = 128 : i64, moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>} -> tensor<640x256xf32>/' > %t.fused.mlir
// RUN: moe-opt %t.fused.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// CHECK-LABEL: .entry block_matmul_act_5(
// CHECK:       wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK-LABEL: .entry

// PTXAS:       Function properties for block_matmul_act_5
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
