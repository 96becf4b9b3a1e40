// RUN: mlirxla-opt %s -p xhlo-dce --split-input-file | FileCheck %s

/// An unused side-effect-free op is removed, and so is the producer it kept alive.
// CHECK-LABEL: func.func @dead_chain
// CHECK-NOT: xhlo.negate
// CHECK-NOT: xhlo.exponential
// CHECK: return %arg0
func.func @dead_chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.exponential"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

/// A used op stays.
// CHECK-LABEL: func.func @no_dce_used
// CHECK: "xhlo.negate"
func.func @no_dce_used(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// A custom call with a side effect is never dead, even unused.
// CHECK-LABEL: func.func @no_dce_side_effect
// CHECK: "xhlo.custom_call"
func.func @no_dce_side_effect(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.custom_call"(%x) {call_target_name = "log", has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

/// Dead ops inside a region computation go too, but not its terminator.
// CHECK-LABEL: func.func @dead_in_region
// CHECK: "xhlo.reduce"
// CHECK-NOT: xhlo.multiply
// CHECK: "xhlo.add"
// CHECK: "xhlo.return"
func.func @dead_in_region(%x: tensor<4xf32>, %z: tensor<f32>) -> tensor<f32> {
  %0 = "xhlo.reduce"(%x, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = "xhlo.multiply"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

/// A private computation nothing refers to is removed; a referenced one stays.
// CHECK-LABEL: func.func public @main
// CHECK: func.func private @used
// CHECK-NOT: @unused
func.func public @main(%p: tensor<i1>, %x: tensor<f32>) -> tensor<f32> {
  %0 = "xhlo.conditional"(%p, %x, %x) {branch_computations = [@used, @used], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func private @used(%a: tensor<f32>) -> tensor<f32> {
  return %a : tensor<f32>
}
func.func private @unused(%a: tensor<f32>) -> tensor<f32> {
  return %a : tensor<f32>
}

// -----

/// A loop whose results nobody reads stays when its body has a side effect (jax.debug.print
/// in a fori_loop), and so does a conditional whose branch computation has one.
// CHECK-LABEL: func.func @no_dce_side_effect_inside
// CHECK: "xhlo.while"
// CHECK: "xhlo.custom_call"
// CHECK: "xhlo.conditional"
// CHECK-NOT: "xhlo.negate"
// CHECK: return
// CHECK: func.func private @prints
func.func @no_dce_side_effect_inside(%x: tensor<i32>, %p: tensor<i1>, %f: tensor<f32>) -> tensor<i32> {
  %0 = "xhlo.while"(%x) ({
  ^bb0(%a: tensor<i32>):
    %ten = "xhlo.constant"() {value = dense<10> : tensor<i32>} : () -> tensor<i32>
    %c = "xhlo.compare"(%a, %ten) {comparison_direction = "LT", compare_type = "SIGNED"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%a: tensor<i32>):
    "xhlo.custom_call"(%a) {call_target_name = "mlirxla.python_callback", has_side_effect = true} : (tensor<i32>) -> ()
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %s = "xhlo.add"(%a, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%s) : (tensor<i32>) -> ()
  }) : (tensor<i32>) -> tensor<i32>
  %r = "xhlo.conditional"(%p, %f, %f) {branch_computations = [@prints, @quiet], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
  %n = "xhlo.conditional"(%p, %f, %f) {branch_computations = [@quiet, @quiet], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
  return %x : tensor<i32>
}
func.func private @prints(%x: tensor<f32>) -> tensor<f32> {
  "xhlo.custom_call"(%x) {call_target_name = "mlirxla.python_callback", has_side_effect = true} : (tensor<f32>) -> ()
  return %x : tensor<f32>
}
func.func private @quiet(%x: tensor<f32>) -> tensor<f32> {
  %n = "xhlo.negate"(%x) : (tensor<f32>) -> tensor<f32>
  return %n : tensor<f32>
}
