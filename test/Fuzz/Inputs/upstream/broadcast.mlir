func.func @f(%x: tensor<8xf32>, %e: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %t = linalg.broadcast ins(%x : tensor<8xf32>) outs(%e : tensor<8x4xf32>) dimensions = [1, %
  return %t : tensor<8x4xf32>
}
