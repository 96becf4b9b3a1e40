// RUN: mlirxla-opt %s -p xhlo-tuple-simplifier --split-input-file | FileCheck %s

/// get_tuple_element of a tuple built in the same computation is the tuple's operand.
// CHECK-LABEL: @forward_element
// CHECK-NOT: xhlo.get_tuple_element
// CHECK: return %arg1 : tensor<i32>
func.func @forward_element(%a: tensor<f32>, %b: tensor<i32>) -> tensor<i32> {
  %t = "xhlo.tuple"(%a, %b) : (tensor<f32>, tensor<i32>) -> tuple<tensor<f32>, tensor<i32>>
  %e = "xhlo.get_tuple_element"(%t) {index = 1 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<i32>
  return %e : tensor<i32>
}

// -----

/// get_tuple_element of a tuple that arrives as an argument has no operand to forward.
// CHECK-LABEL: @no_forward_element_of_argument
// CHECK: %[[E:.*]] = "xhlo.get_tuple_element"(%arg0) {index = 1 : i32}
// CHECK: return %[[E]] : tensor<i32>
func.func @no_forward_element_of_argument(%t: tuple<tensor<f32>, tensor<i32>>) -> tensor<i32> {
  %e = "xhlo.get_tuple_element"(%t) {index = 1 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<i32>
  return %e : tensor<i32>
}

// -----

/// Nested tuples are taken apart one level at a time, in one run.
// CHECK-LABEL: @forward_nested_elements
// CHECK-NOT: xhlo.get_tuple_element
// CHECK: return %arg1 : tensor<i32>
func.func @forward_nested_elements(%a: tensor<f32>, %b: tensor<i32>) -> tensor<i32> {
  %inner = "xhlo.tuple"(%a, %b) : (tensor<f32>, tensor<i32>) -> tuple<tensor<f32>, tensor<i32>>
  %outer = "xhlo.tuple"(%inner, %a) : (tuple<tensor<f32>, tensor<i32>>, tensor<f32>) -> tuple<tuple<tensor<f32>, tensor<i32>>, tensor<f32>>
  %e0 = "xhlo.get_tuple_element"(%outer) {index = 0 : i32} : (tuple<tuple<tensor<f32>, tensor<i32>>, tensor<f32>>) -> tuple<tensor<f32>, tensor<i32>>
  %e1 = "xhlo.get_tuple_element"(%e0) {index = 1 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<i32>
  return %e1 : tensor<i32>
}

// -----

/// A tuple of every element of t, in order, is t itself.
// CHECK-LABEL: @forward_rebuilt_tuple
// CHECK-NOT: "xhlo.tuple"
// CHECK: return %arg0 : tuple<tensor<f32>, tensor<i32>>
func.func @forward_rebuilt_tuple(%t: tuple<tensor<f32>, tensor<i32>>) -> tuple<tensor<f32>, tensor<i32>> {
  %a = "xhlo.get_tuple_element"(%t) {index = 0 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<f32>
  %b = "xhlo.get_tuple_element"(%t) {index = 1 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<i32>
  %u = "xhlo.tuple"(%a, %b) : (tensor<f32>, tensor<i32>) -> tuple<tensor<f32>, tensor<i32>>
  return %u : tuple<tensor<f32>, tensor<i32>>
}

// -----

/// Elements taken out of order build a different tuple: it stays.
// CHECK-LABEL: @no_forward_swapped_tuple
// CHECK: %[[U:.*]] = "xhlo.tuple"
// CHECK: return %[[U]]
func.func @no_forward_swapped_tuple(%t: tuple<tensor<f32>, tensor<f32>>) -> tuple<tensor<f32>, tensor<f32>> {
  %a = "xhlo.get_tuple_element"(%t) {index = 0 : i32} : (tuple<tensor<f32>, tensor<f32>>) -> tensor<f32>
  %b = "xhlo.get_tuple_element"(%t) {index = 1 : i32} : (tuple<tensor<f32>, tensor<f32>>) -> tensor<f32>
  %u = "xhlo.tuple"(%b, %a) : (tensor<f32>, tensor<f32>) -> tuple<tensor<f32>, tensor<f32>>
  return %u : tuple<tensor<f32>, tensor<f32>>
}

// -----

/// A tuple of only the first elements of t is shorter than t: it stays.
// CHECK-LABEL: @no_forward_partial_tuple
// CHECK: %[[U:.*]] = "xhlo.tuple"
// CHECK: return %[[U]]
func.func @no_forward_partial_tuple(%t: tuple<tensor<f32>, tensor<i32>, tensor<f32>>) -> tuple<tensor<f32>, tensor<i32>> {
  %a = "xhlo.get_tuple_element"(%t) {index = 0 : i32} : (tuple<tensor<f32>, tensor<i32>, tensor<f32>>) -> tensor<f32>
  %b = "xhlo.get_tuple_element"(%t) {index = 1 : i32} : (tuple<tensor<f32>, tensor<i32>, tensor<f32>>) -> tensor<i32>
  %u = "xhlo.tuple"(%a, %b) : (tensor<f32>, tensor<i32>) -> tuple<tensor<f32>, tensor<i32>>
  return %u : tuple<tensor<f32>, tensor<i32>>
}

// -----

/// Elements of two different tuples do not rebuild either of them.
// CHECK-LABEL: @no_forward_mixed_sources
// CHECK: %[[U:.*]] = "xhlo.tuple"
// CHECK: return %[[U]]
func.func @no_forward_mixed_sources(%t: tuple<tensor<f32>, tensor<i32>>, %s: tuple<tensor<f32>, tensor<i32>>) -> tuple<tensor<f32>, tensor<i32>> {
  %a = "xhlo.get_tuple_element"(%t) {index = 0 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<f32>
  %b = "xhlo.get_tuple_element"(%s) {index = 1 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<i32>
  %u = "xhlo.tuple"(%a, %b) : (tensor<f32>, tensor<i32>) -> tuple<tensor<f32>, tensor<i32>>
  return %u : tuple<tensor<f32>, tensor<i32>>
}
