// RUN: mlirxla-opt %s -p xhlo-convolution-1d-to-2d --split-input-file | FileCheck %s

/// NWC x WIO -> NWC becomes NHWC x HWIO -> NHWC with H = 1: a unit dimension before each
/// spatial one, a trivial first window entry (stride 1, no padding, no dilation).
// CHECK-LABEL: func.func @nwc
// CHECK: %[[X:.*]] = "xhlo.reshape"(%arg0) : (tensor<2x9x3xf32>) -> tensor<2x1x9x3xf32>
// CHECK: %[[W:.*]] = "xhlo.reshape"(%arg1) : (tensor<3x3x4xf32>) -> tensor<1x3x3x4xf32>
// CHECK: %[[C:.*]] = "xhlo.convolution"(%[[X]], %[[W]])
// CHECK-SAME: input_batch_dimension = 0 : i64, input_feature_dimension = 3 : i64, input_spatial_dimensions = array<i64: 1, 2>
// CHECK-SAME: kernel_input_feature_dimension = 2 : i64, kernel_output_feature_dimension = 3 : i64, kernel_spatial_dimensions = array<i64: 0, 1>
// CHECK-SAME: lhs_dilation = array<i64: 1, 2>
// CHECK-SAME: padding = dense<{{\[}}[0, 0], [1, 1]]> : tensor<2x2xi64>
// CHECK-SAME: window_strides = array<i64: 1, 2>
// CHECK-SAME: -> tensor<2x1x9x4xf32>
// CHECK: %[[R:.*]] = "xhlo.reshape"(%[[C]]) : (tensor<2x1x9x4xf32>) -> tensor<2x9x4xf32>
// CHECK: return %[[R]]
func.func @nwc(%x: tensor<2x9x3xf32>, %w: tensor<3x3x4xf32>) -> tensor<2x9x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [2], pad = [[1, 1]], lhs_dilate = [2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x9x3xf32>, tensor<3x3x4xf32>) -> tensor<2x9x4xf32>
  return %0 : tensor<2x9x4xf32>
}

// -----

/// NCW x OIW -> NCW: the unit dimension goes before the spatial one, the others move past it.
// CHECK-LABEL: func.func @ncw
// CHECK: "xhlo.reshape"(%arg0) : (tensor<2x3x9xf32>) -> tensor<2x3x1x9xf32>
// CHECK: "xhlo.convolution"
// CHECK-SAME: input_batch_dimension = 0 : i64, input_feature_dimension = 1 : i64, input_spatial_dimensions = array<i64: 2, 3>
// CHECK-SAME: kernel_input_feature_dimension = 1 : i64, kernel_output_feature_dimension = 0 : i64, kernel_spatial_dimensions = array<i64: 2, 3>
// CHECK-SAME: output_batch_dimension = 0 : i64, output_feature_dimension = 1 : i64, output_spatial_dimensions = array<i64: 2, 3>
func.func @ncw(%x: tensor<2x3x9xf32>, %w: tensor<4x3x3xf32>) -> tensor<2x4x7xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {stride = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x9xf32>, tensor<4x3x3xf32>) -> tensor<2x4x7xf32>
  return %0 : tensor<2x4x7xf32>
}

// -----

/// Negative twin: a 2-D convolution stays as it is.
// CHECK-LABEL: func.func @nhwc
// CHECK-NOT: xhlo.reshape
func.func @nhwc(%x: tensor<1x5x5x3xf32>, %w: tensor<3x3x3x4xf32>) -> tensor<1x3x3x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x5x5x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x3x3x4xf32>
  return %0 : tensor<1x3x3x4xf32>
}
