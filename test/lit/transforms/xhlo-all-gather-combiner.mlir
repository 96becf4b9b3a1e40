// RUN: mlirxla-opt %s -p xhlo-all-gather-combiner | FileCheck %s

/// Independent all-gathers along one dim with the same groups, channel kind and element type
/// become one variadic all-gather; one along another dim, one of int32 (MHLO's all_gather
/// takes one element type, and jax reads the program through MHLO) and one gathering a
/// member's result stay apart.
// CHECK-LABEL: func.func @main
// CHECK: %[[BOTH:.*]]:2 = "xhlo.all_gather"(%arg0, %arg1) {all_gather_dim = 0 : i64, channel_handle = {handle = 1 : i64, type = 1 : i64}
// CHECK-SAME: (tensor<2x3xf32>, tensor<1x3xf32>) -> (tensor<8x3xf32>, tensor<4x3xf32>)
// CHECK: "xhlo.all_gather"(%arg0) {all_gather_dim = 1 : i64
// CHECK: "xhlo.all_gather"(%[[BOTH]]#0) {all_gather_dim = 0 : i64
// CHECK: %[[PIVOTS:.*]] = "xhlo.all_gather"(%arg2) {all_gather_dim = 0 : i64
// CHECK-SAME: (tensor<2x3xi32>) -> tensor<8x3xi32>
// CHECK: return %[[BOTH]]#0, %[[BOTH]]#1, {{.*}}, %[[PIVOTS]]
module attributes {mhlo.num_partitions = 4 : i32} {
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>, %c: tensor<2x3xi32>) -> (tensor<8x3xf32>, tensor<4x3xf32>, tensor<2x12xf32>, tensor<32x3xf32>, tensor<8x3xi32>) {
    %0 = "stablehlo.all_gather"(%a) {all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<2x3xf32>) -> tensor<8x3xf32>
    %1 = "stablehlo.all_gather"(%b) {all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<1x3xf32>) -> tensor<4x3xf32>
    %2 = "stablehlo.all_gather"(%a) {all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<2x3xf32>) -> tensor<2x12xf32>
    %3 = "stablehlo.all_gather"(%0) {all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<8x3xf32>) -> tensor<32x3xf32>
    %4 = "stablehlo.all_gather"(%c) {all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<2x3xi32>) -> tensor<8x3xi32>
    return %0, %1, %2, %3, %4 : tensor<8x3xf32>, tensor<4x3xf32>, tensor<2x12xf32>, tensor<32x3xf32>, tensor<8x3xi32>
  }
}
