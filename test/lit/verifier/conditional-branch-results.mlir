// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// A branch returning other types than the conditional is refused.

// CHECK: xhlo.conditional: branch 0 @then returns (tensor<f32>) but the conditional returns (tensor<2xf32>)

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%p: tensor<i1>, %arg0: tensor<f32>) -> (tensor<2xf32>) {
    %0 = "xhlo.conditional"(%p, %arg0, %arg0) {branch_computations = [@then, @else], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @then(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
  func.func private @else(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}
