// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
// The slot-space ops of the decomposed form (T = 256, H = 256, I = 128,
// E = 4, B = 128, N = 7, S = 896) and a kernel region.

// CHECK-LABEL: func.func @data_movement
// CHECK: moe.gather_rows %{{.*}}[%{{.*}}] : tensor<256x256xbf16>, tensor<896xi32> -> tensor<896x256xbf16>
// CHECK: moe.slot_affinities %{{.*}}, %{{.*}}, %{{.*}} {block_size = 128 : i64, num_experts = 4 : i64} : tensor<1024xf32>, tensor<896xi32>, tensor<7xi32> -> tensor<896xf32>
// CHECK: moe.unpack_checkpoint %{{.*}} : tensor<7x2x128x128xbf16> -> tensor<896x256xf32>
func.func @data_movement(%dy: tensor<256x256xbf16>, %aff: tensor<1024xf32>,
    %tok: tensor<896xi32>, %blk: tensor<7xi32>,
    %ckpt: tensor<7x2x128x128xbf16>) {
  %rows = moe.gather_rows %dy[%tok]
      : tensor<256x256xbf16>, tensor<896xi32> -> tensor<896x256xbf16>
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 128 : i64, num_experts = 4 : i64}
      : tensor<1024xf32>, tensor<896xi32>, tensor<7xi32> -> tensor<896xf32>
  %gu = moe.unpack_checkpoint %ckpt
      : tensor<7x2x128x128xbf16> -> tensor<896x256xf32>
  return
}

// CHECK-LABEL: func.func @quantization
// CHECK: %[[Q:.*]], %[[S:.*]] = moe.mx_quantize %{{.*}} {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>} : tensor<896x256xbf16> -> tensor<896x256xf8E4M3FN>, tensor<896x8xf8E8M0FNU>
// CHECK: moe.mx_dequantize %[[Q]], %[[S]] {axis = 1 : i64} : tensor<896x256xf8E4M3FN>, tensor<896x8xf8E8M0FNU> -> tensor<896x256xf32>
// CHECK: moe.mx_quantize %{{.*}} {axis = 0 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>} : tensor<896x128xf32> -> tensor<896x128xf8E5M2>, tensor<28x128xf8E8M0FNU>
func.func @quantization(%rows: tensor<896x256xbf16>, %h: tensor<896x128xf32>) {
  %q, %s = moe.mx_quantize %rows
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<896x256xbf16> -> tensor<896x256xf8E4M3FN>, tensor<896x8xf8E8M0FNU>
  %v = moe.mx_dequantize %q, %s {axis = 1 : i64}
      : tensor<896x256xf8E4M3FN>, tensor<896x8xf8E8M0FNU> -> tensor<896x256xf32>
  %hq, %hs = moe.mx_quantize %h
      {axis = 0 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      : tensor<896x128xf32> -> tensor<896x128xf8E5M2>, tensor<28x128xf8E8M0FNU>
  return
}

// CHECK-LABEL: func.func @gemms
// CHECK: moe.block_matmul lhs(%{{.*}} : tensor<896x256xf8E4M3FN> scales %{{.*}} : tensor<896x8xf8E8M0FNU>) rhs(%{{.*}} : tensor<4x128x256xf8E4M3FN> scales %{{.*}} : tensor<4x128x8xf8E8M0FNU>) experts(%{{.*}} : tensor<7xi32>) {block_size = 128 : i64} -> tensor<896x128xf32>
// CHECK: moe.block_matmul lhs(%{{.*}} : tensor<896x256xbf16>) rhs(%{{.*}} : tensor<4x256x256xbf16>) experts(%{{.*}} : tensor<7xi32>) bias(%{{.*}} : tensor<4x256xf32>) {block_size = 128 : i64, transpose_rhs} -> tensor<896x256xf32>
// CHECK: moe.expert_matmul lhs(%{{.*}} : tensor<896x128xf8E4M3FN> scales %{{.*}} : tensor<28x128xf8E8M0FNU>) rhs(%{{.*}} : tensor<896x256xf8E4M3FN> scales %{{.*}} : tensor<28x256xf8E8M0FNU>) experts(%{{.*}} : tensor<7xi32>) {block_size = 128 : i64} -> tensor<4x128x256xf32>
// CHECK: moe.expert_matmul lhs(%{{.*}} : tensor<896x256xbf16>) rhs(%{{.*}} : tensor<896x256xbf16>) experts(%{{.*}} : tensor<7xi32>) {block_size = 128 : i64} -> tensor<4x256x256xf32>
func.func @gemms(%dyq: tensor<896x256xf8E4M3FN>, %dys: tensor<896x8xf8E8M0FNU>,
    %wdq: tensor<4x128x256xf8E4M3FN>, %wds: tensor<4x128x8xf8E8M0FNU>,
    %blk: tensor<7xi32>, %x: tensor<896x256xbf16>,
    %wgu: tensor<4x256x256xbf16>, %bgu: tensor<4x256xf32>,
    %hq: tensor<896x128xf8E4M3FN>, %hs: tensor<28x128xf8E8M0FNU>,
    %dytq: tensor<896x256xf8E4M3FN>, %dyts: tensor<28x256xf8E8M0FNU>) {
  %dA = moe.block_matmul
      lhs(%dyq : tensor<896x256xf8E4M3FN> scales %dys : tensor<896x8xf8E8M0FNU>)
      rhs(%wdq : tensor<4x128x256xf8E4M3FN> scales %wds : tensor<4x128x8xf8E8M0FNU>)
      experts(%blk : tensor<7xi32>) {block_size = 128 : i64}
      -> tensor<896x128xf32>
  %gu = moe.block_matmul lhs(%x : tensor<896x256xbf16>)
      rhs(%wgu : tensor<4x256x256xbf16>) experts(%blk : tensor<7xi32>)
      bias(%bgu : tensor<4x256xf32>) {block_size = 128 : i64, transpose_rhs}
      -> tensor<896x256xf32>
  %dwd = moe.expert_matmul
      lhs(%hq : tensor<896x128xf8E4M3FN> scales %hs : tensor<28x128xf8E8M0FNU>)
      rhs(%dytq : tensor<896x256xf8E4M3FN> scales %dyts : tensor<28x256xf8E8M0FNU>)
      experts(%blk : tensor<7xi32>) {block_size = 128 : i64}
      -> tensor<4x128x256xf32>
  %dwgu = moe.expert_matmul lhs(%x : tensor<896x256xbf16>)
      rhs(%x : tensor<896x256xbf16>) experts(%blk : tensor<7xi32>)
      {block_size = 128 : i64} -> tensor<4x256x256xf32>
  return
}

// CHECK-LABEL: func.func @elementwise
// CHECK: moe.gated_act_bwd %{{.*}}, %{{.*}}, %{{.*}} {activation = #moe.activation<geglu>, clamp = #moe.clamp<gate_hi = 7.000000e+00>} : tensor<896x256xf32>, tensor<896x128xf32>, tensor<896xf32> -> tensor<896x256xf32>, tensor<896x128xf32>
// CHECK: moe.affinity_grad %{{.*}} dot %{{.*}}, %{{.*}}, %{{.*}} {block_size = 128 : i64, num_experts = 4 : i64} : tensor<896x128xf32> dot tensor<896x128xf32>, tensor<896xi32>, tensor<7xi32> -> tensor<1024xf32>
// CHECK: moe.affinity_grad %{{.*}} dot %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}}, %{{.*}}) {block_size = 128 : i64, num_experts = 4 : i64} : tensor<896x128xf32> dot tensor<896x128xf32>, tensor<896xi32>, tensor<7xi32>, tensor<896x256xbf16>, tensor<4x256xf32> -> tensor<1024xf32>
// CHECK: moe.scale_rows %{{.*}}, %{{.*}} : tensor<896x128xf32>, tensor<896xf32> -> tensor<896x128xf32>
// CHECK: moe.scatter_add_rows %{{.*}}[%{{.*}}], %{{.*}} {block_size = 128 : i64, dx_accumulate = #moe.dx_accumulate<bf16>, num_experts = 4 : i64, top_k = 2 : i64} : tensor<896x256xf32>, tensor<896xi32>, tensor<7xi32> -> tensor<256x256xbf16>
// CHECK: moe.expert_sum %{{.*}}, %{{.*}} {block_size = 128 : i64} : tensor<896x256xf32>, tensor<7xi32> -> tensor<4x256xf32>
func.func @elementwise(%gu: tensor<896x256xf32>, %dA: tensor<896x128xf32>,
    %a: tensor<896xf32>, %tok: tensor<896xi32>, %blk: tensor<7xi32>,
    %rows: tensor<896x256xbf16>, %bd: tensor<4x256xf32>,
    %c: tensor<896x256xf32>) {
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      {activation = #moe.activation<geglu>, clamp = #moe.clamp<gate_hi = 7.0>}
      : tensor<896x256xf32>, tensor<896x128xf32>, tensor<896xf32>
      -> tensor<896x256xf32>, tensor<896x128xf32>
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 128 : i64, num_experts = 4 : i64}
      : tensor<896x128xf32> dot tensor<896x128xf32>, tensor<896xi32>,
        tensor<7xi32> -> tensor<1024xf32>
  %da2 = moe.affinity_grad %dA dot %h, %tok, %blk bias(%rows, %bd)
      {block_size = 128 : i64, num_experts = 4 : i64}
      : tensor<896x128xf32> dot tensor<896x128xf32>, tensor<896xi32>,
        tensor<7xi32>, tensor<896x256xbf16>, tensor<4x256xf32>
      -> tensor<1024xf32>
  %ah = moe.scale_rows %h, %a
      : tensor<896x128xf32>, tensor<896xf32> -> tensor<896x128xf32>
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 128 : i64, dx_accumulate = #moe.dx_accumulate<bf16>, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<896x256xf32>, tensor<896xi32>, tensor<7xi32> -> tensor<256x256xbf16>
  %dbgu = moe.expert_sum %dgu, %blk {block_size = 128 : i64}
      : tensor<896x256xf32>, tensor<7xi32> -> tensor<4x256xf32>
  return
}

// CHECK-LABEL: func.func @kernel_region
// CHECK: %[[DX:.*]] = moe.fused phase(<p2>) ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<896x256xf32>, tensor<4x256x256xbf16>, tensor<7xi32>, tensor<896xi32>) {
// CHECK: ^bb0(%[[A:.*]]: tensor<896x256xf32>, %{{.*}}: tensor<4x256x256xbf16>, %{{.*}}: tensor<7xi32>, %{{.*}}: tensor<896xi32>):
// CHECK:   %[[T:.*]] = arith.truncf %[[A]]
// CHECK:   moe.block_matmul lhs(%[[T]]
// CHECK:   moe.scatter_add_rows
// CHECK:   moe.yield %{{.*}} : tensor<256x256xbf16>
// CHECK: } -> tensor<256x256xbf16>
// CHECK: return %[[DX]]
func.func @kernel_region(%dgu: tensor<896x256xf32>, %w: tensor<4x256x256xbf16>,
    %blk: tensor<7xi32>, %tok: tensor<896xi32>) -> tensor<256x256xbf16> {
  %dx = moe.fused phase(#moe.phase<p2>) ins(%dgu, %w, %blk, %tok
      : tensor<896x256xf32>, tensor<4x256x256xbf16>, tensor<7xi32>,
        tensor<896xi32>) {
  ^bb0(%a: tensor<896x256xf32>, %b: tensor<4x256x256xbf16>,
       %c: tensor<7xi32>, %d: tensor<896xi32>):
    %t = arith.truncf %a : tensor<896x256xf32> to tensor<896x256xbf16>
    %r = moe.block_matmul lhs(%t : tensor<896x256xbf16>)
        rhs(%b : tensor<4x256x256xbf16>) experts(%c : tensor<7xi32>)
        {block_size = 128 : i64} -> tensor<896x256xf32>
    %s = moe.scatter_add_rows %r[%d], %c
        {block_size = 128 : i64, num_experts = 4 : i64, top_k = 2 : i64}
        : tensor<896x256xf32>, tensor<896xi32>, tensor<7xi32> -> tensor<256x256xbf16>
    moe.yield %s : tensor<256x256xbf16>
  } -> tensor<256x256xbf16>
  return %dx : tensor<256x256xbf16>
}

// A region without outputs (its results unused) prints without `->`.
// CHECK-LABEL: func.func @kernel_region_without_outputs
// CHECK: moe.fused phase(<p3>) ins(%{{.*}}, %{{.*}} : tensor<896x256xbf16>, tensor<7xi32>) {
// CHECK: moe.expert_matmul {{.*}} -> tensor<4x256x256xf32>{{$}}
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NEXT: return
func.func @kernel_region_without_outputs(%x: tensor<896x256xbf16>,
    %blk: tensor<7xi32>) {
  moe.fused phase(#moe.phase<p3>) ins(%x, %blk
      : tensor<896x256xbf16>, tensor<7xi32>) {
  ^bb0(%a: tensor<896x256xbf16>, %b: tensor<7xi32>):
    %r = moe.expert_matmul lhs(%a : tensor<896x256xbf16>)
        rhs(%a : tensor<896x256xbf16>) experts(%b : tensor<7xi32>)
        {block_size = 128 : i64} -> tensor<4x256x256xf32>
    moe.yield
  }
  return
}
