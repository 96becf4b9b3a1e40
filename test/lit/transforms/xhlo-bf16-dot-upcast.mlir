// RUN: mlirxla-opt %s -p xhlo-bf16-dot-upcast --split-input-file | FileCheck %s

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

/// Negative twin: an f32 dot and an f16 dot stay as they are.
// CHECK-LABEL: func.func @other_dots
// CHECK-NOT: xhlo.convert
func.func @other_dots(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %h: tensor<4x8xf16>, %v: tensor<8x2xf16>) -> (tensor<4x2xf32>, tensor<4x2xf16>) {
  %0 = "xhlo.dot"(%x, %w) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %1 = "xhlo.dot"(%h, %v) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xf16>, tensor<8x2xf16>) -> tensor<4x2xf16>
  return %0, %1 : tensor<4x2xf32>, tensor<4x2xf16>
}
