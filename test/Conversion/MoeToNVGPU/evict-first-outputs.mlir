// #moe.gemm_config evict_first_outputs (set by hand; no table row takes it
// yet): the epilogue's streams carry an L2 evict-first cache policy, so that
// they do not push the operand panels that the tiles in flight share out of
// L2 (P1 at shape 1 reads 7.8 GB from DRAM where ~4.6 GB would do,
// docs/results/2026-12-02-raster-and-power.md). One createpolicy per
// epilogue, then every load of data no other tile reads (the f32 gate/up
// rows, or the bf16 checkpoint) and every store of an output goes through
// .L2::cache_hint with that policy; the loads stay on the non-coherent path
// (ld.global.nc) that the invariant loads take without it. The values and
// their order are the same. Left out, the kernels are unchanged.
// A plain GEMM (persistent), and P1's kernel (ping-pong, the activation
// backward) of a layer in both modes: T=256 H=256 I=128 E=2 K=1 B=128,
// P1's result 384 x 128.
// RUN: %moe_obj/bin/moe-run --gemm M=256,N=256,K=256,G=1 --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true, evict_first_outputs = true>" > %t.gemm.mlir
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | sed -e 's/{block_size = 128 : i64} -> tensor<384x128xf32>/{block_size = 128 : i64, moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [24, 240], persistent = true, pingpong = true, evict_first_outputs = true>} -> tensor<384x128xf32>/' > %t.mlir
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128,checkpoint=bf16 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | sed -e 's/{block_size = 128 : i64} -> tensor<384x128xf32>/{block_size = 128 : i64, moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [24, 240], persistent = true, pingpong = true, evict_first_outputs = true>} -> tensor<384x128xf32>/' > %t.ckpt.mlir
// RUN: moe-opt %t.mlir --moe-gpu-kernel-config="act-epilogue=true tma-store=false" | FileCheck %s
// REQUIRES: ptxas
// RUN: moe-opt %t.gemm.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.gemm.ptx
// RUN: FileCheck %s --check-prefix=GEMM < %t.gemm.ptx
// RUN: %ptxas -arch=sm_90a -v %t.gemm.ptx -o %t.gemm.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: moe-opt %t.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=P1 < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: moe-opt %t.ckpt.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=true tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.ckpt.ptx
// RUN: FileCheck %s --check-prefix=CKPT < %t.ckpt.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ckpt.ptx -o %t.ckpt.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// moe-gpu-kernel-config keeps P1's configuration; the other GEMMs stream
// as before.
// CHECK:       moe.block_matmul
// CHECK-NOT:     evict_first_outputs
// CHECK-SAME:    rhs_n_major = true, lhs_gather = true>
// CHECK:       moe.block_matmul
// CHECK-SAME:    persistent = true, pingpong = true, evict_first_outputs = true>
// CHECK:       moe.gated_act_bwd
// CHECK-NOT:   evict_first_outputs

// The GEMM's result pairs: one policy, every store hinted.
// GEMM-LABEL:  .entry block_matmul_2(
// GEMM:        createpolicy.fractional.L2::evict_first.b64 [[POL:%rd[0-9]+]], 1.0;
// GEMM:        st.global.L2::cache_hint.v2.f32 [{{%rd[0-9]+}}], {{{%r[0-9]+}}, {{%r[0-9]+}}}, [[POL]];
// GEMM-NOT:    st.global.v2.f32

// In P1 the f32 gate/up pairs in, [dg | du], h or a * h pairs and the row
// partials out, all hinted; the affinities and token ids stay plain.
// P1-LABEL:    .entry block_matmul_act_5(
// P1:          createpolicy.fractional.L2::evict_first.b64 [[POL:%rd[0-9]+]], 1.0;
// P1:          ld.global.nc.L2::cache_hint.v2.f32 {{{%r[0-9]+}}, {{%r[0-9]+}}}, [{{%rd[0-9]+}}], [[POL]];
// P1:          st.global.L2::cache_hint.v2.f32 [{{%rd[0-9]+}}], {{{%r[0-9]+}}, {{%r[0-9]+}}}, [[POL]];
// P1:          st.global.L2::cache_hint.f32 [{{%rd[0-9]+}}], {{%r[0-9]+}}, [[POL]];
// P1-NOT:      st.global.v2.f32
// P1:          .entry

// Checkpoint mode: P1 reads the bf16 checkpoint, one element at a time.
// CKPT-LABEL:  .entry block_matmul_act_{{[0-9]+}}(
// CKPT:        ld.global.nc.L2::cache_hint.b16 {{%rs[0-9]+}}, [{{%rd[0-9]+}}], {{%rd[0-9]+}};
// CKPT:        st.global.L2::cache_hint.v2.f32

// PTXAS-NOT:   bytes spill stores, {{[1-9]}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
