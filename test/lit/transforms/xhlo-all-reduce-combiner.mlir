// RUN: mlirxla-opt %s -p xhlo-all-reduce-combiner | FileCheck %s

/// Independent all-reduces with one reducer, element type, groups and channel kind become one
/// variadic all-reduce at the last member; the negate that read the first member moves after
/// it; an all-reduce depending on a member, another reducer and other groups stay apart.
// CHECK-LABEL: func.func @main
// CHECK: %[[BOTH:.*]]:2 = "xhlo.all_reduce"(%arg0, %arg1)
// CHECK: channel_handle = {handle = 1 : i64, type = 1 : i64}, replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<4xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>)
// CHECK: %[[NEG:.*]] = "xhlo.negate"(%[[BOTH]]#0)
// CHECK: "xhlo.all_reduce"(%[[NEG]])
// CHECK: "xhlo.maximum"
// CHECK: "xhlo.all_reduce"(%arg2)
// CHECK: dense<{{\[\[}}0, 1], [2, 3]]>
// CHECK: return %[[BOTH]]#0, %[[BOTH]]#1
module attributes {mhlo.num_partitions = 4 : i32} {
  func.func @main(%a: tensor<4xf32>, %b: tensor<8xf32>, %c: tensor<2xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xf32>) {
    %0 = "stablehlo.all_reduce"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<4xf32>) -> tensor<4xf32>
    %n = stablehlo.negate %0 : tensor<4xf32>
    %1 = "stablehlo.all_reduce"(%b) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = "stablehlo.all_reduce"(%n) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<4xf32>) -> tensor<4xf32>
    %3 = "stablehlo.all_reduce"(%c) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.maximum %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<2xf32>) -> tensor<2xf32>
    %4 = "stablehlo.all_reduce"(%c) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids} : (tensor<2xf32>) -> tensor<2xf32>
    return %0, %1, %3, %2, %4 : tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xf32>
  }
}
