// RUN: shardplan opt %s -xla-sdy-import-shardings | FileCheck %s
// RUN: shardplan plan %s | FileCheck %s --check-prefix=PLAN
// RUN: shardplan opt %s -xla-sdy-import-shardings -xla-sdy-stablehlo-export-pipeline='enable-hlo-sharding-v3=true' | FileCheck %s --check-prefix=BACK

// XLA's HLO sharding V3 text (enable-hlo-sharding-v3) carries the mesh and
// the axis names: each distinct mesh becomes an sdy.mesh (@mesh, @mesh_0,
// ...), a single device a maximal mesh, and the shardings keep their names,
// open dims and replicated axes. Written back, the text is the same.

// CHECK:      sdy.mesh @mesh = <["data"=2, "model"=4]>
// CHECK-NEXT: sdy.mesh @mesh_0 = <["x"=8]>
// CHECK-NEXT: sdy.mesh @single_device_3 = <[], device_ids=[3]>
// CHECK:      %arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}
// CHECK-SAME: %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model", ?}], replicated={"data"}>}
// CHECK-SAME: %arg2: tensor<4xf32> {sdy.sharding = #sdy.sharding<@single_device_3, []>}
// CHECK-SAME: %arg3: tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh_0, [{}]>}
// CHECK-SAME: -> (tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>})

// PLAN: {"name":"mesh","axes":[{"name":"data","size":2},{"name":"model","size":4}],"devices":8}
// PLAN: "op":"stablehlo.dot_general"
// PLAN-SAME: "sharding":{"text":"<@mesh, [{\"data\"}, {\"model\"}]>"

// BACK:      %arg0: tensor<8x16xf32> {mhlo.sharding = "{mesh['data'=2,'model'=4], [{'data'}, {}]}"}
// BACK-SAME: %arg1: tensor<16x32xf32> {mhlo.sharding = "{mesh['data'=2,'model'=4], [{}, {'model', ?}], replicated={'data'}}"}
// BACK-SAME: %arg2: tensor<4xf32> {mhlo.sharding = "{single_device[device_id=3]}"}
func.func @main(%arg0: tensor<8x16xf32> {mhlo.sharding = "{mesh['data'=2,'model'=4], [{'data'}, {}]}"},
                %arg1: tensor<16x32xf32> {mhlo.sharding = "{mesh['data'=2,'model'=4], [{}, {'model', ?}], replicated={'data'}}"},
                %arg2: tensor<4xf32> {mhlo.sharding = "{single_device[device_id=3]}"},
                %arg3: tensor<4xf32> {mhlo.sharding = "{mesh['x'=8], replicated}"}) -> (tensor<8x32xf32> {mhlo.sharding = "{mesh['data'=2,'model'=4], [{'data'}, {'model'}]}"}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}
