// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// A conditional's branch computations are functions of the module.

// CHECK: conditional-missing-branch.mlir:{{[0-9]+}}:{{[0-9]+}}: xhlo.conditional: branch computation @missing (branch 1) is not a function of the module

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%p: tensor<i1>, %arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.conditional"(%p, %arg0, %arg0) {branch_computations = [@then, @missing], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @then(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}
