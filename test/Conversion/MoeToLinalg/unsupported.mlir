// RUN: moe-opt %s -split-input-file -verify-diagnostics -convert-moe-to-linalg
// The ops convert-moe-to-linalg does not lower are named with what to do
// instead (issue 13: the conversion's "failed to legalize operation
// 'moe.route'" named neither).

func.func @route(%idx: tensor<256x2xi32>, %scores: tensor<256x2xf32>) {
  // expected-error @+1 {{convert-moe-to-linalg: moe.route has no lowering; build the routing on the host (moe::jit::buildRouting, moe_mlir.build_routing, `moe-ref route`) and pass it to moe.blockwise_bwd}}
  %tok, %blk, %aff = moe.route %idx, %scores
      {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<256x2xi32>, tensor<256x2xf32>
      -> tensor<896xi32>, tensor<7xi32>, tensor<1024xf32>
  return
}

// -----

func.func @undecomposed(
    %x: tensor<256x256xbf16>, %dy: tensor<256x256xbf16>,
    %aff: tensor<1024xf32>,
    %wgu: tensor<4x256x2x128xbf16>, %wd: tensor<4x128x256xbf16>,
    %tok: tensor<896xi32>, %blk: tensor<7xi32>) {
  // expected-error @+1 {{convert-moe-to-linalg: moe.blockwise_bwd must be decomposed first (run moe-decompose-bwd, as the pipelines do)}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<256x256xbf16>) dy(%dy : tensor<256x256xbf16>)
      affinities(%aff : tensor<1024xf32>)
      gate_up(%wgu : tensor<4x256x2x128xbf16>)
      down(%wd : tensor<4x128x256xbf16>)
      routing(%tok : tensor<896xi32>, %blk : tensor<7xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       activation = #moe.activation<swiglu>, affinity = #moe.affinity<on_i>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<256x256xbf16>, tensor<1024xf32>,
         tensor<4x256x2x128xf32>, tensor<4x128x256xf32>
  return
}
