// A reshape splits a dimension sharded on "x" (4 devices) into 2x4: the
// output gets the sub-axes "x":(1)2 and "x":(2)2, which no PartitionSpec can
// write. `shardplan lint examples/lint_subaxis.mlir` reports it with the fix.
sdy.mesh @mesh = <["x"=4, "y"=2]>

func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<2x4x16xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<8x16xf32>) -> tensor<2x4x16xf32> loc("split")
  return %0 : tensor<2x4x16xf32>
}
