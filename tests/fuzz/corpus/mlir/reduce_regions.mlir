func.func @r(%a: tensor<2x64x13xf32>, %b: tensor<2x64x13xi32>) -> (tensor<64xf32>, tensor<64xi32>, tensor<2xf32>) {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%a init: %cst), (%b init: %c) across dimensions = [0, 2] :
    (tensor<2x64x13xf32>, tensor<2x64x13xi32>, tensor<f32>, tensor<i32>) -> (tensor<64xf32>, tensor<64xi32>)
    reducer(%x: tensor<f32>, %y: tensor<f32>) (%u: tensor<i32>, %v: tensor<i32>) {
      %s = stablehlo.add %x, %y : tensor<f32>
      %t = stablehlo.add %u, %v : tensor<i32>
      stablehlo.return %s, %t : tensor<f32>, tensor<i32>
    }
  %1 = stablehlo.reduce(%a init: %cst) applies stablehlo.maximum across dimensions = [1, 2] : (tensor<2x64x13xf32>, tensor<f32>) -> tensor<2xf32>
  return %0#0, %0#1, %1 : tensor<64xf32>, tensor<64xi32>, tensor<2xf32>
}
