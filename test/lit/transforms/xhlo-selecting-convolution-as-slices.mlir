// RUN: mlirxla-opt %s -p xhlo-selecting-convolution-as-slices --split-input-file | FileCheck %s

/// jax's conv_general_dilated_patches of 2 features in 2x2 windows: a one-hot kernel of iota
/// and compare, one group per input feature. The padded input sliced at each of the 4 window
/// offsets, the slices interleaved offset-minor beside the features, merged into 8 outputs.
// CHECK-LABEL: func.func @patches
// CHECK-NOT: xhlo.convolution
// CHECK: %[[P:.*]] = "xhlo.pad"(%arg0, %{{.*}}) {edge_padding_high = array<i64: 0, 1, 1, 0>, edge_padding_low = array<i64: 0, 0, 0, 0>
// CHECK: %[[S0:.*]] = "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 1, 5, 5, 2>, start_indices = array<i64: 0, 0, 0, 0>
// CHECK: %[[S1:.*]] = "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 1, 5, 6, 2>, start_indices = array<i64: 0, 0, 1, 0>
// CHECK: %[[S2:.*]] = "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 1, 6, 5, 2>, start_indices = array<i64: 0, 1, 0, 0>
// CHECK: %[[S3:.*]] = "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 1, 6, 6, 2>, start_indices = array<i64: 0, 1, 1, 0>
// CHECK: "xhlo.reshape"(%[[S0]]) : (tensor<1x5x5x2xf32>) -> tensor<1x5x5x2x1x1xf32>
// CHECK: %[[J:.*]] = "xhlo.concatenate"({{.*}}) {dimension = 5 : i64} : {{.*}} -> tensor<1x5x5x2x1x4xf32>
// CHECK: %[[R:.*]] = "xhlo.reshape"(%[[J]]) : (tensor<1x5x5x2x1x4xf32>) -> tensor<1x5x5x8xf32>
// CHECK: return %[[R]]
func.func @patches(%x: tensor<1x5x5x2xf32>) -> tensor<1x5x5x8xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<4x4xi32>
  %1 = stablehlo.iota dim = 1 : tensor<4x4xi32>
  %2 = stablehlo.compare EQ, %0, %1, SIGNED : (tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x4xi1>
  %3 = stablehlo.convert %2 : (tensor<4x4xi1>) -> tensor<4x4xf32>
  %4 = stablehlo.broadcast_in_dim %3, dims = [1, 2] : (tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %5 = stablehlo.reshape %4 : (tensor<2x4x4xf32>) -> tensor<8x1x2x2xf32>
  %6 = stablehlo.transpose %5, dims = [2, 3, 1, 0] : (tensor<8x1x2x2xf32>) -> tensor<2x2x1x8xf32>
  %7 = stablehlo.convolution(%x, %6) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {pad = [[0, 1], [0, 1]]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<1x5x5x2xf32>, tensor<2x2x1x8xf32>) -> tensor<1x5x5x8xf32>
  return %7 : tensor<1x5x5x8xf32>
}

// -----

/// The gradient of those patches: one output a group summing its 4 inputs, each at the
/// window offset that copied it; four strided slices of the features (every 4th from the
/// one each offset reads), added.
// CHECK-LABEL: func.func @patches_gradient
// CHECK-NOT: xhlo.convolution
// CHECK: %[[P:.*]] = "xhlo.pad"(%arg0, %{{.*}}) {edge_padding_high = array<i64: 0, 0, 0, 0>, edge_padding_low = array<i64: 0, 1, 1, 0>
// CHECK: %[[S0:.*]] = "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 1, 6, 6, 8>, start_indices = array<i64: 0, 1, 1, 0>, strides = array<i64: 1, 1, 1, 4>}
// CHECK: %[[S1:.*]] = "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 1, 6, 5, 8>, start_indices = array<i64: 0, 1, 0, 1>, strides = array<i64: 1, 1, 1, 4>}
// CHECK: %[[A:.*]] = "xhlo.add"(%[[S0]], %[[S1]])
// CHECK: "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 1, 5, 6, 8>, start_indices = array<i64: 0, 0, 1, 2>, strides = array<i64: 1, 1, 1, 4>}
// CHECK: "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 1, 5, 5, 8>, start_indices = array<i64: 0, 0, 0, 3>, strides = array<i64: 1, 1, 1, 4>}
// CHECK: %[[T:.*]] = "xhlo.add"
// CHECK: return %[[T]] : tensor<1x5x5x2xf32>
func.func @patches_gradient(%dy: tensor<1x5x5x8xf32>) -> tensor<1x5x5x2xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<4x4xi32>
  %1 = stablehlo.iota dim = 1 : tensor<4x4xi32>
  %2 = stablehlo.compare EQ, %0, %1, SIGNED : (tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x4xi1>
  %3 = stablehlo.convert %2 : (tensor<4x4xi1>) -> tensor<4x4xf32>
  %4 = stablehlo.reshape %3 : (tensor<4x4xf32>) -> tensor<2x2x1x4xf32>
  %5 = stablehlo.broadcast_in_dim %4, dims = [0, 1, 2, 3] : (tensor<2x2x1x4xf32>) -> tensor<2x2x2x4xf32>
  %6 = stablehlo.reverse %5, dims = [0, 1] : tensor<2x2x2x4xf32>
  %7 = stablehlo.convolution(%dy, %6) dim_numbers = [b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f], window = {pad = [[1, 0], [1, 0]]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<1x5x5x8xf32>, tensor<2x2x2x4xf32>) -> tensor<1x5x5x2xf32>
  return %7 : tensor<1x5x5x2xf32>
}

// -----

/// A kernel weighing its selections 2 scales, not selects; a kernel that is an argument is
/// unknown: both convolutions stay.
// CHECK-LABEL: func.func @not_selections
// CHECK-COUNT-2: xhlo.convolution
func.func @not_selections(%x: tensor<1x5x5x1xf32>, %k: tensor<2x2x1x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) {
  %0 = stablehlo.iota dim = 0 : tensor<4x4xi32>
  %1 = stablehlo.iota dim = 1 : tensor<4x4xi32>
  %2 = stablehlo.compare EQ, %0, %1, SIGNED : (tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x4xi1>
  %3 = stablehlo.convert %2 : (tensor<4x4xi1>) -> tensor<4x4xf32>
  %c = stablehlo.constant dense<2.0> : tensor<4x4xf32>
  %4 = stablehlo.multiply %3, %c : tensor<4x4xf32>
  %5 = stablehlo.reshape %4 : (tensor<4x4xf32>) -> tensor<2x2x1x4xf32>
  %6 = stablehlo.convolution(%x, %5) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x5x5x1xf32>, tensor<2x2x1x4xf32>) -> tensor<1x4x4x4xf32>
  %7 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x5x5x1xf32>, tensor<2x2x1x4xf32>) -> tensor<1x4x4x4xf32>
  return %6, %7 : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
}
