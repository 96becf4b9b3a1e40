// RUN: mlirxla-opt %s -p xhlo-integer-dot-as-float --split-input-file | FileCheck %s

/// int8 x int8 into int32 over 512: at most 512 * 2^14 = 2^23, exact in f32; over 2048
/// (2^25) exact in f64. Each result comes back through i32.
// CHECK-LABEL: func.func @exact
// CHECK-DAG: %[[A:.*]] = "xhlo.convert"(%arg0) : (tensor<4x512xi8>) -> tensor<4x512xf32>
// CHECK-DAG: %[[B:.*]] = "xhlo.convert"(%arg1) : (tensor<512x2xi8>) -> tensor<512x2xf32>
// CHECK: %[[D:.*]] = "xhlo.dot"(%[[A]], %[[B]]) {{.*}} -> tensor<4x2xf32>
// CHECK: %[[R:.*]] = "xhlo.convert"(%[[D]]) : (tensor<4x2xf32>) -> tensor<4x2xi32>
// CHECK: "xhlo.dot"({{.*}}) {{.*}} -> tensor<4x2xf64>
// CHECK: %[[W:.*]] = "xhlo.convert"({{.*}}) : (tensor<4x2xf64>) -> tensor<4x2xi32>
// CHECK: return %[[R]], %[[W]]
func.func @exact(%a: tensor<4x512xi8>, %b: tensor<512x2xi8>, %c: tensor<4x2048xi8>, %d: tensor<2048x2xi8>) -> (tensor<4x2xi32>, tensor<4x2xi32>) {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x512xi8>, tensor<512x2xi8>) -> tensor<4x2xi32>
  %1 = "xhlo.dot"(%c, %d) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x2048xi8>, tensor<2048x2xi8>) -> tensor<4x2xi32>
  return %0, %1 : tensor<4x2xi32>, tensor<4x2xi32>
}

// -----

/// Negative twins: int16 over 4 (4 * 2^30 does not fit i32, whose sums wrap), an int8
/// result (its loops are faster), and an int32 dot stay integer dots.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: xhlo.convert
func.func @kept(%a: tensor<4x4xi16>, %b: tensor<4x2xi16>, %c: tensor<4x8xi8>, %d: tensor<8x2xi8>, %e: tensor<4x8xi32>, %f: tensor<8x2xi32>) -> (tensor<4x2xi32>, tensor<4x2xi8>, tensor<4x2xi32>) {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x4xi16>, tensor<4x2xi16>) -> tensor<4x2xi32>
  %1 = "xhlo.dot"(%c, %d) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xi8>, tensor<8x2xi8>) -> tensor<4x2xi8>
  %2 = "xhlo.dot"(%e, %f) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xi32>, tensor<8x2xi32>) -> tensor<4x2xi32>
  return %0, %1, %2 : tensor<4x2xi32>, tensor<4x2xi8>, tensor<4x2xi32>
}
