sdy.mesh @mesh = <["m"=2]>
func.func @main(%arg0: tensor<8x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"m"}, {}]>}, %arg1: tensor<1024x1024xf32>) -> tensor<8x512xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x512xf32>
  return %0 : tensor<8x512xf32>
}
