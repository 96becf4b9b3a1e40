// RUN: mlirxla-opt %s -p "builtin.module(xhlo-while-loop-trip-count-annotator)" --split-input-file | FileCheck %s

/// jax's scan: i from 0 while i < 64, i + 1 in the body: 64 iterations.
// CHECK-LABEL: func.func @scan
// CHECK: "xhlo.while"
// CHECK: known_trip_count = 64 : i64
func.func @scan(%x: tensor<4xf32>) -> tensor<4xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %a = %x) : tensor<i32>, tensor<4xf32>
  cond {
    %n = stablehlo.constant dense<64> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %b = stablehlo.multiply %a, %a : tensor<4xf32>
    stablehlo.return %next, %b : tensor<i32>, tensor<4xf32>
  }
  return %r#1 : tensor<4xf32>
}

// -----

/// A bound read from a carried value proves nothing: no count.
// CHECK-LABEL: func.func @until
// CHECK: "xhlo.while"
// CHECK-NOT: known_trip_count
func.func @until(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %zero, %a = %x, %m = %n) : tensor<i32>, tensor<4xf32>, tensor<i32>
  cond {
    %p = stablehlo.compare LT, %i, %m, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %b = stablehlo.multiply %a, %a : tensor<4xf32>
    stablehlo.return %next, %b, %m : tensor<i32>, tensor<4xf32>, tensor<i32>
  }
  return %r#1 : tensor<4xf32>
}

// -----

/// A condition with a side effect (a callback) must run each iteration: no count.
// CHECK-LABEL: func.func @printing_condition
// CHECK: "xhlo.while"
// CHECK-NOT: known_trip_count
func.func @printing_condition(%x: tensor<4xf32>) -> tensor<4xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %a = %x) : tensor<i32>, tensor<4xf32>
  cond {
    %n = stablehlo.constant dense<8> : tensor<i32>
    stablehlo.custom_call @xla_python_cpu_callback(%i) {has_side_effect = true} : (tensor<i32>) -> ()
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %a : tensor<i32>, tensor<4xf32>
  }
  return %r#1 : tensor<4xf32>
}
