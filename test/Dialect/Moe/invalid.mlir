// RUN: moe-opt %s -split-input-file -verify-diagnostics
// One case per verifier message of moe.blockwise_bwd, moe.route and the
// attributes. The base case (T = 64, H = I = 32, E = 2, K = 1, B = 128, so
// N = 2) is valid; each case breaks one relation.

func.func @f(%x: tensor<?x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op requires static shapes, got 'tensor<?x32xbf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<?x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xf16>, %dy: tensor<64x32xf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op hidden_states must be a 2-D bf16 tensor [T, H], got 'tensor<64x32xf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xf16>) dy(%dy : tensor<64x32xf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<0x32xbf16>, %dy: tensor<0x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op hidden_states must hold at least one token, got 'tensor<0x32xbf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<0x32xbf16>) dy(%dy : tensor<0x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x48xbf16>, %dy: tensor<64x48xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op H (hidden size) must be a positive multiple of 32, got 48}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x48xbf16>) dy(%dy : tensor<64x48xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<32x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op output_grad must have the type of hidden_states, 'tensor<64x32xbf16>', got 'tensor<32x32xbf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<32x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x64xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_weight must be a 4-D tensor [E, H, 2, I], got 'tensor<2x32x64xbf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x64xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_weight element type must be bf16, f8E4M3FN or f8E5M2, got 'f16'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<0x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_weight must hold at least one expert, got 'tensor<0x32x2x32xbf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<0x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x64x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_weight dim 1 must equal H = 32, got 64}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x64x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x3x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_weight dim 2 must be 2 (gate, up), got 3}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x3x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x40xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op I (intermediate size) must be a positive multiple of 32, got 40}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x40xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x64xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op down_weight must be a tensor [E, I, H] = [2, 32, 32], got 'tensor<2x32x64xbf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x64xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xf32>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op down_weight element type must be bf16, f8E4M3FN or f8E5M2, got 'f32'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xf32>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op block_size must be one of 128, 256, 512, 1024, got 64}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 64 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op top_k must be in [1, E] = [1, 2], got 3}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 3 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op single_expert_dense requires E = 1 and top_k = 1, got E = 2, top_k = 1}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, single_expert_dense}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<1xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op block_to_expert must be a 1-D i32 tensor of N = 2 blocks (N = ceil((T*K - (E-1)) / B) + E - 1 for T = 64, K = 1, E = 2, B = 128), got 'tensor<1xi32>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<1xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<128xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op token_position_to_id must be a 1-D i32 tensor of N*B = 256 slots, got 'tensor<128xi32>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<128xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<64x2xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op expert_affinities_masked must be a 1-D f32 tensor of T*E = 128 elements, got 'tensor<64x2xf32>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<64x2xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %sgu: tensor<2x32x2x1xf8E8M0FNU>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_scales given but gate_up_weight is bf16, not pre-quantized}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16> scales %sgu : tensor<2x32x2x1xf8E8M0FNU>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xf8E4M3FN>, %sgu: tensor<2x32x2x1xf8E8M0FNU>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %ckpt: tensor<2x2x32x128xbf16>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op pre-quantized gate_up_weight ('f8E4M3FN') needs MX quantization, but quant is none}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xf8E4M3FN> scales %sgu : tensor<2x32x2x1xf8E8M0FNU>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      checkpoint(%ckpt : tensor<2x2x32x128xbf16>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<none, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xf8E5M2>, %sgu: tensor<2x32x2x1xf8E8M0FNU>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %ckpt: tensor<2x2x32x128xbf16>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_weight element type 'f8E5M2' does not match the quant element f8E4M3FN}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xf8E5M2> scales %sgu : tensor<2x32x2x1xf8E8M0FNU>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      checkpoint(%ckpt : tensor<2x2x32x128xbf16>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xf8E4M3FN>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %ckpt: tensor<2x2x32x128xbf16>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op pre-quantized gate_up_weight requires gate_up_scales}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xf8E4M3FN>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      checkpoint(%ckpt : tensor<2x2x32x128xbf16>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xf8E4M3FN>, %sgu: tensor<2x1x2x32xf8E8M0FNU>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %ckpt: tensor<2x2x32x128xbf16>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_scales must be a f8E8M0FNU tensor [E, H, 2, I/32] = [2, 32, 2, 1], got 'tensor<2x1x2x32xf8E8M0FNU>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xf8E4M3FN> scales %sgu : tensor<2x1x2x32xf8E8M0FNU>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      checkpoint(%ckpt : tensor<2x2x32x128xbf16>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %sd: tensor<2x32x1xf8E8M0FNU>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op down_scales given but down_weight is bf16, not pre-quantized}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16> scales %sd : tensor<2x32x1xf8E8M0FNU>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xf8E4M3FN>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op pre-quantized down_weight requires down_scales}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xf8E4M3FN>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xf8E4M3FN>, %sd: tensor<2x32x1xi8>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op down_scales must be a f8E8M0FNU tensor [E, I, H/32] = [2, 32, 1], got 'tensor<2x32x1xi8>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xf8E4M3FN> scales %sd : tensor<2x32x1xi8>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xf8E4M3FN>, %sgu: tensor<2x32x2x1xf8E8M0FNU>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op pre-quantized gate_up_weight requires gate_up_checkpoint: recomputing g and u contracts over H, but its scales run along 2I}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xf8E4M3FN> scales %sgu : tensor<2x32x2x1xf8E8M0FNU>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %ckpt: tensor<2x2x128x32xbf16>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_checkpoint must be a bf16 or f32 tensor [N, 2, I, B] = [2, 2, 32, 128], got 'tensor<2x2x128x32xbf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      checkpoint(%ckpt : tensor<2x2x128x32xbf16>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %bgu: tensor<2x2x32xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op bias requires the gate_up_bias and down_bias operands}}
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, bias}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>, tensor<2x2x32xf32>, tensor<2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %bgu: tensor<2x2x32xf32>, %bd: tensor<2x32xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_bias and down_bias require the bias attribute}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>)
      down_bias(%bd : tensor<2x32xf32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %bgu: tensor<2x32xf32>, %bd: tensor<2x32xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_bias must be a bf16 or f32 tensor [E, 2, I] = [2, 2, 32], got 'tensor<2x32xf32>'}}
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x32xf32>)
      down_bias(%bd : tensor<2x32xf32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, bias}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>, tensor<2x2x32xf32>, tensor<2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %bgu: tensor<2x2x32xf32>, %bd: tensor<2x32xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op down_bias must be a bf16 or f32 tensor [E, H] = [2, 32], got 'tensor<2x32xi32>'}}
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>)
      down_bias(%bd : tensor<2x32xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, bias}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>, tensor<2x2x32xf32>, tensor<2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op hidden_states_grad must be a bf16 or f32 tensor [T, H] = [64, 32], got 'tensor<64x32xf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op dx_accumulate = bf16 requires a bf16 hidden_states_grad, got 'tensor<64x32xf32>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, dx_accumulate = #moe.dx_accumulate<bf16>}
      -> tensor<64x32xf32>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op affinities_grad must be a 1-D f32 tensor of T*E = 128 elements, got 'tensor<128xbf16>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xbf16>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_weight_grad must be an f32 or bf16 tensor [E, H, 2, I] = [2, 32, 2, 32], got 'tensor<2x32x2x64xf32>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x64xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op down_weight_grad must be an f32 or bf16 tensor [E, I, H] = [2, 32, 32], got 'tensor<2x32x32xf8E4M3FN>'}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf8E4M3FN>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %bgu: tensor<2x2x32xf32>, %bd: tensor<2x32xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op bias requires the gate_up_bias_grad and down_bias_grad results}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>)
      down_bias(%bd : tensor<2x32xf32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, bias}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_bias_grad and down_bias_grad require the bias attribute}}
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>, tensor<2x2x32xf32>, tensor<2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %bgu: tensor<2x2x32xf32>, %bd: tensor<2x32xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op gate_up_bias_grad must be an f32 tensor [E, 2, I] = [2, 2, 32], got 'tensor<2x2x32xbf16>'}}
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>)
      down_bias(%bd : tensor<2x32xf32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, bias}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>, tensor<2x2x32xbf16>, tensor<2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64x32xbf16>, %dy: tensor<64x32xbf16>, %aff: tensor<128xf32>, %wgu: tensor<2x32x2x32xbf16>, %wd: tensor<2x32x32xbf16>, %tok: tensor<256xi32>, %blk: tensor<2xi32>, %bgu: tensor<2x2x32xf32>, %bd: tensor<2x32xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op down_bias_grad must be an f32 tensor [E, H] = [2, 32], got 'tensor<32x2xf32>'}}
  %dx, %da, %dwgu, %dwd, %dbgu, %dbd = moe.blockwise_bwd
      x(%x : tensor<64x32xbf16>) dy(%dy : tensor<64x32xbf16>)
      affinities(%aff : tensor<128xf32>)
      gate_up(%wgu : tensor<2x32x2x32xbf16>) down(%wd : tensor<2x32x32xbf16>)
      routing(%tok : tensor<256xi32>, %blk : tensor<2xi32>)
      gate_up_bias(%bgu : tensor<2x2x32xf32>)
      down_bias(%bd : tensor<2x32xf32>)
      {block_size = 128 : i64, top_k = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>, bias}
      -> tensor<64x32xbf16>, tensor<128xf32>, tensor<2x32x2x32xf32>, tensor<2x32x32xf32>, tensor<2x2x32xf32>, tensor<32x2xf32>
  return
}

// -----

func.func @f(%idx: tensor<64xi32>, %s: tensor<64x2xf32>) {
  // expected-error @+1 {{'moe.route' op topk_indices must be a 2-D i32 tensor [T, K], got 'tensor<64xi32>'}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<64xi32>, tensor<64x2xf32> -> tensor<512xi32>, tensor<4xi32>, tensor<256xf32>
  return
}

// -----

func.func @f(%idx: tensor<0x2xi32>, %s: tensor<0x2xf32>) {
  // expected-error @+1 {{'moe.route' op topk_indices must hold at least one token, got 'tensor<0x2xi32>'}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<0x2xi32>, tensor<0x2xf32> -> tensor<512xi32>, tensor<4xi32>, tensor<256xf32>
  return
}

// -----

func.func @f(%idx: tensor<64x2xi32>, %s: tensor<64x2xbf16>) {
  // expected-error @+1 {{'moe.route' op topk_scores must be an f32 tensor of the shape of topk_indices, [64, 2], got 'tensor<64x2xbf16>'}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<64x2xi32>, tensor<64x2xbf16> -> tensor<512xi32>, tensor<4xi32>, tensor<256xf32>
  return
}

// -----

func.func @f(%idx: tensor<64x2xi32>, %s: tensor<64x2xf32>) {
  // expected-error @+1 {{'moe.route' op num_experts must be positive, got 0}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 0 : i64, block_size = 128 : i64}
      : tensor<64x2xi32>, tensor<64x2xf32> -> tensor<512xi32>, tensor<4xi32>, tensor<256xf32>
  return
}

// -----

func.func @f(%idx: tensor<64x8xi32>, %s: tensor<64x8xf32>) {
  // expected-error @+1 {{'moe.route' op K (topk_indices dim 1) must be in [1, num_experts] = [1, 4], got 8}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<64x8xi32>, tensor<64x8xf32> -> tensor<512xi32>, tensor<4xi32>, tensor<256xf32>
  return
}

// -----

func.func @f(%idx: tensor<64x2xi32>, %s: tensor<64x2xf32>) {
  // expected-error @+1 {{'moe.route' op block_size must be one of 128, 256, 512, 1024, got 100}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 4 : i64, block_size = 100 : i64}
      : tensor<64x2xi32>, tensor<64x2xf32> -> tensor<512xi32>, tensor<4xi32>, tensor<256xf32>
  return
}

// -----

// T*K = 128, E = 4: N = ceil(125 / 128) + 3 = 4.
func.func @f(%idx: tensor<64x2xi32>, %s: tensor<64x2xf32>) {
  // expected-error @+1 {{'moe.route' op block_to_expert must be a 1-D i32 tensor of N = 4 blocks (N = ceil((T*K - (E-1)) / B) + E - 1 for T = 64, K = 2, E = 4, B = 128), got 'tensor<3xi32>'}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<64x2xi32>, tensor<64x2xf32> -> tensor<512xi32>, tensor<3xi32>, tensor<256xf32>
  return
}

// -----

func.func @f(%idx: tensor<64x2xi32>, %s: tensor<64x2xf32>) {
  // expected-error @+1 {{'moe.route' op token_position_to_id must be a 1-D i32 tensor of N*B = 512 slots, got 'tensor<512xi64>'}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<64x2xi32>, tensor<64x2xf32> -> tensor<512xi64>, tensor<4xi32>, tensor<256xf32>
  return
}

// -----

func.func @f(%idx: tensor<64x2xi32>, %s: tensor<64x2xf32>) {
  // expected-error @+1 {{'moe.route' op expert_affinities_masked must be a 1-D f32 tensor of T*E = 256 elements, got 'tensor<128xf32>'}}
  %tok, %blk, %aff = moe.route %idx, %s {num_experts = 4 : i64, block_size = 128 : i64}
      : tensor<64x2xi32>, tensor<64x2xf32> -> tensor<512xi32>, tensor<4xi32>, tensor<128xf32>
  return
}

// -----

// expected-error @+1 {{MX block size must be 32, got 16}}
func.func @f() attributes {q = #moe.mx<f8E4M3FN, block = 16, rule = rceil>} {
  return
}

// -----

// expected-error @+1 {{tile must be 3 positive sizes [M, N, K], got [128, 128]}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{mma_shape must be 3 positive sizes [M, N, K], got [64, 0, 16]}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 0, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{warpgroups must be 2 positive counts [producer, consumer], got [1, 2, 3]}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2, 3], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{registers must be 2 positive counts [producer, consumer], got [40]}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40]>} {
  return
}

// -----

// expected-error @+1 {{tile M 128 is not mma_shape M 64 times 1 consumer warpgroups}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 1], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{tile N 128 is not mma_shape N 64}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 64, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{tile K 64 is not a multiple of mma_shape K 48}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 48], stages = 6, warpgroups = [1, 2], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{stages must be at least 2, got 1}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 1, warpgroups = [1, 2], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{the bf16 MMA path needs dequant_stages >= 1, got 0}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16, tile = [128, 128, 128], mma_shape = [64, 128, 16], stages = 6, warpgroups = [2, 2], registers = [144, 112]>} {
  return
}

// -----

// expected-error @+1 {{dequant_stages applies only to the bf16 MMA path and rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{rhs_n_major applies only to the bf16_operands MMA path}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 4, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_m_major applies only to the bf16_operands MMA path}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 4, warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true>} {
  return
}

// -----

// expected-error @+1 {{persistent applies only to the bf16_operands MMA path}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16, tile = [128, 128, 128], mma_shape = [64, 128, 16], stages = 3, dequant_stages = 2, warpgroups = [2, 2], registers = [144, 112], persistent = true>} {
  return
}

// -----

// expected-error @+1 {{ctas_per_sm must be 1, or more for a bf16_operands kernel of one CTA per tile, got 2}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, ctas_per_sm = 2>} {
  return
}

// -----

// expected-error @+1 {{ctas_per_sm must be 1, or more for a bf16_operands kernel of one CTA per tile, got 0}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 1], registers = [40, 216], ctas_per_sm = 0>} {
  return
}

// -----

// expected-error @+1 {{pingpong needs a persistent kernel with 2 consumer warpgroups}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], pingpong = true>} {
  return
}

// -----

// expected-error @+1 {{pingpong needs a persistent kernel with 2 consumer warpgroups}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 3], registers = [40, 152], persistent = true, pingpong = true>} {
  return
}

// -----

// expected-error @+1 {{k_turns needs the bf16_operands MMA path, 2 consumer warpgroups and no pingpong}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true, pingpong = true, k_turns = true>} {
  return
}

// -----

// expected-error @+1 {{k_turns needs the bf16_operands MMA path, 2 consumer warpgroups and no pingpong}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [64, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 1], registers = [40, 232], k_turns = true>} {
  return
}

// -----

// expected-error @+1 {{k_turns needs the bf16_operands MMA path, 2 consumer warpgroups and no pingpong}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, warpgroups = [1, 2], registers = [40, 232], k_turns = true>} {
  return
}

// -----

// expected-error @+1 {{pingpong tile M 96 is not a multiple of mma_shape M 64}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [96, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true, pingpong = true>} {
  return
}

// -----

// expected-error @+1 {{cluster_n must be 1, or 2 for a bf16_operands kernel of one CTA per tile, got 2}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true, cluster_n = 2>} {
  return
}

// -----

// expected-error @+1 {{cluster_n must be 1, or 2 for a bf16_operands kernel of one CTA per tile, got 4}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], cluster_n = 4>} {
  return
}

// -----

// expected-error @+1 {{evict_first_outputs applies only to the bf16_operands MMA path}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, warpgroups = [1, 2], registers = [40, 232], evict_first_outputs = true>} {
  return
}

// -----

// expected-error @+1 {{rhs_codes needs dequant_stages >= 1, got 0}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, warpgroups = [1, 2], registers = [40, 232], rhs_codes = true>} {
  return
}

// -----

// expected-error @+1 {{rhs_codes needs the bf16_operands MMA path, a K-major rhs and no cluster}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], rhs_codes = true>} {
  return
}

// -----

// expected-error @+1 {{rhs_codes needs the bf16_operands MMA path, a K-major rhs and no cluster}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, rhs_codes = true>} {
  return
}

// -----

// expected-error @+1 {{rhs_codes needs the bf16_operands MMA path, a K-major rhs and no cluster}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2, rhs_codes = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_codes needs the bf16_operands MMA path, a K-major lhs, no cluster and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, warpgroups = [1, 2], registers = [40, 232], lhs_codes = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_codes needs the bf16_operands MMA path, a K-major lhs, no cluster and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true, lhs_codes = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_codes needs the bf16_operands MMA path, a K-major lhs, no cluster and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2, lhs_codes = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_codes needs the bf16_operands MMA path, a K-major lhs, no cluster and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], rhs_codes = true, lhs_codes = true>} {
  return
}

// -----

// expected-error @+1 {{raster_m must be 1, or more for a bf16_operands kernel without cluster_n, got 4}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2, raster_m = 4>} {
  return
}

// -----

// expected-error @+1 {{raster_m must be 1, or more for a bf16_operands kernel without cluster_n, got 0}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], raster_m = 0>} {
  return
}

// -----

// expected-error @+1 {{raster_m must be 1, or more for a bf16_operands kernel without cluster_n, got 2}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, warpgroups = [1, 2], registers = [40, 232], raster_m = 2>} {
  return
}

// -----

// expected-error @+1 {{expected rhs_n_major, lhs_m_major, persistent, pingpong, ctas_per_sm, cluster_n, raster_m, evict_first_outputs, rhs_codes, lhs_codes, lhs_gather, round_lhs, round_rhs, swap_operands, rhs_gather, tma_store, store_columns or k_turns, got 'mn_major'}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], mn_major = true>} {
  return
}

// -----

// expected-error @+1 {{register count 20 is not a multiple of 8 in [24, 256]}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [20, 232]>} {
  return
}

// -----

// expected-error @+1 {{register count 236 is not a multiple of 8 in [24, 256]}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 236]>} {
  return
}

// -----

// expected-error @+1 {{kernel must be a symbol @module::@kernel, got @k}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @k, grid = [2, 4, 1], block = [384, 1, 1], pointers = [0]>} {
  return
}

// -----

// expected-error @+1 {{grid must be 3 positive sizes [x, y, z], got [2, 4]}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4], block = [384, 1, 1], pointers = [0]>} {
  return
}

// -----

// expected-error @+1 {{block must be 3 positive sizes [x, y, z], got [384, 0, 1]}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4, 1], block = [384, 0, 1], pointers = [0]>} {
  return
}

// -----

// expected-error @+1 {{block of 2048 threads exceeds the 1024 of a CUDA block}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4, 1], block = [1024, 2, 1], pointers = [0]>} {
  return
}

// -----

// expected-error @+1 {{dynamic_shared_memory must be a non-negative i32, got -1}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4, 1], block = [384, 1, 1], dynamic_shared_memory = -1, pointers = [0]>} {
  return
}

// -----

// expected-error @+1 {{dynamic_shared_memory must be a non-negative i32, got 2147483648}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4, 1], block = [384, 1, 1], dynamic_shared_memory = 2147483648, pointers = [0]>} {
  return
}

// -----

// expected-error @+1 {{argument index -1 is negative}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4, 1], block = [384, 1, 1], pointers = [0, -1]>} {
  return
}

// -----

// expected-error @+1 {{argument #0 is passed twice}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4, 1], block = [384, 1, 1], tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>], pointers = [1, 0]>} {
  return
}

// -----

// expected-error @+1 {{argument #2 is passed twice}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4, 1], block = [384, 1, 1], pointers = [2, 1, 2]>} {
  return
}

// -----

// expected-error @+1 {{results must be at least 1, got 0}}
func.func @f() attributes {l = #moe.gpu_launch<kernel = @m::@k, grid = [2, 4, 1], block = [384, 1, 1], pointers = [0], results = 0>} {
  return
}

// -----

// expected-error @+1 {{clamp gate_lo (2.000000e+00) must be less than gate_hi (1.000000e+00)}}
func.func @f() attributes {c = #moe.clamp<gate_lo = 2.0, gate_hi = 1.0>} {
  return
}

// -----

// expected-error @+1 {{clamp up_lo (3.000000e+00) must be less than up_hi (3.000000e+00)}}
func.func @f() attributes {c = #moe.clamp<up_lo = 3.0, up_hi = 3.0>} {
  return
}

// -----

// expected-error @+1 {{clamp limit up_hi must be finite}}
func.func @f() attributes {c = #moe.clamp<up_hi = 0x7FF0000000000000>} {
  return
}

// -----

// expected-error @+1 {{unknown clamp limit 'gate_max', expected gate_lo, gate_hi, up_lo or up_hi}}
func.func @f() attributes {c = #moe.clamp<gate_max = 1.0>} {
  return
}

// -----

// expected-error @+1 {{clamp limit 'gate_hi' given twice}}
func.func @f() attributes {c = #moe.clamp<gate_hi = 1.0, gate_hi = 2.0>} {
  return
}

// -----

// expected-error @+1 {{counters must be non-negative, got -1}}
func.func @f() attributes {g = #moe.gpu_launch<kernel = @m::@k, grid = [1, 1, 1], block = [128, 1, 1], counters = -1, pointers = [0]>} {
  return
}

// -----

// expected-error @+1 {{lhs_gather needs the bf16_operands MMA path, a K-major lhs, no cluster, no lhs_codes and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, warpgroups = [1, 2], registers = [40, 232], lhs_gather = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_gather needs the bf16_operands MMA path, a K-major lhs, no cluster, no lhs_codes and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true, lhs_gather = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_gather needs the bf16_operands MMA path, a K-major lhs, no cluster, no lhs_codes and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2, lhs_gather = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_gather needs the bf16_operands MMA path, a K-major lhs, no cluster, no lhs_codes and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, warpgroups = [1, 2], registers = [40, 232], lhs_codes = true, lhs_gather = true>} {
  return
}

// -----

// expected-error @+1 {{lhs_gather needs the bf16_operands MMA path, a K-major lhs, no cluster, no lhs_codes and no rhs_codes}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 5, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], rhs_codes = true, lhs_gather = true>} {
  return
}

// -----

// expected-error @+1 {{round_lhs needs the bf16_operands MMA path, an M-major lhs (or swap_operands), a persistent kernel without pingpong, no lhs_codes and no lhs_gather}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, warpgroups = [1, 2], registers = [40, 232], round_lhs = true>} {
  return
}

// -----

// expected-error @+1 {{round_lhs needs the bf16_operands MMA path, an M-major lhs (or swap_operands), a persistent kernel without pingpong, no lhs_codes and no lhs_gather}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [64, 216], persistent = true, round_lhs = true>} {
  return
}

// -----

// expected-error @+1 {{round_lhs needs the bf16_operands MMA path, an M-major lhs (or swap_operands), a persistent kernel without pingpong, no lhs_codes and no lhs_gather}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [64, 216], lhs_m_major = true, round_lhs = true>} {
  return
}

// -----

// expected-error @+1 {{round_lhs needs the bf16_operands MMA path, an M-major lhs (or swap_operands), a persistent kernel without pingpong, no lhs_codes and no lhs_gather}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [64, 216], lhs_m_major = true, persistent = true, pingpong = true, round_lhs = true>} {
  return
}

// -----

// expected-error @+1 {{round_rhs needs the bf16_operands MMA path, an N-major rhs, a persistent kernel without pingpong, no rhs_codes and no lhs_gather}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [64, 216], persistent = true, round_rhs = true>} {
  return
}

// -----

// expected-error @+1 {{round_rhs needs the bf16_operands MMA path, an N-major rhs, a persistent kernel without pingpong, no rhs_codes and no lhs_gather}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [64, 216], rhs_n_major = true, round_rhs = true>} {
  return
}

// -----

// The transposed product stores its tiles by TMA (tma_store is missing).
// expected-error @+1 {{swap_operands needs the bf16_operands MMA path, an M-major lhs beside an N-major rhs, a persistent kernel with tma_store of 32 columns and 64-row MMAs}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true>} {
  return
}

// -----

// An expert GEMM's transposed product reads both operands slot-major: an
// N-major rhs beside a K-major lhs is neither that nor a block GEMM's.
// expected-error @+1 {{swap_operands needs the bf16_operands MMA path, an M-major lhs beside an N-major rhs, a persistent kernel with tma_store of 32 columns and 64-row MMAs}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>} {
  return
}

// -----

// rhs_gather copies the slot rows of a block GEMM's transposed product.
// expected-error @+1 {{rhs_gather needs the bf16_operands MMA path, swap_operands, a K-major rhs, no rhs_codes, no round_rhs and no lhs_gather}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, rhs_gather = true, tma_store = 2>} {
  return
}

// -----

// expected-error @+1 {{rhs_gather needs the bf16_operands MMA path, swap_operands, a K-major rhs, no rhs_codes, no round_rhs and no lhs_gather}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, rhs_gather = true, tma_store = 2>} {
  return
}

// -----

// expected-error @+1 {{tma_store must be 0, or 2 or more buffers of 32 columns that mma_shape N is a multiple of, on the bf16_operands MMA path without pingpong or cluster, got 2}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, pingpong = true, tma_store = 2>} {
  return
}

// -----

// expected-error @+1 {{tma_store must be 0, or 2 or more buffers of 32 columns that mma_shape N is a multiple of, on the bf16_operands MMA path without pingpong or cluster, got 4}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 192, 64], mma_shape = [64, 192, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], tma_store = 4>} {
  return
}

// -----

// expected-error @+1 {{tma_store must be 0, or 2 or more buffers of 32 columns that mma_shape N is a multiple of, on the bf16_operands MMA path without pingpong or cluster, got 2}}
func.func @f() attributes {g = #moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 4, warpgroups = [1, 2], registers = [40, 232], tma_store = 2>} {
  return
}

// -----

// expected-error @+1 {{tma_store must be 0, or 2 or more buffers of 32 columns that mma_shape N is a multiple of, on the bf16_operands MMA path without pingpong or cluster, got 1}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], tma_store = 1>} {
  return
}

// -----

// expected-error @+1 {{tile M 128 is not mma_shape M 64 times 2222222222222222221 consumer warpgroups}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [122, 2222222222222222221], registers = [40, 232]>} {
  return
}

// -----

// expected-error @+1 {{tma_store must be 0, or 2 or more buffers of 32 columns that mma_shape N is a multiple of, on the bf16_operands MMA path without pingpong or cluster, got 288230376151711744}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], tma_store = 288230376151711744>} {
  return
}

// -----

// expected-error @+1 {{store_columns must be 8, 16 or 32, got 12}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], tma_store = 2, store_columns = 12>} {
  return
}

// -----

// expected-error @+1 {{store_columns needs tma_store}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], store_columns = 16>} {
  return
}

// -----

// expected-error @+1 {{tma_store must be 0, or 2 or more buffers of 8 columns that mma_shape N is a multiple of, on the bf16_operands MMA path without pingpong or cluster, got 32}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], tma_store = 32, store_columns = 8>} {
  return
}

// -----

// expected-error @+1 {{tma_store must be 0, or 2 or more buffers of 16 columns that mma_shape N is a multiple of, on the bf16_operands MMA path without pingpong or cluster, got 3}}
func.func @f() attributes {g = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], tma_store = 3, store_columns = 16>} {
  return
}
