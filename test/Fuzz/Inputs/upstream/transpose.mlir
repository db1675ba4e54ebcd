func.func @f(%x: tensor<8x32xf32>, %e: tensor<32x8xf32>) -> tensor<32x8xf32> {
  %t = linalg.transpose ins(%x : tensor<8x32xf32>) outs(%e : tensor<32x8xf32>) permutation = [1, %
  return %t : tensor<32x8xf32>
}
