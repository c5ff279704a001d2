// Issue 18: a return of more values than the function declares killed the
// planner with SIGSEGV; every path now stops at the verifier with LINE:COL.
// RUN: (shardplan plan %s; test $? -eq 1) 2>&1 | FileCheck %s
// RUN: (shardplan lint %s; test $? -eq 1) 2>&1 | FileCheck %s
// RUN: (shardplan cost %s; test $? -eq 1) 2>&1 | FileCheck %s
// CHECK: 11:3{{.*}}'func.return' op has 2 operands, but enclosing function (@main) returns 1
sdy.mesh @mesh = <["m"=2]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"m"}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>
  // the second operand is one too many
  return %0, %arg0 : tensor<8x16xf32>, tensor<8x16xf32>
}
