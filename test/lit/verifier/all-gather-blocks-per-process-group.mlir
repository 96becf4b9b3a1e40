// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// With a channel and replica ids, an all_gather runs in cross_replica_and_partition mode:
// every partition of the replicas listed joins, so on 2 replicas x 2 partitions the group
// [0, 1] has 4 members and the result holds 4 blocks, not the 2 the listed group suggests
// (StableHLO's own verifier counts the listed ids only).

// CHECK: xhlo.all_gather: dimension 0 goes from 2 to 4, but its process groups have 4 members in cross_replica_and_partition mode (replica_count=2, partition_count=2)

module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<4xf32>) {
    %0 = "stablehlo.all_gather"(%arg0) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<2xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
