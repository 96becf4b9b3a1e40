// RUN: mlirxla-opt %s -p "builtin.module(xhlo-priority-fusion, xhlo-output-fusion)" --split-input-file | FileCheck %s

/// A dense layer: the dot takes in the bias-add-relu loop fusion that consumes it.
// CHECK-LABEL: func.func @dense_relu
// CHECK: %[[F:.*]] = "xhlo.fusion"(%arg0, %arg1, %arg2)
// CHECK: xhlo.dot
// CHECK: xhlo.broadcast
// CHECK: xhlo.add
// CHECK: xhlo.maximum
// CHECK: kind = "output", name = "dot_maximum_fusion"
// CHECK-NOT: xhlo.fusion
// CHECK: return %[[F]]
func.func @dense_relu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x16xf32>
  %cst = stablehlo.constant dense<0.0> : tensor<4x16xf32>
  %3 = stablehlo.maximum %2, %cst : tensor<4x16xf32>
  return %3 : tensor<4x16xf32>
}

// -----

/// Negative twin: the dot's result is also returned (two users), so it stays a library call
/// and its consumer a loop fusion.
// CHECK-LABEL: func.func @dot_result_also_returned
// CHECK: %[[D:.*]] = "xhlo.dot"
// CHECK: "xhlo.fusion"(%arg2, %[[D]])
// CHECK: kind = "loop"
// CHECK-NOT: kind = "output"
func.func @dot_result_also_returned(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x16xf32>
  return %0, %2 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

/// Negative twin: the consumer reduces the dot's result (not an elementwise epilogue).
// CHECK-LABEL: func.func @dot_then_reduce
// CHECK: "xhlo.dot"
// CHECK: kind = "input"
// CHECK-NOT: kind = "output"
func.func @dot_then_reduce(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = stablehlo.exponential %0 : tensor<4x16xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %2 = stablehlo.reduce(%1 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
