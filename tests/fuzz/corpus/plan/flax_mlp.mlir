// Flax guide "Scaling Flax modules across multiple devices": MLP of 4 DotReluDot
// layers (depth 1024, batch 8) on a 2x4 mesh ("data", "model"): the guide's
// apply_fn(state, x), jitted with in_shardings=(state_sharding, x_sharding) and
// out_shardings=x_sharding, as .lower(new_state, x).as_text() prints it with
// Shardy enabled (the state leaves apply_fn does not use, step and opt_state,
// are pruned; jax.nn.relu is shown inlined as a maximum with a broadcast zero).
// Arguments: for each layer i, Dense_0 kernel W1 (%arg{2i}, [{}, {"model"}]) and
// W2 (%arg{2i+1}, [{"model"}, {}]) in the pytree order of the params dict, then
// the input x (%arg8, [{"data"}, {}]). Each layer computes
//   y = with_sharding_constraint(relu(x @ W1), P("data", "model"))
//   x = with_sharding_constraint(y @ W2, P("data", None))
// Try: ./build/rel/shardplan opt examples/flax_mlp.mlir -sdy-populate-op-sharding-rules
module @jit_apply_fn attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func public @main(%arg0: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg1: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg2: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg3: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg4: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg5: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg6: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg7: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg8: tensor<8x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> (tensor<8x1024xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
    %0 = stablehlo.dot_general %arg8, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x1024xf32>
    %2 = stablehlo.maximum %0, %1 : tensor<8x1024xf32>
    %3 = sdy.sharding_constraint %2 <@mesh, [{"data"}, {"model"}]> : tensor<8x1024xf32>
    %4 = stablehlo.dot_general %3, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %5 = sdy.sharding_constraint %4 <@mesh, [{"data"}, {}]> : tensor<8x1024xf32>
    %6 = stablehlo.dot_general %5, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8x1024xf32>
    %8 = stablehlo.maximum %6, %7 : tensor<8x1024xf32>
    %9 = sdy.sharding_constraint %8 <@mesh, [{"data"}, {"model"}]> : tensor<8x1024xf32>
    %10 = stablehlo.dot_general %9, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %11 = sdy.sharding_constraint %10 <@mesh, [{"data"}, {}]> : tensor<8x1024xf32>
    %12 = stablehlo.dot_general %11, %arg4, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<8x1024xf32>
    %14 = stablehlo.maximum %12, %13 : tensor<8x1024xf32>
    %15 = sdy.sharding_constraint %14 <@mesh, [{"data"}, {"model"}]> : tensor<8x1024xf32>
    %16 = stablehlo.dot_general %15, %arg5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %17 = sdy.sharding_constraint %16 <@mesh, [{"data"}, {}]> : tensor<8x1024xf32>
    %18 = stablehlo.dot_general %17, %arg6, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<8x1024xf32>
    %20 = stablehlo.maximum %18, %19 : tensor<8x1024xf32>
    %21 = sdy.sharding_constraint %20 <@mesh, [{"data"}, {"model"}]> : tensor<8x1024xf32>
    %22 = stablehlo.dot_general %21, %arg7, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %23 = sdy.sharding_constraint %22 <@mesh, [{"data"}, {}]> : tensor<8x1024xf32>
    return %23 : tensor<8x1024xf32>
  }
}
