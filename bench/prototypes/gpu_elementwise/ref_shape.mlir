func.func @moe_layer_bwd(
    %x: tensor<16384x4096xbf16>, %dy: tensor<16384x4096xbf16>,
    %aff: tensor<2097152xf32>,
    %wgu: tensor<128x4096x2x1536xbf16>, %wd: tensor<128x1536x4096xbf16>,
    %tok: tensor<147328xi32>, %blk: tensor<1151xi32>)
    -> (tensor<16384x4096xbf16>, tensor<2097152xf32>,
        tensor<128x4096x2x1536xf32>, tensor<128x1536x4096xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd
      x(%x : tensor<16384x4096xbf16>) dy(%dy : tensor<16384x4096xbf16>)
      affinities(%aff : tensor<2097152xf32>)
      gate_up(%wgu : tensor<128x4096x2x1536xbf16>)
      down(%wd : tensor<128x1536x4096xbf16>)
      routing(%tok : tensor<147328xi32>, %blk : tensor<1151xi32>)
      {block_size = 128 : i64, top_k = 8 : i64,
       activation = #moe.activation<swiglu>, affinity = #moe.affinity<on_i>,
       quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      -> tensor<16384x4096xbf16>, tensor<2097152xf32>,
         tensor<128x4096x2x1536xf32>, tensor<128x1536x4096xf32>
  return %dx, %da, %dwgu, %dwd
      : tensor<16384x4096xbf16>, tensor<2097152xf32>,
        tensor<128x4096x2x1536xf32>, tensor<128x1536x4096xf32>
}
