// RUN: shardplan opt %s -split-input-file -sdy-populate-op-sharding-rules 2>&1 | FileCheck %s

// The edges of Shardy's registry (op_sharding_rule_registry.cc): which ops
// and custom calls get a rule, which get none, and which warn. Shardy warns
// about an unknown custom call, and about an op it has no case for, once per
// process: in this file, which runs as one process, only the first of each.

// CHECK: warning: custom call @my_kernel is unknown to SDY sharding rule registry
// CHECK-NOT: unknown to SDY sharding rule registry
// CHECK-LABEL: func.func @custom_calls
func.func @custom_calls(%a: tensor<8x2xf32>) -> tensor<8x2xf32> {
  // no rule, and the warning
  // CHECK: stablehlo.custom_call @my_kernel(%arg0) :
  %0 = stablehlo.custom_call @my_kernel(%a) : (tensor<8x2xf32>) -> tensor<8x2xf32>
  // unknown too, but Shardy warns once
  // CHECK: stablehlo.custom_call @my_other_kernel(%0) :
  %1 = stablehlo.custom_call @my_other_kernel(%0) : (tensor<8x2xf32>) -> tensor<8x2xf32>
  // kernels and host callbacks partition themselves: no rule, no warning
  // CHECK: stablehlo.custom_call @tpu_custom_call(%1) :
  %2 = stablehlo.custom_call @tpu_custom_call(%1) : (tensor<8x2xf32>) -> tensor<8x2xf32>
  // CHECK: stablehlo.custom_call @xla_python_cpu_callback(%2) :
  %3 = stablehlo.custom_call @xla_python_cpu_callback(%2) : (tensor<8x2xf32>) -> tensor<8x2xf32>
  // CHECK: stablehlo.custom_call @xla.debug.Log(%3) :
  %4 = stablehlo.custom_call @xla.debug.Log(%3) : (tensor<8x2xf32>) -> tensor<8x2xf32>
  // pointwise: XLA's SPMD permutes, device placement, the linear-algebra helpers
  // CHECK: @_SPMDInternalOp_MultiRotate(%4) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j], [i, j]) {i=8, j=2}>}
  %5:2 = stablehlo.custom_call @_SPMDInternalOp_MultiRotate(%4) : (tensor<8x2xf32>) -> (tensor<8x2xf32>, tensor<8x2xf32>)
  // CHECK: @annotate_device_placement(%5#0) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=2}>}
  %6 = stablehlo.custom_call @annotate_device_placement(%5#0) : (tensor<8x2xf32>) -> tensor<8x2xf32>
  // CHECK: @InvertDiagBlocksLowerTriangular(%6) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=2}>}
  %7 = stablehlo.custom_call @InvertDiagBlocksLowerTriangular(%6) : (tensor<8x2xf32>) -> tensor<8x2xf32>
  return %7 : tensor<8x2xf32>
}

// -----

sdy.mesh @mesh = <["a"=2]>

// CHECK: warning: op 'stablehlo.batch_norm_training' is unknown to SDY sharding rule registry
// CHECK-NOT: unknown to SDY sharding rule registry
// CHECK-LABEL: func.func @ops
func.func @ops(%x: tensor<8x4xf32>, %s: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xi32>, tensor<8x4xf32>) {
  // Shardy registers batch_norm_inference only
  // CHECK: "stablehlo.batch_norm_training"(%arg0, %arg1, %arg1) <{epsilon = 1.000000e-03 : f32, feature_index = 1 : i64}> :
  %0:3 = "stablehlo.batch_norm_training"(%x, %s, %s) {epsilon = 1.0e-3 : f32, feature_index = 1 : i64} : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // no case either, and the warning was given
  // CHECK: stablehlo.replica_id :
  %1 = stablehlo.replica_id : tensor<ui32>
  // iota has no rule (nothing to propagate to), and no warning
  // CHECK: stablehlo.iota dim = 0 :
  %2 = stablehlo.iota dim = 0 : tensor<8x4xi32>
  // sharding_constraint and collective_broadcast are pointwise
  // CHECK: %[[C:.*]] = sdy.sharding_constraint %0#0 <@mesh, [{"a"}, {}]> {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=4}>}
  %3 = sdy.sharding_constraint %0#0 <@mesh, [{"a"}, {}]> : tensor<8x4xf32>
  // CHECK: "stablehlo.collective_broadcast"(%[[C]]) <{replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>}> {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=4}>}
  %4 = "stablehlo.collective_broadcast"(%3) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0#0, %2, %4 : tensor<8x4xf32>, tensor<8x4xi32>, tensor<8x4xf32>
}
