// The embedded default example: the backward of one MoE layer with T = 256
// tokens, H = 256, I = 128, E = 4 experts, top-2 routing in blocks of 128
// slots (N = ceil((256*2 - 3) / 128) + 3 = 7 blocks), MXFP8 e4m3 with the
// RCEIL scale rule, SwiGLU, affinity on I. `moe-run` compiles and runs this
// file and compares it with the references; `moe-ref run` with no flags
// computes the reference gradients of exactly this layer.
func.func @moe_layer_bwd(
    %x: tensor<256x256xbf16>, %dy: tensor<256x256xbf16>,
    %aff: tensor<1024xf32>,
    %wgu: tensor<4x256x2x128xbf16>, %wd: tensor<4x128x256xbf16>,
    %tok: tensor<896xi32>, %blk: tensor<7xi32>)
    -> (tensor<256x256xbf16>, tensor<1024xf32>,
        tensor<4x256x2x128xf32>, tensor<4x128x256xf32>) {
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
  return %dx, %da, %dwgu, %dwd
      : tensor<256x256xbf16>, tensor<1024xf32>,
        tensor<4x256x2x128xf32>, tensor<4x128x256xf32>
}
