// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// With a channel but no use_global_device_ids, an all_reduce's groups still hold replica
// ids (cross-replica-and-partition mode): 4 partitions of 1 replica give only replica 0.

// CHECK: xhlo.all_reduce: replica id 1 in replica_groups is out of range [0, 1) in cross_replica_and_partition mode (replica_count=1, partition_count=4)

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {channel_handle = {handle = 1 : i64, type = 1 : i64}, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
