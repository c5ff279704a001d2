// RUN: sdy_opt %s -split-input-file -verify-diagnostics

func.func @none(%arg0 : tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{>
}
