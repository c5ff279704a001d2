func.func @k() -> (tensor<f32>, tensor<2x2xi64>, tensor<3xi1>, tensor<2xf16>) {
  %cst = stablehlo.constant dense<1.500000e+00> : tensor<f32>
  %c = stablehlo.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi64>
  %c_0 = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
  %cst_1 = "stablehlo.constant"() <{value = dense<0x7C00> : tensor<2xf16>}> : () -> tensor<2xf16>
  return %cst, %c, %c_0, %cst_1 : tensor<f32>, tensor<2x2xi64>, tensor<3xi1>, tensor<2xf16>
}
