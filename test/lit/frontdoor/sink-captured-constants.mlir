// RUN: mlirxla-opt %s | FileCheck %s

/// jax's canonicalizer hoists constants out of sort comparators; HLO computations take only
/// their arguments, so the front door copies the constant back in.
// CHECK-LABEL: func.func @comparator_constant
// CHECK: "xhlo.sort"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[ZERO:.*]] = "xhlo.constant"() {value = dense<0.000000e+00> : tensor<f32>}
// CHECK-NEXT: "xhlo.compare"(%{{.*}}, %[[ZERO]])
func.func @comparator_constant(%x: tensor<5xf32>) -> tensor<5xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare EQ, %a, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %s = stablehlo.select %c, %zero, %a : tensor<i1>, tensor<f32>
    %lt = stablehlo.compare LT, %s, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<5xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}
