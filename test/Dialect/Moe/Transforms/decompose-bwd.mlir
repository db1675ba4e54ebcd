// RUN: moe-opt %s --moe-decompose-bwd | FileCheck %s
// RUN: moe-opt %s --moe-decompose-bwd | moe-opt | FileCheck %s
// The decomposition of moe.blockwise_bwd into phase-level ops, one function
// per option that changes it. Shapes: T = 64, H = 96, I = 32 (2I = 64),
// E = 2, K = 2, B = 128, so N = 2 blocks and S = 256 slots; MX scales along
// H have 3 blocks, along 2I 2, along I 1 and along the slots 8.

// The default op: SwiGLU, affinity on I, MXFP8 e4m3 with RCEIL, no clamp,
// no bias, g|u recomputed, bf16 weights, bf16 dx with an f32 running sum,
// f32 weight gradients. Every op of the decomposition, in order.
// CHECK-LABEL: func.func @defaults
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<64x96xbf16>, %[[DY:[a-z0-9]+]]: tensor<64x96xbf16>, %[[AFF:[a-z0-9]+]]: tensor<128xf32>, %[[WGU:[a-z0-9]+]]: tensor<2x96x2x32xbf16>, %[[WD:[a-z0-9]+]]: tensor<2x32x96xbf16>, %[[TOK:[a-z0-9]+]]: tensor<256xi32>, %[[BLK:[a-z0-9]+]]: tensor<2xi32>)
// CHECK-NEXT: %[[XR:.*]] = moe.gather_rows %[[X]][%[[TOK]]] : tensor<64x96xbf16>, tensor<256xi32> -> tensor<256x96xbf16>
// CHECK-NEXT: %[[DYR:.*]] = moe.gather_rows %[[DY]][%[[TOK]]] : tensor<64x96xbf16>, tensor<256xi32> -> tensor<256x96xbf16>
// CHECK-NEXT: %[[A:.*]] = moe.slot_affinities %[[AFF]], %[[TOK]], %[[BLK]] {block_size = 128 : i64, num_experts = 2 : i64} : tensor<128xf32>, tensor<256xi32>, tensor<2xi32> -> tensor<256xf32>
// CHECK-NEXT: %[[W:.*]] = tensor.collapse_shape %[[WGU]] {{\[\[}}0], [1], [2, 3]] : tensor<2x96x2x32xbf16> into tensor<2x96x64xbf16>
// Recomputation of g|u: x rows and Wgu along H, the axis it contracts.
// CHECK-NEXT: %[[XQ:.*]], %[[XS:.*]] = moe.mx_quantize %[[XR]] {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x96xbf16> -> tensor<256x96xf8E4M3FN>, tensor<256x3xf8E8M0FNU>
// CHECK-NEXT: %[[WHQ:.*]], %[[WHS:.*]] = moe.mx_quantize %[[W]] {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E4M3FN>, tensor<2x3x64xf8E8M0FNU>
// CHECK-NEXT: %[[GU:.*]] = moe.block_matmul lhs(%[[XQ]] : tensor<256x96xf8E4M3FN> scales %[[XS]] : tensor<256x3xf8E8M0FNU>) rhs(%[[WHQ]] : tensor<2x96x64xf8E4M3FN> scales %[[WHS]] : tensor<2x3x64xf8E8M0FNU>) experts(%[[BLK]] : tensor<2xi32>) tokens(%[[TOK]] : tensor<256xi32>) {block_size = 128 : i64, transpose_rhs} -> tensor<256x64xf32>
// P1: dy rows and Wd along H.
// CHECK-NEXT: %[[DYQ:.*]], %[[DYS:.*]] = moe.mx_quantize %[[DYR]] {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x96xbf16> -> tensor<256x96xf8E4M3FN>, tensor<256x3xf8E8M0FNU>
// CHECK-NEXT: %[[WDQ:.*]], %[[WDS:.*]] = moe.mx_quantize %[[WD]] {axis = 2 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<2x32x96xbf16> -> tensor<2x32x96xf8E4M3FN>, tensor<2x32x3xf8E8M0FNU>
// CHECK-NEXT: %[[DA:.*]] = moe.block_matmul lhs(%[[DYQ]] : tensor<256x96xf8E4M3FN> scales %[[DYS]] : tensor<256x3xf8E8M0FNU>) rhs(%[[WDQ]] : tensor<2x32x96xf8E4M3FN> scales %[[WDS]] : tensor<2x32x3xf8E8M0FNU>) experts(%[[BLK]] : tensor<2xi32>) tokens(%[[TOK]] : tensor<256xi32>) {block_size = 128 : i64} -> tensor<256x32xf32>
// CHECK-NEXT: %[[DGU:.*]], %[[H:.*]] = moe.gated_act_bwd %[[GU]], %[[DA]], %[[A]] : tensor<256x64xf32>, tensor<256x32xf32>, tensor<256xf32> -> tensor<256x64xf32>, tensor<256x32xf32>
// CHECK-NEXT: %[[DAFF:.*]] = moe.affinity_grad %[[DA]] dot %[[H]], %[[TOK]], %[[BLK]] {block_size = 128 : i64, num_experts = 2 : i64} : tensor<256x32xf32> dot tensor<256x32xf32>, tensor<256xi32>, tensor<2xi32> -> tensor<128xf32>
// P2: [dg|du] rows and Wgu along 2I.
// CHECK-NEXT: %[[DGQ:.*]], %[[DGS:.*]] = moe.mx_quantize %[[DGU]] {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x64xf32> -> tensor<256x64xf8E4M3FN>, tensor<256x2xf8E8M0FNU>
// CHECK-NEXT: %[[WIQ:.*]], %[[WIS:.*]] = moe.mx_quantize %[[W]] {axis = 2 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E4M3FN>, tensor<2x96x2xf8E8M0FNU>
// CHECK-NEXT: %[[C:.*]] = moe.block_matmul lhs(%[[DGQ]] : tensor<256x64xf8E4M3FN> scales %[[DGS]] : tensor<256x2xf8E8M0FNU>) rhs(%[[WIQ]] : tensor<2x96x64xf8E4M3FN> scales %[[WIS]] : tensor<2x96x2xf8E8M0FNU>) experts(%[[BLK]] : tensor<2xi32>) tokens(%[[TOK]] : tensor<256xi32>) {block_size = 128 : i64} -> tensor<256x96xf32>
// CHECK-NEXT: %[[DX:.*]] = moe.scatter_add_rows %[[C]][%[[TOK]]], %[[BLK]] {block_size = 128 : i64, num_experts = 2 : i64, top_k = 2 : i64} : tensor<256x96xf32>, tensor<256xi32>, tensor<2xi32> -> tensor<64x96xbf16>
// P3: x rows and [dg|du] along the slots.
// CHECK-NEXT: %[[XTQ:.*]], %[[XTS:.*]] = moe.mx_quantize %[[XR]] {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x96xbf16> -> tensor<256x96xf8E4M3FN>, tensor<8x96xf8E8M0FNU>
// CHECK-NEXT: %[[DGTQ:.*]], %[[DGTS:.*]] = moe.mx_quantize %[[DGU]] {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x64xf32> -> tensor<256x64xf8E4M3FN>, tensor<8x64xf8E8M0FNU>
// CHECK-NEXT: %[[P3:.*]] = moe.expert_matmul lhs(%[[XTQ]] : tensor<256x96xf8E4M3FN> scales %[[XTS]] : tensor<8x96xf8E8M0FNU>) rhs(%[[DGTQ]] : tensor<256x64xf8E4M3FN> scales %[[DGTS]] : tensor<8x64xf8E8M0FNU>) experts(%[[BLK]] : tensor<2xi32>) tokens(%[[TOK]] : tensor<256xi32>) {block_size = 128 : i64} -> tensor<2x96x64xf32>
// CHECK-NEXT: %[[DWGU:.*]] = tensor.expand_shape %[[P3]] {{\[\[}}0], [1], [2, 3]] output_shape [2, 96, 2, 32] : tensor<2x96x64xf32> into tensor<2x96x2x32xf32>
// P4 with the affinity on I: a*h and dy rows along the slots.
// CHECK-NEXT: %[[AH:.*]] = moe.scale_rows %[[H]], %[[A]] : tensor<256x32xf32>, tensor<256xf32> -> tensor<256x32xf32>
// CHECK-NEXT: %[[AHQ:.*]], %[[AHS:.*]] = moe.mx_quantize %[[AH]] {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x32xf32> -> tensor<256x32xf8E4M3FN>, tensor<8x32xf8E8M0FNU>
// CHECK-NEXT: %[[DYTQ:.*]], %[[DYTS:.*]] = moe.mx_quantize %[[DYR]] {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x96xbf16> -> tensor<256x96xf8E4M3FN>, tensor<8x96xf8E8M0FNU>
// CHECK-NEXT: %[[DWD:.*]] = moe.expert_matmul lhs(%[[AHQ]] : tensor<256x32xf8E4M3FN> scales %[[AHS]] : tensor<8x32xf8E8M0FNU>) rhs(%[[DYTQ]] : tensor<256x96xf8E4M3FN> scales %[[DYTS]] : tensor<8x96xf8E8M0FNU>) experts(%[[BLK]] : tensor<2xi32>) tokens(%[[TOK]] : tensor<256xi32>) {block_size = 128 : i64} -> tensor<2x32x96xf32>
// CHECK-NEXT: return %[[DX]], %[[DAFF]], %[[DWGU]], %[[DWD]] : tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
func.func @defaults(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// A bf16 checkpoint replaces the recomputation: its rows feed the
// activation backward, zeroed on padding slots (tok < 0); no GEMM contracts
// over H for g|u, so only P1 and P2 remain as block GEMMs.
// CHECK-LABEL: func.func @checkpoint
// CHECK-SAME: %[[TOK:[a-z0-9]+]]: tensor<256xi32>, %{{.*}}: tensor<2xi32>, %[[CKPT:[a-z0-9]+]]: tensor<2x2x32x128xbf16>
// CHECK-NOT: transpose_rhs
// CHECK: %[[GU:.*]] = moe.unpack_checkpoint %[[CKPT]] : tensor<2x2x32x128xbf16> -> tensor<256x64xf32>
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0> : tensor<256xi32>
// CHECK-NEXT: %[[HOLDS:.*]] = arith.cmpi sge, %[[TOK]], %[[ZERO]] : tensor<256xi32>
// CHECK-NEXT: %[[VALID:.*]] = arith.uitofp %[[HOLDS]] : tensor<256xi1> to tensor<256xf32>
// CHECK-NEXT: %[[GUM:.*]] = moe.scale_rows %[[GU]], %[[VALID]] : tensor<256x64xf32>, tensor<256xf32> -> tensor<256x64xf32>
// CHECK: %[[DA:.*]] = moe.block_matmul {{.*}} -> tensor<256x32xf32>
// CHECK-NEXT: moe.gated_act_bwd %[[GUM]], %[[DA]], %{{.*}} :
// CHECK-COUNT-6: moe.mx_quantize
// CHECK-NOT: moe.mx_quantize
// CHECK-NOT: transpose_rhs
// CHECK: return
func.func @checkpoint(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>,
    %ckpt: tensor<2x2x32x128xbf16>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      checkpoint(%ckpt : tensor<2x2x32x128xbf16>)
      {block_size = 128 : i64, top_k = 2 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// Bias: the recomputation adds bgu (as [E, 2I]) and zeroes the padding rows
// it gave the bias; da gets <dy, bd>; dbgu sums [dg|du] per expert and dbd
// sums a*dy per expert.
// CHECK-LABEL: func.func @bias
// CHECK-SAME: %[[TOK:[a-z0-9]+]]: tensor<256xi32>, %[[BLK:[a-z0-9]+]]: tensor<2xi32>, %[[BGU:[a-z0-9]+]]: tensor<2x2x32xf32>, %[[BD:[a-z0-9]+]]: tensor<2x96xbf16>
// CHECK: moe.gather_rows
// CHECK-NEXT: %[[DYR:.*]] = moe.gather_rows %{{.*}}[%[[TOK]]] : tensor<64x96xbf16>, tensor<256xi32> -> tensor<256x96xbf16>
// CHECK-NEXT: %[[A:.*]] = moe.slot_affinities
// CHECK: %[[B:.*]] = tensor.collapse_shape %[[BGU]] {{\[\[}}0], [1, 2]] : tensor<2x2x32xf32> into tensor<2x64xf32>
// CHECK-NEXT: %[[GU:.*]] = moe.block_matmul {{.*}} bias(%[[B]] : tensor<2x64xf32>) {block_size = 128 : i64, transpose_rhs} -> tensor<256x64xf32>
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0> : tensor<256xi32>
// CHECK-NEXT: %[[HOLDS:.*]] = arith.cmpi sge, %[[TOK]], %[[ZERO]] : tensor<256xi32>
// CHECK-NEXT: %[[VALID:.*]] = arith.uitofp %[[HOLDS]] : tensor<256xi1> to tensor<256xf32>
// CHECK-NEXT: %[[GUM:.*]] = moe.scale_rows %[[GU]], %[[VALID]]
// CHECK: %[[DA:.*]] = moe.block_matmul {{.*}} -> tensor<256x32xf32>
// CHECK-NEXT: %[[DGU:.*]], %[[H:.*]] = moe.gated_act_bwd %[[GUM]], %[[DA]], %[[A]]
// CHECK-NEXT: moe.affinity_grad %[[DA]] dot %[[H]], %[[TOK]], %[[BLK]] bias(%[[DYR]], %[[BD]]) {block_size = 128 : i64, num_experts = 2 : i64} : tensor<256x32xf32> dot tensor<256x32xf32>, tensor<256xi32>, tensor<2xi32>, tensor<256x96xbf16>, tensor<2x96xbf16> -> tensor<128xf32>
// CHECK: %[[DWD:.*]] = moe.expert_matmul {{.*}} -> tensor<2x32x96xf32>
// CHECK-NEXT: %[[SB:.*]] = moe.expert_sum %[[DGU]], %[[BLK]] {block_size = 128 : i64} : tensor<256x64xf32>, tensor<2xi32> -> tensor<2x64xf32>
// CHECK-NEXT: %[[DBGU:.*]] = tensor.expand_shape %[[SB]] {{\[\[}}0], [1, 2]] output_shape [2, 2, 32] : tensor<2x64xf32> into tensor<2x2x32xf32>
// CHECK-NEXT: %[[ADY:.*]] = moe.scale_rows %[[DYR]], %[[A]] : tensor<256x96xbf16>, tensor<256xf32> -> tensor<256x96xf32>
// CHECK-NEXT: %[[DBD:.*]] = moe.expert_sum %[[ADY]], %[[BLK]] {block_size = 128 : i64} : tensor<256x96xf32>, tensor<2xi32> -> tensor<2x96xf32>
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %{{.*}}, %[[DWD]], %[[DBGU]], %[[DBD]] :
func.func @bias(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>,
    %bgu: tensor<2x2x32xf32>, %bd: tensor<2x96xbf16>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>, tensor<2x2x32xf32>, tensor<2x96xf32>) {
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>) down_bias(%bd : tensor<2x96xbf16>)
      {block_size = 128 : i64, top_k = 2 : i64, bias,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
         tensor<2x32x96xf32>, tensor<2x2x32xf32>, tensor<2x96xf32>
  return %dx, %da, %dwgu, %dwd, %dbgu, %dbd
      : tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>, tensor<2x2x32xf32>, tensor<2x96xf32>
}

// Affinity on H: P4 quantizes h itself and a*dy along the slots.
// CHECK-LABEL: func.func @on_h
// CHECK: moe.gather_rows
// CHECK-NEXT: %[[DYR:.*]] = moe.gather_rows %{{.*}} : tensor<64x96xbf16>, tensor<256xi32> -> tensor<256x96xbf16>
// CHECK-NEXT: %[[A:.*]] = moe.slot_affinities
// CHECK: %{{.*}}, %[[H:.*]] = moe.gated_act_bwd
// CHECK: tensor.expand_shape
// CHECK-NEXT: %[[ADY:.*]] = moe.scale_rows %[[DYR]], %[[A]] : tensor<256x96xbf16>, tensor<256xf32> -> tensor<256x96xf32>
// CHECK-NEXT: %[[HQ:.*]], %[[HS:.*]] = moe.mx_quantize %[[H]] {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x32xf32> -> tensor<256x32xf8E4M3FN>, tensor<8x32xf8E8M0FNU>
// CHECK-NEXT: %[[ADYQ:.*]], %[[ADYS:.*]] = moe.mx_quantize %[[ADY]] {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<256x96xf32> -> tensor<256x96xf8E4M3FN>, tensor<8x96xf8E8M0FNU>
// CHECK-NEXT: moe.expert_matmul lhs(%[[HQ]] : tensor<256x32xf8E4M3FN> scales %[[HS]] : tensor<8x32xf8E8M0FNU>) rhs(%[[ADYQ]] : tensor<256x96xf8E4M3FN> scales %[[ADYS]] : tensor<8x96xf8E8M0FNU>) experts(%{{.*}} : tensor<2xi32>) tokens(%{{.*}} : tensor<256xi32>) {block_size = 128 : i64} -> tensor<2x32x96xf32>
// CHECK-NEXT: return
func.func @on_h(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       affinity = #moe.affinity<on_h>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// Affinity on H with bias: one a*dy feeds both P4 and dbd.
// CHECK-LABEL: func.func @on_h_bias
// CHECK: %[[ADY:.*]] = moe.scale_rows %{{.*}}, %{{.*}} : tensor<256x96xbf16>, tensor<256xf32> -> tensor<256x96xf32>
// CHECK: moe.mx_quantize %[[ADY]] {axis = 0 : i64
// CHECK-NOT: moe.scale_rows
// CHECK: moe.expert_sum %[[ADY]], %{{.*}} {block_size = 128 : i64} : tensor<256x96xf32>, tensor<2xi32> -> tensor<2x96xf32>
func.func @on_h_bias(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>,
    %bgu: tensor<2x2x32xbf16>, %bd: tensor<2x96xf32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>, tensor<2x2x32xf32>, tensor<2x96xf32>) {
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xbf16>) down_bias(%bd : tensor<2x96xf32>)
      {block_size = 128 : i64, top_k = 2 : i64, bias,
       affinity = #moe.affinity<on_h>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
         tensor<2x32x96xf32>, tensor<2x2x32xf32>, tensor<2x96xf32>
  return %dx, %da, %dwgu, %dwd, %dbgu, %dbd
      : tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>, tensor<2x2x32xf32>, tensor<2x96xf32>
}

// quant = none: no MX quantization; bf16 tensors feed the GEMMs as they are
// and f32 ones are rounded to bf16 once ([dg|du] serves P2 and P3).
// CHECK-LABEL: func.func @quant_none
// CHECK-SAME: %[[WGU:[a-z0-9]+]]: tensor<2x96x2x32xbf16>, %[[WD:[a-z0-9]+]]: tensor<2x32x96xbf16>
// CHECK-NOT: moe.mx_quantize
// CHECK: %[[XR:.*]] = moe.gather_rows
// CHECK-NEXT: %[[DYR:.*]] = moe.gather_rows
// CHECK-NEXT: %[[A:.*]] = moe.slot_affinities
// CHECK-NEXT: %[[W:.*]] = tensor.collapse_shape %[[WGU]]
// CHECK-NEXT: %[[GU:.*]] = moe.block_matmul lhs(%[[XR]] : tensor<256x96xbf16>) rhs(%[[W]] : tensor<2x96x64xbf16>) experts(%{{.*}} : tensor<2xi32>) tokens(%{{.*}} : tensor<256xi32>) {block_size = 128 : i64, transpose_rhs} -> tensor<256x64xf32>
// CHECK-NEXT: %[[DA:.*]] = moe.block_matmul lhs(%[[DYR]] : tensor<256x96xbf16>) rhs(%[[WD]] : tensor<2x32x96xbf16>) experts(%{{.*}} : tensor<2xi32>) tokens(%{{.*}} : tensor<256xi32>) {block_size = 128 : i64} -> tensor<256x32xf32>
// CHECK-NEXT: %[[DGU:.*]], %[[H:.*]] = moe.gated_act_bwd %[[GU]], %[[DA]], %[[A]]
// CHECK-NEXT: moe.affinity_grad
// CHECK-NEXT: %[[DGB:.*]] = arith.truncf %[[DGU]] : tensor<256x64xf32> to tensor<256x64xbf16>
// CHECK-NEXT: %[[C:.*]] = moe.block_matmul lhs(%[[DGB]] : tensor<256x64xbf16>) rhs(%[[W]] : tensor<2x96x64xbf16>) experts(%{{.*}} : tensor<2xi32>) tokens(%{{.*}} : tensor<256xi32>) {block_size = 128 : i64} -> tensor<256x96xf32>
// CHECK-NEXT: moe.scatter_add_rows %[[C]]
// CHECK-NEXT: moe.expert_matmul lhs(%[[XR]] : tensor<256x96xbf16>) rhs(%[[DGB]] : tensor<256x64xbf16>) experts(%{{.*}} : tensor<2xi32>) tokens(%{{.*}} : tensor<256xi32>) {block_size = 128 : i64} -> tensor<2x96x64xf32>
// CHECK-NEXT: tensor.expand_shape
// CHECK-NEXT: %[[AH:.*]] = moe.scale_rows %[[H]], %[[A]] : tensor<256x32xf32>, tensor<256xf32> -> tensor<256x32xf32>
// CHECK-NEXT: %[[AHB:.*]] = arith.truncf %[[AH]] : tensor<256x32xf32> to tensor<256x32xbf16>
// CHECK-NEXT: moe.expert_matmul lhs(%[[AHB]] : tensor<256x32xbf16>) rhs(%[[DYR]] : tensor<256x96xbf16>) experts(%{{.*}} : tensor<2xi32>) tokens(%{{.*}} : tensor<256xi32>) {block_size = 128 : i64} -> tensor<2x32x96xf32>
// CHECK-NEXT: return
func.func @quant_none(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       quant = #moe.mx<none, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// quant = none with the affinity on H: h and a*dy are rounded to bf16.
// CHECK-LABEL: func.func @quant_none_on_h
// CHECK-NOT: moe.mx_quantize
// CHECK: %{{.*}}, %[[H:.*]] = moe.gated_act_bwd
// CHECK: %[[ADY:.*]] = moe.scale_rows %{{.*}}, %{{.*}} : tensor<256x96xbf16>, tensor<256xf32> -> tensor<256x96xf32>
// CHECK-NEXT: %[[HB:.*]] = arith.truncf %[[H]] : tensor<256x32xf32> to tensor<256x32xbf16>
// CHECK-NEXT: %[[ADYB:.*]] = arith.truncf %[[ADY]] : tensor<256x96xf32> to tensor<256x96xbf16>
// CHECK-NEXT: moe.expert_matmul lhs(%[[HB]] : tensor<256x32xbf16>) rhs(%[[ADYB]] : tensor<256x96xbf16>)
// CHECK-NOT: moe.mx_quantize
func.func @quant_none_on_h(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       affinity = #moe.affinity<on_h>,
       quant = #moe.mx<none, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// e5m2 with the FLOOR rule: every one of the ten quantizations carries the
// op's quant attribute and produces f8E5M2 codes.
// CHECK-LABEL: func.func @e5m2_floor
// CHECK-COUNT-10: moe.mx_quantize {{.*}} quant = #moe.mx<f8E5M2, block = 32, rule = floor>} : {{.*}} -> tensor<{{[0-9x]+}}xf8E5M2>, tensor<{{[0-9x]+}}xf8E8M0FNU>
// CHECK-NOT: moe.mx_quantize
// CHECK-NOT: f8E4M3FN
// CHECK: return
func.func @e5m2_floor(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// Pre-quantized weights (with the f32 checkpoint they require): Wd's codes
// and scales feed P1 directly, Wgu's codes and scales, merged to [E, H, 2I]
// and [E, H, 2I/32], feed P2; no weight is quantized.
// CHECK-LABEL: func.func @prequantized
// CHECK-SAME: %[[WGU:[a-z0-9]+]]: tensor<2x96x2x32xf8E4M3FN>, %[[SGU:[a-z0-9]+]]: tensor<2x96x2x1xf8E8M0FNU>, %[[WD:[a-z0-9]+]]: tensor<2x32x96xf8E4M3FN>, %[[SD:[a-z0-9]+]]: tensor<2x32x3xf8E8M0FNU>
// CHECK-SAME: %[[CKPT:[a-z0-9]+]]: tensor<2x2x32x128xf32>
// CHECK: %[[W:.*]] = tensor.collapse_shape %[[WGU]] {{\[\[}}0], [1], [2, 3]] : tensor<2x96x2x32xf8E4M3FN> into tensor<2x96x64xf8E4M3FN>
// CHECK-NEXT: moe.unpack_checkpoint %[[CKPT]] : tensor<2x2x32x128xf32> -> tensor<256x64xf32>
// CHECK: %[[DYQ:.*]], %[[DYS:.*]] = moe.mx_quantize %{{.*}} {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = floor_alt>} : tensor<256x96xbf16>
// CHECK-NEXT: moe.block_matmul lhs(%[[DYQ]] : tensor<256x96xf8E4M3FN> scales %[[DYS]] : tensor<256x3xf8E8M0FNU>) rhs(%[[WD]] : tensor<2x32x96xf8E4M3FN> scales %[[SD]] : tensor<2x32x3xf8E8M0FNU>) experts(%{{.*}} : tensor<2xi32>) tokens(%{{.*}} : tensor<256xi32>) {block_size = 128 : i64} -> tensor<256x32xf32>
// CHECK: %[[DGQ:.*]], %[[DGS:.*]] = moe.mx_quantize %{{.*}} {axis = 1 : i64, {{.*}}} : tensor<256x64xf32>
// CHECK-NEXT: %[[S:.*]] = tensor.collapse_shape %[[SGU]] {{\[\[}}0], [1], [2, 3]] : tensor<2x96x2x1xf8E8M0FNU> into tensor<2x96x2xf8E8M0FNU>
// CHECK-NEXT: moe.block_matmul lhs(%[[DGQ]] : tensor<256x64xf8E4M3FN> scales %[[DGS]] : tensor<256x2xf8E8M0FNU>) rhs(%[[W]] : tensor<2x96x64xf8E4M3FN> scales %[[S]] : tensor<2x96x2xf8E8M0FNU>) experts(%{{.*}} : tensor<2xi32>) tokens(%{{.*}} : tensor<256xi32>) {block_size = 128 : i64} -> tensor<256x96xf32>
// CHECK-NOT: moe.mx_quantize %[[W]]
// CHECK-NOT: moe.mx_quantize %[[WD]]
// CHECK: return
func.func @prequantized(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xf8E4M3FN>,
    %sgu: tensor<2x96x2x1xf8E8M0FNU>, %wd: tensor<2x32x96xf8E4M3FN>,
    %sd: tensor<2x32x3xf8E8M0FNU>, %tok: tensor<256xi32>,
    %blk: tensor<2xi32>, %ckpt: tensor<2x2x32x128xf32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xf8E4M3FN>
              scales %sgu : tensor<2x96x2x1xf8E8M0FNU>)
      down(%wd : tensor<2x32x96xf8E4M3FN> scales %sd : tensor<2x32x3xf8E8M0FNU>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      checkpoint(%ckpt : tensor<2x2x32x128xf32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = floor_alt>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// bf16 weight gradients: the f32 GEMM results are rounded once, at the end.
// CHECK-LABEL: func.func @bf16_weight_grads
// CHECK: %[[P3:.*]] = moe.expert_matmul {{.*}} -> tensor<2x96x64xf32>
// CHECK-NEXT: %[[E:.*]] = tensor.expand_shape %[[P3]] {{.*}} : tensor<2x96x64xf32> into tensor<2x96x2x32xf32>
// CHECK-NEXT: %[[DWGU:.*]] = arith.truncf %[[E]] : tensor<2x96x2x32xf32> to tensor<2x96x2x32xbf16>
// CHECK: %[[P4:.*]] = moe.expert_matmul {{.*}} -> tensor<2x32x96xf32>
// CHECK-NEXT: %[[DWD:.*]] = arith.truncf %[[P4]] : tensor<2x32x96xf32> to tensor<2x32x96xbf16>
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[DWGU]], %[[DWD]] :
func.func @bf16_weight_grads(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xbf16>,
        tensor<2x32x96xbf16>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xbf16>, tensor<2x32x96xbf16>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xbf16>, tensor<2x32x96xbf16>
}

// An f32 dx: the running sum is returned without rounding.
// CHECK-LABEL: func.func @f32_dx
// CHECK: %[[DX:.*]] = moe.scatter_add_rows %{{.*}}[%{{.*}}], %{{.*}} {block_size = 128 : i64, num_experts = 2 : i64, top_k = 2 : i64} : tensor<256x96xf32>, tensor<256xi32>, tensor<2xi32> -> tensor<64x96xf32>
// CHECK: return %[[DX]],
func.func @f32_dx(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xf32>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xf32>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xf32>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// bf16 dx accumulation: the scatter-add rounds after every expert.
// CHECK-LABEL: func.func @bf16_dx_accumulate
// CHECK: %[[DX:.*]] = moe.scatter_add_rows %{{.*}}[%{{.*}}], %{{.*}} {block_size = 128 : i64, dx_accumulate = #moe.dx_accumulate<bf16>, num_experts = 2 : i64, top_k = 2 : i64} : tensor<256x96xf32>, tensor<256xi32>, tensor<2xi32> -> tensor<64x96xbf16>
// CHECK: return %[[DX]],
func.func @bf16_dx_accumulate(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       dx_accumulate = #moe.dx_accumulate<bf16>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// GeGLU with clamp limits: the activation backward carries both.
// CHECK-LABEL: func.func @geglu_clamp
// CHECK: moe.gated_act_bwd %{{.*}}, %{{.*}}, %{{.*}} {activation = #moe.activation<geglu>, clamp = #moe.clamp<gate_hi = 7.000000e+00, up_lo = -7.000000e+00, up_hi = 7.000000e+00>} : tensor<256x64xf32>, tensor<256x32xf32>, tensor<256xf32> -> tensor<256x64xf32>, tensor<256x32xf32>
func.func @geglu_clamp(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>) down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       activation = #moe.activation<geglu>,
       clamp = #moe.clamp<gate_hi = 7.0, up_lo = -7.0, up_hi = 7.0>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// E = 1, K = 1 dense: identity routing is just a routing, so the same
// decomposition with one expert (T = 100, N = 1, S = 128).
// CHECK-LABEL: func.func @single_expert_dense
// CHECK: moe.slot_affinities {{.*}} {block_size = 128 : i64, num_experts = 1 : i64} : tensor<100xf32>, tensor<128xi32>, tensor<1xi32> -> tensor<128xf32>
// CHECK: moe.block_matmul {{.*}} -> tensor<128x64xf32>
// CHECK: moe.block_matmul {{.*}} -> tensor<128x32xf32>
// CHECK: moe.affinity_grad {{.*}} {block_size = 128 : i64, num_experts = 1 : i64} {{.*}} -> tensor<100xf32>
// CHECK: moe.scatter_add_rows {{.*}} {block_size = 128 : i64, num_experts = 1 : i64, top_k = 1 : i64} : {{.*}} -> tensor<100x96xbf16>
// CHECK: moe.expert_matmul {{.*}} -> tensor<1x96x64xf32>
// CHECK: moe.expert_matmul {{.*}} -> tensor<1x32x96xf32>
// CHECK-NOT: moe.blockwise_bwd
func.func @single_expert_dense(%x: tensor<100x96xbf16>,
    %dy: tensor<100x96xbf16>, %aff: tensor<100xf32>,
    %wgu: tensor<1x96x2x32xbf16>, %wd: tensor<1x32x96xbf16>,
    %tok: tensor<128xi32>, %blk: tensor<1xi32>)
    -> (tensor<100x96xbf16>, tensor<100xf32>, tensor<1x96x2x32xf32>,
        tensor<1x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<100x96xbf16>) dy(%dy : tensor<100x96xbf16>)
      affinities(%aff : tensor<100xf32>)
      gate_up(%wgu : tensor<1x96x2x32xbf16>) down(%wd : tensor<1x32x96xbf16>)
      routing(%tok : tensor<128xi32>, %blk : tensor<1xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, single_expert_dense,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<100x96xbf16>, tensor<100xf32>,
         tensor<1x96x2x32xf32>, tensor<1x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<100x96xbf16>, tensor<100xf32>,
      tensor<1x96x2x32xf32>, tensor<1x32x96xf32>
}
