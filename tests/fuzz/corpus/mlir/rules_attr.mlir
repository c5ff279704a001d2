func.func @rules(%arg0: tensor<8x32xf32>, %arg1: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding_rule = #sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=16, k=32} reduction={k}>} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.reshape %0 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, jk])->([ij, k]) {i=8, j=2, k=8}, custom>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %2 = stablehlo.reshape %1 : (tensor<16x8xf32>) -> tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
