// RUN: mlirxla-opt %s -p xhlo-top-k-rewriter --split-input-file | FileCheck %s

/// lax.top_k(x, 3): the iota, the sort and the two slices become one TopK call, k-wide results.
// CHECK-LABEL: func.func @top_3
// CHECK-NEXT: %[[C:.*]]:2 = "xhlo.custom_call"(%arg0) {call_target_name = "TopK", canonical = false, largest = true} : (tensor<5x16xf32>) -> (tensor<5x3xf32>, tensor<5x3xi32>)
// CHECK-NEXT: return %[[C]]#0, %[[C]]#1
func.func @top_3(%x: tensor<5x16xf32>) -> (tensor<5x3xf32>, tensor<5x3xi32>) {
  %values, %indices = chlo.top_k(%x, k = 3) : tensor<5x16xf32> -> (tensor<5x3xf32>, tensor<5x3xi32>)
  return %values, %indices : tensor<5x3xf32>, tensor<5x3xi32>
}

// -----

/// The k smallest of an i32 row (an ascending comparator), only the values read: the call
/// still has both results; the positions are left unread.
// CHECK-LABEL: func.func @bottom_2
// CHECK-NEXT: %[[C:.*]]:2 = "xhlo.custom_call"(%arg0) {call_target_name = "TopK", canonical = true, largest = false} : (tensor<4x9xi32>) -> (tensor<4x2xi32>, tensor<4x2xi32>)
// CHECK-NEXT: return %[[C]]#0
func.func @bottom_2(%x: tensor<4x9xi32>) -> tensor<4x2xi32> {
  %iota = stablehlo.iota dim = 1 : tensor<4x9xi32>
  %0:2 = "stablehlo.sort"(%x, %iota) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<i32>, %d: tensor<i32>):
    %lt = stablehlo.compare LT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<4x9xi32>, tensor<4x9xi32>) -> (tensor<4x9xi32>, tensor<4x9xi32>)
  %1 = stablehlo.slice %0#0 [0:4, 0:2] : (tensor<4x9xi32>) -> tensor<4x2xi32>
  return %1 : tensor<4x2xi32>
}

// -----

/// Negative twins, each left a sort: slices not starting at position 0; a result also read
/// whole; a k above 64 (the selection kernel's bound); sorted positions that are not an iota.
// CHECK-LABEL: func.func @not_top_k
// CHECK-NOT: TopK
// CHECK-COUNT-4: "xhlo.sort"
func.func @not_top_k(%x: tensor<2x80xf32>, %p: tensor<2x80xi32>) -> (tensor<2x3xf32>, tensor<2x80xf32>, tensor<2x70xf32>, tensor<2x3xf32>, tensor<2x3xi32>) {
  %iota = stablehlo.iota dim = 1 : tensor<2x80xi32>
  %0:2 = "stablehlo.sort"(%x, %iota) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %gt = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<2x80xf32>, tensor<2x80xi32>) -> (tensor<2x80xf32>, tensor<2x80xi32>)
  %1 = stablehlo.slice %0#0 [0:2, 1:4] : (tensor<2x80xf32>) -> tensor<2x3xf32>
  %2:2 = "stablehlo.sort"(%x, %iota) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %gt = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = false} : (tensor<2x80xf32>, tensor<2x80xi32>) -> (tensor<2x80xf32>, tensor<2x80xi32>)
  %3 = stablehlo.negate %2#0 : tensor<2x80xf32>
  %4:2 = "stablehlo.sort"(%3, %iota) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %gt = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<2x80xf32>, tensor<2x80xi32>) -> (tensor<2x80xf32>, tensor<2x80xi32>)
  %5 = stablehlo.slice %4#0 [0:2, 0:70] : (tensor<2x80xf32>) -> tensor<2x70xf32>
  %6:2 = "stablehlo.sort"(%x, %p) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %gt = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<2x80xf32>, tensor<2x80xi32>) -> (tensor<2x80xf32>, tensor<2x80xi32>)
  %7 = stablehlo.slice %6#0 [0:2, 0:3] : (tensor<2x80xf32>) -> tensor<2x3xf32>
  %8 = stablehlo.slice %6#1 [0:2, 0:3] : (tensor<2x80xi32>) -> tensor<2x3xi32>
  return %1, %2#0, %5, %7, %8 : tensor<2x3xf32>, tensor<2x80xf32>, tensor<2x70xf32>, tensor<2x3xf32>, tensor<2x3xi32>
}
