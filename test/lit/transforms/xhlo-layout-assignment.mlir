// RUN: mlirxla-opt %s -p xhlo-layout-assignment --split-input-file | FileCheck %s

/// Entry parameters and results get the default row-major layout; elementwise ops propagate it.
// CHECK-LABEL: func.func @default_row_major
// CHECK-SAME: {xhlo.layout = array<i64: 1, 0>}
// CHECK: "xhlo.negate"(%arg0) {result_layouts = [array<i64: 1, 0>]}
// CHECK-NOT: xhlo.copy
func.func @default_row_major(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.negate"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A given entry layout propagates through elementwise ops; the row-major result needs a copy.
// CHECK-LABEL: func.func @given_layout_conflict
// CHECK: "xhlo.negate"(%arg0) {result_layouts = [array<i64: 0, 1>]}
// CHECK: "xhlo.copy"(%0) {result_layouts = [array<i64: 1, 0>]}
// CHECK: return %1
func.func @given_layout_conflict(%x: tensor<2x3xf32> {xhlo.layout = array<i64: 0, 1>}) -> tensor<2x3xf32> {
  %0 = "xhlo.negate"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// Negative twin: the given layout is also the result's, so no copy.
// CHECK-LABEL: func.func @no_copy_given_layout_matches
// CHECK-NOT: xhlo.copy
func.func @no_copy_given_layout_matches(%x: tensor<2x3xf32> {xhlo.layout = array<i64: 0, 1>}) -> (tensor<2x3xf32> {xhlo.layout = array<i64: 0, 1>}) {
  %0 = "xhlo.negate"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A transpose becomes a bitcast (column-major result); the dot wants row-major, so a copy.
// CHECK-LABEL: func.func @transpose_into_dot
// CHECK: "xhlo.transpose"(%arg0) {permutation = array<i64: 1, 0>, result_layouts = [array<i64: 0, 1>]}
// CHECK: %[[C:.*]] = "xhlo.copy"(%0) {result_layouts = [array<i64: 1, 0>]}
// CHECK: "xhlo.dot"(%[[C]], %arg1)
func.func @transpose_into_dot(%x: tensor<3x2xf32>, %y: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %t = "xhlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %d = "xhlo.dot"(%t, %y) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %d : tensor<2x4xf32>
}

// -----

/// Negative twin: a dot of row-major parameters needs no copy.
// CHECK-LABEL: func.func @no_copy_dot
// CHECK-NOT: xhlo.copy
// CHECK: "xhlo.dot"(%arg0, %arg1) {{.*}}result_layouts = [array<i64: 1, 0>]
func.func @no_copy_dot(%x: tensor<2x3xf32>, %y: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %d = "xhlo.dot"(%x, %y) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %d : tensor<2x4xf32>
}

// -----

/// Ops inside regions get layouts too; scalars get the empty layout.
// CHECK-LABEL: func.func @region_layouts
// CHECK: "xhlo.add"(%arg2, %arg3) {result_layouts = [array<i64>]}
// CHECK: result_layouts = [array<i64: 0>]
func.func @region_layouts(%x: tensor<2x3xf32>, %z: tensor<f32>) -> tensor<3xf32> {
  %r = "xhlo.reduce"(%x, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// -----

/// One copy per value and needed layout in a block: the dot and the return share it.
// CHECK-LABEL: func.func @copy_reused
// CHECK: %[[C:.*]] = "xhlo.copy"(%1) {result_layouts = [array<i64: 1, 0>]}
// CHECK-NOT: xhlo.copy
// CHECK: return %[[C]]
func.func @copy_reused(%x: tensor<2x3xf32>, %y: tensor<3x2xf32> {xhlo.layout = array<i64: 0, 1>}) -> (tensor<3x2xf32>, tensor<2x2xf32>) {
  %t = "xhlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %a = "xhlo.add"(%t, %y) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %d = "xhlo.dot"(%x, %a) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  return %a, %d : tensor<3x2xf32>, tensor<2x2xf32>
}
