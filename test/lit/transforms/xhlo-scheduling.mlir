// RUN: mlirxla-opt %s -p xhlo-scheduling --split-input-file | FileCheck %s

/// Source order keeps two 4 KiB intermediates live at once; the list scheduler reduces each
/// right after it is produced, so only one is ever live.
// CHECK: xhlo.schedule = {algorithm = "list", peak_bytes = 4112 : i64}
// CHECK-LABEL: func.func @two_reductions
// CHECK: "xhlo.exponential"
// CHECK-NEXT: "xhlo.reduce"
// CHECK: "xhlo.negate"
// CHECK-NEXT: "xhlo.reduce"
// CHECK: "xhlo.add"
// CHECK-NEXT: return
func.func @two_reductions(%x: tensor<1024xf32>) -> (tensor<f32>) {
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %a = "xhlo.exponential"(%x) : (tensor<1024xf32>) -> tensor<1024xf32>
  %b = "xhlo.negate"(%x) : (tensor<1024xf32>) -> tensor<1024xf32>
  %c = "xhlo.reduce"(%a, %z) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<1024xf32>, tensor<f32>) -> tensor<f32>
  %d = "xhlo.reduce"(%b, %z) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<1024xf32>, tensor<f32>) -> tensor<f32>
  %e = "xhlo.add"(%c, %d) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %e : tensor<f32>
}

// -----

/// An order that is already best stays as it is ("original" wins ties).
// CHECK: xhlo.schedule = {algorithm = "original", peak_bytes = 32 : i64}
// CHECK-LABEL: func.func @chain
// CHECK: "xhlo.negate"
// CHECK-NEXT: "xhlo.exponential"
// CHECK-NEXT: return
func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.exponential"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

/// Side-effecting custom calls keep their relative order; while bodies are scheduled too,
/// their terminator staying last.
// CHECK-LABEL: func.func @ordered
// CHECK: call_target_name = "first"
// CHECK: call_target_name = "second"
// CHECK: "xhlo.while"
// CHECK: "xhlo.compare"
// CHECK-NEXT: "xhlo.return"
// CHECK: "xhlo.add"
// CHECK-NEXT: "xhlo.return"
func.func @ordered(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<i32> {
  %0 = "xhlo.custom_call"(%x) {call_target_name = "first", has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "xhlo.custom_call"(%x) {call_target_name = "second", has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
  %w = "xhlo.while"(%n) ({
  ^bb0(%i: tensor<i32>):
    %c = "xhlo.compare"(%i, %n) {compare_type = "SIGNED", comparison_direction = "LT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>):
    %s = "xhlo.add"(%i, %i) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    "xhlo.return"(%s) : (tensor<i32>) -> ()
  }) : (tensor<i32>) -> tensor<i32>
  return %w : tensor<i32>
}
