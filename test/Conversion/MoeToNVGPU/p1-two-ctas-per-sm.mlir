// P1's kernel in 64-row tiles, two CTAs per SM (#moe.gemm_config
// ctas_per_sm = 2, set by hand: moe-run --gemm-config-at 1=ATTR, or on the
// GEMM as here): P1's activation-backward epilogue (f32 g|u loads; [dg|du],
// a*h and partials stores) cannot overlap its own tile's MMAs in a kernel of
// one CTA per tile, but one CTA's epilogue runs beside the other CTA's MMAs:
// 4 stages of 24 KB each, and the register file split in two (128 per
// thread at entry, setmaxnreg 40 / 216). Measured slower than one 128-row
// CTA per tile (docs/results/2026-12-02-p1-tile-variants.md), so no table
// row takes it. Layer T=256 H=256 I=128 E=2 K=1 B=128, recompute and
// checkpoint modes; P1's result is 384 x 128.
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | sed -e 's/{block_size = 128 : i64} -> tensor<384x128xf32>/{block_size = 128 : i64, moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 1], registers = [40, 216], ctas_per_sm = 2>} -> tensor<384x128xf32>/' > %t.mlir
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128,checkpoint=bf16 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | sed -e 's/{block_size = 128 : i64} -> tensor<384x128xf32>/{block_size = 128 : i64, moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 1], registers = [40, 216], ctas_per_sm = 2>} -> tensor<384x128xf32>/' > %t.ckpt.mlir
// RUN: moe-opt %t.mlir --moe-gpu-kernel-config="act-epilogue=true tma-store=false" | FileCheck %s
// RUN: moe-opt %t.mlir --moe-gpu-kernel-config="act-epilogue=true tma-store=false" --convert-moe-to-nvgpu="act-epilogue=true tma-store=false" | FileCheck %s --check-prefix=LAUNCH
// REQUIRES: ptxas
// RUN: moe-opt %t.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: moe-opt %t.ckpt.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.ckpt.ptx
// RUN: FileCheck %s --check-prefix=CKPT < %t.ckpt.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ckpt.ptx -o %t.ckpt.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// moe-gpu-kernel-config keeps P1's configuration and chooses the others'.
// CHECK:       moe.block_matmul
// CHECK-SAME:    moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [48, 224], rhs_n_major = true, lhs_gather = true>
// CHECK:       moe.block_matmul
// CHECK-SAME:    moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 1], registers = [40, 216], ctas_per_sm = 2>
// CHECK:       moe.gated_act_bwd

// 6 M tiles of 64 rows (384 slots), 256 threads, 4 x 24 KB stages.
// LAUNCH:      func.func private @block_matmul_act_5_launch(
// LAUNCH-SAME:   grid = [1, 6, 1], block = [256, 1, 1], dynamic_shared_memory = 99408,

// PTX-LABEL:   .entry block_matmul_act_5(
// PTX:         .maxntid 256, 1, 1
// PTX-NEXT:    .minnctapersm 2
// PTX:         setmaxnreg.dec.sync.aligned.u32 40;
// PTX:         setmaxnreg.inc.sync.aligned.u32 216;
// PTX:         wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16

// CKPT-LABEL:  .entry block_matmul_act_2(
// CKPT:        .minnctapersm 2
// The checkpoint's two runs of the whole block (64-row tiles read half),
// 32 KB apart.
// CKPT:        cp.async.bulk.prefetch.L2.global [[[P:%rd[0-9]+]]], [[S:%r[0-9]+]];
// CKPT-NEXT:   cp.async.bulk.prefetch.L2.global [[[P]]+32768], [[S]];

// PTXAS:       Function properties for block_matmul_act_{{[0-9]+}}
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT:  Used 128 registers
