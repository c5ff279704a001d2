sdy.mesh @mesh = <["a"=2, "b"=2], device_ids=[3, 2, 1, 0]>
func.func @f(%arg0: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {"a"}]>}) -> tensor<4x4xf32> {
  return %arg0 : tensor<4x4xf32>
}
