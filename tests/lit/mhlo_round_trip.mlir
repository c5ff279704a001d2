// RUN: shardplan opt %s -split-input-file -xla-sdy-round-trip-import-pipeline | FileCheck %s
// RUN: shardplan opt %s -split-input-file -xla-sdy-import-sdy-custom-calls | FileCheck %s --check-prefix=CALLS
// RUN: shardplan opt %s -split-input-file | shardplan opt - -split-input-file | FileCheck %s --check-prefix=PRINT

// XLA's round-trip tests write MHLO ops in their custom forms: they read as
// their StableHLO twins and print back under their own names (mhlo.compare
// with one space before its direction, as MHLO prints it). The meshes of
// xla.sdy.meshes may be strings, escaped once more, and in Shardy's earlier
// syntax without brackets.

// CHECK-LABEL: module @mhlo_ops
// CHECK:       sdy.mesh @mesh = <["a"=2, "b"=4]>
// CHECK:       sdy.mesh @other = <["x"=8]>
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %arg0: tensor<8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}
// CHECK-NEXT:    %0 = mhlo.add %arg0, %arg0 : tensor<8xi32>
// CHECK-NEXT:    %1 = sdy.sharding_constraint %0 <@mesh, [{"b"}]> : tensor<8xi32>
// CHECK-NEXT:    %2 = mhlo.compare LT, %1, %1 : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
// CHECK-NEXT:    %3 = mhlo.custom_call @Unknown(%1) : (tensor<8xi32>) -> tensor<8xi32>
// CHECK-NEXT:    return %3, %2

// CALLS-LABEL: func.func @main
// CALLS:         sdy.sharding_constraint %0 <@mesh, [{"b"}]> : tensor<8xi32>

// PRINT-LABEL: func.func @main
// PRINT-NEXT:    %0 = mhlo.add %arg0, %arg0
// PRINT-NEXT:    %1 = mhlo.custom_call @Sharding(%0)
// PRINT-NEXT:    %2 = mhlo.compare LT, %1, %1
module @mhlo_ops attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = \22#sdy.mesh<\\22a\\22=2, \\22b\\22=4>\22, other = \22#sdy.mesh<[\\\22x\\\22=8]>\22}"}} {
  func.func @main(%arg0: tensor<8xi32> {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{\22a\22}]>"}}) -> (tensor<8xi32>, tensor<8xi1>) {
    %0 = mhlo.add %arg0, %arg0 : tensor<8xi32>
    %1 = mhlo.custom_call @Sharding(%0) {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{\22b\22}]>]>"}} : (tensor<8xi32>) -> tensor<8xi32>
    %2 = mhlo.compare LT, %1, %1 : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %3 = mhlo.custom_call @Unknown(%1) : (tensor<8xi32>) -> tensor<8xi32>
    return %3, %2 : tensor<8xi32>, tensor<8xi1>
  }
}
