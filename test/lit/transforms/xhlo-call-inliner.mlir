// RUN: mlirxla-opt %s -p xhlo-call-inliner --split-input-file | FileCheck %s

/// A call of a private computation becomes the computation's ops, and the callee goes.
// CHECK-LABEL: func.func @inline_private_call
// CHECK-NEXT: %[[S:.*]] = "xhlo.add"(%arg0, %arg1)
// CHECK-NEXT: %[[N:.*]] = "xhlo.negate"(%[[S]])
// CHECK-NEXT: return %[[N]] : tensor<f32>
// CHECK-NOT: @add_negate
func.func @inline_private_call(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %c = "xhlo.call"(%a, %b) {callee = @add_negate} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %c : tensor<f32>
}
func.func private @add_negate(%x: tensor<f32>, %y: tensor<f32>) -> tensor<f32> {
  %s = "xhlo.add"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %n = "xhlo.negate"(%s) : (tensor<f32>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

/// A public callee is another entry point: the call and the function stay.
// CHECK-LABEL: func.func @no_inline_public_callee
// CHECK: "xhlo.call"(%arg0, %arg1) {callee = @add_public}
// CHECK: func.func @add_public
func.func @no_inline_public_callee(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %c = "xhlo.call"(%a, %b) {callee = @add_public} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %c : tensor<f32>
}
func.func @add_public(%x: tensor<f32>, %y: tensor<f32>) -> tensor<f32> {
  %s = "xhlo.add"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

/// Calls inside an inlined body are inlined too, one call site per use.
// CHECK-LABEL: func.func @inline_nested_calls
// CHECK-NOT: xhlo.call
// CHECK: %[[S0:.*]] = "xhlo.add"(%arg0, %arg1)
// CHECK: %[[N0:.*]] = "xhlo.negate"(%[[S0]])
// CHECK: %[[S1:.*]] = "xhlo.add"(%[[N0]], %arg1)
// CHECK: %[[N1:.*]] = "xhlo.negate"(%[[S1]])
// CHECK: return %[[N1]]
// CHECK-NOT: func.func private
func.func @inline_nested_calls(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %c = "xhlo.call"(%a, %b) {callee = @outer} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %d = "xhlo.call"(%c, %b) {callee = @outer} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %d : tensor<f32>
}
func.func private @outer(%x: tensor<f32>, %y: tensor<f32>) -> tensor<f32> {
  %s = "xhlo.add"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %t = "xhlo.call"(%s) {callee = @inner} : (tensor<f32>) -> tensor<f32>
  return %t : tensor<f32>
}
func.func private @inner(%x: tensor<f32>) -> tensor<f32> {
  %n = "xhlo.negate"(%x) : (tensor<f32>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

/// Conditional branch computations are not calls: the conditional keeps them.
// CHECK-LABEL: func.func @no_inline_branch_computations
// CHECK: "xhlo.conditional"(%arg0, %arg1, %arg1) {branch_computations = [@on_true, @on_false]
// CHECK: func.func private @on_true
// CHECK: func.func private @on_false
func.func @no_inline_branch_computations(%p: tensor<i1>, %x: tensor<f32>) -> tensor<f32> {
  %r = "xhlo.conditional"(%p, %x, %x) {branch_computations = [@on_true, @on_false], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}
func.func private @on_true(%x: tensor<f32>) -> tensor<f32> {
  %n = "xhlo.negate"(%x) : (tensor<f32>) -> tensor<f32>
  return %n : tensor<f32>
}
func.func private @on_false(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

/// A callee that is also a branch computation is inlined at the call but kept for the conditional.
// CHECK-LABEL: func.func @inline_call_keep_branch
// CHECK: %[[N:.*]] = "xhlo.negate"(%arg1)
// CHECK: "xhlo.conditional"(%arg0, %[[N]], %[[N]]) {branch_computations = [@negate, @identity]
// CHECK: func.func private @negate
func.func @inline_call_keep_branch(%p: tensor<i1>, %x: tensor<f32>) -> tensor<f32> {
  %c = "xhlo.call"(%x) {callee = @negate} : (tensor<f32>) -> tensor<f32>
  %r = "xhlo.conditional"(%p, %c, %c) {branch_computations = [@negate, @identity], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}
func.func private @negate(%x: tensor<f32>) -> tensor<f32> {
  %n = "xhlo.negate"(%x) : (tensor<f32>) -> tensor<f32>
  return %n : tensor<f32>
}
func.func private @identity(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

/// A computation that calls itself would be inlined forever: its calls stay.
// CHECK-LABEL: func.func @no_inline_recursive_callee
// CHECK: "xhlo.call"(%arg0) {callee = @self}
// CHECK: func.func private @self
// CHECK: "xhlo.call"(%arg0) {callee = @self}
func.func @no_inline_recursive_callee(%a: tensor<f32>) -> tensor<f32> {
  %c = "xhlo.call"(%a) {callee = @self} : (tensor<f32>) -> tensor<f32>
  return %c : tensor<f32>
}
func.func private @self(%x: tensor<f32>) -> tensor<f32> {
  %c = "xhlo.call"(%x) {callee = @self} : (tensor<f32>) -> tensor<f32>
  return %c : tensor<f32>
}
