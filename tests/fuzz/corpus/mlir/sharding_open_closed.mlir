sdy.mesh @mesh = <["a"=2, "b"=4, "c"=2]>
func.func @g(%arg0: tensor<8x16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b":(1)2, ?}, {}], replicated={"c"}>}) -> (tensor<8x16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {?}, {?}]>}) {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {"b"}, {?}]> : tensor<8x16x4xf32>
  return %0 : tensor<8x16x4xf32>
}
