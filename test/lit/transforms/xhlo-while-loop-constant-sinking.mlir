// RUN: mlirxla-opt %s -p "builtin.module(cse, xhlo-while-loop-constant-sinking)" --split-input-file | FileCheck %s

/// CSE shares the body's broadcast of 13 with the one before the loop; the pass recomputes
/// it (and its constant) at the start of the body, where fusion can fold it in. The shift
/// by a value that varies stays read from outside.
// CHECK-LABEL: func.func @rotation
// CHECK: %[[C:.*]] = "xhlo.constant"() {value = dense<13> : tensor<ui32>}
// CHECK: %[[B:.*]] = "xhlo.broadcast"(%[[C]])
// CHECK: %[[V:.*]] = "xhlo.add"(%arg1, %arg1)
// CHECK: "xhlo.while"
// CHECK: ^bb0
// CHECK: "xhlo.compare"
// CHECK: ^bb0(%{{.*}}: tensor<i32>, %[[X:.*]]: tensor<64x2xui32>)
// CHECK-NEXT: %[[C2:.*]] = "xhlo.constant"() {value = dense<13> : tensor<ui32>}
// CHECK-NEXT: %[[B2:.*]] = "xhlo.broadcast"(%[[C2]])
// CHECK: "xhlo.shift_left"(%[[X]], %[[B2]])
// CHECK: "xhlo.shift_left"(%{{.*}}, %[[V]])
func.func @rotation(%x: tensor<64x2xui32>, %y: tensor<64x2xui32>) -> tensor<64x2xui32> {
  %c = stablehlo.constant dense<13> : tensor<ui32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui32>) -> tensor<64x2xui32>
  %first = stablehlo.shift_left %x, %b : tensor<64x2xui32>
  %v = stablehlo.add %y, %y : tensor<64x2xui32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %a = %first) : tensor<i32>, tensor<64x2xui32>
  cond {
    %n = stablehlo.constant dense<4> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c13 = stablehlo.constant dense<13> : tensor<ui32>
    %b13 = stablehlo.broadcast_in_dim %c13, dims = [] : (tensor<ui32>) -> tensor<64x2xui32>
    %s = stablehlo.shift_left %a, %b13 : tensor<64x2xui32>
    %t = stablehlo.shift_left %s, %v : tensor<64x2xui32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %t : tensor<i32>, tensor<64x2xui32>
  }
  return %r#1 : tensor<64x2xui32>
}

// -----

/// Negative twin: a constant that is no splat stays where it is (read-only memory either way).
// CHECK-LABEL: func.func @table
// CHECK: %[[T:.*]] = "xhlo.constant"() {value = dense<[1, 2, 3, 4]> : tensor<4xi32>}
// CHECK: "xhlo.while"
// CHECK-NOT: dense<[1, 2, 3, 4]>
// CHECK: "xhlo.add"(%{{.*}}, %[[T]])
func.func @table(%x: tensor<4xi32>) -> tensor<4xi32> {
  %t = stablehlo.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %first = stablehlo.add %x, %t : tensor<4xi32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %a = %first) : tensor<i32>, tensor<4xi32>
  cond {
    %n = stablehlo.constant dense<4> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %u = stablehlo.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
    %s = stablehlo.add %a, %u : tensor<4xi32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %s : tensor<i32>, tensor<4xi32>
  }
  return %r#1 : tensor<4xi32>
}
