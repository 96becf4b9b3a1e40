// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// An all_gather's result holds one block per member of its group, so its groups have one
// size (-1 pads a shorter group). An all_reduce's groups may differ (see the interpret
// suite's all_reduce.mlir, @ragged_replica_groups).

// CHECK: xhlo.all_gather: replica groups differ in size (1, 3): {{\[}}[0, 1, 2], [3]]

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<6xf32>) {
    %0 = "xhlo.all_gather"(%arg0) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2], [3, -1, -1]]> : tensor<2x3xi64>} : (tensor<2xf32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}
