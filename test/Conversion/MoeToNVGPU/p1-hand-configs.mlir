// P1's kernel with configurations set by hand (#moe.gemm_config on the
// block GEMM of its moe.fused region) that the table does not choose: both
// measured slower on the H200 (docs/results/2026-12-02-p1-tile-variants.md).
// Layer T=512 H=384 I=256 E=2 K=1 B=128: 640 slots, P1's result 640 x 256.
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --layer T=512,H=384,I=256,E=2,K=1,B=128 --print-layer-ir > %t.mlir
//
// 128x256 tiles (1.74x slower): the f32 epilogue loads g and u 16 column
// pairs at a time, so next to the 128 accumulator registers of m64n256 the
// kernel does not spill.
// RUN: moe-opt %t.mlir --moe-decompose-bwd --moe-fuse | sed -e 's/{block_size = 128 : i64} -> tensor<640x256xf32>/{block_size = 128 : i64, moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>} -> tensor<640x256xf32>/' > %t.wide.mlir
// RUN: moe-opt %t.wide.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=true weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.wide.ptx
// RUN: FileCheck %s --check-prefix=WIDE < %t.wide.ptx
// RUN: %ptxas -arch=sm_90a -v %t.wide.ptx -o %t.wide.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
//
// Persistent (1-5% slower): each tile's f32 g|u rows are prefetched into L2
// by the 256 consumer threads as the tile starts (row r by consumer thread
// r, two prefetches each), not by the producer thread.
// RUN: moe-opt %t.mlir --moe-decompose-bwd --moe-fuse | sed -e 's/{block_size = 128 : i64} -> tensor<640x256xf32>/{block_size = 128 : i64, moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true>} -> tensor<640x256xf32>/' > %t.persistent.mlir
// RUN: moe-opt %t.persistent.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=true weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.persistent.ptx
// RUN: FileCheck %s --check-prefix=PERSISTENT < %t.persistent.ptx
// RUN: %ptxas -arch=sm_90a -v %t.persistent.ptx -o %t.persistent.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// WIDE-LABEL: .entry block_matmul_act_5(
// WIDE:       wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// WIDE-LABEL: .entry

// The producer issues TMA loads and no prefetch; the consumers' tile loop
// prefetches its rows' 512-byte g and u runs, then runs the mainloop.
// PERSISTENT-LABEL: .entry block_matmul_act_5(
// PERSISTENT:       setmaxnreg.dec.sync.aligned.u32 40;
// PERSISTENT-NOT:   cp.async.bulk.prefetch.L2.global
// PERSISTENT:       setmaxnreg.inc.sync.aligned.u32 232;
// PERSISTENT:       cp.async.bulk.prefetch.L2.global [{{%rd[0-9]+}}], [[S:%r[0-9]+]];
// PERSISTENT-NEXT:  cp.async.bulk.prefetch.L2.global [{{%rd[0-9]+}}], [[S]];
// PERSISTENT:       wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PERSISTENT-LABEL: .entry

// PTXAS:       Function properties for block_matmul_act_5
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
