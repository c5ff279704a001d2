func.func @gr(%arg0: tensor<?x8xf32>, %arg1: tensor<f32>) -> tensor<?xf32> {
  %0 = "stablehlo.reduce"(%arg0, %arg1) ({
  ^bb0(%arg2: tensor<f32> loc("a"), %arg3: tensor<f32> loc("a")):
    %1 = "stablehlo.add"(%arg2, %arg3) : (tensor<f32>, tensor<f32>) -> tensor<f32> loc("a")
    "stablehlo.return"(%1) : (tensor<f32>) -> () loc("a")
  }) {dimensions = array<i64: 1>} : (tensor<?x8xf32>, tensor<f32>) -> tensor<?xf32> loc("b")
  func.return %0 : tensor<?xf32>
}
