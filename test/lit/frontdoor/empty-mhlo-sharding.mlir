// RUN: mlirxla-opt %s | FileCheck %s

/// An empty `mhlo.sharding` (older exports write it for "no sharding") is no sharding, as
/// XLA reads it: nothing is refused and no xhlo.sharding appears.
// CHECK: func.func @main(%arg0: tensor<4xf32> {mhlo.sharding = ""}) -> (tensor<4xf32> {mhlo.sharding = ""})
// CHECK-NOT: xhlo.sharding
func.func @main(%arg0: tensor<4xf32> {mhlo.sharding = ""}) -> (tensor<4xf32> {mhlo.sharding = ""}) {
  %0 = stablehlo.custom_call @foo(%arg0) {mhlo.sharding = " "} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
