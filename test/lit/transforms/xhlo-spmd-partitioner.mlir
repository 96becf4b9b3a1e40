// RUN: mlirxla-opt %s --split-input-file -p xhlo-sharding-propagation,xhlo-spmd-partitioner | FileCheck %s

/// The SPMD partitioner on 8 partitions: local shapes, and the collective each resharding
/// or reduction needs, in the forms XLA's partitioner writes (a channel, flattened ids).

/// dot contracting over a sharded dim: a local dot on the contracting tiles, then an all-reduce
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<16x4xf32>, %arg1: tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK: %[[DOT:.*]] = "xhlo.dot"(%arg0, %arg1) {{.*}} : (tensor<16x4xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK: "xhlo.all_reduce"(%[[DOT]])
// CHECK: "xhlo.add"
// CHECK: channel_handle = {handle = 1 : i64, type = 1 : i64}, replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids
// CHECK-NOT: xhlo.sharding
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}, %b: tensor<32x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x8xf32> {mhlo.sharding = "{replicated}"}) {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
    return %0 : tensor<16x8xf32>
  }
}

// -----

/// the same dot with its result sharded by rows: a reduce-scatter instead
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> tensor<2x8xf32>
// CHECK: "xhlo.reduce_scatter"
// CHECK: replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, scatter_dimension = 0 : i64, use_global_device_ids} : (tensor<16x8xf32>) -> tensor<2x8xf32>
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}, %b: tensor<32x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
    return %0 : tensor<16x8xf32>
  }
}

// -----

/// replicated -> tiled: a dynamic-slice at the partition's offset, read from a table by partition id
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<16x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[ID:.*]] = "xhlo.partition_id"() : () -> tensor<ui32>
// CHECK: %[[I32:.*]] = "xhlo.convert"(%[[ID]]) : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[TABLE:.*]] = "xhlo.constant"() {value = dense<[0, 2, 4, 6, 8, 10, 12, 14]> : tensor<8xi32>}
// CHECK: "xhlo.dynamic_slice"(%[[TABLE]], %[[I32]])
// CHECK: "xhlo.dynamic_slice"(%arg0, {{.*}}) {slice_sizes = array<i64: 2, 8>} : (tensor<16x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x8xf32>
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x8xf32>) -> (tensor<16x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %0 = stablehlo.negate %a : tensor<16x8xf32>
    return %0 : tensor<16x8xf32>
  }
}

// -----

/// tiled -> replicated: an all-gather along the tiled dim
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<2x8xf32>) -> tensor<16x8xf32>
// CHECK: "xhlo.all_gather"({{.*}}) {all_gather_dim = 0 : i64, {{.*}}replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids} : (tensor<2x8xf32>) -> tensor<16x8xf32>
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x8xf32> {mhlo.sharding = "{replicated}"}) {
    %0 = stablehlo.negate %a : tensor<16x8xf32>
    return %0 : tensor<16x8xf32>
  }
}

// -----

/// tiled on dim 0 -> tiled on dim 1 over the same partitions: one all-to-all
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<2x16xf32>) -> tensor<16x2xf32>
// CHECK: "xhlo.all_to_all"(%{{.*}}) {channel_handle = {{.*}}, concat_dimension = 0 : i64, replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, split_count = 8 : i64, split_dimension = 1 : i64} : (tensor<2x16xf32>) -> tensor<16x2xf32>
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x16xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x16xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}) {
    %0 = stablehlo.negate %a : tensor<16x16xf32>
    return %0 : tensor<16x16xf32>
  }
}

// -----

/// the same tiles on other partitions: one collective-permute
// CHECK-LABEL: func.func @main
// CHECK: "xhlo.collective_permute"(%{{.*}}) {channel_handle = {{.*}}, source_target_pairs = dense<{{\[\[}}7, 0], [6, 1], [5, 2], [4, 3], [3, 4], [2, 5], [1, 6], [0, 7]]> : tensor<8x2xi64>} : (tensor<2x16xf32>) -> tensor<2x16xf32>
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x16xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x16xf32> {mhlo.sharding = "{devices=[8,1]7,6,5,4,3,2,1,0}"}) {
    %0 = stablehlo.negate %a : tensor<16x16xf32>
    return %0 : tensor<16x16xf32>
  }
}

// -----

/// a reduce over a sharded dim: a local reduce, then an all-reduce with the reducer's kind
// CHECK-LABEL: func.func @main
// CHECK: "xhlo.reduce"(%arg0,
// CHECK: (tensor<16x2xf32>, tensor<f32>) -> tensor<16xf32>
// CHECK: "xhlo.all_reduce"
// CHECK: "xhlo.maximum"
// CHECK: -> tensor<16xf32>
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x16xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}) -> (tensor<16xf32> {mhlo.sharding = "{replicated}"}) {
    %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.reduce(%a init: %init) applies stablehlo.maximum across dimensions = [1] : (tensor<16x16xf32>, tensor<f32>) -> tensor<16xf32>
    return %0 : tensor<16xf32>
  }
}

// -----

/// an op without a handler (sort) falls back: its operand gathered, run whole, its result sliced
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<2x16xf32>) -> tensor<2x16xf32>
// CHECK: %[[ALL:.*]] = "xhlo.all_gather"(%arg0)
// CHECK: "xhlo.sort"(%[[ALL]])
// CHECK: (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK: "xhlo.dynamic_slice"
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x16xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x16xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %0 = "stablehlo.sort"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %lt = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    }) {dimension = 0 : i64} : (tensor<16x16xf32>) -> tensor<16x16xf32>
    return %0 : tensor<16x16xf32>
  }
}

// -----

/// a 3x3 SAME convolution sharded on height: a row from each neighbour by collective-permute
/// (the edges receive zeros, the convolution's padding), concatenated around the tile, and a
/// local convolution unpadded on height; the activation is never gathered
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<2x2x8x4xf32>, %arg1: tensor<3x3x4x4xf32>) -> tensor<2x2x8x4xf32>
// CHECK-NOT: all_gather
// CHECK: %[[LAST:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 2, 2, 8, 4>, start_indices = array<i64: 0, 1, 0, 0>
// CHECK: %[[FROM_LEFT:.*]] = "xhlo.collective_permute"(%[[LAST]]) {{.*}}source_target_pairs = dense<{{\[\[}}0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7]]>
// CHECK: %[[FIRST:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 2, 1, 8, 4>, start_indices = array<i64: 0, 0, 0, 0>
// CHECK: %[[FROM_RIGHT:.*]] = "xhlo.collective_permute"(%[[FIRST]]) {{.*}}source_target_pairs = dense<{{\[\[}}1, 0], [2, 1], [3, 2], [4, 3], [5, 4], [6, 5], [7, 6]]>
// CHECK: %[[GROWN:.*]] = "xhlo.concatenate"(%[[FROM_LEFT]], %arg0, %[[FROM_RIGHT]]) {dimension = 1 : i64} {{.*}} -> tensor<2x4x8x4xf32>
// CHECK: "xhlo.convolution"(%[[GROWN]], %arg1) {{.*}}padding = dense<{{\[\[}}0, 0], [1, 1]]> {{.*}} -> tensor<2x2x8x4xf32>
// CHECK-NOT: all_gather
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%x: tensor<2x16x8x4xf32> {mhlo.sharding = "{devices=[1,8,1,1]<=[8]}"}, %k: tensor<3x3x4x4xf32>) -> (tensor<2x16x8x4xf32> {mhlo.sharding = "{devices=[1,8,1,1]<=[8]}"}) {
    %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x16x8x4xf32>, tensor<3x3x4x4xf32>) -> tensor<2x16x8x4xf32>
    return %0 : tensor<2x16x8x4xf32>
  }
}

// -----

/// a 3-row max pool, stride 1, sharded on rows: the halos at the edges are replaced by the
/// init value (-inf), the partitions whose tile is first (left halo) or last (right) chosen
/// from a table by partition id
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[FROM_LEFT:.*]] = "xhlo.collective_permute"
// CHECK: %[[FIRST_TILE:.*]] = "xhlo.constant"() {value = dense<[1, 0, 0, 0, 0, 0, 0, 0]> : tensor<8xi32>}
// CHECK: "xhlo.select"({{.*}}, %[[FROM_LEFT]])
// CHECK: "xhlo.collective_permute"
// CHECK: "xhlo.constant"() {value = dense<[0, 0, 0, 0, 0, 0, 0, 1]> : tensor<8xi32>}
// CHECK: "xhlo.concatenate"
// CHECK: "xhlo.reduce_window"
// CHECK: padding = dense<0> : tensor<2x2xi64>
// CHECK-SAME: -> tensor<2x4xf32>
// CHECK-NOT: all_gather
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%x: tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = "stablehlo.reduce_window"(%x, %init) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) {window_dimensions = array<i64: 3, 1>, padding = dense<[[1, 1], [0, 0]]> : tensor<2x2xi64>} : (tensor<16x4xf32>, tensor<f32>) -> tensor<16x4xf32>
    return %0 : tensor<16x4xf32>
  }
}
