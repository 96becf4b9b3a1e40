// RUN: mlirxla-opt %s | FileCheck %s

// A well-formed fusion: xhlo ops ending in xhlo.return.

// CHECK: "xhlo.fusion"
// CHECK: "xhlo.negate"
// CHECK: "xhlo.return"

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.fusion"(%arg0) ({
    ^bb0(%x: tensor<f32>):
      %y = "xhlo.negate"(%x) : (tensor<f32>) -> tensor<f32>
      "xhlo.return"(%y) : (tensor<f32>) -> ()
    }) {kind = "loop"} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
