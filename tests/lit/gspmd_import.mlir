// RUN: shardplan opt %s -xla-sdy-import-shardings | FileCheck %s --check-prefix=IMPORT
// RUN: shardplan plan %s | FileCheck %s --check-prefix=PLAN
// RUN: sed 's/<=\[2,4\]T(1,0) last/<=[2,4]T(1,1) last/' %s > %t.bad.mlir && \
// RUN:   (shardplan plan %t.bad.mlir; echo "exit=$?") 2>&1 | FileCheck %s --check-prefix=BAD

// A module as JAX hands it to XLA with GSPMD: mhlo.sharding strings on the
// arguments and result and a @Sharding constraint whose dim 1 is left to the
// partitioner (unspecified_dims). The mesh is the common factors of the
// local meshes: [2,1,4]<=[8] replicated last is 2 x 4, and [1,4,2]<=[2,4]T(1,0)
// replicated last is the same two axes with _axis_1 on dim 1.

// IMPORT:      sdy.mesh @mesh = <["_axis_0"=2, "_axis_1"=4]>
// IMPORT:      func.func public @main(
// IMPORT-SAME:   %arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"_axis_0"}, {}]>}
// IMPORT-SAME:   %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"_axis_1"}]>}
// IMPORT-SAME:   -> (tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"_axis_0"}, {"_axis_1"}]>})
// IMPORT:      stablehlo.custom_call @Sharding(%0)
// IMPORT-SAME{LITERAL}: sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"_axis_0"}, {}]>]>

// The loader imports it for `plan` (and POST /v1/plans): the @Sharding call
// becomes a constraint with its unspecified dim open, and propagation fills
// the dot's result from it and from the output.
// PLAN:      "meshes":[
// PLAN-NEXT:   {"name":"mesh","axes":[{"name":"_axis_0","size":2},{"name":"_axis_1","size":4}],"devices":8}],
// PLAN:      "sharding":{"text":"<@mesh, [{\"_axis_0\"}, {}]>"
// PLAN:      "sharding":{"text":"<@mesh, [{}, {\"_axis_1\"}]>"
// PLAN:      "op":"stablehlo.dot_general"
// PLAN-SAME: "sharding":{"text":"<@mesh, [{\"_axis_0\"}, {\"_axis_1\"}]>"
// PLAN:      "op":"sdy.sharding_constraint"
// PLAN:      "local_shape":[4,8]

// A sharding that cannot be converted is an error at the op's LINE:COL.
// BAD: invalid at 35:1: mhlo.sharding "{devices=[1,4,2]<=[2,4]T(1,1) last_tile_dim_replicate}" of argument 1 of @main: the iota transpose is not a permutation of the reshape dims at col 25
// BAD-NEXT: exit=1
func.func public @main(%arg0: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
                       %arg1: tensor<16x32xf32> {mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"})
    -> (tensor<8x32xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.custom_call @Sharding(%0) {backend_config = "unspecified_dims=[1]", mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}
