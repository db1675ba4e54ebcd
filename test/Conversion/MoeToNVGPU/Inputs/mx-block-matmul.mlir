// An MX block GEMM for the GPU pipeline tests: S = 256 slots in 2 blocks of
// 128, E = 2 experts, Nout = 128, K = 256.
func.func @mx_gemm(%lq: tensor<256x256xf8E4M3FN>, %ls: tensor<256x8xf8E8M0FNU>,
                   %rq: tensor<2x128x256xf8E4M3FN>, %rs: tensor<2x128x8xf8E8M0FNU>,
                   %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  %r = moe.block_matmul
      lhs(%lq : tensor<256x256xf8E4M3FN> scales %ls : tensor<256x8xf8E8M0FNU>)
      rhs(%rq : tensor<2x128x256xf8E4M3FN> scales %rs : tensor<2x128x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}
