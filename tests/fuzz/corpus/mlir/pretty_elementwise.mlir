func.func @ew(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  %1 = stablehlo.multiply %0, %b : tensor<2x3xf32>
  %2 = stablehlo.maximum %1, %a : tensor<2x3xf32>
  %3 = stablehlo.negate %2 : tensor<2x3xf32>
  return %3 : tensor<2x3xf32>
}
