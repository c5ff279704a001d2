// RUN: shardplan opt %s -split-input-file -sdy-propagation-pipeline -verify-diagnostics

// Two members of one group annotated differently: Shardy warns at the first
// member's owner (here the function) and wraps every member in an open
// sharding constraint before propagating (sharding_group_map.cc).
sdy.mesh @mesh = <["a"=2, "b"=2]>

// expected-warning @+1 {{The initial operand shardings on the sharding groups of groupID: 0 do not match}}
func.func @members_disagree(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                            %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) -> tensor<8x8xf32> {
  sdy.sharding_group %arg0 group_id=3 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=3 : tensor<8x8xf32>
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2]>

// A sharding naming an axis the mesh does not have is rejected when the module is read.
// expected-error @+1 {{arg 0 - unknown axis name: "c"}}
func.func @unknown_axis(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c"}]>}) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}

// -----
sdy.mesh @mesh = <["a"=2]>

// expected-error @+1 {{arg 0 - sharding doesn't match tensor rank: 1 != 2}}
func.func @rank_mismatch(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}) -> tensor<8x8xf32> {
  return %arg0 : tensor<8x8xf32>
}
