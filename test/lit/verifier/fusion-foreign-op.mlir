// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// A fused computation holds only xhlo ops (check ops pass the front door, not a fusion).

// CHECK: fusion-foreign-op.mlir:{{[0-9]+}}:{{[0-9]+}}: xhlo.fusion: fused computation holds a non-xhlo op 'check.expect_eq_const'

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.fusion"(%arg0) ({
    ^bb0(%x: tensor<f32>):
      "check.expect_eq_const"(%x) {value = dense<1.0> : tensor<f32>} : (tensor<f32>) -> ()
      "xhlo.return"(%x) : (tensor<f32>) -> ()
    }) {kind = "loop"} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
