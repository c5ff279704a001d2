// RUN: not shardplan opt %s -xla-sdy-round-trip-import-pipeline 2>&1 | FileCheck %s
// A mesh string that does not end: an error, not a read past the text.
// CHECK: malformed xla.sdy.meshes: unterminated string
module attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = \22#sdy.mesh<[\\22a\\22=2]>}"}} {
  func.func @main(%arg0: tensor<8xi32>) -> tensor<8xi32> {
    return %arg0 : tensor<8xi32>
  }
}
