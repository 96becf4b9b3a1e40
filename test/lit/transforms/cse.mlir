// RUN: mlirxla-opt %s -p cse --split-input-file | FileCheck %s

/// MLIR's CSE merges identical side-effect-free xhlo ops (they carry the Pure trait).
// CHECK-LABEL: func.func @merge_identical
// CHECK-COUNT-1: "xhlo.exponential"
// CHECK-NOT: "xhlo.exponential"
func.func @merge_identical(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.exponential"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.exponential"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "xhlo.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

/// Ops that differ in an attribute are not merged.
// CHECK-LABEL: func.func @no_cse_different_attributes
// CHECK: comparison_direction = "LT"
// CHECK: comparison_direction = "GT"
func.func @no_cse_different_attributes(%x: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xi1>) {
  %0 = "xhlo.compare"(%x, %x) {comparison_direction = "LT"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %1 = "xhlo.compare"(%x, %x) {comparison_direction = "GT"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0, %1 : tensor<4xi1>, tensor<4xi1>
}

// -----

/// Ops with a side effect (no Pure trait) are never merged.
// CHECK-LABEL: func.func @no_cse_custom_call
// CHECK-COUNT-2: "xhlo.custom_call"
func.func @no_cse_custom_call(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "xhlo.custom_call"(%x) {call_target_name = "f"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.custom_call"(%x) {call_target_name = "f"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

/// A reducer is a computation of its own (IsolatedFromAbove, as in HLO): the constant in its
/// body is not replaced by the equal one outside (jnp.argmax on booleans once lost its
/// native kernel that way, and its interpreter fallback printed an unknown SSA value).
// CHECK-LABEL: func.func @reducer_keeps_its_constant
// CHECK: "xhlo.reduce"
// CHECK: ^bb0
// CHECK-NEXT: %[[FALSE:.*]] = "xhlo.constant"() {value = dense<false> : tensor<i1>}
// CHECK-NEXT: "xhlo.or"(%{{.*}}, %[[FALSE]])
func.func @reducer_keeps_its_constant(%x: tensor<4xi1>) -> tensor<i1> {
  %init = "xhlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
  %0 = "xhlo.reduce"(%x, %init) ({
  ^bb0(%a: tensor<i1>, %b: tensor<i1>):
    %f = "xhlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
    %o = "xhlo.or"(%a, %f) : (tensor<i1>, tensor<i1>) -> tensor<i1>
    %r = "xhlo.or"(%o, %b) : (tensor<i1>, tensor<i1>) -> tensor<i1>
    "xhlo.return"(%r) : (tensor<i1>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4xi1>, tensor<i1>) -> tensor<i1>
  return %0 : tensor<i1>
}
