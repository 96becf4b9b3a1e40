// RUN: mlirxla-opt %s -p "builtin.module(xhlo-priority-fusion, xhlo-horizontal-loop-fusion)" --split-input-file | FileCheck %s

/// Three independent loop kernels of different shapes, all returned: one fusion with the
/// results of all three, in their order.
// CHECK-LABEL: func.func @three_updates
// CHECK: %[[F:.*]]:3 = "xhlo.fusion"(%arg0, %arg1, %arg2)
// CHECK: xhlo.exponential
// CHECK: xhlo.negate
// CHECK: xhlo.sqrt
// CHECK: kind = "loop", name = "horizontal_loop_fusion"
// CHECK-NOT: xhlo.fusion
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2
func.func @three_updates(%a: tensor<64x64xf32>, %b: tensor<64xf32>, %c: tensor<8x3xf16>) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<8x3xf16>) {
  %0 = stablehlo.exponential %a : tensor<64x64xf32>
  %1 = stablehlo.negate %b : tensor<64xf32>
  %2 = stablehlo.sqrt %c : tensor<8x3xf16>
  return %0, %1, %2 : tensor<64x64xf32>, tensor<64xf32>, tensor<8x3xf16>
}

// -----

/// Negative twin: the negation is also read by the dot (another consumer), the dot is a
/// library call: the exponential is the return's only candidate, nothing is merged.
// CHECK-LABEL: func.func @read_by_another_consumer
// CHECK: "xhlo.exponential"(%arg0)
// CHECK: %[[N:.*]] = "xhlo.negate"(%arg1)
// CHECK: "xhlo.dot"(%[[N]], %arg2)
// CHECK-NOT: xhlo.fusion
// CHECK: return
func.func @read_by_another_consumer(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) {
  %0 = stablehlo.exponential %a : tensor<16x16xf32>
  %1 = stablehlo.negate %b : tensor<16x16xf32>
  %2 = stablehlo.dot_general %1, %w, contracting_dims = [1] x [0] : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return %0, %1, %2 : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
}

// -----

/// Negative twin: a reduction is not a loop kernel; only the two loop kernels beside it merge.
// CHECK-LABEL: func.func @reduction_kept_apart
// CHECK: kind = "input"
// CHECK: %[[F:.*]]:2 = "xhlo.fusion"(%arg1, %arg2)
// CHECK: kind = "loop", name = "horizontal_loop_fusion"
// CHECK-NOT: xhlo.fusion
func.func @reduction_kept_apart(%a: tensor<16x16xf32>, %b: tensor<16xf32>, %c: tensor<4xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<4xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<16x16xf32>, tensor<f32>) -> tensor<16xf32>
  %1 = stablehlo.exponential %b : tensor<16xf32>
  %2 = stablehlo.exponential %c : tensor<4xf32>
  return %0, %1, %2 : tensor<16xf32>, tensor<16xf32>, tensor<4xf32>
}

// -----

/// Negative twin: a loop fusion holding a transpose stays apart from the exponential beside
/// it (the transpose emitter takes a kernel of one transposing nest).
// CHECK-LABEL: func.func @transpose_kept_apart
// CHECK: "xhlo.fusion"(%arg0)
// CHECK: xhlo.transpose
// CHECK: "xhlo.exponential"(%arg1)
// CHECK-NOT: horizontal_loop_fusion
func.func @transpose_kept_apart(%a: tensor<64x32xf32>, %b: tensor<64xf32>) -> (tensor<32x64xf32>, tensor<64xf32>) {
  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<64x32xf32>) -> tensor<32x64xf32>
  %t = stablehlo.exponential %0 : tensor<32x64xf32>
  %1 = stablehlo.exponential %b : tensor<64xf32>
  return %t, %1 : tensor<32x64xf32>, tensor<64xf32>
}
