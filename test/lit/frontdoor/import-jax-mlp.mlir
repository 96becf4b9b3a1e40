// RUN: mlirxla-opt %programs/01_mlp_softmax.stablehlo.mlir | FileCheck %s
// RUN: mlirxla-opt %programs/01_mlp_softmax.vhlo.bc | FileCheck %s

/// The JAX MLP imports to xhlo: func.call @relu is inlined, dot_general becomes xhlo.dot with
/// its dimension numbers as a dictionary, broadcast_in_dim becomes xhlo.broadcast, and the
/// module carries its config.

// CHECK: module @jit_mlp
// CHECK-SAME: xhlo.config = {debug_options = {}, device_assignment = dense<0> : tensor<1x1xi64>, partition_count = 1 : i64, replica_count = 1 : i64}
// CHECK: func.func public @main
// CHECK-NOT: stablehlo.
// CHECK-NOT: call @relu
// CHECK: "xhlo.dot"(%arg4, %arg0) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}
// CHECK: "xhlo.broadcast"(%arg1) {dimensions = array<i64: 1>} : (tensor<128xf32>) -> tensor<1x128xf32>
// CHECK: "xhlo.maximum"
// CHECK: "xhlo.reduce"
// CHECK: "xhlo.return"
// CHECK-NEXT: }) {dimensions = array<i64: 1>} : (tensor<32x10xf32>, tensor<f32>) -> tensor<32xf32>
// CHECK: "xhlo.exponential"
// CHECK: "xhlo.divide"
// CHECK-NOT: func.func private @relu
