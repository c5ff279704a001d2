func.func @s(%v: tensor<16xbf16>) -> tensor<8x2x4xbf16> {
  %0 = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<16xbf16>) -> tensor<4x16xbf16>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<4x16xbf16>) -> tensor<16x4xbf16>
  %2 = stablehlo.reshape %1 : (tensor<16x4xbf16>) -> tensor<8x2x4xbf16>
  return %2 : tensor<8x2x4xbf16>
}
