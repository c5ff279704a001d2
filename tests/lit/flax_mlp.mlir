// RUN: shardplan opt %S/../../examples/flax_mlp.mlir -sdy-propagation-pipeline | FileCheck %s

// The MLP of the Flax guide "Scaling Flax modules across multiple devices"
// (shared/reference/seeds/flax-scaling-multiple-devices.zh.txt, the Chinese
// translation; line numbers below refer to that file), as lowered in
// examples/flax_mlp.mlir: 4 DotReluDot layers, depth 1024, batch 8
// (guide line 112), on a mesh data=2 x model=4 (lines 41-49).
//
// Where each expected sharding comes from:
// - mesh `<["data"=2, "model"=4]>`: line 49 `Mesh('data': 2, 'model': 4)`.
// - W1 = Dense_0 kernel, PartitionSpec(None, 'model') -> [{}, {"model"}]:
//   line 64 `nn.with_partitioning(self.dense_init, (None, 'model'))`, lines
//   81-83, the printed state_sharding on line 156 (`'kernel': NamedSharding(
//   ..., spec=PartitionSpec(None, 'model'))` for DotReluDot_0..3), line 179
//   `(None, 'model')`, line 188, the CPU 0,4 | 1,5 | 2,6 | 3,7 column picture
//   on lines 168 and 224.
// - W2, PartitionSpec('model', None) -> [{"model"}, {}]: line 72
//   `nn.with_partitioning(self.dense_init, ('model', None))`, line 156
//   (`'W2': NamedSharding(..., spec=PartitionSpec('model', None))`), line 201
//   `names=('model', None)`, the row picture on lines 169 and 226.
// - x, PartitionSpec('data', None) -> [{"data"}, {}]: line 125 `x_sharding`,
//   the picture on line 128 (CPU 0,1,2,3 over CPU 4,5,6,7).
// - y = relu(x @ W1) constrained to PartitionSpec('data', 'model') ->
//   [{"data"}, {"model"}]: line 69; the matmul and the relu (a maximum with a
//   broadcast zero) take the same sharding (lines 63-67).
// - z = y @ W2 constrained to PartitionSpec('data', None) -> [{"data"}, {}]:
//   line 76, lines 85-86 (batch dim on 'data', depth replicated).
// - the output: `out_shardings=x_sharding` (line 229), "the output is also
//   sharded along (data, None)" (line 227), the picture of y on line 241.
// Parameters keep the guide's shardings exactly (they are closed
// in_shardings, line 228) and the function result is closed at the end of the
// pipeline. Whether the shardings of ops are closed too (i.e. whether the
// pipeline runs -sdy-close-shardings on every op) is not in the docs, so op
// shardings accept a dim printed open or closed ({"data"} or {"data", ?}, {}
// or {?}); the axes are exact. A constraint may print as
// sdy.sharding_constraint or as sdy.reshard (whether the pipeline runs
// -sdy-sharding-constraint-to-reshard is not in the docs either).

// CHECK: sdy.mesh @mesh = <["data"=2, "model"=4]>
// CHECK-LABEL: func.func public @main(
// CHECK-SAME: %arg0: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME: %arg1: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME: %arg2: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME: %arg3: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME: %arg4: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME: %arg5: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME: %arg6: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
// CHECK-SAME: %arg7: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
// CHECK-SAME: %arg8: tensor<8x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>})
// CHECK-SAME: -> (tensor<8x1024xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>})

// Layer 0 (DotReluDot_0): x = %arg8, W1 = %arg0, W2 = %arg1.
// CHECK:      %[[Y0:.*]] = stablehlo.dot_general %arg8, %arg0, {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// The four layers' zero constants and broadcasts are identical: the
// constant-or-scalar merger keeps the first of each (as Shardy does).
// CHECK:      %[[ZERO0:.*]] = stablehlo.broadcast_in_dim {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// CHECK:      %[[RELU0:.*]] = stablehlo.maximum %[[Y0]], %[[ZERO0]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// CHECK-NEXT: %[[YC0:.*]] = sdy.{{sharding_constraint|reshard}} %[[RELU0]] <@mesh, [{"data"}, {"model"}]>
// CHECK-NEXT: %[[Z0:.*]] = stablehlo.dot_general %[[YC0]], %arg1, {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {{\{\??}}}]>]>}
// CHECK-NEXT: %[[ZC0:.*]] = sdy.{{sharding_constraint|reshard}} %[[Z0]] <@mesh, [{"data"}, {}]>

// Layer 1: W1 = %arg2, W2 = %arg3.
// CHECK-NEXT: %[[Y1:.*]] = stablehlo.dot_general %[[ZC0]], %arg2, {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// CHECK:      %[[RELU1:.*]] = stablehlo.maximum %[[Y1]], %[[ZERO0]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// CHECK-NEXT: %[[YC1:.*]] = sdy.{{sharding_constraint|reshard}} %[[RELU1]] <@mesh, [{"data"}, {"model"}]>
// CHECK-NEXT: %[[Z1:.*]] = stablehlo.dot_general %[[YC1]], %arg3, {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {{\{\??}}}]>]>}
// CHECK-NEXT: %[[ZC1:.*]] = sdy.{{sharding_constraint|reshard}} %[[Z1]] <@mesh, [{"data"}, {}]>

// Layer 2: W1 = %arg4, W2 = %arg5.
// CHECK-NEXT: %[[Y2:.*]] = stablehlo.dot_general %[[ZC1]], %arg4, {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// CHECK:      %[[RELU2:.*]] = stablehlo.maximum %[[Y2]], %[[ZERO0]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// CHECK-NEXT: %[[YC2:.*]] = sdy.{{sharding_constraint|reshard}} %[[RELU2]] <@mesh, [{"data"}, {"model"}]>
// CHECK-NEXT: %[[Z2:.*]] = stablehlo.dot_general %[[YC2]], %arg5, {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {{\{\??}}}]>]>}
// CHECK-NEXT: %[[ZC2:.*]] = sdy.{{sharding_constraint|reshard}} %[[Z2]] <@mesh, [{"data"}, {}]>

// Layer 3: W1 = %arg6, W2 = %arg7.
// CHECK-NEXT: %[[Y3:.*]] = stablehlo.dot_general %[[ZC2]], %arg6, {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// CHECK:      %[[RELU3:.*]] = stablehlo.maximum %[[Y3]], %[[ZERO0]] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {"model"{{(, \?)?}}}]>]>}
// CHECK-NEXT: %[[YC3:.*]] = sdy.{{sharding_constraint|reshard}} %[[RELU3]] <@mesh, [{"data"}, {"model"}]>
// CHECK-NEXT: %[[Z3:.*]] = stablehlo.dot_general %[[YC3]], %arg7, {{.*}}{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"{{(, \?)?}}}, {{\{\??}}}]>]>}
// CHECK-NEXT: %[[ZC3:.*]] = sdy.{{sharding_constraint|reshard}} %[[Z3]] <@mesh, [{"data"}, {}]>
// CHECK-NEXT: return %[[ZC3]]
