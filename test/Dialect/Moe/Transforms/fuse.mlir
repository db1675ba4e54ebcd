// RUN: moe-opt -moe-fuse %s | FileCheck %s --enable-var-scope
// RUN: moe-opt -moe-fuse -moe-fuse %s | FileCheck %s --enable-var-scope
// RUN: moe-opt -moe-fuse %s > %t.once
// RUN: moe-opt -moe-fuse %t.once > %t.twice
// RUN: diff %t.once %t.twice
// RUN: moe-opt -moe-decompose-bwd -moe-fuse %s \
// RUN:   | FileCheck %s --check-prefix=PIPE --enable-var-scope
//
// moe-fuse on hand-written decomposed backward passes (T = 48, H = 96,
// I = 32, E = 2, K = 2, B = 32, N = 4, S = 128): one moe.fused per GEMM,
// prologue producers cloned in, epilogue consumers moved in, weight
// quantization left outside. Running the pass twice changes nothing. The
// PIPE checks at the end run it on what moe-decompose-bwd makes of
// moe.blockwise_bwd (B = 128 there, as that op requires).

#mx = #moe.mx<f8E4M3FN, block = 32, rule = rceil>
#mx5 = #moe.mx<f8E5M2, block = 32, rule = floor>

// The default case (e4m3, recompute, affinity on I), checked op by op: five
// regions, and outside them only the weights' reshape and quantization.
// P1 yields da and the MX copies of [dg|du] (along 2I and along slots) and of
// a*h; P2, P3 and P4 read them. The gathers of x and dy are cloned into
// every region that loads x or dy, and the originals are gone.
// CHECK-LABEL: func.func @default(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<48x96xbf16>, %[[DY:[^:]+]]: tensor<48x96xbf16>, %[[AFF:[^:]+]]: tensor<96xf32>, %[[WGU:[^:]+]]: tensor<2x96x2x32xbf16>, %[[WD:[^:]+]]: tensor<2x32x96xbf16>, %[[TOK:[^:]+]]: tensor<128xi32>, %[[BLK:[^:]+]]: tensor<4xi32>)
// CHECK-NEXT:    %[[WGU2:.+]] = tensor.collapse_shape %[[WGU]]
// CHECK-NEXT:    %[[WQ:[^ ,]+]], %[[WS:[^ ]+]] = moe.mx_quantize %[[WGU2]] {axis = 1 : i64
// CHECK-NEXT:    %[[GU:.+]] = moe.fused phase(<recompute>) ins(%[[X]], %[[TOK]], %[[WQ]], %[[WS]], %[[BLK]] : tensor<48x96xbf16>, tensor<128xi32>, tensor<2x96x64xf8E4M3FN>, tensor<2x3x64xf8E8M0FNU>, tensor<4xi32>) {
// CHECK-NEXT:    ^bb0(%[[R0:[^:]+]]: tensor<48x96xbf16>, %[[R1:[^:]+]]: tensor<128xi32>, %[[R2:[^:]+]]: tensor<2x96x64xf8E4M3FN>, %[[R3:[^:]+]]: tensor<2x3x64xf8E8M0FNU>, %[[R4:[^:]+]]: tensor<4xi32>):
// CHECK-NEXT:      %[[XR:.+]] = moe.gather_rows %[[R0]][%[[R1]]]
// CHECK-NEXT:      %[[XQ:[^ ,]+]], %[[XS:[^ ]+]] = moe.mx_quantize %[[XR]] {axis = 1 : i64
// CHECK-NEXT:      %[[G:.+]] = moe.block_matmul lhs(%[[XQ]] : tensor<128x96xf8E4M3FN> scales %[[XS]] : tensor<128x3xf8E8M0FNU>) rhs(%[[R2]] : tensor<2x96x64xf8E4M3FN> scales %[[R3]] : tensor<2x3x64xf8E8M0FNU>) experts(%[[R4]] : tensor<4xi32>) {block_size = 32 : i64, transpose_rhs} -> tensor<128x64xf32>
// CHECK-NEXT:      moe.yield %[[G]] : tensor<128x64xf32>
// CHECK-NEXT:    } -> tensor<128x64xf32>
// CHECK-NEXT:    %[[WDQ:[^ ,]+]], %[[WDS:[^ ]+]] = moe.mx_quantize %[[WD]] {axis = 2 : i64
// CHECK-NEXT:    %[[P1:[^:]+]]:7 = moe.fused phase(<p1>) ins(%[[DY]], %[[TOK]], %[[WDQ]], %[[WDS]], %[[BLK]], %[[GU]], %[[AFF]] : tensor<48x96xbf16>, tensor<128xi32>, tensor<2x32x96xf8E4M3FN>, tensor<2x32x3xf8E8M0FNU>, tensor<4xi32>, tensor<128x64xf32>, tensor<96xf32>) {
// CHECK-NEXT:    ^bb0(%[[Q0:[^:]+]]: {{[^,]*}}, %[[Q1:[^:]+]]: {{[^,]*}}, %[[Q2:[^:]+]]: {{[^,]*}}, %[[Q3:[^:]+]]: {{[^,]*}}, %[[Q4:[^:]+]]: {{[^,]*}}, %[[Q5:[^:]+]]: {{[^,]*}}, %[[Q6:[^:]+]]: {{[^,]*}}):
// CHECK-NEXT:      %[[DYR:.+]] = moe.gather_rows %[[Q0]][%[[Q1]]]
// CHECK-NEXT:      %[[DYQ:[^ ,]+]], %[[DYS:[^ ]+]] = moe.mx_quantize %[[DYR]] {axis = 1 : i64
// CHECK-NEXT:      %[[DA:.+]] = moe.block_matmul lhs(%[[DYQ]] : tensor<128x96xf8E4M3FN> scales %[[DYS]] : tensor<128x3xf8E8M0FNU>) rhs(%[[Q2]] : tensor<2x32x96xf8E4M3FN> scales %[[Q3]] : tensor<2x32x3xf8E8M0FNU>) experts(%[[Q4]] : tensor<4xi32>) {block_size = 32 : i64} -> tensor<128x32xf32>
// CHECK-NEXT:      %[[A:.+]] = moe.slot_affinities %[[Q6]], %[[Q1]], %[[Q4]]
// CHECK-NEXT:      %[[DGU:[^ ,]+]], %[[H:[^ ]+]] = moe.gated_act_bwd %[[Q5]], %[[DA]], %[[A]] :
// CHECK-NEXT:      %[[DAFF:.+]] = moe.affinity_grad %[[DA]] dot %[[H]], %[[Q1]], %[[Q4]] {
// CHECK-NEXT:      %[[GQ:[^ ,]+]], %[[GS:[^ ]+]] = moe.mx_quantize %[[DGU]] {axis = 1 : i64
// CHECK-NEXT:      %[[GTQ:[^ ,]+]], %[[GTS:[^ ]+]] = moe.mx_quantize %[[DGU]] {axis = 0 : i64
// CHECK-NEXT:      %[[AH:.+]] = moe.scale_rows %[[H]], %[[A]]
// CHECK-NEXT:      %[[AHQ:[^ ,]+]], %[[AHS:[^ ]+]] = moe.mx_quantize %[[AH]] {axis = 0 : i64
// CHECK-NEXT:      moe.yield %[[DAFF]], %[[GQ]], %[[GS]], %[[GTQ]], %[[GTS]], %[[AHQ]], %[[AHS]] :
// CHECK-NEXT:    } -> tensor<96xf32>, tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>, tensor<128x64xf8E4M3FN>, tensor<4x64xf8E8M0FNU>, tensor<128x32xf8E4M3FN>, tensor<4x32xf8E8M0FNU>
// CHECK-NEXT:    %[[WGQ:[^ ,]+]], %[[WGS:[^ ]+]] = moe.mx_quantize %[[WGU2]] {axis = 2 : i64
// CHECK-NEXT:    %[[DX:.+]] = moe.fused phase(<p2>) ins(%[[P1]]#1, %[[P1]]#2, %[[WGQ]], %[[WGS]], %[[BLK]], %[[TOK]] :
// CHECK-NEXT:    ^bb0(%[[S0:[^:]+]]: {{[^,]*}}, %[[S1:[^:]+]]: {{[^,]*}}, %[[S2:[^:]+]]: {{[^,]*}}, %[[S3:[^:]+]]: {{[^,]*}}, %[[S4:[^:]+]]: {{[^,]*}}, %[[S5:[^:]+]]: {{[^,]*}}):
// CHECK-NEXT:      %[[C:.+]] = moe.block_matmul lhs(%[[S0]] : tensor<128x64xf8E4M3FN> scales %[[S1]] : tensor<128x2xf8E8M0FNU>) rhs(%[[S2]] : tensor<2x96x64xf8E4M3FN> scales %[[S3]] : tensor<2x96x2xf8E8M0FNU>) experts(%[[S4]] : tensor<4xi32>) {block_size = 32 : i64} -> tensor<128x96xf32>
// CHECK-NEXT:      %[[SUM:.+]] = moe.scatter_add_rows %[[C]][%[[S5]]]
// CHECK-NEXT:      moe.yield %[[SUM]] : tensor<48x96xbf16>
// CHECK-NEXT:    } -> tensor<48x96xbf16>
// CHECK-NEXT:    %[[DWGU:.+]] = moe.fused phase(<p3>) ins(%[[X]], %[[TOK]], %[[P1]]#3, %[[P1]]#4, %[[BLK]] :
// CHECK-NEXT:    ^bb0(%[[T0:[^:]+]]: {{[^,]*}}, %[[T1:[^:]+]]: {{[^,]*}}, %[[T2:[^:]+]]: {{[^,]*}}, %[[T3:[^:]+]]: {{[^,]*}}, %[[T4:[^:]+]]: {{[^,]*}}):
// CHECK-NEXT:      %[[XR3:.+]] = moe.gather_rows %[[T0]][%[[T1]]]
// CHECK-NEXT:      %[[XTQ:[^ ,]+]], %[[XTS:[^ ]+]] = moe.mx_quantize %[[XR3]] {axis = 0 : i64
// CHECK-NEXT:      %[[W3:.+]] = moe.expert_matmul lhs(%[[XTQ]] : tensor<128x96xf8E4M3FN> scales %[[XTS]] : tensor<4x96xf8E8M0FNU>) rhs(%[[T2]] : tensor<128x64xf8E4M3FN> scales %[[T3]] : tensor<4x64xf8E8M0FNU>) experts(%[[T4]] : tensor<4xi32>)
// CHECK-NEXT:      %[[W4:.+]] = tensor.expand_shape %[[W3]]
// CHECK-NEXT:      moe.yield %[[W4]] : tensor<2x96x2x32xf32>
// CHECK-NEXT:    } -> tensor<2x96x2x32xf32>
// CHECK-NEXT:    %[[DWD:.+]] = moe.fused phase(<p4>) ins(%[[P1]]#5, %[[P1]]#6, %[[DY]], %[[TOK]], %[[BLK]] :
// CHECK-NEXT:    ^bb0(%[[U0:[^:]+]]: {{[^,]*}}, %[[U1:[^:]+]]: {{[^,]*}}, %[[U2:[^:]+]]: {{[^,]*}}, %[[U3:[^:]+]]: {{[^,]*}}, %[[U4:[^:]+]]: {{[^,]*}}):
// CHECK-NEXT:      %[[DYR4:.+]] = moe.gather_rows %[[U2]][%[[U3]]]
// CHECK-NEXT:      %[[DYTQ:[^ ,]+]], %[[DYTS:[^ ]+]] = moe.mx_quantize %[[DYR4]] {axis = 0 : i64
// CHECK-NEXT:      %[[W:.+]] = moe.expert_matmul lhs(%[[U0]] : tensor<128x32xf8E4M3FN> scales %[[U1]] : tensor<4x32xf8E8M0FNU>) rhs(%[[DYTQ]] : tensor<128x96xf8E4M3FN> scales %[[DYTS]] : tensor<4x96xf8E8M0FNU>) experts(%[[U4]] : tensor<4xi32>)
// CHECK-NEXT:      moe.yield %[[W]] : tensor<2x32x96xf32>
// CHECK-NEXT:    } -> tensor<2x32x96xf32>
// CHECK-NEXT:    return %[[DX]], %[[P1]]#0, %[[DWGU]], %[[DWD]] :
func.func @default(%x: tensor<48x96xbf16>, %dy: tensor<48x96xbf16>,
    %aff: tensor<96xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<128xi32>, %blk: tensor<4xi32>)
    -> (tensor<48x96xbf16>, tensor<96xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %x_rows = moe.gather_rows %x[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %dy_rows = moe.gather_rows %dy[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<128xf32>
  %xq, %xs = moe.mx_quantize %x_rows {axis = 1 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  %wgu2 = tensor.collapse_shape %wgu [[0], [1], [2, 3]]
      : tensor<2x96x2x32xbf16> into tensor<2x96x64xbf16>
  %wq, %ws = moe.mx_quantize %wgu2 {axis = 1 : i64, quant = #mx}
      : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E4M3FN>, tensor<2x3x64xf8E8M0FNU>
  %gu = moe.block_matmul
      lhs(%xq : tensor<128x96xf8E4M3FN> scales %xs : tensor<128x3xf8E8M0FNU>)
      rhs(%wq : tensor<2x96x64xf8E4M3FN> scales %ws : tensor<2x3x64xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64, transpose_rhs}
      -> tensor<128x64xf32>
  %dyq, %dys = moe.mx_quantize %dy_rows {axis = 1 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  %wdq, %wds = moe.mx_quantize %wd {axis = 2 : i64, quant = #mx}
      : tensor<2x32x96xbf16> -> tensor<2x32x96xf8E4M3FN>, tensor<2x32x3xf8E8M0FNU>
  %dA = moe.block_matmul
      lhs(%dyq : tensor<128x96xf8E4M3FN> scales %dys : tensor<128x3xf8E8M0FNU>)
      rhs(%wdq : tensor<2x32x96xf8E4M3FN> scales %wds : tensor<2x32x3xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<128x32xf32>
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<128x64xf32>, tensor<128x32xf32>, tensor<128xf32>
      -> tensor<128x64xf32>, tensor<128x32xf32>
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<128x32xf32> dot tensor<128x32xf32>, tensor<128xi32>, tensor<4xi32>
      -> tensor<96xf32>
  %gq, %gs = moe.mx_quantize %dgu {axis = 1 : i64, quant = #mx}
      : tensor<128x64xf32> -> tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
  %wgq, %wgs = moe.mx_quantize %wgu2 {axis = 2 : i64, quant = #mx}
      : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E4M3FN>, tensor<2x96x2xf8E8M0FNU>
  %c = moe.block_matmul
      lhs(%gq : tensor<128x64xf8E4M3FN> scales %gs : tensor<128x2xf8E8M0FNU>)
      rhs(%wgq : tensor<2x96x64xf8E4M3FN> scales %wgs : tensor<2x96x2xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<128x96xf32>
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<128x96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<48x96xbf16>
  %xtq, %xts = moe.mx_quantize %x_rows {axis = 0 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  %gtq, %gts = moe.mx_quantize %dgu {axis = 0 : i64, quant = #mx}
      : tensor<128x64xf32> -> tensor<128x64xf8E4M3FN>, tensor<4x64xf8E8M0FNU>
  %dwgu3 = moe.expert_matmul
      lhs(%xtq : tensor<128x96xf8E4M3FN> scales %xts : tensor<4x96xf8E8M0FNU>)
      rhs(%gtq : tensor<128x64xf8E4M3FN> scales %gts : tensor<4x64xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x96x64xf32>
  %dwgu = tensor.expand_shape %dwgu3 [[0], [1], [2, 3]]
      output_shape [2, 96, 2, 32] : tensor<2x96x64xf32> into tensor<2x96x2x32xf32>
  %ah = moe.scale_rows %h, %a
      : tensor<128x32xf32>, tensor<128xf32> -> tensor<128x32xf32>
  %ahq, %ahs = moe.mx_quantize %ah {axis = 0 : i64, quant = #mx}
      : tensor<128x32xf32> -> tensor<128x32xf8E4M3FN>, tensor<4x32xf8E8M0FNU>
  %dytq, %dyts = moe.mx_quantize %dy_rows {axis = 0 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  %dwd = moe.expert_matmul
      lhs(%ahq : tensor<128x32xf8E4M3FN> scales %ahs : tensor<4x32xf8E8M0FNU>)
      rhs(%dytq : tensor<128x96xf8E4M3FN> scales %dyts : tensor<4x96xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<48x96xbf16>, tensor<96xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// With the checkpoint there is no recomputation: P1 unpacks g and u itself.
// The activation attributes travel with the moved op.
// CHECK-LABEL: func.func @checkpoint(
// CHECK-SAME:    %[[CKPT:[^:]+]]: tensor<4x2x32x32xbf16>
// CHECK-NOT:     moe.unpack_checkpoint
// CHECK-NOT:     phase(<recompute>)
// CHECK:         moe.fused phase(<p1>) ins({{.*}}, %[[CKPT]], {{.*}}) {
// CHECK-NEXT:    ^bb0({{.*}}, %[[C:[^:]+]]: tensor<4x2x32x32xbf16>, {{.*}}):
// CHECK-NEXT:      moe.gather_rows
// CHECK-NEXT:      moe.mx_quantize
// CHECK-NEXT:      %[[DA:.+]] = moe.block_matmul
// CHECK-NEXT:      %[[GU:.+]] = moe.unpack_checkpoint %[[C]] : tensor<4x2x32x32xbf16> -> tensor<128x64xf32>
// CHECK-NEXT:      %[[A:.+]] = moe.slot_affinities
// CHECK-NEXT:      moe.gated_act_bwd %[[GU]], %[[DA]], %[[A]] {activation = #moe.activation<geglu>, clamp = #moe.clamp<gate_hi = 7.000000e+00>}
// CHECK-NEXT:      moe.affinity_grad
// CHECK-NEXT:      moe.mx_quantize {{.*}}axis = 1 : i64
// CHECK-NEXT:      moe.mx_quantize {{.*}}axis = 0 : i64
// CHECK-NEXT:      moe.scale_rows
// CHECK-NEXT:      moe.mx_quantize {{.*}}axis = 0 : i64
// CHECK-NEXT:      moe.yield
// CHECK-NOT:     moe.unpack_checkpoint
// CHECK:         moe.fused phase(<p2>)
// CHECK:         moe.fused phase(<p3>)
// CHECK:         moe.fused phase(<p4>)
func.func @checkpoint(%x: tensor<48x96xbf16>, %dy: tensor<48x96xbf16>,
    %aff: tensor<96xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %ckpt: tensor<4x2x32x32xbf16>,
    %tok: tensor<128xi32>, %blk: tensor<4xi32>)
    -> (tensor<48x96xbf16>, tensor<96xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %x_rows = moe.gather_rows %x[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %dy_rows = moe.gather_rows %dy[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<128xf32>
  %gu = moe.unpack_checkpoint %ckpt
      : tensor<4x2x32x32xbf16> -> tensor<128x64xf32>
  %wgu2 = tensor.collapse_shape %wgu [[0], [1], [2, 3]]
      : tensor<2x96x2x32xbf16> into tensor<2x96x64xbf16>
  %dyq, %dys = moe.mx_quantize %dy_rows {axis = 1 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  %wdq, %wds = moe.mx_quantize %wd {axis = 2 : i64, quant = #mx}
      : tensor<2x32x96xbf16> -> tensor<2x32x96xf8E4M3FN>, tensor<2x32x3xf8E8M0FNU>
  %dA = moe.block_matmul
      lhs(%dyq : tensor<128x96xf8E4M3FN> scales %dys : tensor<128x3xf8E8M0FNU>)
      rhs(%wdq : tensor<2x32x96xf8E4M3FN> scales %wds : tensor<2x32x3xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<128x32xf32>
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      {activation = #moe.activation<geglu>, clamp = #moe.clamp<gate_hi = 7.0>}
      : tensor<128x64xf32>, tensor<128x32xf32>, tensor<128xf32>
      -> tensor<128x64xf32>, tensor<128x32xf32>
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<128x32xf32> dot tensor<128x32xf32>, tensor<128xi32>, tensor<4xi32>
      -> tensor<96xf32>
  %gq, %gs = moe.mx_quantize %dgu {axis = 1 : i64, quant = #mx}
      : tensor<128x64xf32> -> tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
  %wgq, %wgs = moe.mx_quantize %wgu2 {axis = 2 : i64, quant = #mx}
      : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E4M3FN>, tensor<2x96x2xf8E8M0FNU>
  %c = moe.block_matmul
      lhs(%gq : tensor<128x64xf8E4M3FN> scales %gs : tensor<128x2xf8E8M0FNU>)
      rhs(%wgq : tensor<2x96x64xf8E4M3FN> scales %wgs : tensor<2x96x2xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<128x96xf32>
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<128x96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<48x96xbf16>
  %xtq, %xts = moe.mx_quantize %x_rows {axis = 0 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  %gtq, %gts = moe.mx_quantize %dgu {axis = 0 : i64, quant = #mx}
      : tensor<128x64xf32> -> tensor<128x64xf8E4M3FN>, tensor<4x64xf8E8M0FNU>
  %dwgu3 = moe.expert_matmul
      lhs(%xtq : tensor<128x96xf8E4M3FN> scales %xts : tensor<4x96xf8E8M0FNU>)
      rhs(%gtq : tensor<128x64xf8E4M3FN> scales %gts : tensor<4x64xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x96x64xf32>
  %dwgu = tensor.expand_shape %dwgu3 [[0], [1], [2, 3]]
      output_shape [2, 96, 2, 32] : tensor<2x96x64xf32> into tensor<2x96x2x32xf32>
  %ah = moe.scale_rows %h, %a
      : tensor<128x32xf32>, tensor<128xf32> -> tensor<128x32xf32>
  %ahq, %ahs = moe.mx_quantize %ah {axis = 0 : i64, quant = #mx}
      : tensor<128x32xf32> -> tensor<128x32xf8E4M3FN>, tensor<4x32xf8E8M0FNU>
  %dytq, %dyts = moe.mx_quantize %dy_rows {axis = 0 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  %dwd = moe.expert_matmul
      lhs(%ahq : tensor<128x32xf8E4M3FN> scales %ahs : tensor<4x32xf8E8M0FNU>)
      rhs(%dytq : tensor<128x96xf8E4M3FN> scales %dyts : tensor<4x96xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<48x96xbf16>, tensor<96xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// Bias: the recomputation takes the (reshaped) gate/up bias as an input;
// P1's affinity gradient reads its own clone of the dy rows and the down
// bias; P1 also sums dbgu, P4 sums dbd = a*dy over the dy rows it loads.
// CHECK-LABEL: func.func @bias(
// CHECK-SAME:    %[[BGU:[^:]+]]: tensor<2x2x32xbf16>, %[[BD:[^:]+]]: tensor<2x96xbf16>
// CHECK:         %[[BGU2:.+]] = tensor.collapse_shape %[[BGU]]
// CHECK-NEXT:    moe.fused phase(<recompute>) ins({{.*}}, %[[BGU2]] :
// CHECK:           moe.block_matmul {{.*}} bias(%{{.+}} : tensor<2x64xbf16>) {block_size = 32 : i64, transpose_rhs}
// CHECK:         %[[P1:[^:]+]]:8 = moe.fused phase(<p1>) ins({{.*}}, %[[BD]] :
// CHECK-NEXT:    ^bb0({{.*}}, %[[RBD:[^:]+]]: tensor<2x96xbf16>):
// CHECK-NEXT:      %[[DYR:.+]] = moe.gather_rows
// CHECK:           %[[DGU:[^ ,]+]], %{{.+}} = moe.gated_act_bwd
// CHECK-NEXT:      moe.affinity_grad {{.*}} bias(%[[DYR]], %[[RBD]])
// CHECK:           moe.scale_rows
// CHECK-NEXT:      moe.mx_quantize
// CHECK-NEXT:      %[[DBGU2:.+]] = moe.expert_sum %[[DGU]], %{{.+}} {block_size = 32 : i64} : tensor<128x64xf32>
// CHECK-NEXT:      %[[DBGU:.+]] = tensor.expand_shape %[[DBGU2]]
// CHECK-NEXT:      moe.yield {{.*}}, %[[DBGU]] :
// CHECK:         moe.fused phase(<p2>)
// CHECK:         moe.fused phase(<p3>)
// CHECK:         %[[P4:[^:]+]]:2 = moe.fused phase(<p4>)
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      %[[DYR4:.+]] = moe.gather_rows
// CHECK-NEXT:      moe.mx_quantize %[[DYR4]] {axis = 0 : i64
// CHECK-NEXT:      %[[W:.+]] = moe.expert_matmul
// CHECK-NEXT:      %[[A4:.+]] = moe.slot_affinities
// CHECK-NEXT:      %[[ADY:.+]] = moe.scale_rows %[[DYR4]], %[[A4]]
// CHECK-NEXT:      %[[DBD:.+]] = moe.expert_sum %[[ADY]]
// CHECK-NEXT:      moe.yield %[[W]], %[[DBD]] : tensor<2x32x96xf32>, tensor<2x96xf32>
// CHECK-NEXT:    } -> tensor<2x32x96xf32>, tensor<2x96xf32>
// CHECK-NEXT:    return %{{.+}}, %[[P1]]#0, %{{.+}}, %[[P4]]#0, %[[P1]]#7, %[[P4]]#1 :
func.func @bias(%x: tensor<48x96xbf16>, %dy: tensor<48x96xbf16>,
    %aff: tensor<96xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %bgu: tensor<2x2x32xbf16>,
    %bd: tensor<2x96xbf16>, %tok: tensor<128xi32>, %blk: tensor<4xi32>)
    -> (tensor<48x96xbf16>, tensor<96xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>, tensor<2x2x32xf32>, tensor<2x96xf32>) {
  %x_rows = moe.gather_rows %x[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %dy_rows = moe.gather_rows %dy[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<128xf32>
  %xq, %xs = moe.mx_quantize %x_rows {axis = 1 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  %wgu2 = tensor.collapse_shape %wgu [[0], [1], [2, 3]]
      : tensor<2x96x2x32xbf16> into tensor<2x96x64xbf16>
  %wq, %ws = moe.mx_quantize %wgu2 {axis = 1 : i64, quant = #mx}
      : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E4M3FN>, tensor<2x3x64xf8E8M0FNU>
  %bgu2 = tensor.collapse_shape %bgu [[0], [1, 2]]
      : tensor<2x2x32xbf16> into tensor<2x64xbf16>
  %gu = moe.block_matmul
      lhs(%xq : tensor<128x96xf8E4M3FN> scales %xs : tensor<128x3xf8E8M0FNU>)
      rhs(%wq : tensor<2x96x64xf8E4M3FN> scales %ws : tensor<2x3x64xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) bias(%bgu2 : tensor<2x64xbf16>)
      {block_size = 32 : i64, transpose_rhs} -> tensor<128x64xf32>
  %dyq, %dys = moe.mx_quantize %dy_rows {axis = 1 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<128x3xf8E8M0FNU>
  %wdq, %wds = moe.mx_quantize %wd {axis = 2 : i64, quant = #mx}
      : tensor<2x32x96xbf16> -> tensor<2x32x96xf8E4M3FN>, tensor<2x32x3xf8E8M0FNU>
  %dA = moe.block_matmul
      lhs(%dyq : tensor<128x96xf8E4M3FN> scales %dys : tensor<128x3xf8E8M0FNU>)
      rhs(%wdq : tensor<2x32x96xf8E4M3FN> scales %wds : tensor<2x32x3xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<128x32xf32>
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<128x64xf32>, tensor<128x32xf32>, tensor<128xf32>
      -> tensor<128x64xf32>, tensor<128x32xf32>
  %da = moe.affinity_grad %dA dot %h, %tok, %blk bias(%dy_rows, %bd)
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<128x32xf32> dot tensor<128x32xf32>, tensor<128xi32>, tensor<4xi32>,
        tensor<128x96xbf16>, tensor<2x96xbf16> -> tensor<96xf32>
  %gq, %gs = moe.mx_quantize %dgu {axis = 1 : i64, quant = #mx}
      : tensor<128x64xf32> -> tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
  %wgq, %wgs = moe.mx_quantize %wgu2 {axis = 2 : i64, quant = #mx}
      : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E4M3FN>, tensor<2x96x2xf8E8M0FNU>
  %c = moe.block_matmul
      lhs(%gq : tensor<128x64xf8E4M3FN> scales %gs : tensor<128x2xf8E8M0FNU>)
      rhs(%wgq : tensor<2x96x64xf8E4M3FN> scales %wgs : tensor<2x96x2xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<128x96xf32>
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<128x96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<48x96xbf16>
  %xtq, %xts = moe.mx_quantize %x_rows {axis = 0 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  %gtq, %gts = moe.mx_quantize %dgu {axis = 0 : i64, quant = #mx}
      : tensor<128x64xf32> -> tensor<128x64xf8E4M3FN>, tensor<4x64xf8E8M0FNU>
  %dwgu3 = moe.expert_matmul
      lhs(%xtq : tensor<128x96xf8E4M3FN> scales %xts : tensor<4x96xf8E8M0FNU>)
      rhs(%gtq : tensor<128x64xf8E4M3FN> scales %gts : tensor<4x64xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x96x64xf32>
  %dwgu = tensor.expand_shape %dwgu3 [[0], [1], [2, 3]]
      output_shape [2, 96, 2, 32] : tensor<2x96x64xf32> into tensor<2x96x2x32xf32>
  %ah = moe.scale_rows %h, %a
      : tensor<128x32xf32>, tensor<128xf32> -> tensor<128x32xf32>
  %ahq, %ahs = moe.mx_quantize %ah {axis = 0 : i64, quant = #mx}
      : tensor<128x32xf32> -> tensor<128x32xf8E4M3FN>, tensor<4x32xf8E8M0FNU>
  %dytq, %dyts = moe.mx_quantize %dy_rows {axis = 0 : i64, quant = #mx}
      : tensor<128x96xbf16> -> tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  %dwd = moe.expert_matmul
      lhs(%ahq : tensor<128x32xf8E4M3FN> scales %ahs : tensor<4x32xf8E8M0FNU>)
      rhs(%dytq : tensor<128x96xf8E4M3FN> scales %dyts : tensor<4x96xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x32x96xf32>
  %dbgu2 = moe.expert_sum %dgu, %blk {block_size = 32 : i64}
      : tensor<128x64xf32>, tensor<4xi32> -> tensor<2x64xf32>
  %dbgu = tensor.expand_shape %dbgu2 [[0], [1, 2]] output_shape [2, 2, 32]
      : tensor<2x64xf32> into tensor<2x2x32xf32>
  %ady = moe.scale_rows %dy_rows, %a
      : tensor<128x96xbf16>, tensor<128xf32> -> tensor<128x96xf32>
  %dbd = moe.expert_sum %ady, %blk {block_size = 32 : i64}
      : tensor<128x96xf32>, tensor<4xi32> -> tensor<2x96xf32>
  return %dx, %da, %dwgu, %dwd, %dbgu, %dbd : tensor<48x96xbf16>,
      tensor<96xf32>, tensor<2x96x2x32xf32>, tensor<2x32x96xf32>,
      tensor<2x2x32xf32>, tensor<2x96xf32>
}

// Affinity on H (e5m2, floor): P1 quantizes h itself; P4 scales the dy rows
// it loads by a and quantizes them.
// CHECK-LABEL: func.func @on_h(
// CHECK:         %[[P1:[^:]+]]:7 = moe.fused phase(<p1>)
// CHECK:           %[[DGU:[^ ,]+]], %[[H:[^ ]+]] = moe.gated_act_bwd
// CHECK-NEXT:      moe.affinity_grad
// CHECK-NEXT:      moe.mx_quantize %[[DGU]] {axis = 1 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
// CHECK-NEXT:      moe.mx_quantize %[[DGU]] {axis = 0 : i64
// CHECK-NEXT:      %[[HQ:[^ ,]+]], %[[HS:[^ ]+]] = moe.mx_quantize %[[H]] {axis = 0 : i64
// CHECK-NEXT:      moe.yield %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[HQ]], %[[HS]] :
// CHECK:         moe.fused phase(<p2>)
// CHECK:           moe.scatter_add_rows {{.*}} {block_size = 32 : i64, dx_accumulate = #moe.dx_accumulate<bf16>, num_experts = 2 : i64, top_k = 2 : i64}
// CHECK:         moe.fused phase(<p3>)
// CHECK:         moe.fused phase(<p4>) ins(%[[P1]]#5, %[[P1]]#6,
// CHECK-NEXT:    ^bb0(%[[V0:[^:]+]]: {{[^,]*}}, %[[V1:[^:]+]]: {{[^,]*}},
// CHECK-NEXT:      %[[DYR:.+]] = moe.gather_rows
// CHECK-NEXT:      %[[A:.+]] = moe.slot_affinities
// CHECK-NEXT:      %[[ADY:.+]] = moe.scale_rows %[[DYR]], %[[A]]
// CHECK-NEXT:      %[[Q:[^ ,]+]], %[[S:[^ ]+]] = moe.mx_quantize %[[ADY]] {axis = 0 : i64
// CHECK-NEXT:      moe.expert_matmul lhs(%[[V0]] : tensor<128x32xf8E5M2> scales %[[V1]] : tensor<4x32xf8E8M0FNU>) rhs(%[[Q]] : tensor<128x96xf8E5M2> scales %[[S]] :
// CHECK-NEXT:      moe.yield
func.func @on_h(%x: tensor<48x96xbf16>, %dy: tensor<48x96xbf16>,
    %aff: tensor<96xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<128xi32>, %blk: tensor<4xi32>)
    -> (tensor<48x96xbf16>, tensor<96xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %x_rows = moe.gather_rows %x[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %dy_rows = moe.gather_rows %dy[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<128xf32>
  %xq, %xs = moe.mx_quantize %x_rows {axis = 1 : i64, quant = #mx5}
      : tensor<128x96xbf16> -> tensor<128x96xf8E5M2>, tensor<128x3xf8E8M0FNU>
  %wgu2 = tensor.collapse_shape %wgu [[0], [1], [2, 3]]
      : tensor<2x96x2x32xbf16> into tensor<2x96x64xbf16>
  %wq, %ws = moe.mx_quantize %wgu2 {axis = 1 : i64, quant = #mx5}
      : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E5M2>, tensor<2x3x64xf8E8M0FNU>
  %gu = moe.block_matmul
      lhs(%xq : tensor<128x96xf8E5M2> scales %xs : tensor<128x3xf8E8M0FNU>)
      rhs(%wq : tensor<2x96x64xf8E5M2> scales %ws : tensor<2x3x64xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64, transpose_rhs}
      -> tensor<128x64xf32>
  %dyq, %dys = moe.mx_quantize %dy_rows {axis = 1 : i64, quant = #mx5}
      : tensor<128x96xbf16> -> tensor<128x96xf8E5M2>, tensor<128x3xf8E8M0FNU>
  %wdq, %wds = moe.mx_quantize %wd {axis = 2 : i64, quant = #mx5}
      : tensor<2x32x96xbf16> -> tensor<2x32x96xf8E5M2>, tensor<2x32x3xf8E8M0FNU>
  %dA = moe.block_matmul
      lhs(%dyq : tensor<128x96xf8E5M2> scales %dys : tensor<128x3xf8E8M0FNU>)
      rhs(%wdq : tensor<2x32x96xf8E5M2> scales %wds : tensor<2x32x3xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<128x32xf32>
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<128x64xf32>, tensor<128x32xf32>, tensor<128xf32>
      -> tensor<128x64xf32>, tensor<128x32xf32>
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<128x32xf32> dot tensor<128x32xf32>, tensor<128xi32>, tensor<4xi32>
      -> tensor<96xf32>
  %gq, %gs = moe.mx_quantize %dgu {axis = 1 : i64, quant = #mx5}
      : tensor<128x64xf32> -> tensor<128x64xf8E5M2>, tensor<128x2xf8E8M0FNU>
  %wgq, %wgs = moe.mx_quantize %wgu2 {axis = 2 : i64, quant = #mx5}
      : tensor<2x96x64xbf16> -> tensor<2x96x64xf8E5M2>, tensor<2x96x2xf8E8M0FNU>
  %c = moe.block_matmul
      lhs(%gq : tensor<128x64xf8E5M2> scales %gs : tensor<128x2xf8E8M0FNU>)
      rhs(%wgq : tensor<2x96x64xf8E5M2> scales %wgs : tensor<2x96x2xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<128x96xf32>
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, dx_accumulate = #moe.dx_accumulate<bf16>, num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<128x96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<48x96xbf16>
  %xtq, %xts = moe.mx_quantize %x_rows {axis = 0 : i64, quant = #mx5}
      : tensor<128x96xbf16> -> tensor<128x96xf8E5M2>, tensor<4x96xf8E8M0FNU>
  %gtq, %gts = moe.mx_quantize %dgu {axis = 0 : i64, quant = #mx5}
      : tensor<128x64xf32> -> tensor<128x64xf8E5M2>, tensor<4x64xf8E8M0FNU>
  %dwgu3 = moe.expert_matmul
      lhs(%xtq : tensor<128x96xf8E5M2> scales %xts : tensor<4x96xf8E8M0FNU>)
      rhs(%gtq : tensor<128x64xf8E5M2> scales %gts : tensor<4x64xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x96x64xf32>
  %dwgu = tensor.expand_shape %dwgu3 [[0], [1], [2, 3]]
      output_shape [2, 96, 2, 32] : tensor<2x96x64xf32> into tensor<2x96x2x32xf32>
  %hq, %hs = moe.mx_quantize %h {axis = 0 : i64, quant = #mx5}
      : tensor<128x32xf32> -> tensor<128x32xf8E5M2>, tensor<4x32xf8E8M0FNU>
  %ady = moe.scale_rows %dy_rows, %a
      : tensor<128x96xbf16>, tensor<128xf32> -> tensor<128x96xf32>
  %adyq, %adys = moe.mx_quantize %ady {axis = 0 : i64, quant = #mx5}
      : tensor<128x96xf32> -> tensor<128x96xf8E5M2>, tensor<4x96xf8E8M0FNU>
  %dwd = moe.expert_matmul
      lhs(%hq : tensor<128x32xf8E5M2> scales %hs : tensor<4x32xf8E8M0FNU>)
      rhs(%adyq : tensor<128x96xf8E5M2> scales %adys : tensor<4x96xf8E8M0FNU>)
      experts(%blk : tensor<4xi32>) {block_size = 32 : i64}
      -> tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<48x96xbf16>, tensor<96xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// quant none: bf16 roundings take the place of the quantizations, and the
// bf16 weight gradients are rounded in P3's and P4's epilogues.
// CHECK-LABEL: func.func @quant_none(
// CHECK-SAME:    %[[WD:[^:]+]]: tensor<2x32x96xbf16>
// CHECK-NEXT:    %[[WGU2:.+]] = tensor.collapse_shape
// CHECK-NEXT:    moe.fused phase(<recompute>) ins(%{{.+}}, %{{.+}}, %[[WGU2]], %{{.+}} :
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      %[[XR:.+]] = moe.gather_rows
// CHECK-NEXT:      moe.block_matmul lhs(%[[XR]] : tensor<128x96xbf16>) rhs(%{{.+}} : tensor<2x96x64xbf16>)
// CHECK-NEXT:      moe.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[P1:[^:]+]]:4 = moe.fused phase(<p1>) ins(%{{.+}}, %{{.+}}, %[[WD]], %{{.+}}, %{{.+}}, %{{.+}} :
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      %[[DYR:.+]] = moe.gather_rows
// CHECK-NEXT:      moe.block_matmul lhs(%[[DYR]] : tensor<128x96xbf16>) rhs(%{{.+}} : tensor<2x32x96xbf16>)
// CHECK-NEXT:      moe.slot_affinities
// CHECK-NEXT:      %[[DGU:[^ ,]+]], %[[H:[^ ]+]] = moe.gated_act_bwd
// CHECK-NEXT:      %[[DAFF:.+]] = moe.affinity_grad
// CHECK-NEXT:      %[[G2:.+]] = arith.truncf %[[DGU]] : tensor<128x64xf32> to tensor<128x64xbf16>
// CHECK-NEXT:      %[[G3:.+]] = arith.truncf %[[DGU]] : tensor<128x64xf32> to tensor<128x64xbf16>
// CHECK-NEXT:      %[[AH:.+]] = moe.scale_rows %[[H]]
// CHECK-NEXT:      %[[AHB:.+]] = arith.truncf %[[AH]] : tensor<128x32xf32> to tensor<128x32xbf16>
// CHECK-NEXT:      moe.yield %[[DAFF]], %[[G2]], %[[G3]], %[[AHB]] :
// CHECK-NEXT:    } -> tensor<96xf32>, tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x32xbf16>
// CHECK-NEXT:    moe.fused phase(<p2>) ins(%[[P1]]#1, %[[WGU2]], %{{.+}}, %{{.+}} :
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      moe.block_matmul
// CHECK-NEXT:      moe.scatter_add_rows {{.*}} -> tensor<48x96xf32>
// CHECK-NEXT:      moe.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    moe.fused phase(<p3>) ins(%{{.+}}, %{{.+}}, %[[P1]]#2, %{{.+}} :
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      moe.gather_rows
// CHECK-NEXT:      moe.expert_matmul
// CHECK-NEXT:      tensor.expand_shape
// CHECK-NEXT:      %[[T3:.+]] = arith.truncf %{{.+}} : tensor<2x96x2x32xf32> to tensor<2x96x2x32xbf16>
// CHECK-NEXT:      moe.yield %[[T3]]
// CHECK-NEXT:    }
// CHECK-NEXT:    moe.fused phase(<p4>) ins(%[[P1]]#3, %{{.+}}, %{{.+}}, %{{.+}} :
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      moe.gather_rows
// CHECK-NEXT:      moe.expert_matmul
// CHECK-NEXT:      %[[T4:.+]] = arith.truncf %{{.+}} : tensor<2x32x96xf32> to tensor<2x32x96xbf16>
// CHECK-NEXT:      moe.yield %[[T4]]
// CHECK-NEXT:    }
// CHECK-NEXT:    return
func.func @quant_none(%x: tensor<48x96xbf16>, %dy: tensor<48x96xbf16>,
    %aff: tensor<96xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<128xi32>, %blk: tensor<4xi32>)
    -> (tensor<48x96xf32>, tensor<96xf32>, tensor<2x96x2x32xbf16>,
        tensor<2x32x96xbf16>) {
  %x_rows = moe.gather_rows %x[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %dy_rows = moe.gather_rows %dy[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<128xf32>
  %wgu2 = tensor.collapse_shape %wgu [[0], [1], [2, 3]]
      : tensor<2x96x2x32xbf16> into tensor<2x96x64xbf16>
  %gu = moe.block_matmul lhs(%x_rows : tensor<128x96xbf16>)
      rhs(%wgu2 : tensor<2x96x64xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64, transpose_rhs} -> tensor<128x64xf32>
  %dA = moe.block_matmul lhs(%dy_rows : tensor<128x96xbf16>)
      rhs(%wd : tensor<2x32x96xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64} -> tensor<128x32xf32>
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<128x64xf32>, tensor<128x32xf32>, tensor<128xf32>
      -> tensor<128x64xf32>, tensor<128x32xf32>
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<128x32xf32> dot tensor<128x32xf32>, tensor<128xi32>, tensor<4xi32>
      -> tensor<96xf32>
  %gb = arith.truncf %dgu : tensor<128x64xf32> to tensor<128x64xbf16>
  %c = moe.block_matmul lhs(%gb : tensor<128x64xbf16>)
      rhs(%wgu2 : tensor<2x96x64xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64} -> tensor<128x96xf32>
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<128x96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<48x96xf32>
  %gtb = arith.truncf %dgu : tensor<128x64xf32> to tensor<128x64xbf16>
  %dwgu3 = moe.expert_matmul lhs(%x_rows : tensor<128x96xbf16>)
      rhs(%gtb : tensor<128x64xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64} -> tensor<2x96x64xf32>
  %dwgu4 = tensor.expand_shape %dwgu3 [[0], [1], [2, 3]]
      output_shape [2, 96, 2, 32] : tensor<2x96x64xf32> into tensor<2x96x2x32xf32>
  %dwgu = arith.truncf %dwgu4 : tensor<2x96x2x32xf32> to tensor<2x96x2x32xbf16>
  %ah = moe.scale_rows %h, %a
      : tensor<128x32xf32>, tensor<128xf32> -> tensor<128x32xf32>
  %ahb = arith.truncf %ah : tensor<128x32xf32> to tensor<128x32xbf16>
  %dwd32 = moe.expert_matmul lhs(%ahb : tensor<128x32xbf16>)
      rhs(%dy_rows : tensor<128x96xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64} -> tensor<2x32x96xf32>
  %dwd = arith.truncf %dwd32 : tensor<2x32x96xf32> to tensor<2x32x96xbf16>
  return %dx, %da, %dwgu, %dwd : tensor<48x96xf32>, tensor<96xf32>,
      tensor<2x96x2x32xbf16>, tensor<2x32x96xbf16>
}

// GEMMs without a recognizable neighbourhood still get a region each: a
// block_matmul that is neither the recomputation nor P1 is P2, an
// expert_matmul without h or a row scaling is P3.
// CHECK-LABEL: func.func @lone_gemms(
// CHECK-SAME:    %[[L:[^:]+]]: tensor<128x64xbf16>, %[[W:[^:]+]]: tensor<2x96x64xbf16>, %[[BLK:[^:]+]]: tensor<4xi32>, %[[P:[^:]+]]: tensor<128x96xbf16>, %[[Q:[^:]+]]: tensor<128x64xbf16>)
// CHECK-NEXT:    %[[C:.+]] = moe.fused phase(<p2>) ins(%[[L]], %[[W]], %[[BLK]] :
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      %[[R:.+]] = moe.block_matmul
// CHECK-NEXT:      moe.yield %[[R]] : tensor<128x96xf32>
// CHECK-NEXT:    } -> tensor<128x96xf32>
// CHECK-NEXT:    %[[D:.+]] = moe.fused phase(<p3>) ins(%[[P]], %[[Q]], %[[BLK]] :
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      %[[S:.+]] = moe.expert_matmul
// CHECK-NEXT:      moe.yield %[[S]] : tensor<2x96x64xf32>
// CHECK-NEXT:    } -> tensor<2x96x64xf32>
// CHECK-NEXT:    return %[[C]], %[[D]]
func.func @lone_gemms(%l: tensor<128x64xbf16>, %w: tensor<2x96x64xbf16>,
    %blk: tensor<4xi32>, %p: tensor<128x96xbf16>, %q: tensor<128x64xbf16>)
    -> (tensor<128x96xf32>, tensor<2x96x64xf32>) {
  %c = moe.block_matmul lhs(%l : tensor<128x64xbf16>)
      rhs(%w : tensor<2x96x64xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64} -> tensor<128x96xf32>
  %d = moe.expert_matmul lhs(%p : tensor<128x96xbf16>)
      rhs(%q : tensor<128x64xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64} -> tensor<2x96x64xf32>
  return %c, %d : tensor<128x96xf32>, tensor<2x96x64xf32>
}

// The region replaces its GEMM, so an epilogue op reading a value computed
// after the GEMM by an op that cannot be cloned (a call) stays outside. The
// bf16 rounding of the activation operand is a prologue op.
// CHECK-LABEL: func.func @late_operand(
// CHECK-SAME:    %[[G:[^:]+]]: tensor<128x64xf32>, %[[W:[^:]+]]: tensor<2x96x64xbf16>, %[[BLK:[^:]+]]: tensor<4xi32>, %[[TOK:[^:]+]]: tensor<128xi32>)
// CHECK-NEXT:    %[[C:.+]] = moe.fused phase(<p2>) ins(%[[G]], %[[W]], %[[BLK]] :
// CHECK-NEXT:    ^bb0(%[[A0:[^:]+]]: {{[^,]*}},
// CHECK-NEXT:      %[[GB:.+]] = arith.truncf %[[A0]]
// CHECK-NEXT:      %[[R:.+]] = moe.block_matmul lhs(%[[GB]] :
// CHECK-NEXT:      moe.yield %[[R]]
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[T:.+]] = call @renumber(%[[TOK]])
// CHECK-NEXT:    %[[DX:.+]] = moe.scatter_add_rows %[[C]][%[[T]]]
// CHECK-NEXT:    return %[[DX]]
func.func private @renumber(tensor<128xi32>) -> tensor<128xi32>
func.func @late_operand(%g: tensor<128x64xf32>, %w: tensor<2x96x64xbf16>,
    %blk: tensor<4xi32>, %tok: tensor<128xi32>) -> tensor<48x96xf32> {
  %gb = arith.truncf %g : tensor<128x64xf32> to tensor<128x64xbf16>
  %c = moe.block_matmul lhs(%gb : tensor<128x64xbf16>)
      rhs(%w : tensor<2x96x64xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64} -> tensor<128x96xf32>
  %t = func.call @renumber(%tok) : (tensor<128xi32>) -> tensor<128xi32>
  %dx = moe.scatter_add_rows %c[%t], %blk
      {block_size = 32 : i64, num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<128x96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<48x96xf32>
  return %dx : tensor<48x96xf32>
}

// Elementwise arith on slot data after the GEMM can be cloned, so the
// scatter-add still goes in; constants are cloned rather than passed in.
// CHECK-LABEL: func.func @late_elementwise_operand(
// CHECK-SAME:    %[[G:[^:]+]]: tensor<128x64xbf16>, %[[W:[^:]+]]: tensor<2x96x64xbf16>, %[[BLK:[^:]+]]: tensor<4xi32>, %[[TOK:[^:]+]]: tensor<128xi32>)
// CHECK-NEXT:    %[[DX:.+]] = moe.fused phase(<p2>) ins(%[[G]], %[[W]], %[[BLK]], %[[TOK]] :
// CHECK-NEXT:    ^bb0({{.*}}, %[[A3:[^:]+]]: tensor<128xi32>):
// CHECK-NEXT:      %[[R:.+]] = moe.block_matmul
// CHECK-NEXT:      %[[ONE:.+]] = arith.constant dense<1> : tensor<128xi32>
// CHECK-NEXT:      %[[T:.+]] = arith.addi %[[A3]], %[[ONE]]
// CHECK-NEXT:      %[[S:.+]] = moe.scatter_add_rows %[[R]][%[[T]]]
// CHECK-NEXT:      moe.yield %[[S]]
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[DX]]
func.func @late_elementwise_operand(%g: tensor<128x64xbf16>,
    %w: tensor<2x96x64xbf16>, %blk: tensor<4xi32>, %tok: tensor<128xi32>)
    -> tensor<48x96xf32> {
  %c = moe.block_matmul lhs(%g : tensor<128x64xbf16>)
      rhs(%w : tensor<2x96x64xbf16>) experts(%blk : tensor<4xi32>)
      {block_size = 32 : i64} -> tensor<128x96xf32>
  %one = arith.constant dense<1> : tensor<128xi32>
  %t = arith.addi %tok, %one : tensor<128xi32>
  %dx = moe.scatter_add_rows %c[%t], %blk
      {block_size = 32 : i64, num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<128x96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<48x96xf32>
  return %dx : tensor<48x96xf32>
}

// Without a GEMM nothing changes.
// CHECK-LABEL: func.func @no_gemm(
// CHECK-NEXT:    moe.gather_rows
// CHECK-NEXT:    moe.slot_affinities
// CHECK-NEXT:    moe.scale_rows
// CHECK-NEXT:    moe.mx_quantize
// CHECK-NEXT:    return
func.func @no_gemm(%x: tensor<48x96xbf16>, %aff: tensor<96xf32>,
    %tok: tensor<128xi32>, %blk: tensor<4xi32>)
    -> (tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>) {
  %rows = moe.gather_rows %x[%tok]
      : tensor<48x96xbf16>, tensor<128xi32> -> tensor<128x96xbf16>
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<128xf32>
  %s = moe.scale_rows %rows, %a
      : tensor<128x96xbf16>, tensor<128xf32> -> tensor<128x96xf32>
  %q, %sc = moe.mx_quantize %s {axis = 0 : i64, quant = #mx}
      : tensor<128x96xf32> -> tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
  return %q, %sc : tensor<128x96xf8E4M3FN>, tensor<4x96xf8E8M0FNU>
}

// A GEMM already inside a moe.fused is left alone.
// CHECK-LABEL: func.func @existing_region(
// CHECK-NEXT:    %[[DX:.+]] = moe.fused phase(<p2>)
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      arith.truncf
// CHECK-NEXT:      moe.block_matmul
// CHECK-NEXT:      moe.scatter_add_rows
// CHECK-NEXT:      moe.yield
// CHECK-NEXT:    } -> tensor<48x96xbf16>
// CHECK-NEXT:    return %[[DX]]
func.func @existing_region(%dgu: tensor<128x64xf32>, %w: tensor<2x96x64xbf16>,
    %blk: tensor<4xi32>, %tok: tensor<128xi32>) -> tensor<48x96xbf16> {
  %dx = moe.fused phase(#moe.phase<p2>) ins(%dgu, %w, %blk, %tok
      : tensor<128x64xf32>, tensor<2x96x64xbf16>, tensor<4xi32>,
        tensor<128xi32>) {
  ^bb0(%a: tensor<128x64xf32>, %b: tensor<2x96x64xbf16>,
       %c: tensor<4xi32>, %d: tensor<128xi32>):
    %t = arith.truncf %a : tensor<128x64xf32> to tensor<128x64xbf16>
    %r = moe.block_matmul lhs(%t : tensor<128x64xbf16>)
        rhs(%b : tensor<2x96x64xbf16>) experts(%c : tensor<4xi32>)
        {block_size = 32 : i64} -> tensor<128x96xf32>
    %s = moe.scatter_add_rows %r[%d], %c
        {block_size = 32 : i64, num_experts = 2 : i64, top_k = 2 : i64}
        : tensor<128x96xf32>, tensor<128xi32>, tensor<4xi32> -> tensor<48x96xbf16>
    moe.yield %s : tensor<48x96xbf16>
  } -> tensor<48x96xbf16>
  return %dx : tensor<48x96xbf16>
}

// -moe-decompose-bwd -moe-fuse: the real decomposition of moe.blockwise_bwd
// gives the same regions. Between the regions (the NOT lines after each
// region's end) only the weights' reshapes and quantizations are left.
// PIPE-LABEL: func.func @bwd_default(
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         %[[GU:.+]] = moe.fused phase(<recompute>)
// PIPE:           moe.block_matmul {{.*}}transpose_rhs
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} -> tensor<256x64xf32>
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         %[[P1:[^:]+]]:7 = moe.fused phase(<p1>) ins({{.*}}%[[GU]],
// PIPE-NEXT:    ^bb0(
// PIPE-NEXT:      moe.gather_rows
// PIPE-NEXT:      moe.mx_quantize {{.*}}axis = 1 : i64
// PIPE-NEXT:      moe.block_matmul
// PIPE-NEXT:      moe.slot_affinities
// PIPE-NEXT:      moe.gated_act_bwd
// PIPE-NEXT:      moe.affinity_grad
// PIPE-NEXT:      moe.mx_quantize {{.*}}axis = 1 : i64
// PIPE-NEXT:      moe.mx_quantize {{.*}}axis = 0 : i64
// PIPE-NEXT:      moe.scale_rows
// PIPE-NEXT:      moe.mx_quantize {{.*}}axis = 0 : i64
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} ->
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         moe.fused phase(<p2>) ins(%[[P1]]#1, %[[P1]]#2,
// PIPE:           moe.scatter_add_rows
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} ->
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         moe.fused phase(<p3>) ins(%{{.+}}, %{{.+}}, %[[P1]]#3, %[[P1]]#4,
// PIPE:           tensor.expand_shape
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} ->
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         moe.fused phase(<p4>) ins(%[[P1]]#5, %[[P1]]#6,
// PIPE:           moe.expert_matmul
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} ->
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         return
func.func @bwd_default(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>)
      down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 2 : i64, quant = #mx}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
  return %dx, %da, %dwgu, %dwd : tensor<64x96xbf16>, tensor<128xf32>,
      tensor<2x96x2x32xf32>, tensor<2x32x96xf32>
}

// Checkpoint, bias, affinity on H, e5m2, bf16 weight gradients: P1 unpacks
// the checkpoint, sums dbgu and quantizes h; P4 scales dy and sums dbd.
// PIPE-LABEL: func.func @bwd_all_options(
// PIPE-NOT:     phase(<recompute>)
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         %[[P1:[^:]+]]:8 = moe.fused phase(<p1>)
// PIPE:           moe.unpack_checkpoint
// PIPE:           %{{.+}}, %[[H:[^ ]+]] = moe.gated_act_bwd
// PIPE-NEXT:      moe.affinity_grad {{.*}} bias(
// PIPE:           moe.mx_quantize %[[H]] {axis = 0 : i64
// PIPE-NEXT:      moe.expert_sum
// PIPE-NEXT:      tensor.expand_shape
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} ->
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         moe.fused phase(<p2>)
// PIPE:           moe.scatter_add_rows {{.*}}dx_accumulate = #moe.dx_accumulate<bf16>
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} ->
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         moe.fused phase(<p3>)
// PIPE:           arith.truncf {{.*}} to tensor<2x96x2x32xbf16>
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} ->
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         %[[P4:[^:]+]]:2 = moe.fused phase(<p4>) ins(%[[P1]]#5, %[[P1]]#6,
// PIPE:           %[[ADY:.+]] = moe.scale_rows
// PIPE-NEXT:      moe.mx_quantize %[[ADY]] {axis = 0 : i64
// PIPE-NEXT:      moe.expert_matmul
// PIPE-NEXT:      arith.truncf {{.*}} to tensor<2x32x96xbf16>
// PIPE-NEXT:      moe.expert_sum %[[ADY]]
// PIPE-NEXT:      moe.yield
// PIPE-NEXT:    {{^ *}}} ->
// PIPE-NOT:     {{moe\.(gather_rows|slot_affinities|unpack_checkpoint|scale_rows|gated_act_bwd|affinity_grad|scatter_add_rows|expert_sum|block_matmul|expert_matmul)|arith\.}}
// PIPE:         return %{{.+}}, %[[P1]]#0, %{{.+}}, %[[P4]]#0, %[[P1]]#7, %[[P4]]#1 :
func.func @bwd_all_options(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>,
    %ckpt: tensor<2x2x32x128xbf16>, %bgu: tensor<2x2x32xf32>,
    %bd: tensor<2x96xbf16>)
    -> (tensor<64x96xbf16>, tensor<128xf32>, tensor<2x96x2x32xbf16>,
        tensor<2x32x96xbf16>, tensor<2x2x32xf32>, tensor<2x96xf32>) {
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>)
      down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      checkpoint(%ckpt : tensor<2x2x32x128xbf16>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>)
      down_bias(%bd : tensor<2x96xbf16>)
      {block_size = 128 : i64, top_k = 2 : i64,
       activation = #moe.activation<geglu>, affinity = #moe.affinity<on_h>,
       clamp = #moe.clamp<up_hi = 7.0, gate_hi = 7.0, up_lo = -7.0>,
       bias, dx_accumulate = #moe.dx_accumulate<bf16>, quant = #mx5}
      -> tensor<64x96xbf16>, tensor<128xf32>,
         tensor<2x96x2x32xbf16>, tensor<2x32x96xbf16>,
         tensor<2x2x32xf32>, tensor<2x96xf32>
  return %dx, %da, %dwgu, %dwd, %dbgu, %dbd : tensor<64x96xbf16>,
      tensor<128xf32>, tensor<2x96x2x32xbf16>, tensor<2x32x96xbf16>,
      tensor<2x2x32xf32>, tensor<2x96xf32>
}

// quant none with bias: bf16 roundings in P1's epilogue, no quantization.
// PIPE-LABEL: func.func @bwd_quant_none(
// PIPE-NOT:     moe.mx_quantize
// PIPE:         moe.fused phase(<recompute>)
// PIPE:           moe.block_matmul {{.*}} bias(
// PIPE:         %[[P1:[^:]+]]:4 = moe.fused phase(<p1>)
// PIPE:           arith.truncf {{.*}} : tensor<256x64xf32> to tensor<256x64xbf16>
// PIPE:         moe.fused phase(<p2>) ins(%[[P1]]#1,
// PIPE:         moe.fused phase(<p3>) ins(%{{.+}}, %{{.+}}, %[[P1]]#1,
// PIPE:         moe.fused phase(<p4>) ins(%[[P1]]#2,
// PIPE-NOT:     moe.mx_quantize
// PIPE:         return
func.func @bwd_quant_none(%x: tensor<64x96xbf16>, %dy: tensor<64x96xbf16>,
    %aff: tensor<128xf32>, %wgu: tensor<2x96x2x32xbf16>,
    %wd: tensor<2x32x96xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>,
    %bgu: tensor<2x2x32xf32>, %bd: tensor<2x96xbf16>)
    -> (tensor<64x96xf32>, tensor<128xf32>, tensor<2x96x2x32xf32>,
        tensor<2x32x96xf32>, tensor<2x2x32xf32>, tensor<2x96xf32>) {
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x96xbf16>) dy(%dy : tensor<64x96xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x96x2x32xbf16>)
      down(%wd : tensor<2x32x96xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>)
      down_bias(%bd : tensor<2x96xbf16>)
      {block_size = 128 : i64, top_k = 2 : i64, bias,
       quant = #moe.mx<none, block = 32, rule = rceil>}
      -> tensor<64x96xf32>, tensor<128xf32>,
         tensor<2x96x2x32xf32>, tensor<2x32x96xf32>,
         tensor<2x2x32xf32>, tensor<2x96xf32>
  return %dx, %da, %dwgu, %dwd, %dbgu, %dbd : tensor<64x96xf32>,
      tensor<128xf32>, tensor<2x96x2x32xf32>, tensor<2x32x96xf32>,
      tensor<2x2x32xf32>, tensor<2x96xf32>
}
