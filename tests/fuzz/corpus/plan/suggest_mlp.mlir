// A two-layer MLP whose weights were left without a sharding (jax.jit without
// in_shardings for the parameters) on a 2x4 mesh ("data", "model"); only the
// batch of x is sharded on "data". Propagation keeps the 16 MiB weights
// replicated on every device and the "model" axis idle.
// Try: ./build/rel/shardplan suggest examples/suggest_mlp.mlir [--objective memory] [--check]
module @mlp {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func @main(%arg0: tensor<1024x4096xf32>, %arg1: tensor<4096x1024xf32>, %arg2: tensor<64x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> tensor<64x1024xf32> {
    %0 = stablehlo.dot_general %arg2, %arg0, contracting_dims = [1] x [0] : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32>
    %1 = stablehlo.tanh %0 : tensor<64x4096xf32>
    %2 = stablehlo.dot_general %1, %arg1, contracting_dims = [1] x [0] : (tensor<64x4096xf32>, tensor<4096x1024xf32>) -> tensor<64x1024xf32>
    return %2 : tensor<64x1024xf32>
  }
}
