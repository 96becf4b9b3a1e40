// RUN: mlirxla-opt %s -p xhlo-transposed-convolution-phases --split-input-file | FileCheck %s

/// A stride-2 transposed 3x3 convolution padded by 1: four phase convolutions of the
/// undilated input (1x1, 1x2, 2x1 and 2x2 slices of the window, no dilation left), their
/// results padded to 4x4, interleaved along each spatial dimension by a concatenate and a
/// reshape, and sliced to 7x7.
// CHECK-LABEL: func.func @transposed
// CHECK-NOT: lhs_dilation
// CHECK: "xhlo.slice"(%arg1) {{.*}} -> tensor<1x1x4x2xf32>
// CHECK: "xhlo.convolution"(%arg0, {{.*}}) -> tensor<1x4x4x2xf32>
// CHECK: "xhlo.convolution"(%arg0, {{.*}}) -> tensor<1x4x3x2xf32>
// CHECK: "xhlo.convolution"(%arg0, {{.*}}) -> tensor<1x3x4x2xf32>
// CHECK: "xhlo.slice"(%arg1) {{.*}} -> tensor<2x2x4x2xf32>
// CHECK: "xhlo.convolution"(%arg0, {{.*}}) -> tensor<1x3x3x2xf32>
// CHECK: "xhlo.concatenate"({{.*}}) {{.*}} -> tensor<1x4x4x2x2xf32>
// CHECK: "xhlo.concatenate"({{.*}}) {{.*}} -> tensor<1x4x2x7x2xf32>
// CHECK: "xhlo.reshape"({{.*}}) : (tensor<1x4x2x7x2xf32>) -> tensor<1x8x7x2xf32>
// CHECK: %[[OUT:.*]] = "xhlo.slice"({{.*}}) {{.*}} -> tensor<1x7x7x2xf32>
// CHECK: return %[[OUT]]
func.func @transposed(%x: tensor<1x4x4x4xf32>, %k: tensor<3x3x4x2xf32>) -> tensor<1x7x7x2xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [2, 2], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x4x4xf32>, tensor<3x3x4x2xf32>) -> tensor<1x7x7x2xf32>
  return %0 : tensor<1x7x7x2xf32>
}

// -----

/// Negative twins: a strided convolution, and a dilated input read through a dilated window,
/// stay as they are.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-2: "xhlo.convolution"
// CHECK-NOT: "xhlo.concatenate"
func.func @kept(%x: tensor<1x8x8x4xf32>, %k: tensor<3x3x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x11x11x2xf32>) {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x4xf32>, tensor<3x3x4x2xf32>) -> tensor<1x4x4x2xf32>
  %1 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [2, 2], rhs_dilate = [2, 2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x4xf32>, tensor<3x3x4x2xf32>) -> tensor<1x11x11x2xf32>
  return %0, %1 : tensor<1x4x4x2xf32>, tensor<1x11x11x2xf32>
}
