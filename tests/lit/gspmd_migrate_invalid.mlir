// migrate reads a GSPMD module through the same verifier as plan: an op
// whose operand shapes disagree is refused at its LINE:COL (exit 1), not
// migrated. (The subshell checks the exit status.)
// RUN: (shardplan migrate %s; test $? -eq 1) 2>&1 | FileCheck %s
// RUN: (shardplan plan %s; test $? -eq 1) 2>&1 | FileCheck %s

// CHECK: invalid at 10:3: 'stablehlo.add' op requires the same shape for all operands and results

func.func @main(%arg0: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}, %arg1: tensor<8x4xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg1 {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
