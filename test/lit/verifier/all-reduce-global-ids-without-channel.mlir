// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// use_global_device_ids needs a channel (XLA has no group mode for it otherwise).

// CHECK: xhlo.all_reduce: use_global_device_ids requires a channel_handle

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {use_global_device_ids, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
