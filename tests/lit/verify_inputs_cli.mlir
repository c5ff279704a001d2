// Issue 18: a mesh axis of size 0 killed `shardplan plan|lint|cost` with
// SIGFPE; every path now stops at the input loader's verifier with LINE:COL.
// (exit status 1, not a signal: the subshell checks it)
// RUN: (shardplan plan %s; test $? -eq 1) 2>&1 | FileCheck %s
// RUN: (shardplan lint %s; test $? -eq 1) 2>&1 | FileCheck %s
// RUN: (shardplan cost %s; test $? -eq 1) 2>&1 | FileCheck %s
// RUN: (shardplan opt %s; test $? -eq 1) 2>&1 | FileCheck %s
// CHECK: 9:1{{.*}}axis size must be at least 1, got: 0
sdy.mesh @mesh = <["m"=0]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"m"}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
