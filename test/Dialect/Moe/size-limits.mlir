// Tensor sizes no lowering can index: a verifier error naming the tensor,
// where the JIT code used to crash (the byte size of [T, H] overflows
// int64 at H = 2^56 + 32; at H = 2^40 it fits but needs 2^50
// bytes). The slot rows are checked once the layout is known.
// RUN: moe-opt %s -split-input-file -verify-diagnostics

func.func @moe_layer_bwd(
    %x: tensor<256x72057594037927968xbf16>, %dy: tensor<256x72057594037927968xbf16>,
    %aff: tensor<1024xf32>,
    %wgu: tensor<4x72057594037927968x2x128xbf16>, %wd: tensor<4x128x72057594037927968xbf16>,
    %tok: tensor<896xi32>, %blk: tensor<7xi32>)
    -> (tensor<256x72057594037927968xbf16>, tensor<1024xf32>,
        tensor<4x72057594037927968x2x128xf32>, tensor<4x128x72057594037927968xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op hidden_states [T, H] = [256, 72057594037927968] overflows a 64-bit size}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<256x72057594037927968xbf16>) dy(%dy : tensor<256x72057594037927968xbf16>)
      affinities(%aff : tensor<1024xf32>)
      gate_up(%wgu : tensor<4x72057594037927968x2x128xbf16>)
      down(%wd : tensor<4x128x72057594037927968xbf16>)
      routing(%tok : tensor<896xi32>, %blk : tensor<7xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       activation = #moe.activation<swiglu>, affinity = #moe.affinity<on_i>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<256x72057594037927968xbf16>, tensor<1024xf32>,
         tensor<4x72057594037927968x2x128xf32>, tensor<4x128x72057594037927968xf32>
  return %dx, %da, %dwgu, %dwd
      : tensor<256x72057594037927968xbf16>, tensor<1024xf32>,
        tensor<4x72057594037927968x2x128xf32>, tensor<4x128x72057594037927968xf32>
}

// -----

func.func @moe_layer_bwd(
    %x: tensor<256x1099511627776xbf16>, %dy: tensor<256x1099511627776xbf16>,
    %aff: tensor<1024xf32>,
    %wgu: tensor<4x1099511627776x2x128xbf16>, %wd: tensor<4x128x1099511627776xbf16>,
    %tok: tensor<896xi32>, %blk: tensor<7xi32>)
    -> (tensor<256x1099511627776xbf16>, tensor<1024xf32>,
        tensor<4x1099511627776x2x128xf32>, tensor<4x128x1099511627776xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op hidden_states [T, H] = [256, 1099511627776] needs 1125899906842624 bytes, more than the 2^40 a tensor may have}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<256x1099511627776xbf16>) dy(%dy : tensor<256x1099511627776xbf16>)
      affinities(%aff : tensor<1024xf32>)
      gate_up(%wgu : tensor<4x1099511627776x2x128xbf16>)
      down(%wd : tensor<4x128x1099511627776xbf16>)
      routing(%tok : tensor<896xi32>, %blk : tensor<7xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       activation = #moe.activation<swiglu>, affinity = #moe.affinity<on_i>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<256x1099511627776xbf16>, tensor<1024xf32>,
         tensor<4x1099511627776x2x128xf32>, tensor<4x128x1099511627776xf32>
  return %dx, %da, %dwgu, %dwd
      : tensor<256x1099511627776xbf16>, tensor<1024xf32>,
        tensor<4x1099511627776x2x128xf32>, tensor<4x128x1099511627776xf32>
}

// -----

// Every tensor fits, but the phases' f32 slot rows [N*B, H] would not.
func.func @f(%x: tensor<1048576x131072xbf16>, %dy: tensor<1048576x131072xbf16>,
             %aff: tensor<8388608xf32>, %wgu: tensor<8x131072x2x32xbf16>,
             %wd: tensor<8x32x131072xbf16>, %tok: tensor<8389504xi32>,
             %blk: tensor<65543xi32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op the slot rows [N*B, max(H, 2I)] = [65543, 128, 131072] needs 4398516273152 bytes, more than the 2^40 a tensor may have}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<1048576x131072xbf16>) dy(%dy : tensor<1048576x131072xbf16>)
      affinities(%aff : tensor<8388608xf32>)
      gate_up(%wgu : tensor<8x131072x2x32xbf16>)
      down(%wd : tensor<8x32x131072xbf16>)
      routing(%tok : tensor<8389504xi32>, %blk : tensor<65543xi32>)
      {block_size = 128 : i64, top_k = 8 : i64,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<1048576x131072xbf16>, tensor<8388608xf32>,
         tensor<8x131072x2x32xf32>, tensor<8x32x131072xf32>
  return
}

// -----

// T = 2^31 + 128 fits every byte limit (K = 1, H = 32), but the routing
// names tokens by i32.
func.func @moe_layer_bwd(
    %x: tensor<2147483776x32xbf16>, %dy: tensor<2147483776x32xbf16>,
    %aff: tensor<8589935104xf32>,
    %wgu: tensor<4x32x2x32xbf16>, %wd: tensor<4x32x32xbf16>,
    %tok: tensor<2147484160xi32>, %blk: tensor<16777220xi32>)
    -> (tensor<2147483776x32xbf16>, tensor<8589935104xf32>,
        tensor<4x32x2x32xf32>, tensor<4x32x32xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op hidden_states holds T = 2147483776 tokens, more than the i32 ids of token_position_to_id can name (2^31 - 1)}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<2147483776x32xbf16>) dy(%dy : tensor<2147483776x32xbf16>)
      affinities(%aff : tensor<8589935104xf32>)
      gate_up(%wgu : tensor<4x32x2x32xbf16>)
      down(%wd : tensor<4x32x32xbf16>)
      routing(%tok : tensor<2147484160xi32>, %blk : tensor<16777220xi32>)
      {block_size = 128 : i64, top_k = 1 : i64,
       activation = #moe.activation<swiglu>, affinity = #moe.affinity<on_i>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<2147483776x32xbf16>, tensor<8589935104xf32>,
         tensor<4x32x2x32xf32>, tensor<4x32x32xf32>
  return %dx, %da, %dwgu, %dwd
      : tensor<2147483776x32xbf16>, tensor<8589935104xf32>,
        tensor<4x32x2x32xf32>, tensor<4x32x32xf32>
}

// -----

// H = 2^62: the sizes wrapped to zero, and the run blamed "input 'x' null
// data pointer" (issue 13).
func.func @moe_layer_bwd(
    %x: tensor<256x4611686018427387904xbf16>, %dy: tensor<256x4611686018427387904xbf16>,
    %aff: tensor<1024xf32>,
    %wgu: tensor<4x4611686018427387904x2x128xbf16>, %wd: tensor<4x128x4611686018427387904xbf16>,
    %tok: tensor<896xi32>, %blk: tensor<7xi32>)
    -> (tensor<256x4611686018427387904xbf16>, tensor<1024xf32>,
        tensor<4x4611686018427387904x2x128xf32>, tensor<4x128x4611686018427387904xf32>) {
  // expected-error @+1 {{'moe.blockwise_bwd' op hidden_states [T, H] = [256, 4611686018427387904] overflows a 64-bit size}}
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<256x4611686018427387904xbf16>) dy(%dy : tensor<256x4611686018427387904xbf16>)
      affinities(%aff : tensor<1024xf32>)
      gate_up(%wgu : tensor<4x4611686018427387904x2x128xbf16>)
      down(%wd : tensor<4x128x4611686018427387904xbf16>)
      routing(%tok : tensor<896xi32>, %blk : tensor<7xi32>)
      {block_size = 128 : i64, top_k = 2 : i64,
       activation = #moe.activation<swiglu>, affinity = #moe.affinity<on_i>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<256x4611686018427387904xbf16>, tensor<1024xf32>,
         tensor<4x4611686018427387904x2x128xf32>, tensor<4x128x4611686018427387904xf32>
  return %dx, %da, %dwgu, %dwd
      : tensor<256x4611686018427387904xbf16>, tensor<1024xf32>,
        tensor<4x4611686018427387904x2x128xf32>, tensor<4x128x4611686018427387904xf32>
}

