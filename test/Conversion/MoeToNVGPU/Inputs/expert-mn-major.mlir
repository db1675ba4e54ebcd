// An expert GEMM reading both slot-major operands as stored (lhs_m_major,
// rhs_n_major): the input of gpu-device-pipeline-ptxas.mlir.
func.func @expert_mn_major(%a: tensor<256x128xbf16>, %b: tensor<256x128xbf16>,
                           %blk: tensor<2xi32>) -> tensor<2x128x128xf32> {
  %aq, %as = moe.mx_quantize %a
      {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x128xbf16> -> tensor<256x128xf8E4M3FN>, tensor<8x128xf8E8M0FNU>
  %bq, %bs = moe.mx_quantize %b
      {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x128xbf16> -> tensor<256x128xf8E4M3FN>, tensor<8x128xf8E8M0FNU>
  %r = moe.expert_matmul
      lhs(%aq : tensor<256x128xf8E4M3FN> scales %as : tensor<8x128xf8E8M0FNU>)
      rhs(%bq : tensor<256x128xf8E4M3FN> scales %bs : tensor<8x128xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands,
           tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6,
           warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true,
           lhs_m_major = true>}
      -> tensor<2x128x128xf32>
  return %r : tensor<2x128x128xf32>
}
