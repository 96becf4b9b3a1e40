// RUN: mlirxla-opt %s -p xhlo-convolution-group-split --split-input-file | FileCheck %s

/// Two feature groups of 8 input and 8 output features (jax's vmap of a convolution with a
/// batched kernel): each group's input features and kernel output features sliced, one
/// ungrouped convolution each, concatenated along the output features.
// CHECK-LABEL: func.func @feature_groups
// CHECK: %[[X0:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 1, 6, 6, 8>, start_indices = array<i64: 0, 0, 0, 0>
// CHECK: %[[K0:.*]] = "xhlo.slice"(%arg1) {limit_indices = array<i64: 3, 3, 8, 8>, start_indices = array<i64: 0, 0, 0, 0>
// CHECK: %[[C0:.*]] = "xhlo.convolution"(%[[X0]], %[[K0]]) {{.*}}feature_group_count = 1 : i64{{.*}} -> tensor<1x6x6x8xf32>
// CHECK: %[[X1:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 1, 6, 6, 16>, start_indices = array<i64: 0, 0, 0, 8>
// CHECK: %[[K1:.*]] = "xhlo.slice"(%arg1) {limit_indices = array<i64: 3, 3, 8, 16>, start_indices = array<i64: 0, 0, 0, 8>
// CHECK: %[[C1:.*]] = "xhlo.convolution"(%[[X1]], %[[K1]]) {{.*}}feature_group_count = 1 : i64{{.*}} -> tensor<1x6x6x8xf32>
// CHECK: %[[J:.*]] = "xhlo.concatenate"(%[[C0]], %[[C1]]) {dimension = 3 : i64} : (tensor<1x6x6x8xf32>, tensor<1x6x6x8xf32>) -> tensor<1x6x6x16xf32>
// CHECK: return %[[J]]
func.func @feature_groups(%x: tensor<1x6x6x16xf32>, %k: tensor<3x3x8x16xf32>) -> tensor<1x6x6x16xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<1x6x6x16xf32>, tensor<3x3x8x16xf32>) -> tensor<1x6x6x16xf32>
  return %0 : tensor<1x6x6x16xf32>
}

// -----

/// The per-example weight gradient jax makes of a vmapped layer: two feature groups in the
/// gradient's layout (the examples are the input's features, the layer's channels its
/// batch), each 1 feature of a 6x6 window (36 multiply-adds) deep: split too.
// CHECK-LABEL: func.func @weight_gradient_groups
// CHECK: "xhlo.slice"(%arg0) {limit_indices = array<i64: 1, 8, 8, 4>, start_indices = array<i64: 0, 0, 0, 0>
// CHECK: "xhlo.convolution"({{.*}}) {{.*}}feature_group_count = 1 : i64{{.*}} -> tensor<3x3x4x8xf32>
// CHECK: "xhlo.slice"(%arg0) {limit_indices = array<i64: 2, 8, 8, 4>, start_indices = array<i64: 1, 0, 0, 0>
// CHECK: "xhlo.convolution"({{.*}}) {{.*}}feature_group_count = 1 : i64{{.*}} -> tensor<3x3x4x8xf32>
// CHECK: "xhlo.concatenate"({{.*}}) {dimension = 3 : i64} : (tensor<3x3x4x8xf32>, tensor<3x3x4x8xf32>) -> tensor<3x3x4x16xf32>
func.func @weight_gradient_groups(%x: tensor<2x8x8x4xf32>, %dy: tensor<1x6x6x16xf32>) -> tensor<3x3x4x16xf32> {
  %0 = stablehlo.convolution(%x, %dy) dim_numbers = [f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f], window = {} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<2x8x8x4xf32>, tensor<1x6x6x16xf32>) -> tensor<3x3x4x16xf32>
  return %0 : tensor<3x3x4x16xf32>
}

// -----

/// Two batch groups: the input's batch cut in two, each half convolved with its half of the
/// kernel's output features (the spec's definition of batch groups).
// CHECK-LABEL: func.func @batch_groups
// CHECK: "xhlo.slice"(%arg0) {limit_indices = array<i64: 1, 6, 6, 8>, start_indices = array<i64: 0, 0, 0, 0>
// CHECK: "xhlo.convolution"({{.*}}) {{.*}}batch_group_count = 1 : i64{{.*}} -> tensor<1x4x4x8xf32>
// CHECK: "xhlo.slice"(%arg0) {limit_indices = array<i64: 2, 6, 6, 8>, start_indices = array<i64: 1, 0, 0, 0>
// CHECK: "xhlo.convolution"({{.*}}) {{.*}}batch_group_count = 1 : i64{{.*}} -> tensor<1x4x4x8xf32>
// CHECK: "xhlo.concatenate"({{.*}}) {dimension = 3 : i64} : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x16xf32>
func.func @batch_groups(%x: tensor<2x6x6x8xf32>, %k: tensor<3x3x8x16xf32>) -> tensor<1x4x4x16xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {} {batch_group_count = 2 : i64, feature_group_count = 1 : i64} : (tensor<2x6x6x8xf32>, tensor<3x3x8x16xf32>) -> tensor<1x4x4x16xf32>
  return %0 : tensor<1x4x4x16xf32>
}

// -----

/// Negative twins: a depthwise 3x3 convolution (9 multiply-adds deep), groups of 4 output
/// features, and an integer convolution stay grouped.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: "xhlo.slice"
// CHECK-COUNT-3: "xhlo.convolution"
// CHECK-NOT: "xhlo.concatenate"
func.func @kept(%x: tensor<1x6x6x16xf32>, %d: tensor<3x3x1x16xf32>, %n: tensor<3x3x8x8xf32>, %i: tensor<1x6x6x16xi32>, %ki: tensor<3x3x8x16xi32>)
    -> (tensor<1x6x6x16xf32>, tensor<1x6x6x8xf32>, tensor<1x6x6x16xi32>) {
  %0 = stablehlo.convolution(%x, %d) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 16 : i64} : (tensor<1x6x6x16xf32>, tensor<3x3x1x16xf32>) -> tensor<1x6x6x16xf32>
  %1 = stablehlo.convolution(%x, %n) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<1x6x6x16xf32>, tensor<3x3x8x8xf32>) -> tensor<1x6x6x8xf32>
  %2 = stablehlo.convolution(%i, %ki) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<1x6x6x16xi32>, tensor<3x3x8x16xi32>) -> tensor<1x6x6x16xi32>
  return %0, %1, %2 : tensor<1x6x6x16xf32>, tensor<1x6x6x8xf32>, tensor<1x6x6x16xi32>
}
