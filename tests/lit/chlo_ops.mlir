// RUN: shardplan opt %s -sdy-populate-op-sharding-rules | FileCheck %s
// RUN: shardplan opt %s | shardplan opt - | FileCheck %s --check-prefix=RT

// The chlo ops JAX emits read in their custom forms and get the rules
// Shardy gives what XLA turns them into before it runs: chlo.top_k the
// mhlo.topk custom call's (the sorted dimension needs replication and
// blocks propagation), the element-wise ones the point-wise rule.

// CHECK-LABEL: func.func @f
// CHECK: chlo.top_k(%arg0, k = 4) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j], [i, j]) {i=8, j=16} need_replication={j} blocked_propagation={j}>} : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)
// CHECK: chlo.erf %arg0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=16}>} : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: chlo.next_after %1, %arg0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=16}>} : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
// RT: %0:2 = chlo.top_k(%arg0, k = 4) : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)
// RT: %1 = chlo.erf %arg0 : tensor<8x16xf32> -> tensor<8x16xf32>
// RT: %2 = chlo.next_after %1, %arg0 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
func.func @f(%arg0: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x4xi32>, tensor<8x16xf32>) {
  %0:2 = chlo.top_k(%arg0, k = 4) : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)
  %1 = chlo.erf %arg0 : tensor<8x16xf32> -> tensor<8x16xf32>
  %2 = chlo.next_after %1, %arg0 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %0#0, %0#1, %2 : tensor<8x4xf32>, tensor<8x4xi32>, tensor<8x16xf32>
}
