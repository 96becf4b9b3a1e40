// RUN: mlirxla-opt %s -p xhlo-dot-canonicalizer --split-input-file | FileCheck %s

/// jax's dot_product_attention batches over dimensions 0 and 2 of (batch, sequence, heads,
/// depth): both operands transposed to [batch, heads, sequence, depth], the rhs contracting
/// its depth last; the result keeps its type.
// CHECK-LABEL: func.func @attention_scores
// CHECK: %[[Q:.*]] = "xhlo.transpose"(%arg0) {permutation = array<i64: 0, 2, 1, 3>}
// CHECK: %[[K:.*]] = "xhlo.transpose"(%arg1) {permutation = array<i64: 0, 2, 3, 1>}
// CHECK: "xhlo.dot"(%[[Q]], %[[K]])
// CHECK-SAME: lhs_batching_dimensions = array<i64: 0, 1>, lhs_contracting_dimensions = array<i64: 3>, rhs_batching_dimensions = array<i64: 0, 1>, rhs_contracting_dimensions = array<i64: 2>
// CHECK-SAME: -> tensor<2x3x16x16xf32>
func.func @attention_scores(%q: tensor<2x16x3x8xf32>, %k: tensor<2x16x3x8xf32>) -> tensor<2x3x16x16xf32> {
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3] : (tensor<2x16x3x8xf32>, tensor<2x16x3x8xf32>) -> tensor<2x3x16x16xf32>
  return %0 : tensor<2x3x16x16xf32>
}

// -----

/// Two contracting dimensions, paired in the order the dimension numbers give, become one.
// CHECK-LABEL: func.func @two_contracting
// CHECK: %[[A:.*]] = "xhlo.transpose"(%arg0) {permutation = array<i64: 1, 3, 0, 2>}
// CHECK: %[[AR:.*]] = "xhlo.reshape"(%[[A]]) : (tensor<4x3x5x6xf32>) -> tensor<4x3x30xf32>
// CHECK: %[[B:.*]] = "xhlo.transpose"(%arg1) {permutation = array<i64: 2, 0, 1>}
// CHECK: %[[BR:.*]] = "xhlo.reshape"(%[[B]]) : (tensor<5x6x7xf32>) -> tensor<30x7xf32>
// CHECK: "xhlo.dot"(%[[AR]], %[[BR]])
func.func @two_contracting(%a: tensor<5x4x6x3xf32>, %b: tensor<6x7x5xf32>) -> tensor<4x3x7xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [0, 2] x [2, 0] : (tensor<5x4x6x3xf32>, tensor<6x7x5xf32>) -> tensor<4x3x7xf32>
  return %0 : tensor<4x3x7xf32>
}

// -----

/// Two contracting dimensions adjacent and in one order on both sides are one GEMM
/// dimension already (a layer's weight gradient over [batch, sequence, features]): left
/// alone; adjacent but paired crosswise, they are not.
// CHECK-LABEL: func.func @adjacent_contracting
// CHECK: %[[A:.*]] = "xhlo.transpose"(%arg0) {permutation = array<i64: 2, 0, 1>}
// CHECK: %[[B:.*]] = "xhlo.transpose"(%arg1) {permutation = array<i64: 1, 0, 2>}
// CHECK: "xhlo.dot"(%{{.*}}, %{{.*}})
// CHECK-NOT: xhlo.transpose
// CHECK: "xhlo.dot"(%arg0, %arg1)
// CHECK-SAME: lhs_contracting_dimensions = array<i64: 0, 1>
// CHECK-SAME: rhs_contracting_dimensions = array<i64: 0, 1>
func.func @adjacent_contracting(%h: tensor<4x4x8xf32>, %dy: tensor<4x4x6xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>) {
  %0 = stablehlo.dot_general %h, %dy, contracting_dims = [0, 1] x [1, 0] : (tensor<4x4x8xf32>, tensor<4x4x6xf32>) -> tensor<8x6xf32>
  %1 = stablehlo.dot_general %h, %dy, contracting_dims = [0, 1] x [0, 1] : (tensor<4x4x8xf32>, tensor<4x4x6xf32>) -> tensor<8x6xf32>
  return %0, %1 : tensor<8x6xf32>, tensor<8x6xf32>
}

// -----

/// Negative twins: a dot in GEMM form already, a matrix times a vector, an integer dot.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: xhlo.transpose
func.func @left_alone(%a: tensor<8x4x6xf32>, %b: tensor<8x6x5xf32>, %v: tensor<6xf32>, %i: tensor<4x6x2xi32>, %j: tensor<5x6xi32>) -> (tensor<8x4x5xf32>, tensor<8x4xf32>, tensor<4x2x5xi32>) {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<8x4x6xf32>, tensor<8x6x5xf32>) -> tensor<8x4x5xf32>
  %1 = stablehlo.dot_general %a, %v, contracting_dims = [2] x [0] : (tensor<8x4x6xf32>, tensor<6xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.dot_general %i, %j, contracting_dims = [1] x [1] : (tensor<4x6x2xi32>, tensor<5x6xi32>) -> tensor<4x2x5xi32>
  return %0, %1, %2 : tensor<8x4x5xf32>, tensor<8x4xf32>, tensor<4x2x5xi32>
}
