// jax's psum_start(...).done() inside a shard_map: the async pair becomes the all-reduce it
// wraps, reading the region's operand and read by what read the done; the control_dep
// scheduling hints (jax.experimental.control_deps), one of them on the future, are dropped.
// RUN: mlirxla-opt %s | FileCheck %s

// CHECK-LABEL: func.func public @main
// CHECK-NOT: async
// CHECK-NOT: control_dep
// CHECK: %[[LOCAL:.*]] = "xhlo.custom_call"(%{{.*}}) {{.*}}call_target_name = "SPMDFullToShardShape"
// CHECK: %[[SUM:.*]] = "xhlo.all_reduce"(%[[LOCAL]])
// CHECK: %[[TWICE:.*]] = "xhlo.multiply"(%[[SUM]], %{{.*}})
// CHECK: "xhlo.custom_call"(%[[TWICE]]) {{.*}}call_target_name = "Sharding"
// CHECK-NOT: async
// CHECK-NOT: control_dep
module @jit_psum_async attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=2]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}]>}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"i"}]>] out_shardings=[<@mesh, [{"i"}]>] manual_axes={"i"} (%arg1: tensor<4xf32>) {
      %1 = "stablehlo.async_start"(%arg1) ({
      ^bb0(%arg2: tensor<4xf32>):
        %3 = "stablehlo.all_reduce"(%arg2) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> ({
        ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
          %4 = stablehlo.add %arg3, %arg4 : tensor<f32>
          stablehlo.return %4 : tensor<f32>
        }) : (tensor<4xf32>) -> tensor<4xf32>
        stablehlo.return %3 : tensor<4xf32>
      }) : (tensor<4xf32>) -> !stablehlo.future<tensor<4xf32>>
      stablehlo.custom_call @control_dep(%1, %arg1) {has_side_effect = true} : (!stablehlo.future<tensor<4xf32>>, tensor<4xf32>) -> ()
      %2 = "stablehlo.async_done"(%1) : (!stablehlo.future<tensor<4xf32>>) -> tensor<4xf32>
      stablehlo.custom_call @control_dep(%2, %arg1) {has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
      %c = stablehlo.constant dense<2.0> : tensor<4xf32>
      %5 = stablehlo.multiply %2, %c : tensor<4xf32>
      sdy.return %5 : tensor<4xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
