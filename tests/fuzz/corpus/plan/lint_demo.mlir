// Three things `shardplan lint` reports (docs/advisor.md): a batch of 6 on
// 4 "data" devices, a custom call without a sharding rule, and an add whose
// annotated replicated result conflicts with the constraint after it.
sdy.mesh @mesh = <["data"=4, "model"=2]>
func.func @main(%arg0: tensor<6x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
                %arg1: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
                %arg2: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>})
    -> (tensor<6x1024xf32>, tensor<64x64xf32>) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<6x1024xf32>, tensor<1024x1024xf32>) -> tensor<6x1024xf32> loc("dense")
  %1 = stablehlo.custom_call @my_kernel(%0) : (tensor<6x1024xf32>) -> tensor<6x1024xf32> loc("kernel")
  %2 = stablehlo.add %arg2, %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<64x64xf32> loc("add")
  %3 = sdy.sharding_constraint %2 <@mesh, [{}, {"data"}]> : tensor<64x64xf32>
  return %1, %3 : tensor<6x1024xf32>, tensor<64x64xf32>
}
