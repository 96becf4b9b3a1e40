// Calls nested in private functions are inlined, whatever their callees hold: here a chlo op
// (generic form, which MLIR's own inliner will not move) below two levels of calls, one of
// them inside a while body, next to the @Sharding call that jax.random emits.
// RUN: mlirxla-opt %s | FileCheck %s
// RUN: mlirxla-opt %s | FileCheck %s --check-prefix=NOCALL
// RUN: mlirxla-run %s --check | FileCheck %s --check-prefix=ORACLE

// CHECK: func.func public @main
// CHECK: "xhlo.while"
// NOCALL-NOT: func.call
// NOCALL-NOT: "xhlo.call"
// NOCALL-NOT: func.func private
// ORACLE: check against the StableHLO reference interpreter: 1 output(s) match
module @jit_normal attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{replicated}"} : (tensor<3xf32>) -> tensor<3xf32>
    %1 = call @_normal(%0) : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
  func.func private @_normal(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%i = %c0, %v = %arg0) : tensor<i32>, tensor<3xf32>
     cond {
      %c2 = stablehlo.constant dense<2> : tensor<i32>
      %p = stablehlo.compare LT, %i, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %c1 = stablehlo.constant dense<1> : tensor<i32>
      %n = stablehlo.add %i, %c1 : tensor<i32>
      %w = func.call @_normal_real(%v) : (tensor<3xf32>) -> tensor<3xf32>
      stablehlo.return %n, %w : tensor<i32>, tensor<3xf32>
    }
    return %0#1 : tensor<3xf32>
  }
  func.func private @_normal_real(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %cst = stablehlo.constant dense<0.5> : tensor<3xf32>
    %0 = stablehlo.multiply %arg0, %cst : tensor<3xf32>
    %1 = "chlo.erf_inv"(%0) : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}
