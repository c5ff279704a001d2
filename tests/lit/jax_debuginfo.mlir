// RUN: shardplan plan %S/../reader/jax_mlp_debuginfo.mlir | FileCheck %s --check-prefix=PLAN
// RUN: shardplan opt %S/../reader/jax_mlp_debuginfo.mlir -mlir-print-debuginfo | FileCheck %s --check-prefix=LOC
// RUN: shardplan opt %S/../reader/jax_mlp_debuginfo.mlir -mlir-print-debuginfo > %t.1 && \
// RUN:   shardplan opt %t.1 -mlir-print-debuginfo | diff %t.1 -
// RUN: shardplan opt %S/../reader/jax_mlp_debuginfo.mlir | FileCheck %s --check-prefix=NOLOC

// A dump in the style of `jax.jit(f).lower(x).as_text(debug_info=True)`
// (tests/reader/jax_mlp_debuginfo.mlir): the module and every op carry a
// location, the `#locN` aliases come at the end, arguments are named by
// their locations and the result by jax.result_info. The plan names values
// and source lines as JAX gave them; the debug-info round trip is byte-stable.

// PLAN:      "inputs":[
// PLAN-NEXT: {"index":0,"name":"x","type":"tensor<8x16xf32>"
// PLAN-NEXT: {"index":1,"name":"params['w1']","type":"tensor<16x32xf32>"
// PLAN-NEXT: {"index":2,"name":"params['w2']","type":"tensor<32x4xf32>"
// PLAN:      {"path":"/functions/0/ops/0","op":"stablehlo.dot_general","loc_name":"jit(mlp)/jit(main)/dot_general","source":"/home/user/model.py:14"
// PLAN:      {"path":"/functions/0/ops/1","op":"func.call","loc_name":"jit(mlp)/jit(main)/relu","source":"/home/user/model.py:15"
// fused[#loc7, #loc5]: the first member's line
// PLAN:      {"path":"/functions/0/ops/2","op":"stablehlo.dot_general","loc_name":"jit(mlp)/jit(main)/dot_general","source":"/home/user/model.py:16"
// PLAN:      "outputs":[
// PLAN-NEXT: {"index":0,"name":"result","type":"tensor<8x4xf32>"
// callsite(#loc8 at #loc6): the callee's line
// PLAN:      {"path":"/functions/1/ops/2","op":"stablehlo.maximum","loc_name":"jit(mlp)/jit(main)/jit(relu)/max","source":"/home/user/model.py:9"

// LOC:      func.func public @main(%arg0: tensor<8x16xf32> {{.*}} loc("x"), %arg1: tensor<16x32xf32> {{.*}} loc("params['w1']"),
// LOC:      stablehlo.dot_general {{.*}} loc(#loc11)
// LOC:      } loc(#loc12)
// LOC-NEXT: } loc(#loc)
// LOC:      #loc = loc(unknown)
// LOC:      #loc9 = loc(callsite(#loc8 at #loc6))
// LOC:      #loc10 = loc(fused<"jax">[#loc7, #loc5])

// NOLOC-NOT: loc(
// NOLOC:     module @jit_mlp
// NOLOC-NOT: loc(
