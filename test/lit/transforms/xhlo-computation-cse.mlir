// RUN: mlirxla-opt %s -p xhlo-computation-cse --split-input-file | FileCheck %s

/// jnp.linalg.eigh(x)[0] and eigh(x)[1] in one function: two identical LAPACK calls without
/// a side effect are one, as XLA's HloCSE makes them.
// CHECK-LABEL: func.func @merge_lapack_calls
// CHECK: %[[E:.*]]:3 = "xhlo.custom_call"(%arg0)
// CHECK-NOT: "xhlo.custom_call"
// CHECK: return %[[E]]#1, %[[E]]#0
func.func @merge_lapack_calls(%x: tensor<4x4xf32>) -> (tensor<4xf32>, tensor<4x4xf32>) {
  %0:3 = "xhlo.custom_call"(%x) {call_target_name = "lapack_ssyevd_ffi", mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<i32>)
  %1:3 = "xhlo.custom_call"(%x) {call_target_name = "lapack_ssyevd_ffi", mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<i32>)
  return %0#1, %1#0 : tensor<4xf32>, tensor<4x4xf32>
}

// -----

/// A custom call with a side effect runs as often as the program says.
// CHECK-LABEL: func.func @keep_side_effects
// CHECK-COUNT-2: "xhlo.custom_call"
func.func @keep_side_effects(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "xhlo.custom_call"(%x) {call_target_name = "f", has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.custom_call"(%x) {call_target_name = "f", has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

/// Calls that differ in a configuration are different calls.
// CHECK-LABEL: func.func @keep_different_configurations
// CHECK: uplo = 76
// CHECK: uplo = 85
func.func @keep_different_configurations(%x: tensor<4x4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:3 = "xhlo.custom_call"(%x) {call_target_name = "lapack_ssyevd_ffi", mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<i32>)
  %1:3 = "xhlo.custom_call"(%x) {call_target_name = "lapack_ssyevd_ffi", mhlo.backend_config = {mode = 86 : ui8, uplo = 85 : ui8}} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<i32>)
  return %0#1, %1#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

/// Reductions of the same value by the same computation merge; one by another computation
/// (max) or of another value does not.
// CHECK-LABEL: func.func @merge_reductions
// CHECK: %[[S:.*]] = "xhlo.reduce"(%arg0
// CHECK: "xhlo.add"
// CHECK: %[[M:.*]] = "xhlo.reduce"(%arg0
// CHECK: "xhlo.maximum"
// CHECK: %[[T:.*]] = "xhlo.reduce"(%arg1
// CHECK-NOT: "xhlo.reduce"
// CHECK: return %[[S]], %[[S]], %[[M]], %[[T]]
func.func @merge_reductions(%x: tensor<4xf32>, %y: tensor<4xf32>, %z: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %0 = "xhlo.reduce"(%x, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%r) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %1 = "xhlo.reduce"(%x, %z) ({
  ^bb0(%c: tensor<f32>, %d: tensor<f32>):
    %r = "xhlo.add"(%c, %d) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%r) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %2 = "xhlo.reduce"(%x, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = "xhlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%r) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %3 = "xhlo.reduce"(%y, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%r) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

/// Twins inside a loop body merge there.
// CHECK-LABEL: func.func @merge_in_a_body
// CHECK: "xhlo.while"
// CHECK-COUNT-1: "xhlo.sort"
// CHECK-NOT: "xhlo.sort"
func.func @merge_in_a_body(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.while"(%x) ({
  ^bb0(%a: tensor<4xf32>):
    %t = "xhlo.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
    "xhlo.return"(%t) : (tensor<i1>) -> ()
  }, {
  ^bb0(%a: tensor<4xf32>):
    %s = "xhlo.sort"(%a) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %l = "xhlo.compare"(%p, %q) {comparison_direction = "LT"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
      "xhlo.return"(%l) : (tensor<i1>) -> ()
    }) {dimension = 0 : i64, is_stable = false} : (tensor<4xf32>) -> tensor<4xf32>
    %u = "xhlo.sort"(%a) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %l = "xhlo.compare"(%p, %q) {comparison_direction = "LT"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
      "xhlo.return"(%l) : (tensor<i1>) -> ()
    }) {dimension = 0 : i64, is_stable = false} : (tensor<4xf32>) -> tensor<4xf32>
    %v = "xhlo.add"(%s, %u) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%v) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// Two equal loops (jax's `interp` twice on the same points: two binary searches), their
/// bodies reading the same constant from outside: one loop.
// CHECK-LABEL: func.func @merge_equal_loops
// CHECK-COUNT-1: "xhlo.while"
// CHECK-NOT: "xhlo.while"
func.func @merge_equal_loops(%x: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
  %0:2 = "xhlo.while"(%x, %n) ({
  ^bb0(%a: tensor<4xf32>, %i: tensor<i32>):
    %c = "xhlo.compare"(%i, %one) {comparison_direction = "GT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%a: tensor<4xf32>, %i: tensor<i32>):
    %b = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %j = "xhlo.subtract"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%b, %j) : (tensor<4xf32>, tensor<i32>) -> ()
  }) : (tensor<4xf32>, tensor<i32>) -> (tensor<4xf32>, tensor<i32>)
  %1:2 = "xhlo.while"(%x, %n) ({
  ^bb0(%a: tensor<4xf32>, %i: tensor<i32>):
    %c = "xhlo.compare"(%i, %one) {comparison_direction = "GT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%a: tensor<4xf32>, %i: tensor<i32>):
    %b = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %j = "xhlo.subtract"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%b, %j) : (tensor<4xf32>, tensor<i32>) -> ()
  }) : (tensor<4xf32>, tensor<i32>) -> (tensor<4xf32>, tensor<i32>)
  return %0#0, %1#0 : tensor<4xf32>, tensor<4xf32>
}

// -----

/// Loops that print alike but read different values from outside (2 and 3) stay two.
// CHECK-LABEL: func.func @loops_reading_different_values
// CHECK-COUNT-2: "xhlo.while"
func.func @loops_reading_different_values(%x: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %two = "xhlo.constant"() {value = dense<2> : tensor<i32>} : () -> tensor<i32>
  %three = "xhlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
  %0:2 = "xhlo.while"(%x, %n) ({
  ^bb0(%a: tensor<4xf32>, %i: tensor<i32>):
    %c = "xhlo.compare"(%i, %two) {comparison_direction = "GT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%a: tensor<4xf32>, %i: tensor<i32>):
    %b = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %j = "xhlo.subtract"(%i, %two) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%b, %j) : (tensor<4xf32>, tensor<i32>) -> ()
  }) : (tensor<4xf32>, tensor<i32>) -> (tensor<4xf32>, tensor<i32>)
  %1:2 = "xhlo.while"(%x, %n) ({
  ^bb0(%a: tensor<4xf32>, %i: tensor<i32>):
    %c = "xhlo.compare"(%i, %three) {comparison_direction = "GT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%a: tensor<4xf32>, %i: tensor<i32>):
    %b = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %j = "xhlo.subtract"(%i, %three) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%b, %j) : (tensor<4xf32>, tensor<i32>) -> ()
  }) : (tensor<4xf32>, tensor<i32>) -> (tensor<4xf32>, tensor<i32>)
  return %0#0, %1#0 : tensor<4xf32>, tensor<4xf32>
}
