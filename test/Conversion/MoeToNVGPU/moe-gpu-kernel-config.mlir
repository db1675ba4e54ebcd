// RUN: moe-opt %s -moe-gpu-kernel-config="tma-store=false" | FileCheck %s --check-prefixes=CHECK,DEFAULT
// RUN: moe-opt %s -moe-gpu-kernel-config="mma-path=fp8 tma-store=false" | FileCheck %s --check-prefixes=CHECK,FP8
// RUN: not moe-opt %s -moe-gpu-kernel-config="mma-path=fp4 tma-store=false" 2>&1 | FileCheck %s --check-prefix=BADPATH
// RUN: not moe-opt %s -moe-gpu-kernel-config="chip=sm_80 tma-store=false" 2>&1 | FileCheck %s --check-prefix=BADCHIP
// RUN: %moe_obj/bin/moe-run --layer T=256,H=512,I=256,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -moe-gpu-kernel-config="tma-store=false" | FileCheck %s --check-prefix=LAYER
// RUN: %moe_obj/bin/moe-run --layer T=256,H=512,I=256,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -moe-gpu-kernel-config="act-epilogue=true tma-store=false" | FileCheck %s --check-prefix=LAYER-EPI
// RUN: moe-opt %s -moe-gpu-kernel-config="persistent-gemms=false tma-store=false" | FileCheck %s --check-prefix=GRID
// RUN: %moe_obj/bin/moe-run --layer T=256,H=512,I=256,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -moe-gpu-kernel-config="persistent-gemms=false tma-store=false" | FileCheck %s --check-prefix=GRID-LAYER
// RUN: %moe_obj/bin/moe-run --layer T=256,H=512,I=256,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -moe-gpu-kernel-config="chip=sm_100a tma-store=false" | FileCheck %s --check-prefix=SM100
// RUN: %moe_obj/bin/moe-run --layer T=256,H=512,I=384,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -moe-gpu-kernel-config="persistent-gemms=false cluster-gemms=true tma-store=false" | FileCheck %s --check-prefix=CLUSTER-LAYER
// RUN: %moe_obj/bin/moe-run --layer T=256,H=512,I=384,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -moe-gpu-kernel-config="cluster-gemms=true tma-store=false" | FileCheck %s --check-prefix=CLUSTER-PERSISTENT
// RUN: not moe-opt %s -moe-gpu-kernel-config="chip=sm_100a tma-store=false" 2>&1 | FileCheck %s --check-prefix=SM100-BIAS
// RUN: %moe_obj/bin/moe-run --layer T=256,H=512,I=256,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -moe-gpu-kernel-config="chip=sm_120a tma-store=false" | FileCheck %s --check-prefix=SM120
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=8192,K=8192,G=1 --print-layer-ir | moe-opt -moe-gpu-kernel-config="tma-store=false" | FileCheck %s --check-prefix=DENSE
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=8192,K=8192,G=1 --print-layer-ir | moe-opt -moe-gpu-kernel-config="persistent-gemms=false tma-store=false" | FileCheck %s --check-prefix=DENSE-GRID
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=8192,K=8192,G=2 --print-layer-ir | moe-opt -moe-gpu-kernel-config="tma-store=false" | FileCheck %s --check-prefix=NO-RASTER
// RUN: %moe_obj/bin/moe-run --gemm M=1024,N=4096,K=8192,G=1 --print-layer-ir | moe-opt -moe-gpu-kernel-config="tma-store=false" | FileCheck %s --check-prefix=NO-RASTER
// RUN: %moe_obj/bin/moe-run --layer T=8192,H=2048,I=1024,E=1,K=1,B=128,dense=on --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -moe-gpu-kernel-config="tma-store=false" | FileCheck %s --check-prefix=DENSE-LAYER

// The kernel configuration sm_90a gives each GPU GEMM. By default every GEMM
// runs on bf16 operands, one TMA producer and two consumer warpgroups, with
// the first shape of the chip's table that applies: 4 stages of 128x256x64
// tiles for an output of 256 columns or more, except under P1's
// activation-backward epilogue; else 6 stages of 128x128x64. With mma-path=fp8 the e4m3 block GEMM whose
// shape the fp8 tiles divide takes the fp8 kernel (5 stages of
// 128x128x128), an expert GEMM of codes falls back to the bf16 kernel (the
// fp8 kernel covers block GEMMs only), and a GEMM with a bias stays on bf16
// operands (the MX paths take none). Every bf16-operands kernel but the
// recompute's (a block GEMM reading its rhs N-major) is persistent: one CTA
// per SM taking tiles from a counter, P1's (activation epilogue) as a
// ping-pong kernel; persistent-gemms=false keeps one CTA per tile.
// GRID-NOT: persistent
// GRID-LAYER-NOT: persistent
// GRID-LAYER-NOT: pingpong

// cluster-gemms pairs the CTAs of a kernel of one CTA per tile along N
// where its N tiles pair up (I = 384): not the recompute (2I = 768: 3 tiles
// of 256), but P1 (I: 2 tiles of 256), P2 (H = 512: 2 tiles of 256) and
// P4 (dWd's N = H); P3 (dWgu's N = 2I) stays alone. Persistent kernels
// take no clusters: by default only the recompute's is one CTA per tile.
// CLUSTER-LAYER:      moe.block_matmul
// CLUSTER-LAYER-SAME:   tile = [128, 256, 64]{{.*}}rhs_n_major = true, lhs_gather = true>
// CLUSTER-LAYER:      moe.block_matmul
// CLUSTER-LAYER-SAME:   tile = [128, 256, 64]{{.*}}registers = [40, 232], cluster_n = 2>
// CLUSTER-LAYER:      moe.block_matmul
// CLUSTER-LAYER-SAME:   tile = [128, 256, 64]{{.*}}registers = [40, 232], cluster_n = 2>
// CLUSTER-LAYER:      moe.expert_matmul
// CLUSTER-LAYER-SAME:   lhs_m_major = true>
// CLUSTER-LAYER:      moe.expert_matmul
// CLUSTER-LAYER-SAME:   lhs_m_major = true, cluster_n = 2>
// CLUSTER-PERSISTENT-NOT: cluster_n

// BADPATH: error: unknown MMA path 'fp4' (expected fp8, bf16, bf16-operands or block-scale)
// BADCHIP: error: unsupported GPU chip 'sm_80' (supported: sm_90a, sm_100a, sm_120a)

// CHECK-LABEL: func.func @block_codes(
// CHECK:         moe.block_matmul
// DEFAULT-SAME:    moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true>
// FP8-SAME:        moe.gemm_config = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, warpgroups = [1, 2], registers = [40, 232]>
func.func @block_codes(%lq: tensor<256x256xf8E4M3FN>, %ls: tensor<256x8xf8E8M0FNU>,
                       %rq: tensor<2x256x256xf8E4M3FN>, %rs: tensor<2x256x8xf8E8M0FNU>,
                       %blk: tensor<2xi32>) -> tensor<256x256xf32> {
  %r = moe.block_matmul
      lhs(%lq : tensor<256x256xf8E4M3FN> scales %ls : tensor<256x8xf8E8M0FNU>)
      rhs(%rq : tensor<2x256x256xf8E4M3FN> scales %rs : tensor<2x256x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64}
      -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// CHECK-LABEL: func.func @expert_codes(
// CHECK:         moe.expert_matmul
// DEFAULT-SAME:    moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true>
// FP8-SAME:        moe.gemm_config = #moe.gemm_config<mma = bf16, tile = [128, 128, 128], mma_shape = [64, 128, 16], stages = 3, dequant_stages = 2, warpgroups = [2, 2], registers = [144, 112]>
func.func @expert_codes(%hq: tensor<256x128xf8E4M3FN>, %hs: tensor<8x128xf8E8M0FNU>,
                        %dq: tensor<256x128xf8E4M3FN>, %ds: tensor<8x128xf8E8M0FNU>,
                        %blk: tensor<2xi32>) -> tensor<2x128x128xf32> {
  %r = moe.expert_matmul
      lhs(%hq : tensor<256x128xf8E4M3FN> scales %hs : tensor<8x128xf8E8M0FNU>)
      rhs(%dq : tensor<256x128xf8E4M3FN> scales %ds : tensor<8x128xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64}
      -> tensor<2x128x128xf32>
  return %r : tensor<2x128x128xf32>
}

// CHECK-LABEL: func.func @bf16_bias(
// CHECK:         moe.block_matmul
// CHECK-SAME:      moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true>
func.func @bf16_bias(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
                     %blk: tensor<2xi32>, %bias: tensor<2x128xbf16>)
    -> tensor<256x128xf32> {
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      bias(%bias : tensor<2x128xbf16>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// A configuration already set (here by hand: 4 stages) is left alone.

// CHECK-LABEL: func.func @user_set(
// CHECK:         moe.block_matmul
// CHECK-SAME:      moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>
func.func @user_set(%lq: tensor<256x256xf8E4M3FN>, %ls: tensor<256x8xf8E8M0FNU>,
                    %rq: tensor<2x256x256xf8E4M3FN>, %rs: tensor<2x256x8xf8E8M0FNU>,
                    %blk: tensor<2xi32>) -> tensor<256x256xf32> {
  %r = moe.block_matmul
      lhs(%lq : tensor<256x256xf8E4M3FN> scales %ls : tensor<256x8xf8E8M0FNU>)
      rhs(%rq : tensor<2x256x256xf8E4M3FN> scales %rs : tensor<2x256x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// A transpose_rhs weight [E, K, N] (the recompute's gate/up weight) is read
// as it is stored (rhs_n_major) on every path that takes it on bf16
// operands; with K = 96, not a multiple of the tile K 64, a K tile would
// run into the next expert's rows, so the rhs is read K-major.
// DEFAULT-LABEL: func.func @n_major(
// DEFAULT:         moe.block_matmul
// DEFAULT-SAME:      moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true>
// DEFAULT:         moe.block_matmul
// DEFAULT-SAME:      moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true>
func.func @n_major(%x: tensor<256x256xbf16>, %w: tensor<2x256x128xbf16>,
                   %x2: tensor<256x96xbf16>, %w2: tensor<2x96x128xbf16>,
                   %blk: tensor<2xi32>)
    -> (tensor<256x128xf32>, tensor<256x128xf32>) {
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x256x128xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64, transpose_rhs} -> tensor<256x128xf32>
  %r2 = moe.block_matmul lhs(%x2 : tensor<256x96xbf16>)
      rhs(%w2 : tensor<2x96x128xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64, transpose_rhs} -> tensor<256x128xf32>
  return %r, %r2 : tensor<256x128xf32>, tensor<256x128xf32>
}

// A layer's five GEMMs (I = 256, H = 512): every output has 256 columns or
// more, so each takes 128x256 tiles, P1's too (a plain GEMM that stores
// dA: the activation backward of its moe.fused region becomes the operand
// kernel of the GEMMs after it). With act-epilogue, P1's kernel computes it:
// 128x128 tiles, each computed whole by one of the two consumer warpgroups
// in turn (pingpong), which take 240 registers (the producer thread runs in
// 24).
// LAYER:      moe.fused phase(<recompute>)
// LAYER:        moe.block_matmul
// LAYER-SAME:     tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [48, 224], rhs_n_major = true, lhs_gather = true>
// LAYER:      moe.fused phase(<p1>)
// LAYER:        moe.block_matmul
// LAYER-SAME:     tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [48, 224], persistent = true, lhs_gather = true>
// LAYER:        moe.gated_act_bwd
// LAYER-EPI:  moe.fused phase(<p1>)
// LAYER-EPI:    moe.block_matmul
// LAYER-EPI-SAME: tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [24, 240], persistent = true, pingpong = true>
// LAYER:      moe.fused phase(<p2>)
// LAYER:        moe.block_matmul
// LAYER-SAME:     tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4
// LAYER:      moe.fused phase(<p3>)
// LAYER:        moe.expert_matmul
// LAYER-SAME:     tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, {{.*}}rhs_n_major = true, lhs_m_major = true
// LAYER:      moe.fused phase(<p4>)
// LAYER:        moe.expert_matmul
// LAYER-SAME:     tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, {{.*}}rhs_n_major = true, lhs_m_major = true

// A dense product (one group) of more tiles than the chip's 132 SMs takes
// its tiles in bands of 16 M tiles (raster_m), one CTA per tile or
// persistent; grouped products, and dense ones of one wave (8 x 16 tiles
// here), keep N fastest. In a dense layer the block GEMMs (recompute, P1,
// P2) are dense products; the expert GEMMs contract over the slots of one
// group and keep their order.
// DENSE:      persistent = true, raster_m = 16>
// DENSE-GRID: registers = [40, 232], raster_m = 16>
// NO-RASTER-NOT: raster_m
// DENSE-LAYER:      moe.fused phase(<recompute>)
// DENSE-LAYER:        moe.block_matmul
// DENSE-LAYER-SAME:     rhs_n_major = true, raster_m = 16, lhs_gather = true>
// DENSE-LAYER:      moe.fused phase(<p1>)
// DENSE-LAYER:        moe.block_matmul
// DENSE-LAYER-SAME:     registers = [48, 224], persistent = true, raster_m = 16, lhs_gather = true>
// DENSE-LAYER:      moe.fused phase(<p2>)
// DENSE-LAYER:        moe.block_matmul
// DENSE-LAYER-SAME:     persistent = true, raster_m = 16>
// DENSE-LAYER:      moe.fused phase(<p3>)
// DENSE-LAYER:        moe.expert_matmul
// DENSE-LAYER-SAME:     lhs_m_major = true, persistent = true>
// DENSE-LAYER:      moe.fused phase(<p4>)
// DENSE-LAYER:        moe.expert_matmul
// DENSE-LAYER-SAME:     lhs_m_major = true, persistent = true>

// sm_100a: every GEMM of MX codes takes the block_scale kernel (a 128 x 128
// x 128 tile, one 128 x 128 x 32 tcgen05.mma per K = 32, 4 stages, a
// producer and an MMA / epilogue warpgroup); a GEMM of bf16 operands or
// with a bias has no kernel there.
// SM100-COUNT-5: mma = block_scale, tile = [128, 128, 128], mma_shape = [128, 128, 32], stages = 4, warpgroups = [1, 1], registers = [40, 232]>
// SM100-NOT:     gemm_config
// SM100-BIAS: error: 'moe.block_matmul' op has bf16 operands or a bias, and sm_100a has GEMM kernels only for MX codes without bias (the block-scale MMA path)

// sm_120a: the block_scale kernel of warp-level m16n8k32 mma.sync (a 128 x
// 128 x 128 tile, 2 stages in its 99 KB, a producer and two consumer
// warpgroups).
// SM120-COUNT-5: mma = block_scale, tile = [128, 128, 128], mma_shape = [16, 8, 32], stages = 2, warpgroups = [1, 2], registers = [40, 232]>
// SM120-NOT:     gemm_config
