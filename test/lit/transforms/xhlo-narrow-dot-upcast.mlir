// RUN: mlirxla-opt %s -p xhlo-narrow-dot-upcast --split-input-file | FileCheck %s

/// A bf16 dot: both operands widened once (two dots read them), an f32 dot, the bf16 result
/// rounded back; the dot asking for an f32 result is not rounded.
// CHECK-LABEL: func.func @bf16_dots
// CHECK-DAG: %[[X:.*]] = "xhlo.convert"(%arg0) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-DAG: %[[W:.*]] = "xhlo.convert"(%arg1) : (tensor<8x2xbf16>) -> tensor<8x2xf32>
// CHECK: %[[D:.*]] = "xhlo.dot"(%[[X]], %[[W]]) {{.*}} -> tensor<4x2xf32>
// CHECK: %[[R:.*]] = "xhlo.convert"(%[[D]]) : (tensor<4x2xf32>) -> tensor<4x2xbf16>
// CHECK: %[[F:.*]] = "xhlo.dot"(%[[X]], %[[W]]) {{.*}} -> tensor<4x2xf32>
// CHECK-NOT: xhlo.convert
// CHECK: return %[[R]], %[[F]]
func.func @bf16_dots(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16>) -> (tensor<4x2xbf16>, tensor<4x2xf32>) {
  %0 = "xhlo.dot"(%x, %w) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>
  %1 = "xhlo.dot"(%x, %w) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xf32>
  return %0, %1 : tensor<4x2xbf16>, tensor<4x2xf32>
}

// -----

/// An f16 dot, as XLA:CPU computes it: an f32 dot of widened operands, rounded once.
// CHECK-LABEL: func.func @f16_dot
// CHECK-DAG: %[[X:.*]] = "xhlo.convert"(%arg0) : (tensor<4x8xf16>) -> tensor<4x8xf32>
// CHECK-DAG: %[[W:.*]] = "xhlo.convert"(%arg1) : (tensor<8x2xf16>) -> tensor<8x2xf32>
// CHECK: %[[D:.*]] = "xhlo.dot"(%[[X]], %[[W]]) {{.*}} -> tensor<4x2xf32>
// CHECK: %[[R:.*]] = "xhlo.convert"(%[[D]]) : (tensor<4x2xf32>) -> tensor<4x2xf16>
// CHECK: return %[[R]]
func.func @f16_dot(%x: tensor<4x8xf16>, %w: tensor<8x2xf16>) -> tensor<4x2xf16> {
  %0 = "xhlo.dot"(%x, %w) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xf16>, tensor<8x2xf16>) -> tensor<4x2xf16>
  return %0 : tensor<4x2xf16>
}

// -----

/// A bf16 convolution is an f32 one between converts, as XLA:CPU computes it.
// CHECK-LABEL: func.func @bf16_convolution
// CHECK-DAG: %[[X:.*]] = "xhlo.convert"(%arg0) : (tensor<2x8x8x4xbf16>) -> tensor<2x8x8x4xf32>
// CHECK-DAG: %[[W:.*]] = "xhlo.convert"(%arg1) : (tensor<3x3x4x8xbf16>) -> tensor<3x3x4x8xf32>
// CHECK: %[[C:.*]] = "xhlo.convolution"(%[[X]], %[[W]]) {{.*}} -> tensor<2x6x6x8xf32>
// CHECK: %[[R:.*]] = "xhlo.convert"(%[[C]]) : (tensor<2x6x6x8xf32>) -> tensor<2x6x6x8xbf16>
// CHECK: return %[[R]]
func.func @bf16_convolution(%x: tensor<2x8x8x4xbf16>, %w: tensor<3x3x4x8xbf16>) -> tensor<2x6x6x8xbf16> {
  %0 = "xhlo.convolution"(%x, %w) {batch_group_count = 1 : i64, dimension_numbers = {input_batch_dimension = 0 : i64, input_feature_dimension = 3 : i64, input_spatial_dimensions = array<i64: 1, 2>, kernel_input_feature_dimension = 2 : i64, kernel_output_feature_dimension = 3 : i64, kernel_spatial_dimensions = array<i64: 0, 1>, output_batch_dimension = 0 : i64, output_feature_dimension = 3 : i64, output_spatial_dimensions = array<i64: 1, 2>}, feature_group_count = 1 : i64} : (tensor<2x8x8x4xbf16>, tensor<3x3x4x8xbf16>) -> tensor<2x6x6x8xbf16>
  return %0 : tensor<2x6x6x8xbf16>
}

// -----

/// jax's mixed f8 dot (float8_e4m3fn by float8_e5m2, an f32 result): both operands widened.
// CHECK-LABEL: func.func @mixed_f8_dot
// CHECK-DAG: "xhlo.convert"(%arg0) : (tensor<4x8xf8E4M3FN>) -> tensor<4x8xf32>
// CHECK-DAG: "xhlo.convert"(%arg1) : (tensor<8x2xf8E5M2>) -> tensor<8x2xf32>
// CHECK: "xhlo.dot"({{.*}}) {{.*}} -> tensor<4x2xf32>
// CHECK-NOT: xhlo.convert
func.func @mixed_f8_dot(%x: tensor<4x8xf8E4M3FN>, %w: tensor<8x2xf8E5M2>) -> tensor<4x2xf32> {
  %0 = "xhlo.dot"(%x, %w) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xf8E4M3FN>, tensor<8x2xf8E5M2>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

/// Negative twins: an f32 dot, and a dot of bf16 by f16 with an f16 result, stay as they are.
// CHECK-LABEL: func.func @other_dots
// CHECK-NOT: xhlo.convert
func.func @other_dots(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %h: tensor<4x8xbf16>, %v: tensor<8x2xf16>) -> (tensor<4x2xf32>, tensor<4x2xf16>) {
  %0 = "xhlo.dot"(%x, %w) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %1 = "xhlo.dot"(%h, %v) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xbf16>, tensor<8x2xf16>) -> tensor<4x2xf16>
  return %0, %1 : tensor<4x2xf32>, tensor<4x2xf16>
}
