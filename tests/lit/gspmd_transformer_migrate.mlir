// A GSPMD-propagated transformer, made with the generator: a 2-layer dp+tp
// transformer on data=2 x model=4, propagated (without the export for
// partitioning, as XLA propagates before a GSPMD export), its shardings written back as
// GSPMD's mhlo.sharding strings on every op (-xla-sdy-stablehlo-export-
// shardings: sharding constraints become @Sharding calls, the meshes go);
// then in layer 2 the FFN up-projection is given the choice GSPMD might make
// instead (replicated over the model axis). `migrate` finds that one value,
// costs both sides (GSPMD's choice doubles the model-axis traffic) and
// proposes the constraint that reproduces it, re-planned.
//
// RUN: shardplan example transformer --layers 2 --strategy dp+tp --mesh data=2,model=4 --mlir > %t.mlir && \
// RUN:   shardplan opt %t.mlir -sdy-propagation-pipeline='avoid-export-for-partitioning=true' -xla-sdy-stablehlo-export-shardings > %t.gspmd.mlir && \
// RUN:   FileCheck %s --check-prefix=EXPORT < %t.gspmd.mlir && \
// RUN:   awk '/stablehlo.dot_general.*-> tensor<8x128x4096xf32>/{n++; if(n==2) sub(/\{devices=\[2,1,4\]<=\[8\]\}/, "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}")} {print}' %t.gspmd.mlir > %t.changed.mlir && \
// RUN:   shardplan migrate %t.changed.mlir | FileCheck %s

// EXPORT-NOT: sdy.
// EXPORT:     stablehlo.custom_call @Sharding(%{{.*}}) {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"}
// EXPORT:     stablehlo.dot_general {{.*}} {mhlo.sharding = "{devices=[2,1,4]<=[8]}"} {{.*}} -> tensor<8x128x4096xf32>

// CHECK:      mesh @mesh = <["_axis_0"=2, "_axis_1"=4]>
// CHECK:      1 value(s) sharded differently (first first):
// CHECK-NEXT:   1. result (stablehlo.dot_general at [[LINE:[0-9]+]]:5)
// CHECK-NEXT:        GSPMD:  <@mesh, [{"_axis_0"}, {}, {}]>
// CHECK-NEXT:        Shardy: <@mesh, [{"_axis_0"}, {}, {"_axis_1"}]>
// CHECK:        communication                25165824 B               12582912 B
// CHECK-NEXT:     over _axis_1               25165824 B               12582912 B
// CHECK:      GSPMD's choice is not cheaper; to make Shardy take it, add (first divergence first):
// CHECK-NEXT:   after stablehlo.dot_general at [[LINE]]:5
// CHECK-NEXT:     sdy: %c = sdy.sharding_constraint %v <@mesh, [{"_axis_0"}, {}, {}]> : tensor<8x128x4096xf32>
// CHECK-NEXT:     jax: x = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P('_axis_0', None, None)))
// CHECK-NEXT: re-planned with it: 0 value(s) sharded differently
// CHECK:        communication                25165824 B               25165824 B
