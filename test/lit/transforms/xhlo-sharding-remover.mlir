// RUN: mlirxla-opt %s -p xhlo-sharding-remover --split-input-file | FileCheck %s

/// One partition: @Sharding (what jax.random and with_sharding_constraint emit) and the
/// shard_map edge calls return their operand.
// CHECK-LABEL: func.func @one_partition
// CHECK-NOT: xhlo.custom_call
// CHECK: %[[SUM:.*]] = "xhlo.add"(%arg0, %arg0)
// CHECK: return %[[SUM]]
module attributes {mhlo.num_partitions = 1 : i32} {
  func.func @one_partition(%x: tensor<2xui32>) -> tensor<2xui32> {
    %0 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{replicated}"} : (tensor<2xui32>) -> tensor<2xui32>
    %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"} : (tensor<2xui32>) -> tensor<2xui32>
    %2 = stablehlo.add %1, %1 : tensor<2xui32>
    %3 = stablehlo.custom_call @SPMDShardToFullShape(%2) {mhlo.sharding = "{replicated}"} : (tensor<2xui32>) -> tensor<2xui32>
    return %3 : tensor<2xui32>
  }
}

// -----

/// Four partitions: the annotations stay for the SPMD partitioner.
// CHECK-LABEL: func.func @four_partitions
// CHECK: call_target_name = "Sharding"
module attributes {mhlo.num_partitions = 4 : i32} {
  func.func @four_partitions(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[4]<=[4]}"} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
