// RUN: shardplan opt %s -xla-sdy-stablehlo-import-pipeline | FileCheck %s --check-prefix=GSPMD
// RUN: shardplan opt %s -gspmd-user-annotations | FileCheck %s --check-prefix=USER
// RUN: shardplan opt %s -gspmd-user-annotations -sdy-propagation-pipeline | FileCheck %s --check-prefix=SHARDY

// The two sides of a GSPMD -> Shardy migration, from one module as GSPMD left
// it (an mhlo.sharding on every op, dp x tp on 2 x 4 devices). GSPMD chose to
// replicate the abs over the model axis; Shardy, from the same user
// annotations (arguments, result, the @Sharding constraint), keeps the dot's
// sharding on it.

// GSPMD: sdy.mesh @mesh = <["axis_0"=2, "axis_1"=4]>
// GSPMD: stablehlo.dot_general
// GSPMD-SAME{LITERAL}: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"axis_0"}, {"axis_1"}]>]>}
// GSPMD: stablehlo.abs
// GSPMD-SAME{LITERAL}: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"axis_0"}, {}]>]>}

// The user's annotations only: the mesh is the same (the import pipeline
// names its axes axis_N as XLA's did, the loader's import and this pass keep
// XLA's _axis_N placeholders), the ops' shardings go, the @Sharding call is a
// constraint.
// USER:      sdy.mesh @mesh = <["_axis_0"=2, "_axis_1"=4]>
// USER:      %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// USER-NEXT: %1 = sdy.sharding_constraint %0 <@mesh, [{"_axis_0"}, {"_axis_1"}]> : tensor<8x32xf32>
// USER-NEXT: %2 = stablehlo.abs %1 : tensor<8x32xf32>

// SHARDY: stablehlo.abs %{{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"_axis_0"}, {"_axis_1"}]>]>}
func.func @main(%arg0: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
                %arg1: tensor<16x32xf32> {mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"})
    -> (tensor<8x32xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %2 = stablehlo.abs %1 {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"} : tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}
