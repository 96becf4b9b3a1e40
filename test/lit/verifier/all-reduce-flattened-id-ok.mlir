// RUN: mlirxla-opt %s | FileCheck %s

// shard_map's psum over "data": flattened ids within 1 replica x 4 partitions verify.

// CHECK: "xhlo.all_reduce"
// CHECK: replica_groups = dense<{{\[}}[0, 2], [1, 3]]> : tensor<2x2xi64>
// CHECK-SAME: use_global_device_ids

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<f32>) -> (tensor<f32>) {
    %0 = "xhlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {channel_handle = {handle = 1 : i64, type = 1 : i64}, use_global_device_ids, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
