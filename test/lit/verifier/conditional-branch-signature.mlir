// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// Branch i takes its slice of the branch operands and returns the conditional's results.

// CHECK: xhlo.conditional: branch 1 @else takes (tensor<i32>) but gets (tensor<f32>)

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%p: tensor<i1>, %arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.conditional"(%p, %arg0, %arg0) {branch_computations = [@then, @else], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @then(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
  func.func private @else(%x: tensor<i32>) -> tensor<f32> {
    %c = "xhlo.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    return %c : tensor<f32>
  }
}
