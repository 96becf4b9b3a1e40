// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// With a channel and use_global_device_ids the ids are flattened device ids:
// 1 replica x 4 partitions has devices 0..3.

// CHECK: xhlo.all_reduce: device id 4 in replica_groups is out of range [0, 4) in flattened_ids mode

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {channel_handle = {handle = 1 : i64, type = 1 : i64}, use_global_device_ids, replica_groups = dense<[[0, 4], [1, 3]]> : tensor<2x2xi64>} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
