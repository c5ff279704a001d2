sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = func.call @relu(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
func.func private @relu(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> tensor<8x8xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<8x8xf32>
  %0 = stablehlo.maximum %arg0, %cst : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
