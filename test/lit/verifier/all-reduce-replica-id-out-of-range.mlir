// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// Without a channel, replica_groups hold replica ids (cross-replica mode): 2 replicas
// cannot have replica 2.

// CHECK: all-reduce-replica-id-out-of-range.mlir:{{[0-9]+}}:{{[0-9]+}}: xhlo.all_reduce: replica id 2 in replica_groups is out of range [0, 2) in cross_replica mode (replica_count=2, partition_count=1)

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
