// RUN: mlirxla-opt %s -p xhlo-copy-removal --split-input-file | FileCheck %s

/// A copy that keeps its operand's layout is removed; one that changes it stays.
// CHECK-LABEL: func.func @remove_same_layout
// CHECK: %[[N:.*]] = "xhlo.negate"
// CHECK-NEXT: "xhlo.copy"(%[[N]]) {result_layouts = [array<i64: 0, 1>]}
// CHECK-NOT: xhlo.copy
func.func @remove_same_layout(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %a = "xhlo.negate"(%x) {result_layouts = [array<i64: 1, 0>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c1 = "xhlo.copy"(%a) {result_layouts = [array<i64: 1, 0>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c2 = "xhlo.copy"(%c1) {result_layouts = [array<i64: 0, 1>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = "xhlo.abs"(%c2) {result_layouts = [array<i64: 0, 1>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c3 = "xhlo.copy"(%b) {result_layouts = [array<i64: 0, 1>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %c3 : tensor<2x3xf32>
}

// -----

/// Negative twin: copies correctness needs stay (a returned parameter; a live value updated in place).
// CHECK-LABEL: func.func @keep_needed_copies
// CHECK: "xhlo.copy"(%arg0)
// CHECK: "xhlo.copy"(%[[A:.*]])
// CHECK: "xhlo.dynamic_update_slice"
func.func @keep_needed_copies(%x: tensor<4xf32>, %u: tensor<1xf32>, %i: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %p = "xhlo.copy"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %c = "xhlo.copy"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %s = "xhlo.dynamic_update_slice"(%c, %u, %i) : (tensor<4xf32>, tensor<1xf32>, tensor<i32>) -> tensor<4xf32>
  return %p, %a, %s : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
