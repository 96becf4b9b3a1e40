// RUN: mlirxla-opt %s -p xhlo-constant-folding --split-input-file | FileCheck %s
// RUN: mlirxla-opt %s -p 'xhlo-constant-folding{max-result-elements=2}' --split-input-file | FileCheck %s --check-prefix=SMALL

/// An add of two constants is evaluated into one constant.
// CHECK-LABEL: @fold_add
// CHECK: %[[C:.*]] = "xhlo.constant"() {value = dense<[4.000000e+00, 6.000000e+00, 8.000000e+00]> : tensor<3xf32>}
// CHECK-NOT: xhlo.add
// CHECK: return %[[C]]
/// With a limit of 2 elements, the 3-element result is not folded.
// SMALL-LABEL: @fold_add
// SMALL: "xhlo.add"
func.func @fold_add() -> tensor<3xf32> {
  %a = "xhlo.constant"() {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %b = "xhlo.constant"() {value = dense<[3.0, 4.0, 5.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %s = "xhlo.add"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %s : tensor<3xf32>
}

// -----

/// An add with an argument operand is not constant: it stays.
// CHECK-LABEL: @no_fold_add_argument
// CHECK: %[[S:.*]] = "xhlo.add"(%{{.*}}, %arg0)
// CHECK: return %[[S]]
func.func @no_fold_add_argument(%x: tensor<3xf32>) -> tensor<3xf32> {
  %a = "xhlo.constant"() {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %s = "xhlo.add"(%a, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %s : tensor<3xf32>
}

// -----

/// Transcendentals are evaluated by the reference interpreter (the runtime's own results).
// CHECK-LABEL: @fold_exponential_chain
// CHECK: %[[C:.*]] = "xhlo.constant"() {value = dense<[1.000000e+00, 2.71828175]> : tensor<2xf32>}
// CHECK-NOT: xhlo.exponential
// CHECK: return %[[C]]
func.func @fold_exponential_chain() -> tensor<2xf32> {
  %a = "xhlo.constant"() {value = dense<[0.0, 0.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %d = "xhlo.add"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %e = "xhlo.exponential"(%d) : (tensor<2xf32>) -> tensor<2xf32>
  return %e : tensor<2xf32>
}

// -----

/// atan2 is elementwise like the other binary ops, so it folds too (the interpreter's atan2).
// CHECK-LABEL: @fold_atan2
// CHECK: %[[C:.*]] = "xhlo.constant"() {value = dense<[0.785398185, -1.57079637]> : tensor<2xf32>}
// CHECK-NOT: xhlo.atan2
// CHECK: return %[[C]]
func.func @fold_atan2() -> tensor<2xf32> {
  %y = "xhlo.constant"() {value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %x = "xhlo.constant"() {value = dense<[1.0, 0.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %a = "xhlo.atan2"(%y, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %a : tensor<2xf32>
}

// -----

/// An exponential of an argument stays.
// CHECK-LABEL: @no_fold_exponential_argument
// CHECK: "xhlo.exponential"(%arg0)
func.func @no_fold_exponential_argument(%x: tensor<2xf32>) -> tensor<2xf32> {
  %e = "xhlo.exponential"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %e : tensor<2xf32>
}

// -----

/// A broadcast constant feeds a fold next to a plain constant; the broadcast itself is kept.
// CHECK-LABEL: @fold_multiply_by_broadcast
// CHECK: %[[B:.*]] = "xhlo.broadcast"
// CHECK: %[[C:.*]] = "xhlo.constant"() {value = dense<[5.000000e-01, 1.000000e+00, 1.500000e+00]> : tensor<3xf32>}
// CHECK: return %[[C]], %[[B]]
func.func @fold_multiply_by_broadcast() -> (tensor<3xf32>, tensor<3xf32>) {
  %c = "xhlo.constant"() {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %h = "xhlo.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %b = "xhlo.broadcast"(%h) {dimensions = array<i64>} : (tensor<f32>) -> tensor<3xf32>
  %m = "xhlo.multiply"(%c, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %m, %b : tensor<3xf32>, tensor<3xf32>
}

// -----

/// Broadcasts of constants alone are not folded into a big dense constant, nor is iota.
// CHECK-LABEL: @no_fold_broadcasts_and_iota
// CHECK: "xhlo.broadcast"
// CHECK: "xhlo.broadcast"
// CHECK: "xhlo.multiply"
// CHECK: "xhlo.iota"
func.func @no_fold_broadcasts_and_iota() -> (tensor<3xf32>, tensor<3xi32>) {
  %h = "xhlo.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %b = "xhlo.broadcast"(%h) {dimensions = array<i64>} : (tensor<f32>) -> tensor<3xf32>
  %b2 = "xhlo.broadcast"(%h) {dimensions = array<i64>} : (tensor<f32>) -> tensor<3xf32>
  %m = "xhlo.multiply"(%b, %b2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %i = "xhlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<3xi32>
  return %m, %i : tensor<3xf32>, tensor<3xi32>
}

// -----

/// A reduce with its reducer region is evaluated whole; data movement (reverse) folds in numpy.
// CHECK-LABEL: @fold_reduce_and_reverse
// CHECK-NOT: xhlo.reduce
// CHECK-NOT: xhlo.reverse
// CHECK-DAG: "xhlo.constant"() {value = dense<6.000000e+00> : tensor<f32>}
// CHECK-DAG: "xhlo.constant"() {value = dense<[3.000000e+00, 2.000000e+00, 1.000000e+00]> : tensor<3xf32>}
func.func @fold_reduce_and_reverse() -> (tensor<f32>, tensor<3xf32>) {
  %c = "xhlo.constant"() {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %r = "xhlo.reduce"(%c, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
  %v = "xhlo.reverse"(%c) {dimensions = array<i64: 0>} : (tensor<3xf32>) -> tensor<3xf32>
  return %r, %v : tensor<f32>, tensor<3xf32>
}

// -----

/// A reduce of an argument stays (its reducer's add is not constant either).
// CHECK-LABEL: @no_fold_reduce_argument
// CHECK: "xhlo.reduce"(%arg0
// CHECK: "xhlo.add"
func.func @no_fold_reduce_argument(%x: tensor<3xf32>) -> tensor<f32> {
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %r = "xhlo.reduce"(%x, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

/// Integer division folds with the interpreter's rounding (toward zero).
// CHECK-LABEL: @fold_integer_divide
// CHECK: "xhlo.constant"() {value = dense<[2, -3]> : tensor<2xi32>}
// CHECK-NOT: xhlo.divide
func.func @fold_integer_divide() -> tensor<2xi32> {
  %a = "xhlo.constant"() {value = dense<[7, -7]> : tensor<2xi32>} : () -> tensor<2xi32>
  %b = "xhlo.constant"() {value = dense<[3, 2]> : tensor<2xi32>} : () -> tensor<2xi32>
  %d = "xhlo.divide"(%a, %b) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  return %d : tensor<2xi32>
}

// -----

/// Integer division by zero is left to run time (the interpreter traps on it).
// CHECK-LABEL: @no_fold_integer_divide_by_zero
// CHECK: "xhlo.divide"
func.func @no_fold_integer_divide_by_zero() -> tensor<2xi32> {
  %a = "xhlo.constant"() {value = dense<[7, -7]> : tensor<2xi32>} : () -> tensor<2xi32>
  %b = "xhlo.constant"() {value = dense<[0, 2]> : tensor<2xi32>} : () -> tensor<2xi32>
  %d = "xhlo.divide"(%a, %b) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  return %d : tensor<2xi32>
}

// -----

/// Constant arithmetic inside a while body is folded; the carried value's add stays.
// CHECK-LABEL: @fold_in_while_body
// CHECK: "xhlo.while"
// CHECK-NOT: "xhlo.multiply"
// CHECK: "xhlo.constant"() {value = dense<3> : tensor<i32>}
// CHECK-NEXT: %[[STEP:.*]] = "xhlo.constant"() {value = dense<3> : tensor<i32>}
// CHECK-NEXT: "xhlo.add"(%arg1, %[[STEP]])
func.func @fold_in_while_body(%n: tensor<i32>) -> tensor<i32> {
  %z = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %w = "xhlo.while"(%z) ({
  ^bb0(%i: tensor<i32>):
    %p = "xhlo.compare"(%i, %n) {compare_type = "SIGNED", comparison_direction = "LT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %three = "xhlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
    %step = "xhlo.multiply"(%one, %three) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %next = "xhlo.add"(%i, %step) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%next) : (tensor<i32>) -> ()
  }) : (tensor<i32>) -> tensor<i32>
  return %w : tensor<i32>
}

// -----

/// Random numbers are not deterministic: rng with constant operands stays.
// CHECK-LABEL: @no_fold_rng
// CHECK: "xhlo.rng"
func.func @no_fold_rng() -> tensor<2xf32> {
  %lo = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %hi = "xhlo.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %shape = "xhlo.constant"() {value = dense<[2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = "xhlo.rng"(%lo, %hi, %shape) {rng_distribution = "UNIFORM"} : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}
