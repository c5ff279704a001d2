func.func @dots(%x: tensor<4x8x16xf32>, %y: tensor<4x16x2xf32>, %p: tensor<3x5xf32>, %q: tensor<5x7xf32>) -> (tensor<4x8x2xf32>, tensor<3x7xf32>) {
  %0 = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, HIGHEST] : (tensor<4x8x16xf32>, tensor<4x16x2xf32>) -> tensor<4x8x2xf32>
  %1 = "stablehlo.dot_general"(%p, %q) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<3x5xf32>, tensor<5x7xf32>) -> tensor<3x7xf32>
  return %0, %1 : tensor<4x8x2xf32>, tensor<3x7xf32>
}
