// RUN: mlirxla-opt %s --split-input-file -p xhlo-sharding-propagation | FileCheck %s

/// Sharding propagation per op family, from GSPMD (mhlo.sharding) input on 8 partitions: the
/// mesh is 8 = 2x2x2 devices, so "{devices=[2,4]<=[8]}" is the major axis on dim 0 and the
/// two minor axes on dim 1.

/// elementwise: forward from an argument, backward from a result sharding
// CHECK: func.func @main(%arg0: {{.*}}xhlo.sharding = "{devices=[8,1]<=[8]}"}, %arg1: tensor<16x32xf32>) -> (tensor<16x32xf32> {xhlo.sharding = "{devices=[8,1]<=[8]}"}, tensor<16x32xf32> {mhlo.sharding
// CHECK: "xhlo.exponential"(%arg0) {xhlo.sharding = "{devices=[8,1]<=[8]}"}
// CHECK: "xhlo.add"(%0, %arg1) {xhlo.sharding = "{devices=[8,1]<=[8]}"}
/// backward from the result sharding, through the negate to its constant
// CHECK: "xhlo.constant"() {{.*}}xhlo.sharding = "{devices=[1,8]<=[8]}"}
// CHECK: "xhlo.negate"(%2) {xhlo.sharding = "{devices=[1,8]<=[8]}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}, %b: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}) {
    %0 = stablehlo.exponential %a : tensor<16x32xf32>
    %1 = stablehlo.add %0, %b : tensor<16x32xf32>
    %c = stablehlo.constant dense<1.0> : tensor<16x32xf32>
    %2 = stablehlo.negate %c : tensor<16x32xf32>
    return %1, %2 : tensor<16x32xf32>, tensor<16x32xf32>
  }
}

// -----

/// broadcast, reshape splitting and merging a sharded dim, transpose
// CHECK: "xhlo.broadcast"(%arg0) {{.*}}xhlo.sharding = "{devices=[8,1]<=[8]}"}
/// [64] on 8 devices split into [2,32]: the major 2 devices take dim 0, the other 4 dim 1
// CHECK: "xhlo.reshape"(%arg0) {xhlo.sharding = "{devices=[2,4]<=[8]}"}
/// [4,16] sharded 2x4 merged into [64]: dim 0 is not fully sharded, so only its 2 devices carry over
// CHECK: "xhlo.reshape"(%arg1) {xhlo.sharding = "{devices=[2,4]<=[8] last_tile_dim_replicate}"}
// CHECK: "xhlo.transpose"(%arg1) {{.*}}xhlo.sharding = "{devices=[4,2]<=[2,4]T(1,0)}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<64xf32> {mhlo.sharding = "{devices=[8]<=[8]}"}, %m: tensor<4x16xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}) -> (tensor<64x8xf32>, tensor<2x32xf32>, tensor<64xf32>, tensor<16x4xf32>) {
    %0 = stablehlo.broadcast_in_dim %a, dims = [0] : (tensor<64xf32>) -> tensor<64x8xf32>
    %1 = stablehlo.reshape %a : (tensor<64xf32>) -> tensor<2x32xf32>
    %2 = stablehlo.reshape %m : (tensor<4x16xf32>) -> tensor<64xf32>
    %3 = stablehlo.transpose %m, dims = [1, 0] : (tensor<4x16xf32>) -> tensor<16x4xf32>
    return %0, %1, %2, %3 : tensor<64x8xf32>, tensor<2x32xf32>, tensor<64xf32>, tensor<16x4xf32>
  }
}

// -----

/// dot_general: batch, free and contracting dims
/// batch dim (2 devices) and lhs free dim (4) carry over; the contracting dim sharded on both
/// operands leaves a replicated partial sum
// CHECK: "xhlo.dot"(%arg0, %arg1) {{.*}}xhlo.sharding = "{devices=[2,4,1]<=[8]}"}
// CHECK: "xhlo.dot"(%arg2, %arg3) {{.*}}xhlo.sharding = "{replicated}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<2x16x32xf32> {mhlo.sharding = "{devices=[2,4,1]<=[8]}"}, %b: tensor<2x32x8xf32>, %c: tensor<16x64xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}, %d: tensor<64x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<2x16x8xf32>, tensor<16x8xf32>) {
    %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x16x32xf32>, tensor<2x32x8xf32>) -> tensor<2x16x8xf32>
    %1 = stablehlo.dot_general %c, %d, contracting_dims = [1] x [0] : (tensor<16x64xf32>, tensor<64x8xf32>) -> tensor<16x8xf32>
    return %0, %1 : tensor<2x16x8xf32>, tensor<16x8xf32>
  }
}

// -----

/// convolution: batch and output features pass through, spatial dims are shared
// CHECK: "xhlo.convolution"(%arg0, %arg1) {{.*}}xhlo.sharding = "{devices=[2,4,1,1]<=[8]}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%x: tensor<8x32x32x3xf32> {mhlo.sharding = "{devices=[2,4,1,1]<=[8]}"}, %w: tensor<3x3x3x16xf32>) -> tensor<8x32x32x16xf32> {
    %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<8x32x32x3xf32>, tensor<3x3x3x16xf32>) -> tensor<8x32x32x16xf32>
    return %0 : tensor<8x32x32x16xf32>
  }
}

// -----

/// reduce keeps the kept dims, reduce_window shares the windowed dim
// CHECK: "xhlo.reduce"(%arg0, %0)
// CHECK: }) {dimensions = array<i64: 1>, xhlo.sharding = "{devices=[2,4]<=[8] last_tile_dim_replicate}"}
// CHECK: "xhlo.reduce_window"(%arg0, %0)
// CHECK: }) {window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 2>, xhlo.sharding = "{devices=[2,4]<=[8]}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}) -> (tensor<16xf32>, tensor<16x16xf32>) {
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : (tensor<16x32xf32>, tensor<f32>) -> tensor<16xf32>
    %1 = "stablehlo.reduce_window"(%a, %z) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.maximum %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 2>} : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x16xf32>
    return %0, %1 : tensor<16xf32>, tensor<16x16xf32>
  }
}

// -----

/// slice, pad, concatenate
// CHECK: "xhlo.slice"(%arg0) {{.*}}xhlo.sharding = "{devices=[8,1]<=[8]}"}
// CHECK: "xhlo.pad"(%arg0, %0) {{.*}}xhlo.sharding = "{devices=[8,1]<=[8]}"}
// CHECK: "xhlo.concatenate"(%arg0, %arg1) {{.*}}xhlo.sharding = "{devices=[8,1]<=[8]}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}, %b: tensor<16x32xf32>) -> (tensor<16x16xf32>, tensor<16x40xf32>, tensor<16x64xf32>) {
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = stablehlo.slice %a [0:16, 0:16] : (tensor<16x32xf32>) -> tensor<16x16xf32>
    %1 = stablehlo.pad %a, %z, low = [0, 4], high = [0, 4], interior = [0, 0] : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x40xf32>
    %2 = stablehlo.concatenate %a, %b, dim = 1 : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x64xf32>
    return %0, %1, %2 : tensor<16x16xf32>, tensor<16x40xf32>, tensor<16x64xf32>
  }
}

// -----

/// dynamic_slice and dynamic_update_slice: a sliced dim is never sharded
/// the sliced dim 1 is dropped from the slice; the update keeps the operand's sharding
// CHECK: "xhlo.dynamic_slice"(%arg0, %arg2, %arg2) {{.*}}xhlo.sharding = "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"}
// CHECK: "xhlo.dynamic_update_slice"(%arg0, %arg1, %arg2, %arg2) {xhlo.sharding = "{devices=[4,2]<=[8]}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[4,2]<=[8]}"}, %u: tensor<16x4xf32>, %i: tensor<i32>) -> (tensor<16x4xf32>, tensor<16x32xf32>) {
    %0 = stablehlo.dynamic_slice %a, %i, %i, sizes = [16, 4] : (tensor<16x32xf32>, tensor<i32>, tensor<i32>) -> tensor<16x4xf32>
    %1 = stablehlo.dynamic_update_slice %a, %u, %i, %i : (tensor<16x32xf32>, tensor<16x4xf32>, tensor<i32>, tensor<i32>) -> tensor<16x32xf32>
    return %0, %1 : tensor<16x4xf32>, tensor<16x32xf32>
  }
}

// -----

/// gather and scatter: pass-through (offset) dims and index batch dims
/// gather: the index batch dim from the indices (2), the offset dim from the table (4)
// CHECK: "xhlo.gather"(%arg0, %arg1) {{.*}}xhlo.sharding = "{devices=[2,4]<=[8]}"}
/// scatter: the result is sharded as the operand
// CHECK: xhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<64x32xf32>, tensor<16x1xi32>, tensor<16x32xf32>) -> tensor<64x32xf32>
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%table: tensor<64x32xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}, %idx: tensor<16x1xi32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}, %upd: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<64x32xf32>) {
    %0 = "stablehlo.gather"(%table, %idx) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 32>, indices_are_sorted = false} : (tensor<64x32xf32>, tensor<16x1xi32>) -> tensor<16x32xf32>
    %1 = "stablehlo.scatter"(%table, %idx, %upd) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<64x32xf32>, tensor<16x1xi32>, tensor<16x32xf32>) -> tensor<64x32xf32>
    return %0, %1 : tensor<16x32xf32>, tensor<64x32xf32>
  }
}

// -----

/// sort: the sort dim needs replication, the other dims pass through
// CHECK: dimension = 1 : i64, is_stable = true, xhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}) -> tensor<16x32xf32> {
    %0 = "stablehlo.sort"(%a) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.compare LT, %p, %q : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %s : tensor<i1>
    }) {dimension = 1 : i64, is_stable = true} : (tensor<16x32xf32>) -> tensor<16x32xf32>
    return %0 : tensor<16x32xf32>
  }
}

// -----

/// while and conditional carry one sharding through their regions and branches
// CHECK: "xhlo.tanh"(%arg4) {xhlo.sharding = "{devices=[8,1]<=[8]}"}
// CHECK: xhlo.sharding = "{{[{][{]}}replicated}, {devices=[8,1]<=[8]}}"} : (tensor<i32>, tensor<16x32xf32>) -> (tensor<i32>, tensor<16x32xf32>)
// CHECK: "xhlo.conditional"{{.*}}xhlo.sharding = "{devices=[8,1]<=[8]}"}
// CHECK: func.func private @branch_0
// CHECK: "xhlo.exponential"(%arg0) {xhlo.sharding = "{devices=[8,1]<=[8]}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}, %n: tensor<i32>, %p: tensor<i1>) -> (tensor<16x32xf32>, tensor<16x32xf32>) {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%i = %c0, %x = %a) : tensor<i32>, tensor<16x32xf32>
     cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %i, %one : tensor<i32>
      %y = stablehlo.tanh %x : tensor<16x32xf32>
      stablehlo.return %next, %y : tensor<i32>, tensor<16x32xf32>
    }
    %1 = "stablehlo.if"(%p) ({
      %e = stablehlo.exponential %0#1 : tensor<16x32xf32>
      stablehlo.return %e : tensor<16x32xf32>
    }, {
      stablehlo.return %0#1 : tensor<16x32xf32>
    }) : (tensor<i1>) -> tensor<16x32xf32>
    return %0#1, %1 : tensor<16x32xf32>, tensor<16x32xf32>
  }
}

// -----

/// shard_map: the region between the shape calls stays manual; a constraint wins over the
/// argument's sharding, which is resharded
// CHECK: "xhlo.exponential"(%1) {xhlo.sharding = "{manual}"}
// CHECK: call_target_name = "SPMDShardToFullShape", {{.*}}xhlo.sharding = "{devices=[8,1]<=[8]}"}
// CHECK: "xhlo.negate"(%arg0) {xhlo.sharding = "{devices=[8,1]<=[8]}"}
// CHECK: call_target_name = "Sharding", mhlo.sharding = "{devices=[1,8]<=[8]}", xhlo.sharding = "{devices=[1,8]<=[8]}"}
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x32xf32>, tensor<16x32xf32>) {
    %0 = stablehlo.custom_call @Sharding(%a) {mhlo.sharding = "{devices=[8,1]<=[8]}"} : (tensor<16x32xf32>) -> tensor<16x32xf32>
    %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"} : (tensor<16x32xf32>) -> tensor<2x32xf32>
    %2 = stablehlo.exponential %1 : tensor<2x32xf32>
    %3 = stablehlo.custom_call @Sharding(%2) {mhlo.sharding = "{manual}"} : (tensor<2x32xf32>) -> tensor<2x32xf32>
    %4 = stablehlo.custom_call @SPMDShardToFullShape(%3) {mhlo.sharding = "{devices=[8,1]<=[8]}"} : (tensor<2x32xf32>) -> tensor<16x32xf32>
    %5 = stablehlo.negate %a : tensor<16x32xf32>
    %6 = stablehlo.custom_call @Sharding(%5) {mhlo.sharding = "{devices=[1,8]<=[8]}"} : (tensor<16x32xf32>) -> tensor<16x32xf32>
    return %4, %6 : tensor<16x32xf32>, tensor<16x32xf32>
  }
}

// -----

/// a custom call's declared Shardy rule (jax's custom_partitioning): the rows factor takes the
/// first operand's sharding to the result; a rule that does not fit the shapes is ignored
// CHECK: call_target_name = "CustomSPMDPartitioning"{{.*}}xhlo.sharding = "{devices=[8,1]<=[8]}"
// CHECK: call_target_name = "Unfitting"{{.*}}xhlo.sharding = "{replicated}"
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}, %b: tensor<8x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>) {
    %0 = stablehlo.custom_call @CustomSPMDPartitioning(%a, %b) {backend_config = "1", sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=16, j=8, k=32} reduction={j}, custom>} : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
    %1 = stablehlo.custom_call @Unfitting(%a, %b) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=4, j=8, k=32}, custom>} : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
    return %0, %1 : tensor<16x32xf32>, tensor<16x32xf32>
  }
}

// -----

/// a constraint's open dims (jax's unconstrained dims, `{?}`, and automatic mesh axes,
/// `{"x", ?}`) take what propagation brings them, here "y" on dim 1 from the argument; a
/// closed one keeps the user's sharding and the value is resharded to it
// CHECK: "xhlo.multiply"(%arg0, %arg0) {xhlo.sharding = "{devices=[2,2]<=[4]}"}
// CHECK: call_target_name = "Sharding"{{.*}}xhlo.open_dims = array<i64: 0, 1>, xhlo.sharding = "{devices=[2,2]<=[4]}"
// CHECK: call_target_name = "Sharding"{{.*}}xhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"
/// GSPMD's form of open dims: jax's `unspecified_dims` in the constraint's backend config
// CHECK: backend_config = "unspecified_dims=[1]"{{.*}}xhlo.open_dims = array<i64: 1>, xhlo.sharding = "{devices=[2,2]<=[4]}"
module attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%a: tensor<8x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xf32>) {
    %0 = stablehlo.multiply %a, %a : tensor<8x2xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"x", ?}, {?}]> : tensor<8x2xf32>
    %2 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<8x2xf32>
    %3 = stablehlo.custom_call @Sharding(%0) {backend_config = "unspecified_dims=[1]", mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"} : (tensor<8x2xf32>) -> tensor<8x2xf32>
    return %1, %2, %3 : tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xf32>
  }
}

// -----

/// an open parameter (the config's open_parameters: jax's unspecified in_shardings) takes the
/// sharding propagation chooses, written on the entry for the caller; a closed one without a
/// sharding stays replicated, and its user reshards it
// CHECK: func.func @main(%arg0: {{.*}}"{devices=[8,1]<=[8]}"}, %arg1: tensor<16x32xf32> {xhlo.sharding = "{devices=[8,1]<=[8]}"}, %arg2: tensor<16x32xf32>)
// CHECK: "xhlo.add"(%0, %arg2) {xhlo.sharding = "{devices=[8,1]<=[8]}"}
module attributes {xhlo.config = {replica_count = 1 : i64, partition_count = 8 : i64, open_parameters = array<i64: 1>}} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}, %b: tensor<16x32xf32>, %c: tensor<16x32xf32>) -> tensor<16x32xf32> {
    %0 = stablehlo.add %a, %b : tensor<16x32xf32>
    %1 = stablehlo.add %0, %c : tensor<16x32xf32>
    return %1 : tensor<16x32xf32>
  }
}

// -----

/// a sharding group (jax's shard_alike(y, z)) is one sharding as propagation goes: z's dot
/// would put "y" on its rows (from the transposed operand), but y's axes reach z first
// CHECK: %[[Y:.*]] = "xhlo.dot"(%arg0, %0) {{.*}}xhlo.sharding = "{devices=[4,2]<=[8]}"
// CHECK: %[[Z:.*]] = "xhlo.dot"(%{{.*}}, %arg1) {{.*}}xhlo.sharding = "{devices=[4,2]<=[8]}"
module attributes {mhlo.num_partitions = 8 : i32} {
  sdy.mesh @mesh = <["x"=4, "y"=2]>
  func.func @main(%a: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %b: tensor<2x8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> (tensor<8x8xi32>, tensor<8x8xi32>) {
    %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<8x2xi32>) -> tensor<2x8xi32>
    %1 = stablehlo.dot_general %a, %0, contracting_dims = [1] x [0] : (tensor<8x2xi32>, tensor<2x8xi32>) -> tensor<8x8xi32>
    %2 = sdy.sharding_constraint %1 <@mesh, [{"x"}, {"y"}]> : tensor<8x8xi32>
    %3 = stablehlo.transpose %b, dims = [1, 0] : (tensor<2x8xi32>) -> tensor<8x2xi32>
    %4 = stablehlo.dot_general %3, %b, contracting_dims = [1] x [0] : (tensor<8x2xi32>, tensor<2x8xi32>) -> tensor<8x8xi32>
    sdy.sharding_group %1 group_id=0 : tensor<8x8xi32>
    sdy.sharding_group %4 group_id=0 : tensor<8x8xi32>
    return %2, %4 : tensor<8x8xi32>, tensor<8x8xi32>
  }
}
