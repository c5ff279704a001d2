// A run_parallel whose processes can never meet fails at once with the op
// that waits: here program 0 sends on channel 1 and program 1 waits on
// channel 2 (found by fuzzing the interpreter; it used to wait out the
// 300 s rendezvous timeout because a message was pending on another
// channel).
// RUN: not shardplan interpret %s 2>&1 | FileCheck %s

// CHECK: [[@LINE+9]]:3: error: program 1 (replica 1, partition 0): stablehlo.recv: nothing was sent on channel 2
func.func @send(%v : tensor<2xi64>, %t : !stablehlo.token) -> !stablehlo.token {
  %0 = "stablehlo.send"(%v, %t) {
    channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>,
    is_host_transfer = true
  } : (tensor<2xi64>, !stablehlo.token) -> !stablehlo.token
  return %0 : !stablehlo.token
}
func.func @recv(%t : !stablehlo.token) -> (tensor<2xi64>, !stablehlo.token) {
  %0, %1 = "stablehlo.recv"(%t) {
    channel_handle = #stablehlo.channel_handle<handle = 2, type = 3>,
    is_host_transfer = true
  } : (!stablehlo.token) -> (tensor<2xi64>, !stablehlo.token)
  return %0, %1 : tensor<2xi64>, !stablehlo.token
}
func.func @main() {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
  %1 = stablehlo.after_all : !stablehlo.token
  %2:3 = "interpreter.run_parallel"(%0, %1, %1) {
    programs = [[@send], [@recv]]
  } : (tensor<2xi64>, !stablehlo.token, !stablehlo.token) -> (!stablehlo.token, tensor<2xi64>, !stablehlo.token)
  func.return
}
