// RUN: mlirxla-opt %s -p xhlo-algsimp --split-input-file | FileCheck %s

// xhlo-algsimp: each rewrite proved by a positive case and refused by its negative twin.
// Positive cases check with CHECK-NEXT that nothing else is left in the function: the pass
// erases the ops a rewrite leaves unused.

/// x + 0 -> x for integers.
// CHECK-LABEL: func.func @fold_int_add_zero
// CHECK-NEXT: return %arg0
func.func @fold_int_add_zero(%x: tensor<4xi32>) -> tensor<4xi32> {
  %c = "xhlo.constant"() {value = dense<0> : tensor<4xi32>} : () -> tensor<4xi32>
  %0 = "xhlo.add"(%x, %c) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

/// Float x + 0.0 stays: -0.0 + 0.0 is +0.0, not x.
// CHECK-LABEL: func.func @no_fold_float_add_zero
// CHECK: "xhlo.add"(%arg0, %0)
func.func @no_fold_float_add_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "xhlo.constant"() {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "xhlo.add"(%x, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// (-0.0) + x -> x for floats: adding -0.0 changes no value.
// CHECK-LABEL: func.func @fold_float_negative_zero_add
// CHECK-NEXT: return %arg0
func.func @fold_float_negative_zero_add(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "xhlo.constant"() {value = dense<-0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "xhlo.add"(%c, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// 0 + x -> x for integers (a scalar here).
// CHECK-LABEL: func.func @fold_int_zero_add
// CHECK-NEXT: return %arg0
func.func @fold_int_zero_add(%x: tensor<i64>) -> tensor<i64> {
  %c = "xhlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %0 = "xhlo.add"(%c, %x) : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

/// x + c stays when c is not all zeros.
// CHECK-LABEL: func.func @no_fold_int_add_non_splat
// CHECK: "xhlo.add"(%arg0, %0)
func.func @no_fold_int_add_non_splat(%x: tensor<2xi32>) -> tensor<2xi32> {
  %c = "xhlo.constant"() {value = dense<[0, 1]> : tensor<2xi32>} : () -> tensor<2xi32>
  %0 = "xhlo.add"(%x, %c) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

/// x - (+0.0) -> x for floats.
// CHECK-LABEL: func.func @fold_float_subtract_zero
// CHECK-NEXT: return %arg0
func.func @fold_float_subtract_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "xhlo.constant"() {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "xhlo.subtract"(%x, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// Float x - (-0.0) stays: it is x + 0.0.
// CHECK-LABEL: func.func @no_fold_float_subtract_negative_zero
// CHECK: "xhlo.subtract"(%arg0, %0)
func.func @no_fold_float_subtract_negative_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "xhlo.constant"() {value = dense<-0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "xhlo.subtract"(%x, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// x - 0 -> x for integers.
// CHECK-LABEL: func.func @fold_int_subtract_zero
// CHECK-NEXT: return %arg0
func.func @fold_int_subtract_zero(%x: tensor<3xi8>) -> tensor<3xi8> {
  %c = "xhlo.constant"() {value = dense<0> : tensor<3xi8>} : () -> tensor<3xi8>
  %0 = "xhlo.subtract"(%x, %c) : (tensor<3xi8>, tensor<3xi8>) -> tensor<3xi8>
  return %0 : tensor<3xi8>
}

// -----

/// 0 - x stays: it is -x.
// CHECK-LABEL: func.func @no_fold_int_zero_subtract
// CHECK: "xhlo.subtract"(%0, %arg0)
func.func @no_fold_int_zero_subtract(%x: tensor<3xi8>) -> tensor<3xi8> {
  %c = "xhlo.constant"() {value = dense<0> : tensor<3xi8>} : () -> tensor<3xi8>
  %0 = "xhlo.subtract"(%c, %x) : (tensor<3xi8>, tensor<3xi8>) -> tensor<3xi8>
  return %0 : tensor<3xi8>
}

// -----

/// x * 1 -> x for floats.
// CHECK-LABEL: func.func @fold_float_multiply_one
// CHECK-NEXT: return %arg0
func.func @fold_float_multiply_one(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %c = "xhlo.constant"() {value = dense<1.0> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %0 = "xhlo.multiply"(%x, %c) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

/// x * 2 stays.
// CHECK-LABEL: func.func @no_fold_float_multiply_two
// CHECK: "xhlo.multiply"(%arg0, %0)
func.func @no_fold_float_multiply_two(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %c = "xhlo.constant"() {value = dense<2.0> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %0 = "xhlo.multiply"(%x, %c) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

/// 1 * x -> x for unsigned integers.
// CHECK-LABEL: func.func @fold_uint_one_multiply
// CHECK-NEXT: return %arg0
func.func @fold_uint_one_multiply(%x: tensor<4xui16>) -> tensor<4xui16> {
  %c = "xhlo.constant"() {value = dense<1> : tensor<4xui16>} : () -> tensor<4xui16>
  %0 = "xhlo.multiply"(%c, %x) : (tensor<4xui16>, tensor<4xui16>) -> tensor<4xui16>
  return %0 : tensor<4xui16>
}

// -----

/// x * 0 -> 0 for integers.
// CHECK-LABEL: func.func @fold_int_multiply_zero
// CHECK-NEXT: %[[ZERO:.*]] = "xhlo.constant"() {value = dense<0> : tensor<4xi32>}
// CHECK-NEXT: return %[[ZERO]]
func.func @fold_int_multiply_zero(%x: tensor<4xi32>) -> tensor<4xi32> {
  %c = "xhlo.constant"() {value = dense<0> : tensor<4xi32>} : () -> tensor<4xi32>
  %0 = "xhlo.multiply"(%x, %c) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

/// Float x * 0 stays: NaN * 0 is NaN and -1.0 * 0.0 is -0.0.
// CHECK-LABEL: func.func @no_fold_float_multiply_zero
// CHECK: "xhlo.multiply"(%arg0, %0)
func.func @no_fold_float_multiply_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "xhlo.constant"() {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "xhlo.multiply"(%x, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// x / 1 -> x for floats.
// CHECK-LABEL: func.func @fold_divide_one
// CHECK-NEXT: return %arg0
func.func @fold_divide_one(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %c = "xhlo.constant"() {value = dense<1.0> : tensor<4xbf16>} : () -> tensor<4xbf16>
  %0 = "xhlo.divide"(%x, %c) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

/// Float x / c -> x * (1 / c), as XLA rewrites it (exact here: c is a power of two).
// CHECK-LABEL: func.func @fold_divide_by_constant
// CHECK-NEXT: %[[C:.*]] = "xhlo.constant"() {value = dense<2.500000e-01> : tensor<4xf32>}
// CHECK-NEXT: %[[M:.*]] = "xhlo.multiply"(%arg0, %[[C]])
// CHECK-NEXT: return %[[M]]
func.func @fold_divide_by_constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "xhlo.constant"() {value = dense<4.0> : tensor<f32>} : () -> tensor<f32>
  %b = "xhlo.broadcast"(%c) {dimensions = array<i64>} : (tensor<f32>) -> tensor<4xf32>
  %0 = "xhlo.divide"(%x, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// Integer x / c stays no multiply: it rounds toward zero (by a power of two it becomes
/// shifts, below).
// CHECK-LABEL: func.func @no_fold_int_divide_by_constant
// CHECK: "xhlo.divide"(%arg0, %0)
func.func @no_fold_int_divide_by_constant(%x: tensor<4xi32>) -> tensor<4xi32> {
  %c = "xhlo.constant"() {value = dense<5> : tensor<4xi32>} : () -> tensor<4xi32>
  %0 = "xhlo.divide"(%x, %c) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

/// 1 / x stays: it is the reciprocal.
// CHECK-LABEL: func.func @no_fold_one_divide
// CHECK: "xhlo.divide"(%0, %arg0)
func.func @no_fold_one_divide(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "xhlo.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "xhlo.divide"(%c, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// -(-x) -> x; four negations fold away over two rounds of the fixed point.
// CHECK-LABEL: func.func @fold_double_negate
// CHECK-NEXT: return %arg0
func.func @fold_double_negate(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.negate"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "xhlo.negate"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "xhlo.negate"(%2) : (tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

/// -(|-x|) stays: only a negate of a negate folds.
// CHECK-LABEL: func.func @no_fold_negate_of_abs
// CHECK: "xhlo.negate"(%arg0)
// CHECK: "xhlo.abs"
// CHECK: "xhlo.negate"
func.func @no_fold_negate_of_abs(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.abs"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "xhlo.negate"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

/// not(not(p)) -> p for i1.
// CHECK-LABEL: func.func @fold_double_not
// CHECK-NEXT: return %arg0
func.func @fold_double_not(%p: tensor<4xi1>) -> tensor<4xi1> {
  %0 = "xhlo.not"(%p) : (tensor<4xi1>) -> tensor<4xi1>
  %1 = "xhlo.not"(%0) : (tensor<4xi1>) -> tensor<4xi1>
  return %1 : tensor<4xi1>
}

// -----

/// not(and(p, q)) stays.
// CHECK-LABEL: func.func @no_fold_not_of_and
// CHECK: "xhlo.and"(%arg0, %arg1)
// CHECK: "xhlo.not"
func.func @no_fold_not_of_and(%p: tensor<4xi1>, %q: tensor<4xi1>) -> tensor<4xi1> {
  %0 = "xhlo.and"(%p, %q) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %1 = "xhlo.not"(%0) : (tensor<4xi1>) -> tensor<4xi1>
  return %1 : tensor<4xi1>
}

// -----

/// Integer x <= x is true everywhere.
// CHECK-LABEL: func.func @fold_int_compare_self_le
// CHECK-NEXT: %[[TRUE:.*]] = "xhlo.constant"() {value = dense<true> : tensor<4xi1>}
// CHECK-NEXT: return %[[TRUE]]
func.func @fold_int_compare_self_le(%x: tensor<4xi32>) -> tensor<4xi1> {
  %0 = "xhlo.compare"(%x, %x) {comparison_direction = "LE", compare_type = "SIGNED"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

/// Integer x != x is false everywhere.
// CHECK-LABEL: func.func @fold_int_compare_self_ne
// CHECK-NEXT: %[[FALSE:.*]] = "xhlo.constant"() {value = dense<false> : tensor<4xi1>}
// CHECK-NEXT: return %[[FALSE]]
func.func @fold_int_compare_self_ne(%x: tensor<4xi32>) -> tensor<4xi1> {
  %0 = "xhlo.compare"(%x, %x) {comparison_direction = "NE", compare_type = "SIGNED"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

/// Float x == x stays: it is false for NaN.
// CHECK-LABEL: func.func @no_fold_float_compare_self
// CHECK: "xhlo.compare"(%arg0, %arg0)
func.func @no_fold_float_compare_self(%x: tensor<4xf32>) -> tensor<4xi1> {
  %0 = "xhlo.compare"(%x, %x) {comparison_direction = "EQ", compare_type = "FLOAT"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

/// Integer x < y stays for distinct operands.
// CHECK-LABEL: func.func @no_fold_int_compare_different
// CHECK: "xhlo.compare"(%arg0, %arg1)
func.func @no_fold_int_compare_different(%x: tensor<4xi32>, %y: tensor<4xi32>) -> tensor<4xi1> {
  %0 = "xhlo.compare"(%x, %y) {comparison_direction = "LT", compare_type = "SIGNED"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

/// select(true, x, y) -> x, with a splat predicate tensor.
// CHECK-LABEL: func.func @fold_select_true
// CHECK-NEXT: return %arg0
func.func @fold_select_true(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %p = "xhlo.constant"() {value = dense<true> : tensor<4xi1>} : () -> tensor<4xi1>
  %0 = "xhlo.select"(%p, %x, %y) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// select(false, x, y) -> y, with a scalar predicate.
// CHECK-LABEL: func.func @fold_select_false_scalar
// CHECK-NEXT: return %arg1
func.func @fold_select_false_scalar(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %p = "xhlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
  %0 = "xhlo.select"(%p, %x, %y) : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// select with a mixed constant predicate stays.
// CHECK-LABEL: func.func @no_fold_select_mixed_predicate
// CHECK: "xhlo.select"(%0, %arg0, %arg1)
func.func @no_fold_select_mixed_predicate(%x: tensor<2xf32>, %y: tensor<2xf32>) -> tensor<2xf32> {
  %p = "xhlo.constant"() {value = dense<[true, false]> : tensor<2xi1>} : () -> tensor<2xi1>
  %0 = "xhlo.select"(%p, %x, %y) : (tensor<2xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

/// select(p, x, x) -> x.
// CHECK-LABEL: func.func @fold_select_same_operands
// CHECK-NEXT: return %arg1
func.func @fold_select_same_operands(%p: tensor<4xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.select"(%p, %x, %x) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// select(p, x, y) stays with a runtime predicate and distinct operands.
// CHECK-LABEL: func.func @no_fold_select_different_operands
// CHECK: "xhlo.select"(%arg0, %arg1, %arg2)
func.func @no_fold_select_different_operands(%p: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.select"(%p, %x, %y) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// reshape to the operand's own type -> x.
// CHECK-LABEL: func.func @fold_reshape_identity
// CHECK-NEXT: return %arg0
func.func @fold_reshape_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.reshape"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A reshape that changes the shape stays.
// CHECK-LABEL: func.func @no_fold_reshape_new_shape
// CHECK: "xhlo.reshape"(%arg0) : (tensor<2x3xf32>) -> tensor<3x2xf32>
func.func @no_fold_reshape_new_shape(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = "xhlo.reshape"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

/// reshape(reshape(x)) -> reshape(x).
// CHECK-LABEL: func.func @fold_reshape_of_reshape
// CHECK-NEXT: %[[R:.*]] = "xhlo.reshape"(%arg0) : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: return %[[R]]
func.func @fold_reshape_of_reshape(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = "xhlo.reshape"(%x) : (tensor<2x3xf32>) -> tensor<6xf32>
  %1 = "xhlo.reshape"(%0) : (tensor<6xf32>) -> tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}

// -----

/// reshape(transpose(x)) stays: the transpose reorders elements.
// CHECK-LABEL: func.func @no_fold_reshape_of_transpose
// CHECK: "xhlo.transpose"(%arg0)
// CHECK: "xhlo.reshape"
func.func @no_fold_reshape_of_transpose(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = "xhlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = "xhlo.reshape"(%0) : (tensor<3x2xf32>) -> tensor<6xf32>
  return %1 : tensor<6xf32>
}

// -----

/// transpose with the identity permutation -> x.
// CHECK-LABEL: func.func @fold_transpose_identity
// CHECK-NEXT: return %arg0
func.func @fold_transpose_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.transpose"(%x) {permutation = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A transpose that swaps dimensions stays, even when the shape does not change.
// CHECK-LABEL: func.func @no_fold_transpose_swap
// CHECK: "xhlo.transpose"(%arg0) {permutation = array<i64: 1, 0>}
func.func @no_fold_transpose_swap(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = "xhlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

/// transpose(transpose(x, p), q) -> transpose(x, p o q): [1, 2, 0] then [1, 2, 0] is [2, 0, 1].
// CHECK-LABEL: func.func @fold_transpose_of_transpose
// CHECK-NEXT: %[[T:.*]] = "xhlo.transpose"(%arg0) {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[T]]
func.func @fold_transpose_of_transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = "xhlo.transpose"(%x) {permutation = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %1 = "xhlo.transpose"(%0) {permutation = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// -----

/// transpose(transpose(x, [1, 0]), [1, 0]) -> x.
// CHECK-LABEL: func.func @fold_transpose_round_trip
// CHECK-NEXT: return %arg0
func.func @fold_transpose_round_trip(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = "xhlo.transpose"(%0) {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

/// transpose(dot(a, b)) swapping the free dimensions -> dot(b, a), contracting dimensions
/// and precisions swapped with the operands.
// CHECK-LABEL: func.func @fold_transpose_of_dot
// CHECK-NEXT: %[[D:.*]] = "xhlo.dot"(%arg1, %arg0) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}, precision_config = ["HIGHEST", "DEFAULT"]} : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
// CHECK-NEXT: return %[[D]]
func.func @fold_transpose_of_dot(%a: tensor<3x2xf32>, %b: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 0>, rhs_contracting_dimensions = array<i64: 1>}, precision_config = ["DEFAULT", "HIGHEST"]} : (tensor<3x2xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %1 = "xhlo.transpose"(%0) {permutation = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %1 : tensor<4x2xf32>
}

// -----

/// A batched dot: the batch dimension stays first, the free ones swap.
// CHECK-LABEL: func.func @fold_transpose_of_batched_dot
// CHECK-NEXT: %[[D:.*]] = "xhlo.dot"(%arg1, %arg0) {dot_dimension_numbers = {lhs_batching_dimensions = array<i64: 1>, lhs_contracting_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 0>, rhs_contracting_dimensions = array<i64: 2>}} : (tensor<5x6x4xf32>, tensor<6x3x5xf32>) -> tensor<6x4x3xf32>
// CHECK-NEXT: return %[[D]]
func.func @fold_transpose_of_batched_dot(%a: tensor<6x3x5xf32>, %b: tensor<5x6x4xf32>) -> tensor<6x4x3xf32> {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 1>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<6x3x5xf32>, tensor<5x6x4xf32>) -> tensor<6x3x4xf32>
  %1 = "xhlo.transpose"(%0) {permutation = array<i64: 0, 2, 1>} : (tensor<6x3x4xf32>) -> tensor<6x4x3xf32>
  return %1 : tensor<6x4x3xf32>
}

// -----

/// The dot stays when another op reads it (two dots would compute it twice), and when the
/// transpose moves the batch dimension.
// CHECK-LABEL: func.func @no_fold_transpose_of_shared_or_batch_moving_dot
// CHECK: "xhlo.dot"(%arg0, %arg1)
// CHECK: "xhlo.transpose"
// CHECK: "xhlo.dot"(%arg2, %arg3)
// CHECK: "xhlo.transpose"
func.func @no_fold_transpose_of_shared_or_batch_moving_dot(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<6x2x3xf32>, %d: tensor<6x3x4xf32>) -> (tensor<4x2xf32>, tensor<2x4xf32>, tensor<2x6x4xf32>) {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = "xhlo.transpose"(%0) {permutation = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %2 = "xhlo.dot"(%c, %d) {dot_dimension_numbers = {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 0>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 1>}} : (tensor<6x2x3xf32>, tensor<6x3x4xf32>) -> tensor<6x2x4xf32>
  %3 = "xhlo.transpose"(%2) {permutation = array<i64: 1, 0, 2>} : (tensor<6x2x4xf32>) -> tensor<2x6x4xf32>
  return %1, %0, %3 : tensor<4x2xf32>, tensor<2x4xf32>, tensor<2x6x4xf32>
}

// -----

/// transpose(reshape(x)) stays.
// CHECK-LABEL: func.func @no_fold_transpose_of_reshape
// CHECK: "xhlo.reshape"(%arg0)
// CHECK: "xhlo.transpose"
func.func @no_fold_transpose_of_reshape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.reshape"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = "xhlo.transpose"(%0) {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

/// broadcast to the same shape with dimensions 0..n-1 -> x.
// CHECK-LABEL: func.func @fold_broadcast_identity
// CHECK-NEXT: return %arg0
func.func @fold_broadcast_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A broadcast that permutes dimensions stays, though the shape does not change.
// CHECK-LABEL: func.func @no_fold_broadcast_permuting
// CHECK: "xhlo.broadcast"(%arg0) {dimensions = array<i64: 1, 0>}
func.func @no_fold_broadcast_permuting(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

/// broadcast(broadcast(x, [0]), [0, 2]) -> broadcast(x, [0]).
// CHECK-LABEL: func.func @fold_broadcast_of_broadcast
// CHECK-NEXT: %[[B:.*]] = "xhlo.broadcast"(%arg0) {dimensions = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x4x3xf32>
// CHECK-NEXT: return %[[B]]
func.func @fold_broadcast_of_broadcast(%x: tensor<2xf32>) -> tensor<2x4x3xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x3xf32>
  %1 = "xhlo.broadcast"(%0) {dimensions = array<i64: 0, 2>} : (tensor<2x3xf32>) -> tensor<2x4x3xf32>
  return %1 : tensor<2x4x3xf32>
}

// -----

/// broadcast(transpose(x)) stays.
// CHECK-LABEL: func.func @no_fold_broadcast_of_transpose
// CHECK: "xhlo.transpose"(%arg0)
// CHECK: "xhlo.broadcast"
func.func @no_fold_broadcast_of_transpose(%x: tensor<2x3xf32>) -> tensor<4x3x2xf32> {
  %0 = "xhlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = "xhlo.broadcast"(%0) {dimensions = array<i64: 1, 2>} : (tensor<3x2xf32>) -> tensor<4x3x2xf32>
  return %1 : tensor<4x3x2xf32>
}

// -----

/// broadcast of a splat constant -> a splat constant of the (small) result type.
// CHECK-LABEL: func.func @fold_broadcast_of_splat
// CHECK-NEXT: %[[C:.*]] = "xhlo.constant"() {value = dense<2.500000e+00> : tensor<2x4xf32>}
// CHECK-NEXT: return %[[C]]
func.func @fold_broadcast_of_splat() -> tensor<2x4xf32> {
  %c = "xhlo.constant"() {value = dense<2.5> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.broadcast"(%c) {dimensions = array<i64>} : (tensor<f32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

/// A large broadcast of a splat stays a broadcast: a constant would be a 512-byte buffer.
// CHECK-LABEL: func.func @no_fold_broadcast_of_splat_large
// CHECK: "xhlo.broadcast"
func.func @no_fold_broadcast_of_splat_large() -> tensor<8x16xf32> {
  %c = "xhlo.constant"() {value = dense<2.5> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.broadcast"(%c) {dimensions = array<i64>} : (tensor<f32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

/// broadcast of a constant that is not a splat stays.
// CHECK-LABEL: func.func @no_fold_broadcast_of_non_splat
// CHECK: "xhlo.broadcast"(%0) {dimensions = array<i64: 1>}
func.func @no_fold_broadcast_of_non_splat() -> tensor<2x3xf32> {
  %c = "xhlo.constant"() {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %0 = "xhlo.broadcast"(%c) {dimensions = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// x + broadcast(0) -> x: the broadcast becomes a splat, then the add folds (integers).
// CHECK-LABEL: func.func @fold_add_broadcast_zero
// CHECK-NEXT: return %arg0
func.func @fold_add_broadcast_zero(%x: tensor<2x3xi32>) -> tensor<2x3xi32> {
  %c = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %0 = "xhlo.broadcast"(%c) {dimensions = array<i64>} : (tensor<i32>) -> tensor<2x3xi32>
  %1 = "xhlo.add"(%x, %0) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  return %1 : tensor<2x3xi32>
}

// -----

/// iota along a dimension of size 1 -> splat 0.
// CHECK-LABEL: func.func @fold_iota_unit_dimension
// CHECK-NEXT: %[[C:.*]] = "xhlo.constant"() {value = dense<0> : tensor<1x4xi32>}
// CHECK-NEXT: return %[[C]]
func.func @fold_iota_unit_dimension() -> tensor<1x4xi32> {
  %0 = "xhlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<1x4xi32>
  return %0 : tensor<1x4xi32>
}

// -----

/// iota along a longer dimension stays.
// CHECK-LABEL: func.func @no_fold_iota
// CHECK: "xhlo.iota"() {iota_dimension = 1 : i64}
func.func @no_fold_iota() -> tensor<1x4xi32> {
  %0 = "xhlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<1x4xi32>
  return %0 : tensor<1x4xi32>
}

// -----

/// slice of the full range with stride 1 -> x.
// CHECK-LABEL: func.func @fold_slice_full
// CHECK-NEXT: return %arg0
func.func @fold_slice_full(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.slice"(%x) {start_indices = array<i64: 0, 0>, limit_indices = array<i64: 2, 3>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// Two zero-padded values side by side along one dimension, added: their concatenation, each
/// part plus the other pad's zero (jax's gradient of two slices of one value).
// CHECK-LABEL: func.func @fold_add_of_adjacent_pads
// CHECK-NEXT: %[[ZA:.*]] = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<2x3xf32>}
// CHECK-NEXT: %[[A:.*]] = "xhlo.add"(%arg0, %[[ZA]])
// CHECK-NEXT: %[[ZB:.*]] = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<2x2xf32>}
// CHECK-NEXT: %[[B:.*]] = "xhlo.add"(%arg1, %[[ZB]])
// CHECK-NEXT: %[[C:.*]] = "xhlo.concatenate"(%[[A]], %[[B]]) {dimension = 1 : i64}
// CHECK-NEXT: return %[[C]]
func.func @fold_add_of_adjacent_pads(%a: tensor<2x3xf32>, %b: tensor<2x2xf32>) -> tensor<2x5xf32> {
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.pad"(%a, %z) {edge_padding_low = array<i64: 0, 0>, edge_padding_high = array<i64: 0, 2>, interior_padding = array<i64: 0, 0>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x5xf32>
  %1 = "xhlo.pad"(%b, %z) {edge_padding_low = array<i64: 0, 3>, edge_padding_high = array<i64: 0, 0>, interior_padding = array<i64: 0, 0>} : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x5xf32>
  %2 = "xhlo.add"(%0, %1) : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %2 : tensor<2x5xf32>
}

// -----

/// Adjacent but not covering the dimension (two of an LSTM's four gates): the concatenation,
/// padded with the sum of the two zeros.
// CHECK-LABEL: func.func @fold_add_of_adjacent_pads_inside
// CHECK: %[[C:.*]] = "xhlo.concatenate"(%{{.*}}, %{{.*}}) {dimension = 0 : i64} : (tensor<2x4xi32>, tensor<3x4xi32>) -> tensor<5x4xi32>
// CHECK: "xhlo.pad"(%[[C]], %{{.*}}) {edge_padding_high = array<i64: 1, 0>, edge_padding_low = array<i64: 2, 0>, interior_padding = array<i64: 0, 0>}
func.func @fold_add_of_adjacent_pads_inside(%a: tensor<3x4xi32>, %b: tensor<2x4xi32>) -> tensor<8x4xi32> {
  %z = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %0 = "xhlo.pad"(%a, %z) {edge_padding_low = array<i64: 4, 0>, edge_padding_high = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>} : (tensor<3x4xi32>, tensor<i32>) -> tensor<8x4xi32>
  %1 = "xhlo.pad"(%b, %z) {edge_padding_low = array<i64: 2, 0>, edge_padding_high = array<i64: 4, 0>, interior_padding = array<i64: 0, 0>} : (tensor<2x4xi32>, tensor<i32>) -> tensor<8x4xi32>
  %2 = "xhlo.add"(%0, %1) : (tensor<8x4xi32>, tensor<8x4xi32>) -> tensor<8x4xi32>
  return %2 : tensor<8x4xi32>
}

// -----

/// A chain of adds of adjacent pads (jax's gradient of a stack's slices, one pad per slice):
/// one flat concatenate, one add a part, in one run (the sum of two pads' zeros was an add
/// that waited for constant folding, one pad more per round of the pipeline).
// CHECK-LABEL: func.func @fold_chain_of_adds_of_adjacent_pads
// CHECK-COUNT-3: "xhlo.add"
// CHECK-NEXT: "xhlo.concatenate"(%1, %3, %5) {dimension = 0 : i64} : (tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
// CHECK-NOT: "xhlo.add"
// CHECK-NOT: "xhlo.pad"
func.func @fold_chain_of_adds_of_adjacent_pads(%a: tensor<1x2xf32>, %b: tensor<1x2xf32>, %c: tensor<1x2xf32>) -> tensor<3x2xf32> {
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.pad"(%a, %z) {edge_padding_low = array<i64: 0, 0>, edge_padding_high = array<i64: 2, 0>, interior_padding = array<i64: 0, 0>} : (tensor<1x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %1 = "xhlo.pad"(%b, %z) {edge_padding_low = array<i64: 1, 0>, edge_padding_high = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>} : (tensor<1x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %2 = "xhlo.pad"(%c, %z) {edge_padding_low = array<i64: 2, 0>, edge_padding_high = array<i64: 0, 0>, interior_padding = array<i64: 0, 0>} : (tensor<1x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %3 = "xhlo.add"(%0, %1) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %4 = "xhlo.add"(%3, %2) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %4 : tensor<3x2xf32>
}

// -----

/// The same with pads of -0.0 and +0.0: the outer pad's value is their sum, +0.0.
// CHECK-LABEL: func.func @fold_chain_of_adds_of_adjacent_pads_signed_zeros
// CHECK: %[[Z:.*]] = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<f32>}
// CHECK: %[[C:.*]] = "xhlo.concatenate"(%{{.*}}, %{{.*}}, %arg2) {dimension = 0 : i64}
// CHECK-NEXT: "xhlo.pad"(%[[C]], %[[Z]]) {edge_padding_high = array<i64: 1, 0>, edge_padding_low = array<i64: 0, 0>
func.func @fold_chain_of_adds_of_adjacent_pads_signed_zeros(%a: tensor<1x2xf32>, %b: tensor<1x2xf32>, %c: tensor<1x2xf32>) -> tensor<4x2xf32> {
  %n = "xhlo.constant"() {value = dense<-0.0> : tensor<f32>} : () -> tensor<f32>
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.pad"(%a, %n) {edge_padding_low = array<i64: 0, 0>, edge_padding_high = array<i64: 3, 0>, interior_padding = array<i64: 0, 0>} : (tensor<1x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %1 = "xhlo.pad"(%b, %n) {edge_padding_low = array<i64: 1, 0>, edge_padding_high = array<i64: 2, 0>, interior_padding = array<i64: 0, 0>} : (tensor<1x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %2 = "xhlo.pad"(%c, %z) {edge_padding_low = array<i64: 2, 0>, edge_padding_high = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>} : (tensor<1x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %3 = "xhlo.add"(%0, %1) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %4 = "xhlo.add"(%3, %2) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  return %4 : tensor<4x2xf32>
}

// -----

/// Padded values with a gap between them, or padded along two dimensions, stay.
// CHECK-LABEL: func.func @no_fold_add_of_pads_apart
// CHECK: "xhlo.add"(%1, %2)
// CHECK: "xhlo.add"(%1, %4)
func.func @no_fold_add_of_pads_apart(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>, %c: tensor<1x2xf32>) -> (tensor<2x5xf32>, tensor<2x5xf32>) {
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.pad"(%a, %z) {edge_padding_low = array<i64: 0, 0>, edge_padding_high = array<i64: 0, 3>, interior_padding = array<i64: 0, 0>} : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x5xf32>
  %1 = "xhlo.pad"(%b, %z) {edge_padding_low = array<i64: 0, 3>, edge_padding_high = array<i64: 0, 0>, interior_padding = array<i64: 0, 0>} : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x5xf32>
  %2 = "xhlo.add"(%0, %1) : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %3 = "xhlo.pad"(%c, %z) {edge_padding_low = array<i64: 1, 2>, edge_padding_high = array<i64: 0, 1>, interior_padding = array<i64: 0, 0>} : (tensor<1x2xf32>, tensor<f32>) -> tensor<2x5xf32>
  %4 = "xhlo.add"(%0, %3) : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %2, %4 : tensor<2x5xf32>, tensor<2x5xf32>
}

// -----

/// A slice inside one input of a concatenate slices that input (jax's threefry key schedule).
// CHECK-LABEL: func.func @fold_slice_of_concatenate
// CHECK-NEXT: %[[S:.*]] = "xhlo.slice"(%arg1) {limit_indices = array<i64: 2, 2>, start_indices = array<i64: 0, 1>, strides = array<i64: 1, 2>}
// CHECK-NEXT: return %[[S]]
func.func @fold_slice_of_concatenate(%a: tensor<2x2xf32>, %b: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %0 = "xhlo.concatenate"(%a, %b) {dimension = 1 : i64} : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x5xf32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 0, 3>, limit_indices = array<i64: 2, 5>, strides = array<i64: 1, 2>} : (tensor<2x5xf32>) -> tensor<2x1xf32>
  return %1 : tensor<2x1xf32>
}

// -----

/// A slice across two inputs of a concatenate is their slices concatenated (jnp.pad's reflect
/// mode and jnp.roll slice their own concatenates).
// CHECK-LABEL: func.func @fold_slice_across_concatenated_inputs
// CHECK-NEXT: %[[A:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 2, 2>, start_indices = array<i64: 0, 1>, strides = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %[[B:.*]] = "xhlo.slice"(%arg1) {limit_indices = array<i64: 2, 1>, start_indices = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %[[C:.*]] = "xhlo.concatenate"(%[[A]], %[[B]]) {dimension = 1 : i64}
// CHECK-NEXT: return %[[C]]
func.func @fold_slice_across_concatenated_inputs(%a: tensor<2x2xf32>, %b: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %0 = "xhlo.concatenate"(%a, %b) {dimension = 1 : i64} : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x5xf32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 0, 1>, limit_indices = array<i64: 2, 3>, strides = array<i64: 1, 1>} : (tensor<2x5xf32>) -> tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}

// -----

/// A strided slice across three inputs reads two: elements 1, 4, 7 and 10 of a (5) ++ b (7) ++ c
/// (3) are a's 1 and 4, b's 2 and 5; each part keeps the stride.
// CHECK-LABEL: func.func @fold_strided_slice_across_concatenated_inputs
// CHECK-NEXT: %[[A:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 5>, start_indices = array<i64: 1>, strides = array<i64: 3>} : (tensor<5xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[B:.*]] = "xhlo.slice"(%arg1) {limit_indices = array<i64: 6>, start_indices = array<i64: 2>, strides = array<i64: 3>} : (tensor<7xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[C:.*]] = "xhlo.concatenate"(%[[A]], %[[B]]) {dimension = 0 : i64}
// CHECK-NEXT: return %[[C]]
func.func @fold_strided_slice_across_concatenated_inputs(%a: tensor<5xf32>, %b: tensor<7xf32>, %c: tensor<3xf32>) -> tensor<4xf32> {
  %0 = "xhlo.concatenate"(%a, %b, %c) {dimension = 0 : i64} : (tensor<5xf32>, tensor<7xf32>, tensor<3xf32>) -> tensor<15xf32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 1>, limit_indices = array<i64: 12>, strides = array<i64: 3>} : (tensor<15xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

/// A slice that drops elements stays.
// CHECK-LABEL: func.func @no_fold_slice_partial
// CHECK: "xhlo.slice"(%arg0)
func.func @no_fold_slice_partial(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %0 = "xhlo.slice"(%x) {start_indices = array<i64: 0, 1>, limit_indices = array<i64: 2, 3>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

/// A dynamic slice as large as its operand is the operand: every start clamps to 0 (a 0-d one too).
// CHECK-LABEL: func.func @fold_dynamic_slice_full
// CHECK-NEXT: return %arg0, %arg1
func.func @fold_dynamic_slice_full(%x: tensor<2x3xf32>, %s: tensor<f32>, %i: tensor<i32>) -> (tensor<2x3xf32>, tensor<f32>) {
  %0 = "xhlo.dynamic_slice"(%x, %i, %i) {slice_sizes = array<i64: 2, 3>} : (tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x3xf32>
  %1 = "xhlo.dynamic_slice"(%s) {slice_sizes = array<i64>} : (tensor<f32>) -> tensor<f32>
  return %0, %1 : tensor<2x3xf32>, tensor<f32>
}

// -----

/// A smaller dynamic slice stays.
// CHECK-LABEL: func.func @no_fold_dynamic_slice_partial
// CHECK: "xhlo.dynamic_slice"(%arg0, %arg1, %arg1)
func.func @no_fold_dynamic_slice_partial(%x: tensor<2x3xf32>, %i: tensor<i32>) -> tensor<2x2xf32> {
  %0 = "xhlo.dynamic_slice"(%x, %i, %i) {slice_sizes = array<i64: 2, 2>} : (tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

/// A dynamic update slice writing an update as large as its operand is the update.
// CHECK-LABEL: func.func @fold_dynamic_update_slice_full
// CHECK-NEXT: return %arg1, %arg3
func.func @fold_dynamic_update_slice_full(%x: tensor<2x3xf32>, %u: tensor<2x3xf32>, %s: tensor<i32>, %t: tensor<i32>, %i: tensor<i32>) -> (tensor<2x3xf32>, tensor<i32>) {
  %0 = "xhlo.dynamic_update_slice"(%x, %u, %i, %i) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x3xf32>
  %1 = "xhlo.dynamic_update_slice"(%s, %t) : (tensor<i32>, tensor<i32>) -> tensor<i32>
  return %0, %1 : tensor<2x3xf32>, tensor<i32>
}

// -----

/// A dynamic update slice writing an update with no elements is its operand.
// CHECK-LABEL: func.func @fold_dynamic_update_slice_empty
// CHECK-NEXT: return %arg0
func.func @fold_dynamic_update_slice_empty(%x: tensor<2x3xf32>, %u: tensor<0x3xf32>, %i: tensor<i32>) -> tensor<2x3xf32> {
  %0 = "xhlo.dynamic_update_slice"(%x, %u, %i, %i) : (tensor<2x3xf32>, tensor<0x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A smaller update stays.
// CHECK-LABEL: func.func @no_fold_dynamic_update_slice_partial
// CHECK: "xhlo.dynamic_update_slice"(%arg0, %arg1, %arg2, %arg2)
func.func @no_fold_dynamic_update_slice_partial(%x: tensor<2x3xf32>, %u: tensor<1x3xf32>, %i: tensor<i32>) -> tensor<2x3xf32> {
  %0 = "xhlo.dynamic_update_slice"(%x, %u, %i, %i) : (tensor<2x3xf32>, tensor<1x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// slice(slice(x)) -> one slice: [2:10:2] then [1:4:2] reads elements 4 and 8 of x: [4:9:4].
// CHECK-LABEL: func.func @fold_slice_of_slice
// CHECK-NEXT: %[[S:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 9>, start_indices = array<i64: 4>, strides = array<i64: 4>} : (tensor<12xf32>) -> tensor<2xf32>
// CHECK-NEXT: return %[[S]]
func.func @fold_slice_of_slice(%x: tensor<12xf32>) -> tensor<2xf32> {
  %0 = "xhlo.slice"(%x) {start_indices = array<i64: 2>, limit_indices = array<i64: 10>, strides = array<i64: 2>} : (tensor<12xf32>) -> tensor<4xf32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 1>, limit_indices = array<i64: 4>, strides = array<i64: 2>} : (tensor<4xf32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

/// slice(reverse(x)) -> reverse(slice(x)): [1:8:3] of the reverse takes x's 10, 7 and 4, so
/// x's [4:11:3] reversed.
// CHECK-LABEL: func.func @fold_slice_of_reverse
// CHECK-NEXT: %[[S:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 11>, start_indices = array<i64: 4>, strides = array<i64: 3>} : (tensor<12xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[R:.*]] = "xhlo.reverse"(%[[S]]) {dimensions = array<i64: 0>}
// CHECK-NEXT: return %[[R]]
func.func @fold_slice_of_reverse(%x: tensor<12xf32>) -> tensor<3xf32> {
  %0 = "xhlo.reverse"(%x) {dimensions = array<i64: 0>} : (tensor<12xf32>) -> tensor<12xf32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 1>, limit_indices = array<i64: 8>, strides = array<i64: 3>} : (tensor<12xf32>) -> tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

/// slice(broadcast(x)) -> broadcast(slice(x)): x's dimension 0 is the result's dimension 1,
/// cut [1:7:2]; its dimension 1 of size 1, which the broadcast expands into dimension 2,
/// stays whole.
// CHECK-LABEL: func.func @fold_slice_of_broadcast
// CHECK-NEXT: %[[S:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 7, 1>, start_indices = array<i64: 1, 0>, strides = array<i64: 2, 1>} : (tensor<8x1xf32>) -> tensor<3x1xf32>
// CHECK-NEXT: %[[B:.*]] = "xhlo.broadcast"(%[[S]]) {dimensions = array<i64: 1, 2>} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[B]]
func.func @fold_slice_of_broadcast(%x: tensor<8x1xf32>) -> tensor<2x3x4xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 1, 2>} : (tensor<8x1xf32>) -> tensor<5x8x6xf32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 0, 1, 2>, limit_indices = array<i64: 2, 7, 6>, strides = array<i64: 1, 2, 1>} : (tensor<5x8x6xf32>) -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

/// A slice cutting only the dimensions the broadcast adds slices nothing of x.
// CHECK-LABEL: func.func @fold_slice_of_broadcast_keeping_x_whole
// CHECK-NEXT: %[[B:.*]] = "xhlo.broadcast"(%arg0) {dimensions = array<i64: 1>} : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: return %[[B]]
func.func @fold_slice_of_broadcast_keeping_x_whole(%x: tensor<8xf32>) -> tensor<1x8xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 1>} : (tensor<8xf32>) -> tensor<100x8xf32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 3, 0>, limit_indices = array<i64: 4, 8>, strides = array<i64: 1, 1>} : (tensor<100x8xf32>) -> tensor<1x8xf32>
  return %1 : tensor<1x8xf32>
}

// -----

/// transpose(broadcast(x, [1]), [1, 0]) -> broadcast(x, [0]): the transpose moves only copies.
// CHECK-LABEL: func.func @fold_transpose_of_broadcast
// CHECK-NEXT: %[[B:.*]] = "xhlo.broadcast"(%arg0) {dimensions = array<i64: 0>} : (tensor<10xf32>) -> tensor<10x100xf32>
// CHECK-NEXT: return %[[B]]
func.func @fold_transpose_of_broadcast(%x: tensor<10xf32>) -> tensor<10x100xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 1>} : (tensor<10xf32>) -> tensor<100x10xf32>
  %1 = "xhlo.transpose"(%0) {permutation = array<i64: 1, 0>} : (tensor<100x10xf32>) -> tensor<10x100xf32>
  return %1 : tensor<10x100xf32>
}

// -----

/// A transpose swapping two of x's dimensions transposes x itself: left as it is.
// CHECK-LABEL: func.func @transpose_of_broadcast_swapping_operand_dimensions
// CHECK-NEXT: "xhlo.broadcast"
// CHECK-NEXT: "xhlo.transpose"
func.func @transpose_of_broadcast_swapping_operand_dimensions(%x: tensor<3x4xf32>) -> tensor<4x3x5xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 0, 1>} : (tensor<3x4xf32>) -> tensor<3x4x5xf32>
  %1 = "xhlo.transpose"(%0) {permutation = array<i64: 1, 0, 2>} : (tensor<3x4x5xf32>) -> tensor<4x3x5xf32>
  return %1 : tensor<4x3x5xf32>
}

// -----

/// reshape(broadcast(x)) of a one-element x -> broadcast(x as a scalar).
// CHECK-LABEL: func.func @fold_reshape_of_one_element_broadcast
// CHECK-NEXT: %[[S:.*]] = "xhlo.reshape"(%arg0) : (tensor<1x1xf32>) -> tensor<f32>
// CHECK-NEXT: %[[B:.*]] = "xhlo.broadcast"(%[[S]]) {dimensions = array<i64>} : (tensor<f32>) -> tensor<6x5xf32>
// CHECK-NEXT: return %[[B]]
func.func @fold_reshape_of_one_element_broadcast(%x: tensor<1x1xf32>) -> tensor<6x5xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 0, 2>} : (tensor<1x1xf32>) -> tensor<1x30x1xf32>
  %1 = "xhlo.reshape"(%0) : (tensor<1x30x1xf32>) -> tensor<6x5xf32>
  return %1 : tensor<6x5xf32>
}

// -----

/// A reshape of a broadcast of several elements moves them: left as it is.
// CHECK-LABEL: func.func @reshape_of_broadcast_of_several_elements
// CHECK-NEXT: "xhlo.broadcast"
// CHECK-NEXT: "xhlo.reshape"
func.func @reshape_of_broadcast_of_several_elements(%x: tensor<2xf32>) -> tensor<6xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 1>} : (tensor<2xf32>) -> tensor<3x2xf32>
  %1 = "xhlo.reshape"(%0) : (tensor<3x2xf32>) -> tensor<6xf32>
  return %1 : tensor<6xf32>
}

// -----

/// reshape(broadcast(x)) adding only a dimension of size 1 -> reshape(x), which is x.
// CHECK-LABEL: func.func @fold_reshape_of_unit_broadcast
// CHECK-NEXT: return %arg0
func.func @fold_reshape_of_unit_broadcast(%x: tensor<6xf32>) -> tensor<6xf32> {
  %0 = "xhlo.broadcast"(%x) {dimensions = array<i64: 1>} : (tensor<6xf32>) -> tensor<1x6xf32>
  %1 = "xhlo.reshape"(%0) : (tensor<1x6xf32>) -> tensor<6xf32>
  return %1 : tensor<6xf32>
}

// -----

/// slice(iota along 0) keeping index 2 of dimension 0 -> broadcast(2) (here small: a splat).
// CHECK-LABEL: func.func @fold_slice_of_iota
// CHECK-NEXT: %[[C:.*]] = "xhlo.constant"() {value = dense<2> : tensor<1x5xi32>} : () -> tensor<1x5xi32>
// CHECK-NEXT: return %[[C]]
func.func @fold_slice_of_iota() -> tensor<1x5xi32> {
  %0 = "xhlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<3x5xi32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 2, 0>, limit_indices = array<i64: 3, 5>, strides = array<i64: 1, 1>} : (tensor<3x5xi32>) -> tensor<1x5xi32>
  return %1 : tensor<1x5xi32>
}

// -----

/// A slice keeping two indices of the iota's dimension is no constant: left as it is.
// CHECK-LABEL: func.func @slice_of_iota_keeping_two_indices
// CHECK-NEXT: "xhlo.iota"
// CHECK-NEXT: "xhlo.slice"
func.func @slice_of_iota_keeping_two_indices() -> tensor<2x5xi32> {
  %0 = "xhlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<3x5xi32>
  %1 = "xhlo.slice"(%0) {start_indices = array<i64: 1, 0>, limit_indices = array<i64: 3, 5>, strides = array<i64: 1, 1>} : (tensor<3x5xi32>) -> tensor<2x5xi32>
  return %1 : tensor<2x5xi32>
}

// -----

/// pow(abs(x), 0.5) -> sqrt(abs(x)): abs is never negative nor -0.
// CHECK-LABEL: func.func @fold_power_of_half_of_abs
// CHECK-NEXT: %[[A:.*]] = "xhlo.abs"(%arg0)
// CHECK-NEXT: %[[S:.*]] = "xhlo.sqrt"(%[[A]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[S]]
func.func @fold_power_of_half_of_abs(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = "xhlo.constant"() {value = dense<5.000000e-01> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "xhlo.abs"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.power"(%0, %h) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

/// pow(x, 0.5) of an x that may be -0 or -inf: pow gives +0 and +inf, sqrt -0 and NaN.
// CHECK-LABEL: func.func @power_of_half_of_any_x
// CHECK: "xhlo.power"
func.func @power_of_half_of_any_x(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = "xhlo.constant"() {value = dense<5.000000e-01> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "xhlo.power"(%x, %h) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// A reduce over one dimension of 3 is its body on the three slices in turn: the argmax of
/// stacked conditions jax's `select` takes (the iota's slices folded to their index).
// CHECK-LABEL: func.func @fold_short_argmax_reduce
// CHECK-NOT: "xhlo.reduce"
// CHECK-NOT: "xhlo.iota"
// CHECK: return
func.func @fold_short_argmax_reduce(%x: tensor<3x5xf32>) -> (tensor<5xf32>, tensor<5xi32>) {
  %i = "xhlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<3x5xi32>
  %ninf = "xhlo.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %zero = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %0:2 = "xhlo.reduce"(%x, %i, %ninf, %zero) ({
  ^bb0(%a: tensor<f32>, %ai: tensor<i32>, %b: tensor<f32>, %bi: tensor<i32>):
    %gt = "xhlo.compare"(%a, %b) {comparison_direction = "GT", compare_type = "FLOAT"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %v = "xhlo.select"(%gt, %a, %b) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
    %j = "xhlo.select"(%gt, %ai, %bi) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%v, %j) : (tensor<f32>, tensor<i32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<3x5xf32>, tensor<3x5xi32>, tensor<f32>, tensor<i32>) -> (tensor<5xf32>, tensor<5xi32>)
  return %0#0, %0#1 : tensor<5xf32>, tensor<5xi32>
}

// -----

/// jax's cumsum over a dimension of 3 (a window of 3 padded by 2 in front) is, per position,
/// the adds of the slices its window covers: x0, x0 + x1, x0 + x1 + x2, concatenated.
// CHECK-LABEL: func.func @fold_short_cumulative_sum
// CHECK-NOT: "xhlo.reduce_window"
// CHECK-COUNT-3: "xhlo.add"
// CHECK-NOT: "xhlo.add"
// CHECK: %[[C:.*]] = "xhlo.concatenate"({{.*}}) {dimension = 0 : i64} : (tensor<1x5xf32>, tensor<1x5xf32>, tensor<1x5xf32>) -> tensor<3x5xf32>
// CHECK: return %[[C]]
func.func @fold_short_cumulative_sum(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %zero = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.reduce_window"(%x, %zero) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {window_dimensions = array<i64: 3, 1>, padding = dense<[[2, 0], [0, 0]]> : tensor<2x2xi64>} : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

/// A window moving along a dimension of 9 stays a reduce_window.
// CHECK-LABEL: func.func @reduce_window_over_a_long_dimension
// CHECK: "xhlo.reduce_window"
func.func @reduce_window_over_a_long_dimension(%x: tensor<9x5xf32>) -> tensor<9x5xf32> {
  %zero = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.reduce_window"(%x, %zero) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {window_dimensions = array<i64: 9, 1>, padding = dense<[[8, 0], [0, 0]]> : tensor<2x2xi64>} : (tensor<9x5xf32>, tensor<f32>) -> tensor<9x5xf32>
  return %0 : tensor<9x5xf32>
}

// -----

/// Slices of a convert that only slices read: each row converted alone, so the slice of the
/// concatenate below it folds to the part it takes.
// CHECK-LABEL: func.func @fold_slice_of_convert_as_convert_of_slice
// CHECK-NOT: "xhlo.concatenate"
// CHECK: %[[A:.*]] = "xhlo.convert"(%arg0) : (tensor<1x5xi1>) -> tensor<1x5xi32>
// CHECK: %[[B:.*]] = "xhlo.convert"(%arg1) : (tensor<1x5xi1>) -> tensor<1x5xi32>
// CHECK: return %[[A]], %[[B]]
func.func @fold_slice_of_convert_as_convert_of_slice(%a: tensor<1x5xi1>, %b: tensor<1x5xi1>) -> (tensor<1x5xi32>, tensor<1x5xi32>) {
  %c = "xhlo.concatenate"(%a, %b) {dimension = 0 : i64} : (tensor<1x5xi1>, tensor<1x5xi1>) -> tensor<2x5xi1>
  %i = "xhlo.convert"(%c) : (tensor<2x5xi1>) -> tensor<2x5xi32>
  %0 = "xhlo.slice"(%i) {start_indices = array<i64: 0, 0>, limit_indices = array<i64: 1, 5>, strides = array<i64: 1, 1>} : (tensor<2x5xi32>) -> tensor<1x5xi32>
  %1 = "xhlo.slice"(%i) {start_indices = array<i64: 1, 0>, limit_indices = array<i64: 2, 5>, strides = array<i64: 1, 1>} : (tensor<2x5xi32>) -> tensor<1x5xi32>
  return %0, %1 : tensor<1x5xi32>, tensor<1x5xi32>
}

// -----

/// A convert read by a slice and by an add is left alone (its slice would compute again what
/// the add's convert computes whole).
// CHECK-LABEL: func.func @convert_read_whole_stays
// CHECK: "xhlo.convert"(%arg0) : (tensor<2x5xi1>) -> tensor<2x5xi32>
// CHECK: "xhlo.slice"
func.func @convert_read_whole_stays(%a: tensor<2x5xi1>) -> (tensor<1x5xi32>, tensor<2x5xi32>) {
  %i = "xhlo.convert"(%a) : (tensor<2x5xi1>) -> tensor<2x5xi32>
  %0 = "xhlo.slice"(%i) {start_indices = array<i64: 0, 0>, limit_indices = array<i64: 1, 5>, strides = array<i64: 1, 1>} : (tensor<2x5xi32>) -> tensor<1x5xi32>
  %1 = "xhlo.add"(%i, %i) : (tensor<2x5xi32>, tensor<2x5xi32>) -> tensor<2x5xi32>
  return %0, %1 : tensor<1x5xi32>, tensor<2x5xi32>
}

// -----

/// A reduced dimension of 9 is longer than SHORT_DIMENSION: the reduce stays.
// CHECK-LABEL: func.func @reduce_over_a_long_dimension
// CHECK: "xhlo.reduce"
func.func @reduce_over_a_long_dimension(%x: tensor<9x5xf32>) -> tensor<5xf32> {
  %zero = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.reduce"(%x, %zero) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<9x5xf32>, tensor<f32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

/// convert to the operand's own type -> x.
// CHECK-LABEL: func.func @fold_convert_same_type
// CHECK-NEXT: return %arg0
func.func @fold_convert_same_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.convert"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

/// A convert that changes the element type stays.
// CHECK-LABEL: func.func @no_fold_convert_new_type
// CHECK: "xhlo.convert"(%arg0) : (tensor<4xf32>) -> tensor<4xf16>
func.func @no_fold_convert_new_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  %0 = "xhlo.convert"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

/// convert(convert(x: i32 -> i64) -> i32) -> x: the widening loses nothing.
// CHECK-LABEL: func.func @fold_convert_round_trip
// CHECK-NEXT: return %arg0
func.func @fold_convert_round_trip(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "xhlo.convert"(%x) : (tensor<4xi32>) -> tensor<4xi64>
  %1 = "xhlo.convert"(%0) : (tensor<4xi64>) -> tensor<4xi32>
  return %1 : tensor<4xi32>
}

// -----

/// convert(convert(x: f32 -> f16) -> f32) stays: f16 rounds.
// CHECK-LABEL: func.func @no_fold_convert_round_trip_narrowing
// CHECK: "xhlo.convert"(%arg0) : (tensor<4xf32>) -> tensor<4xf16>
// CHECK: "xhlo.convert"(%0) : (tensor<4xf16>) -> tensor<4xf32>
func.func @no_fold_convert_round_trip_narrowing(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.convert"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  %1 = "xhlo.convert"(%0) : (tensor<4xf16>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

/// convert(convert(x: i8 -> i16) -> f32) -> convert(x: i8 -> f32): both steps are exact.
// CHECK-LABEL: func.func @fold_convert_widening_chain
// CHECK-NEXT: %[[C:.*]] = "xhlo.convert"(%arg0) : (tensor<4xi8>) -> tensor<4xf32>
// CHECK-NEXT: return %[[C]]
func.func @fold_convert_widening_chain(%x: tensor<4xi8>) -> tensor<4xf32> {
  %0 = "xhlo.convert"(%x) : (tensor<4xi8>) -> tensor<4xi16>
  %1 = "xhlo.convert"(%0) : (tensor<4xi16>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

/// convert(convert(x: i32 -> f32) -> i32) stays: f32 cannot hold every i32.
// CHECK-LABEL: func.func @no_fold_convert_int_float_int
// CHECK: "xhlo.convert"(%arg0) : (tensor<4xi32>) -> tensor<4xf32>
// CHECK: "xhlo.convert"(%0) : (tensor<4xf32>) -> tensor<4xi32>
func.func @no_fold_convert_int_float_int(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "xhlo.convert"(%x) : (tensor<4xi32>) -> tensor<4xf32>
  %1 = "xhlo.convert"(%0) : (tensor<4xf32>) -> tensor<4xi32>
  return %1 : tensor<4xi32>
}

// -----

/// convert(convert(x: i16 -> i32) -> i8) stays: the second step is not exact (and
/// int -> int wraps where float -> int would not).
// CHECK-LABEL: func.func @no_fold_convert_widen_then_narrow
// CHECK: "xhlo.convert"(%arg0) : (tensor<4xi16>) -> tensor<4xi32>
// CHECK: "xhlo.convert"(%0) : (tensor<4xi32>) -> tensor<4xi8>
func.func @no_fold_convert_widen_then_narrow(%x: tensor<4xi16>) -> tensor<4xi8> {
  %0 = "xhlo.convert"(%x) : (tensor<4xi16>) -> tensor<4xi32>
  %1 = "xhlo.convert"(%0) : (tensor<4xi32>) -> tensor<4xi8>
  return %1 : tensor<4xi8>
}

// -----

/// pad with no padding at all -> x.
// CHECK-LABEL: func.func @fold_pad_zero
// CHECK-NEXT: return %arg0
func.func @fold_pad_zero(%x: tensor<2x3xf32>, %v: tensor<f32>) -> tensor<2x3xf32> {
  %0 = "xhlo.pad"(%x, %v) {edge_padding_low = array<i64: 0, 0>, edge_padding_high = array<i64: 0, 0>, interior_padding = array<i64: 0, 0>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// pad with a negative low edge and a positive high edge (a shift) -> the positive part
/// padded, then sliced (XLA's HandlePad).
// CHECK-LABEL: func.func @fold_pad_shift_as_pad_then_slice
// CHECK-NEXT: %[[P:.*]] = "xhlo.pad"(%arg0, %arg1) {edge_padding_high = array<i64: 0, 1>, edge_padding_low = array<i64: 0, 0>, interior_padding = array<i64: 0, 0>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[S:.*]] = "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 2, 4>, start_indices = array<i64: 0, 1>, strides = array<i64: 1, 1>}
// CHECK-NEXT: return %[[S]]
func.func @fold_pad_shift_as_pad_then_slice(%x: tensor<2x3xf32>, %v: tensor<f32>) -> tensor<2x3xf32> {
  %0 = "xhlo.pad"(%x, %v) {edge_padding_low = array<i64: 0, -1>, edge_padding_high = array<i64: 0, 1>, interior_padding = array<i64: 0, 0>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A pad only cutting edges off is a slice (jax's gradient of a causal convolution's pad); with
/// interior padding the interior stays a pad: [a, v, b, v, c] without its first two.
// CHECK-LABEL: func.func @fold_pad_cutting_edges_as_slice
// CHECK-NEXT: %[[S:.*]] = "xhlo.slice"(%arg0) {limit_indices = array<i64: 8, 4100, 32>, start_indices = array<i64: 0, 4, 0>, strides = array<i64: 1, 1, 1>} : (tensor<8x4100x32xf32>) -> tensor<8x4096x32xf32>
// CHECK-NEXT: %[[P:.*]] = "xhlo.pad"(%arg2, %arg1) {edge_padding_high = array<i64: 0>, edge_padding_low = array<i64: 0>, interior_padding = array<i64: 1>} : (tensor<3xf32>, tensor<f32>) -> tensor<5xf32>
// CHECK-NEXT: %[[T:.*]] = "xhlo.slice"(%[[P]]) {limit_indices = array<i64: 5>, start_indices = array<i64: 2>, strides = array<i64: 1>}
// CHECK-NEXT: return %[[S]], %[[T]]
func.func @fold_pad_cutting_edges_as_slice(%x: tensor<8x4100x32xf32>, %v: tensor<f32>, %y: tensor<3xf32>) -> (tensor<8x4096x32xf32>, tensor<3xf32>) {
  %0 = "xhlo.pad"(%x, %v) {edge_padding_low = array<i64: 0, -4, 0>, edge_padding_high = array<i64: 0, 0, 0>, interior_padding = array<i64: 0, 0, 0>} : (tensor<8x4100x32xf32>, tensor<f32>) -> tensor<8x4096x32xf32>
  %1 = "xhlo.pad"(%y, %v) {edge_padding_low = array<i64: -2>, edge_padding_high = array<i64: 0>, interior_padding = array<i64: 1>} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %0, %1 : tensor<8x4096x32xf32>, tensor<3xf32>
}

// -----

/// concatenate of one input -> x.
// CHECK-LABEL: func.func @fold_concatenate_single
// CHECK-NEXT: return %arg0
func.func @fold_concatenate_single(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.concatenate"(%x) {dimension = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// concatenate drops inputs of size 0 along the dimension; one left, it is the result.
// CHECK-LABEL: func.func @fold_concatenate_empty_inputs
// CHECK-NEXT: return %arg1
func.func @fold_concatenate_empty_inputs(%e: tensor<2x0xf32>, %x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.concatenate"(%e, %x, %e) {dimension = 1 : i64} : (tensor<2x0xf32>, tensor<2x3xf32>, tensor<2x0xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A concatenate of a concatenate along the same dimension is one concatenate; along another
/// it stays.
// CHECK-LABEL: func.func @fold_concatenate_of_concatenate
// CHECK-NEXT: %[[J:.*]] = "xhlo.concatenate"(%arg0, %arg1, %arg0, %arg1) {dimension = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[K:.*]] = "xhlo.concatenate"(%arg0, %arg0) {dimension = 0 : i64}
// CHECK-NEXT: %[[L:.*]] = "xhlo.concatenate"(%[[K]], %[[K]]) {dimension = 1 : i64}
// CHECK-NEXT: return %[[J]], %[[L]]
func.func @fold_concatenate_of_concatenate(%x: tensor<2x3xf32>, %y: tensor<2x1xf32>) -> (tensor<2x8xf32>, tensor<4x6xf32>) {
  %0 = "xhlo.concatenate"(%x, %y) {dimension = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %1 = "xhlo.concatenate"(%0, %0) {dimension = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %2 = "xhlo.concatenate"(%x, %x) {dimension = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %3 = "xhlo.concatenate"(%2, %2) {dimension = 1 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x6xf32>
  return %1, %3 : tensor<2x8xf32>, tensor<4x6xf32>
}

// -----

/// A transpose or a reshape adding a unit dimension, the only reader of a concatenate, is the
/// concatenate of its parts transposed or reshaped; a concatenate read by another op too stays.
// CHECK-LABEL: func.func @fold_transposed_concatenate
// CHECK-NEXT: %[[RA:.*]] = "xhlo.reshape"(%arg0) : (tensor<2x3x4xf32>) -> tensor<2x1x3x4xf32>
// CHECK-NEXT: %[[RB:.*]] = "xhlo.reshape"(%arg1) : (tensor<2x3x5xf32>) -> tensor<2x1x3x5xf32>
// CHECK-NEXT: %[[TA:.*]] = "xhlo.transpose"(%[[RA]]) {permutation = array<i64: 1, 2, 0, 3>} : (tensor<2x1x3x4xf32>) -> tensor<1x3x2x4xf32>
// CHECK-NEXT: %[[TB:.*]] = "xhlo.transpose"(%[[RB]]) {permutation = array<i64: 1, 2, 0, 3>} : (tensor<2x1x3x5xf32>) -> tensor<1x3x2x5xf32>
// CHECK-NEXT: %[[C:.*]] = "xhlo.concatenate"(%[[TA]], %[[TB]]) {dimension = 3 : i64} : (tensor<1x3x2x4xf32>, tensor<1x3x2x5xf32>) -> tensor<1x3x2x9xf32>
// CHECK-NEXT: %[[D:.*]] = "xhlo.concatenate"(%arg0, %arg0) {dimension = 0 : i64}
// CHECK-NEXT: %[[T:.*]] = "xhlo.transpose"(%[[D]])
// CHECK-NEXT: return %[[C]], %[[T]], %[[D]]
func.func @fold_transposed_concatenate(%a: tensor<2x3x4xf32>, %b: tensor<2x3x5xf32>) -> (tensor<1x3x2x9xf32>, tensor<3x4x4xf32>, tensor<4x3x4xf32>) {
  %0 = "xhlo.concatenate"(%a, %b) {dimension = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x3x9xf32>
  %1 = "xhlo.reshape"(%0) : (tensor<2x3x9xf32>) -> tensor<2x1x3x9xf32>
  %2 = "xhlo.transpose"(%1) {permutation = array<i64: 1, 2, 0, 3>} : (tensor<2x1x3x9xf32>) -> tensor<1x3x2x9xf32>
  %3 = "xhlo.concatenate"(%a, %a) {dimension = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<4x3x4xf32>
  %4 = "xhlo.transpose"(%3) {permutation = array<i64: 1, 2, 0>} : (tensor<4x3x4xf32>) -> tensor<3x4x4xf32>
  return %2, %4, %3 : tensor<1x3x2x9xf32>, tensor<3x4x4xf32>, tensor<4x3x4xf32>
}

// -----

/// A reshape merging dimensions of a concatenate stays.
// CHECK-LABEL: func.func @no_fold_merged_concatenate
// CHECK: "xhlo.concatenate"
// CHECK-NEXT: "xhlo.reshape"
func.func @no_fold_merged_concatenate(%a: tensor<2x3x4xf32>, %b: tensor<2x3x5xf32>) -> tensor<6x9xf32> {
  %0 = "xhlo.concatenate"(%a, %b) {dimension = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x3x9xf32>
  %1 = "xhlo.reshape"(%0) : (tensor<2x3x9xf32>) -> tensor<6x9xf32>
  return %1 : tensor<6x9xf32>
}

// -----

/// concatenate keeps its non-empty inputs, in order.
// CHECK-LABEL: func.func @fold_concatenate_some_empty
// CHECK-NEXT: %[[J:.*]] = "xhlo.concatenate"(%arg1, %arg1) {dimension = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
// CHECK-NEXT: return %[[J]]
func.func @fold_concatenate_some_empty(%e: tensor<2x0xf32>, %x: tensor<2x3xf32>) -> tensor<2x6xf32> {
  %0 = "xhlo.concatenate"(%x, %e, %x) {dimension = 1 : i64} : (tensor<2x3xf32>, tensor<2x0xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

/// concatenate of non-empty inputs stays.
// CHECK-LABEL: func.func @no_fold_concatenate
// CHECK: "xhlo.concatenate"(%arg0, %arg1)
func.func @no_fold_concatenate(%x: tensor<2x3xf32>, %y: tensor<2x1xf32>) -> tensor<2x4xf32> {
  %0 = "xhlo.concatenate"(%x, %y) {dimension = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

/// An integer dot contracting a size-1 dimension is an outer product: a multiply of broadcasts.
// CHECK-LABEL: func.func @fold_int_dot_unit_contraction
// CHECK-NEXT: %[[A:.*]] = "xhlo.reshape"(%arg0) : (tensor<3x1xi32>) -> tensor<3xi32>
// CHECK-NEXT: %[[B:.*]] = "xhlo.reshape"(%arg1) : (tensor<1x4xi32>) -> tensor<4xi32>
// CHECK-NEXT: %[[BA:.*]] = "xhlo.broadcast"(%[[A]]) {dimensions = array<i64: 0>} : (tensor<3xi32>) -> tensor<3x4xi32>
// CHECK-NEXT: %[[BB:.*]] = "xhlo.broadcast"(%[[B]]) {dimensions = array<i64: 1>} : (tensor<4xi32>) -> tensor<3x4xi32>
// CHECK-NEXT: %[[M:.*]] = "xhlo.multiply"(%[[BA]], %[[BB]])
// CHECK-NEXT: return %[[M]]
func.func @fold_int_dot_unit_contraction(%a: tensor<3x1xi32>, %b: tensor<1x4xi32>) -> tensor<3x4xi32> {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<3x1xi32>, tensor<1x4xi32>) -> tensor<3x4xi32>
  return %0 : tensor<3x4xi32>
}

// -----

/// A batched integer dot contracting size 1 keeps batch dimensions first.
// CHECK-LABEL: func.func @fold_int_batch_dot_unit_contraction
// CHECK: "xhlo.reshape"(%arg0) : (tensor<2x3x1xi32>) -> tensor<2x3xi32>
// CHECK: "xhlo.reshape"(%arg1) : (tensor<1x2x4xi32>) -> tensor<2x4xi32>
// CHECK: "xhlo.broadcast"(%{{.*}}) {dimensions = array<i64: 0, 1>} : (tensor<2x3xi32>) -> tensor<2x3x4xi32>
// CHECK: "xhlo.broadcast"(%{{.*}}) {dimensions = array<i64: 0, 2>} : (tensor<2x4xi32>) -> tensor<2x3x4xi32>
// CHECK: "xhlo.multiply"
// CHECK-NOT: "xhlo.dot"
func.func @fold_int_batch_dot_unit_contraction(%a: tensor<2x3x1xi32>, %b: tensor<1x2x4xi32>) -> tensor<2x3x4xi32> {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 1>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<2x3x1xi32>, tensor<1x2x4xi32>) -> tensor<2x3x4xi32>
  return %0 : tensor<2x3x4xi32>
}

// -----

/// A float dot contracting size 1 is a multiply of broadcasts plus +0.0: its sum starts at
/// +0.0, so a -0.0 product becomes +0.0.
// CHECK-LABEL: func.func @fold_float_dot_unit_contraction
// CHECK-NOT: "xhlo.dot"
// CHECK: %[[M:.*]] = "xhlo.multiply"
// CHECK: %[[Z:.*]] = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<3x4xf32>}
// CHECK: %[[S:.*]] = "xhlo.add"(%[[M]], %[[Z]])
// CHECK: return %[[S]]
func.func @fold_float_dot_unit_contraction(%a: tensor<3x1xf32>, %b: tensor<1x4xf32>) -> tensor<3x4xf32> {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<3x1xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

/// A batch dot without contraction (BCOO @ x scales gathered rows by the values) is a
/// multiply of broadcasts plus +0.0.
// CHECK-LABEL: func.func @fold_float_batch_dot_without_contraction
// CHECK-NOT: "xhlo.dot"
// CHECK: "xhlo.broadcast"(%arg0) {dimensions = array<i64: 0>} : (tensor<5xf32>) -> tensor<5x8xf32>
// CHECK: "xhlo.multiply"
// CHECK: "xhlo.add"
func.func @fold_float_batch_dot_without_contraction(%a: tensor<5xf32>, %b: tensor<5x8xf32>) -> tensor<5x8xf32> {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 0>}} : (tensor<5xf32>, tensor<5x8xf32>) -> tensor<5x8xf32>
  return %0 : tensor<5x8xf32>
}

// -----

/// A complex dot contracting size 1 stays.
// CHECK-LABEL: func.func @no_fold_complex_dot_unit_contraction
// CHECK: "xhlo.dot"(%arg0, %arg1)
func.func @no_fold_complex_dot_unit_contraction(%a: tensor<3x1xcomplex<f32>>, %b: tensor<1x4xcomplex<f32>>) -> tensor<3x4xcomplex<f32>> {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<3x1xcomplex<f32>>, tensor<1x4xcomplex<f32>>) -> tensor<3x4xcomplex<f32>>
  return %0 : tensor<3x4xcomplex<f32>>
}

// -----

/// An integer dot contracting a dimension of size 2 stays.
// CHECK-LABEL: func.func @no_fold_int_dot_contraction
// CHECK: "xhlo.dot"(%arg0, %arg1)
func.func @no_fold_int_dot_contraction(%a: tensor<3x2xi32>, %b: tensor<2x4xi32>) -> tensor<3x4xi32> {
  %0 = "xhlo.dot"(%a, %b) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<3x2xi32>, tensor<2x4xi32>) -> tensor<3x4xi32>
  return %0 : tensor<3x4xi32>
}

// -----

/// reduce(add) over a size-1 dimension with init 0 -> reshape(x) (integers).
// CHECK-LABEL: func.func @fold_reduce_unit_dimension
// CHECK-NEXT: %[[R:.*]] = "xhlo.reshape"(%arg0) : (tensor<3x1xi32>) -> tensor<3xi32>
// CHECK-NEXT: return %[[R]]
func.func @fold_reduce_unit_dimension(%x: tensor<3x1xi32>) -> tensor<3xi32> {
  %zero = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %0 = "xhlo.reduce"(%x, %zero) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = "xhlo.add"(%a, %b) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%s) : (tensor<i32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<3x1xi32>, tensor<i32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

/// reduce(add) over a size-1 dimension with a float init of +0.0 -> init + reshape(x):
/// the reducer still sees init once, and (+0.0) + (-0.0) is +0.0.
// CHECK-LABEL: func.func @fold_reduce_unit_dimension_with_init
// CHECK-DAG: %[[I:.*]] = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<3xf32>}
// CHECK-DAG: %[[R:.*]] = "xhlo.reshape"(%arg0) : (tensor<1x3xf32>) -> tensor<3xf32>
// CHECK: %[[S:.*]] = "xhlo.add"(%[[I]], %[[R]])
// CHECK-NEXT: return %[[S]]
func.func @fold_reduce_unit_dimension_with_init(%x: tensor<1x3xf32>) -> tensor<3xf32> {
  %zero = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.reduce"(%x, %zero) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<1x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

/// reduce(or) over no dimension with init false -> x (jnp.any over no axis, as jnp.unique
/// writes it; the linalg lowering of such a reduce fails, and the kernel ran on the
/// interpreter); reduce(and) with init true over a size-1 dimension -> reshape(x).
// CHECK-LABEL: func.func @fold_reduce_or_and
// CHECK-NOT: xhlo.reduce
// CHECK: %[[R:.*]] = "xhlo.reshape"(%arg1) : (tensor<4x1xi1>) -> tensor<4xi1>
// CHECK-NEXT: return %arg0, %[[R]]
func.func @fold_reduce_or_and(%x: tensor<5xi1>, %y: tensor<4x1xi1>) -> (tensor<5xi1>, tensor<4xi1>) {
  %false = "xhlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
  %true = "xhlo.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
  %0 = "xhlo.reduce"(%x, %false) ({
  ^bb0(%a: tensor<i1>, %b: tensor<i1>):
    %s = "xhlo.or"(%a, %b) : (tensor<i1>, tensor<i1>) -> tensor<i1>
    "xhlo.return"(%s) : (tensor<i1>) -> ()
  }) {dimensions = array<i64>} : (tensor<5xi1>, tensor<i1>) -> tensor<5xi1>
  %1 = "xhlo.reduce"(%y, %true) ({
  ^bb0(%a: tensor<i1>, %b: tensor<i1>):
    %s = "xhlo.and"(%a, %b) : (tensor<i1>, tensor<i1>) -> tensor<i1>
    "xhlo.return"(%s) : (tensor<i1>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<4x1xi1>, tensor<i1>) -> tensor<4xi1>
  return %0, %1 : tensor<5xi1>, tensor<4xi1>
}

// -----

/// reduce over a dimension of size 3: the add of its three columns to the init, in order.
// CHECK-LABEL: func.func @fold_reduce_of_three_unrolled
// CHECK-NOT: "xhlo.reduce"
// CHECK: return
func.func @fold_reduce_of_three_unrolled(%x: tensor<3x3xi32>) -> tensor<3xi32> {
  %zero = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %0 = "xhlo.reduce"(%x, %zero) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = "xhlo.add"(%a, %b) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%s) : (tensor<i32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<3x3xi32>, tensor<i32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

/// reduce(max) over a size-1 dimension with init -inf -> reshape(x) (floats).
// CHECK-LABEL: func.func @fold_reduce_max_unit_dimension
// CHECK-NEXT: %[[R:.*]] = "xhlo.reshape"(%arg0) : (tensor<2x1xf32>) -> tensor<2xf32>
// CHECK-NEXT: return %[[R]]
func.func @fold_reduce_max_unit_dimension(%x: tensor<2x1xf32>) -> tensor<2xf32> {
  %init = "xhlo.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.reduce"(%x, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

/// reduce(max) over a size-1 dimension with a float init that is not -inf is no reshape:
/// the body once, max(init, x).
// CHECK-LABEL: func.func @fold_reduce_max_float_init_unrolled
// CHECK-NOT: "xhlo.reduce"
// CHECK: "xhlo.maximum"
func.func @fold_reduce_max_float_init_unrolled(%x: tensor<2x1xf32>) -> tensor<2xf32> {
  %init = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "xhlo.reduce"(%x, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

/// A reducer that is not a plain add/multiply/maximum/minimum of its arguments: its body
/// once, init - x.
// CHECK-LABEL: func.func @fold_reduce_unit_dimension_other_reducer_unrolled
// CHECK-NOT: "xhlo.reduce"
// CHECK: "xhlo.subtract"
func.func @fold_reduce_unit_dimension_other_reducer_unrolled(%x: tensor<3x1xi32>) -> tensor<3xi32> {
  %zero = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %0 = "xhlo.reduce"(%x, %zero) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = "xhlo.subtract"(%a, %b) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%s) : (tensor<i32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<3x1xi32>, tensor<i32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

/// reduce over a dimension of size 0 -> the init value broadcast: nothing is reduced.
// CHECK-LABEL: func.func @fold_reduce_empty_dimension
// CHECK-NEXT: %[[B:.*]] = "xhlo.broadcast"(%arg1) {dimensions = array<i64>} : (tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT: return %[[B]]
func.func @fold_reduce_empty_dimension(%x: tensor<3x0xf32>, %init: tensor<f32>) -> tensor<3xf32> {
  %0 = "xhlo.reduce"(%x, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<3x0xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

/// A two-input reduce over a size-1 dimension is no reshape (only single-input reduces are):
/// its body once, on both inputs.
// CHECK-LABEL: func.func @fold_variadic_reduce_unrolled
// CHECK-NOT: "xhlo.reduce"
// CHECK: return
func.func @fold_variadic_reduce_unrolled(%x: tensor<3x1xi32>, %y: tensor<3x1xi32>, %i: tensor<i32>, %j: tensor<i32>) -> (tensor<3xi32>, tensor<3xi32>) {
  %0:2 = "xhlo.reduce"(%x, %y, %i, %j) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<i32>, %d: tensor<i32>):
    %s = "xhlo.add"(%a, %c) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %t = "xhlo.add"(%b, %d) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%s, %t) : (tensor<i32>, tensor<i32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<3x1xi32>, tensor<3x1xi32>, tensor<i32>, tensor<i32>) -> (tensor<3xi32>, tensor<3xi32>)
  return %0#0, %0#1 : tensor<3xi32>, tensor<3xi32>
}

// -----

/// Rewrites inside regions too: x * 1 in a while body folds.
// CHECK-LABEL: func.func @fold_inside_while_body
// CHECK: "xhlo.while"
// CHECK-NOT: "xhlo.multiply"
// CHECK: "xhlo.add"
func.func @fold_inside_while_body(%x: tensor<i32>) -> tensor<i32> {
  %0 = "xhlo.while"(%x) ({
  ^bb0(%a: tensor<i32>):
    %ten = "xhlo.constant"() {value = dense<10> : tensor<i32>} : () -> tensor<i32>
    %p = "xhlo.compare"(%a, %ten) {comparison_direction = "LT", compare_type = "SIGNED"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%a: tensor<i32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %m = "xhlo.multiply"(%a, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.add"(%m, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%s) : (tensor<i32>) -> ()
  }) : (tensor<i32>) -> tensor<i32>
  return %0 : tensor<i32>
}

// -----

/// Ops carrying a sharding are left alone.
// CHECK-LABEL: func.func @no_fold_sharded_op
// CHECK: "xhlo.reshape"(%arg0) {xhlo.sharding = "{replicated}"}
func.func @no_fold_sharded_op(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "xhlo.reshape"(%x) {xhlo.sharding = "{replicated}"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// An op whose result has no elements is an empty constant: nothing is left to compute.
// CHECK-LABEL: func.func @fold_zero_elements
// CHECK: %[[EMPTY:.*]] = "xhlo.constant"() {value = dense<> : tensor<2x0xf32>}
// CHECK: "xhlo.pad"(%[[EMPTY]]
func.func @fold_zero_elements(%x: tensor<2x0xf32>, %p: tensor<f32>) -> tensor<2x2xf32> {
  %0 = "xhlo.exponential"(%x) : (tensor<2x0xf32>) -> tensor<2x0xf32>
  %1 = "xhlo.pad"(%0, %p) {edge_padding_low = array<i64: 0, 1>, edge_padding_high = array<i64: 0, 1>, interior_padding = array<i64: 0, 0>} : (tensor<2x0xf32>, tensor<f32>) -> tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}

// -----

/// A reversed window is the kernel reversed along those spatial dimensions (the generated
/// loops computed a depthwise convolution with a reversed window wrongly).
// CHECK-LABEL: func.func @fold_reverse_window_into_kernel
// CHECK: %[[K:.*]] = "xhlo.reverse"(%arg1) {dimensions = array<i64: 1>}
// CHECK: "xhlo.convolution"(%arg0, %[[K]])
// CHECK-NOT: window_reversal
func.func @fold_reverse_window_into_kernel(%x: tensor<2x1x8x4xf32>, %w: tensor<1x3x1x4xf32>) -> tensor<2x1x8x4xf32> {
  %0 = "xhlo.convolution"(%x, %w) {batch_group_count = 1 : i64, dimension_numbers = {input_batch_dimension = 0 : i64, input_feature_dimension = 3 : i64, input_spatial_dimensions = array<i64: 1, 2>, kernel_input_feature_dimension = 2 : i64, kernel_output_feature_dimension = 3 : i64, kernel_spatial_dimensions = array<i64: 0, 1>, output_batch_dimension = 0 : i64, output_feature_dimension = 3 : i64, output_spatial_dimensions = array<i64: 1, 2>}, feature_group_count = 4 : i64, padding = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>, window_reversal = array<i1: false, true>} : (tensor<2x1x8x4xf32>, tensor<1x3x1x4xf32>) -> tensor<2x1x8x4xf32>
  return %0 : tensor<2x1x8x4xf32>
}

// -----

/// A signed integer divided by 2^k: an arithmetic shift of x plus 2^k - 1 when x is negative
/// (division rounds toward zero), the sign's bits shifted down into that bias.
// CHECK-LABEL: func.func @fold_signed_divide_by_power_of_two
// CHECK: %[[S:.*]] = "xhlo.shift_right_arithmetic"(%arg0,
// CHECK: %[[B:.*]] = "xhlo.shift_right_logical"(%[[S]],
// CHECK: %[[A:.*]] = "xhlo.add"(%arg0, %[[B]])
// CHECK: "xhlo.shift_right_arithmetic"(%[[A]],
// CHECK-NOT: xhlo.divide
func.func @fold_signed_divide_by_power_of_two(%x: tensor<64xi32>, %y: tensor<64xi8>) -> (tensor<64xi32>, tensor<64xi8>) {
  %c8 = "xhlo.constant"() {value = dense<8> : tensor<64xi32>} : () -> tensor<64xi32>
  %c64 = "xhlo.constant"() {value = dense<64> : tensor<64xi8>} : () -> tensor<64xi8>
  %0 = "xhlo.divide"(%x, %c8) : (tensor<64xi32>, tensor<64xi32>) -> tensor<64xi32>
  %1 = "xhlo.divide"(%y, %c64) : (tensor<64xi8>, tensor<64xi8>) -> tensor<64xi8>
  return %0, %1 : tensor<64xi32>, tensor<64xi8>
}

// -----

/// Unsigned: a logical shift for a division, a mask for a remainder (2^7 too, the top bit).
// CHECK-LABEL: func.func @fold_unsigned_divide_and_remainder_by_power_of_two
// CHECK: "xhlo.shift_right_logical"(%arg0,
// CHECK: "xhlo.and"(%arg0,
// CHECK: "xhlo.shift_right_logical"(%arg1,
// CHECK-NOT: xhlo.divide
// CHECK-NOT: xhlo.remainder
func.func @fold_unsigned_divide_and_remainder_by_power_of_two(%x: tensor<64xui32>, %y: tensor<64xui8>) -> (tensor<64xui32>, tensor<64xui32>, tensor<64xui8>) {
  %c2 = "xhlo.constant"() {value = dense<2> : tensor<ui32>} : () -> tensor<ui32>
  %b2 = "xhlo.broadcast"(%c2) {dimensions = array<i64>} : (tensor<ui32>) -> tensor<64xui32>
  %c16 = "xhlo.constant"() {value = dense<16> : tensor<64xui32>} : () -> tensor<64xui32>
  %c128 = "xhlo.constant"() {value = dense<128> : tensor<64xui8>} : () -> tensor<64xui8>
  %0 = "xhlo.divide"(%x, %b2) : (tensor<64xui32>, tensor<64xui32>) -> tensor<64xui32>
  %1 = "xhlo.remainder"(%x, %c16) : (tensor<64xui32>, tensor<64xui32>) -> tensor<64xui32>
  %2 = "xhlo.divide"(%y, %c128) : (tensor<64xui8>, tensor<64xui8>) -> tensor<64xui8>
  return %0, %1, %2 : tensor<64xui32>, tensor<64xui32>, tensor<64xui8>
}

// -----

/// Negative twins: a divisor that is no power of two, a signed remainder, a negative divisor.
// CHECK-LABEL: func.func @no_fold_integer_division_by_other_constants
// CHECK-COUNT-2: xhlo.divide
// CHECK: xhlo.remainder
// CHECK-NOT: xhlo.shift
func.func @no_fold_integer_division_by_other_constants(%x: tensor<64xi32>) -> (tensor<64xi32>, tensor<64xi32>, tensor<64xi32>) {
  %c6 = "xhlo.constant"() {value = dense<6> : tensor<64xi32>} : () -> tensor<64xi32>
  %cm8 = "xhlo.constant"() {value = dense<-8> : tensor<64xi32>} : () -> tensor<64xi32>
  %c8 = "xhlo.constant"() {value = dense<8> : tensor<64xi32>} : () -> tensor<64xi32>
  %0 = "xhlo.divide"(%x, %c6) : (tensor<64xi32>, tensor<64xi32>) -> tensor<64xi32>
  %1 = "xhlo.divide"(%x, %cm8) : (tensor<64xi32>, tensor<64xi32>) -> tensor<64xi32>
  %2 = "xhlo.remainder"(%x, %c8) : (tensor<64xi32>, tensor<64xi32>) -> tensor<64xi32>
  return %0, %1, %2 : tensor<64xi32>, tensor<64xi32>, tensor<64xi32>
}

// -----

/// A convolution or dot with an operand of no elements sums no products: zeros (a weight
/// gradient over an empty input went to the reference interpreter, which aborted on it).
// CHECK-LABEL: func.func @fold_empty_operands
// CHECK-NOT: xhlo.convolution
// CHECK-NOT: xhlo.dot
// CHECK-DAG: "xhlo.constant"() {value = dense<0.000000e+00> : tensor<1x1x4x3xf32>}
// CHECK-DAG: %[[C:.*]] = "xhlo.constant"() {value = dense<(0.000000e+00,0.000000e+00)> : tensor<complex<f32>>}
// CHECK-DAG: "xhlo.broadcast"(%[[C]]) {{.*}} -> tensor<3x5xcomplex<f32>>
func.func @fold_empty_operands(%x: tensor<1x0x4x2xf32>, %k: tensor<1x2x2x3xf32>, %a: tensor<3x0xcomplex<f32>>, %b: tensor<0x5xcomplex<f32>>) -> (tensor<1x1x4x3xf32>, tensor<3x5xcomplex<f32>>) {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 0], [0, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x0x4x2xf32>, tensor<1x2x2x3xf32>) -> tensor<1x1x4x3xf32>
  %1 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<3x0xcomplex<f32>>, tensor<0x5xcomplex<f32>>) -> tensor<3x5xcomplex<f32>>
  return %0, %1 : tensor<1x1x4x3xf32>, tensor<3x5xcomplex<f32>>
}
