// RUN: mlirxla-opt %s -p xhlo-bf16-accumulation-in-f32 --split-input-file | FileCheck %s

/// A bf16 sum down the columns: the operand converted to f32, the constant init an f32
/// constant, the reducer an f32 add, the result converted back to bf16 for its reader.
// CHECK-LABEL: func.func @column_sum
// CHECK: %[[X:.*]] = "xhlo.convert"(%arg0) : (tensor<64x32xbf16>) -> tensor<64x32xf32>
// CHECK: %[[I:.*]] = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK: %[[R:.*]] = "xhlo.reduce"(%[[X]], %[[I]])
// CHECK: ^bb0(%[[A:.*]]: tensor<f32>, %[[B:.*]]: tensor<f32>):
// CHECK: "xhlo.add"(%[[A]], %[[B]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: (tensor<64x32xf32>, tensor<f32>) -> tensor<32xf32>
// CHECK: %[[N:.*]] = "xhlo.convert"(%[[R]]) : (tensor<32xf32>) -> tensor<32xbf16>
// CHECK: return %[[N]]
func.func @column_sum(%x: tensor<64x32xbf16>) -> tensor<32xbf16> {
  %zero = stablehlo.constant dense<0.0> : tensor<bf16>
  %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<64x32xbf16>, tensor<bf16>) -> tensor<32xbf16>
  return %0 : tensor<32xbf16>
}

// -----

/// An argmax: the bf16 values and their init widened, the i32 indices as they are; the
/// computation's compares and selects on f32 values.
// CHECK-LABEL: func.func @argmax
// CHECK: "xhlo.reduce"
// CHECK: ^bb0(%{{.*}}: tensor<f32>, %{{.*}}: tensor<i32>, %{{.*}}: tensor<f32>, %{{.*}}: tensor<i32>):
// CHECK: "xhlo.compare"({{.*}}) {{.*}} : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK: -> (tensor<8xf32>, tensor<8xi32>)
// CHECK: "xhlo.convert"({{.*}}) : (tensor<8xf32>) -> tensor<8xbf16>
func.func @argmax(%x: tensor<8x16xbf16>, %i: tensor<8x16xi32>) -> (tensor<8xbf16>, tensor<8xi32>) {
  %low = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %none = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%x init: %low), (%i init: %none) across dimensions = [1] : (tensor<8x16xbf16>, tensor<8x16xi32>, tensor<bf16>, tensor<i32>) -> (tensor<8xbf16>, tensor<8xi32>)
    reducer(%a: tensor<bf16>, %b: tensor<bf16>) (%ia: tensor<i32>, %ib: tensor<i32>) {
      %gt = stablehlo.compare GT, %a, %b : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
      %v = stablehlo.select %gt, %a, %b : tensor<i1>, tensor<bf16>
      %w = stablehlo.select %gt, %ia, %ib : tensor<i1>, tensor<i32>
      stablehlo.return %v, %w : tensor<bf16>, tensor<i32>
    }
  return %0#0, %0#1 : tensor<8xbf16>, tensor<8xi32>
}

// -----

/// An f32 reduce and a bf16 sort are left as they are.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: xhlo.convert
func.func @left_alone(%x: tensor<64xf32>, %y: tensor<64xbf16>) -> (tensor<f32>, tensor<64xbf16>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<64xf32>, tensor<f32>) -> tensor<f32>
  %1 = "stablehlo.sort"(%y) ({
    ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
      %lt = stablehlo.compare LT, %a, %b : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
  }) {dimension = 0 : i64} : (tensor<64xbf16>) -> tensor<64xbf16>
  return %0, %1 : tensor<f32>, tensor<64xbf16>
}
