// RUN: shardplan migrate %s | FileCheck %s
// RUN: shardplan migrate --help | FileCheck %s --check-prefix=HELP
// RUN: shardplan migrate %s --json | python3 -m json.tool --compact | FileCheck %s --check-prefix=JSON
// RUN: (shardplan migrate %S/flax_mlp.mlir; echo "exit=$?") 2>&1 | FileCheck %s --check-prefix=NOGSPMD

// `shardplan migrate` on a module as GSPMD left it (mhlo.sharding on every
// op; dp x tp on 2 x 4 devices). GSPMD replicated the abs over the model
// axis (an all-gather); Shardy, from the same user annotations, keeps the
// dot's sharding. The report names the value, both shardings, both costs,
// and the constraint that makes Shardy take GSPMD's choice, re-planned.

// CHECK:      migration of {{.*}}gspmd_migrate.mlir from GSPMD to Shardy
// CHECK-NEXT: mesh @mesh = <["_axis_0"=2, "_axis_1"=4]>
// CHECK:      1 value(s) sharded differently (first first):
// CHECK-NEXT:   1. h (stablehlo.abs at {{[0-9]+}}:3)
// CHECK-NEXT:        GSPMD:  <@mesh, [{"_axis_0"}, {}]>
// CHECK-NEXT:        Shardy: <@mesh, [{"_axis_0"}, {"_axis_1"}]>
// CHECK-NEXT:        why (Shardy's origins): _axis_0 from output: 0, _axis_1 from output: 0
// CHECK:      cost per device (cpu-local)    GSPMD                    Shardy
// CHECK-NEXT:   peak memory
// CHECK-NEXT:   fits the profile's memory    yes                      yes
// CHECK-NEXT:   communication                384 B                    0 B
// CHECK-NEXT:     over _axis_1               384 B                    0 B
// CHECK-NEXT:   predicted step time
// CHECK:      GSPMD's choice is not cheaper; to make Shardy take it, add (first divergence first):
// CHECK-NEXT:   after stablehlo.abs at {{[0-9]+}}:3
// CHECK-NEXT:     sdy: %c = sdy.sharding_constraint %v <@mesh, [{"_axis_0"}, {}]> : tensor<8x32xf32>
// CHECK-NEXT:     jax: h = jax.lax.with_sharding_constraint(h, NamedSharding(mesh, P('_axis_0', None)))
// CHECK-NEXT: re-planned with it: 0 value(s) sharded differently
// CHECK:        communication                384 B                    384 B

// HELP: usage: shardplan migrate MODULE.mlir

// JSON: {"format":"shardplan.migration/v1",
// JSON-SAME: "divergences":[{"op":"stablehlo.abs","line":{{[0-9]+}},"col":3,"result":0,"value":"h","gspmd":"<@mesh, [{\"_axis_0\"}, {}]>","shardy":"<@mesh, [{\"_axis_0\"}, {\"_axis_1\"}]>","shardy_origins":{"_axis_0":"output: 0","_axis_1":"output: 0"}}]
// JSON-SAME: "fix":{"gspmd_cheaper":false,"constraints":[{"op":"stablehlo.abs","line":{{[0-9]+}},"col":3,"sdy":"%c = sdy.sharding_constraint %v <@mesh, [{\"_axis_0\"}, {}]> : tensor<8x32xf32>","jax":"h = jax.lax.with_sharding_constraint(h, NamedSharding(mesh, P('_axis_0', None)))","jax_spelled":true}],"divergences_after":0

// NOGSPMD: no GSPMD shardings (mhlo.sharding, @Sharding) to migrate from
// NOGSPMD: exit=1
func.func @main(%arg0: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
                %arg1: tensor<16x32xf32> {mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"})
    -> (tensor<8x32xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %2 = stablehlo.abs %1 {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"} : tensor<8x32xf32> loc("h")
  return %2 : tensor<8x32xf32>
}
