// RUN: mlirxla-opt %s -p "builtin.module(xhlo-priority-fusion, xhlo-reshape-to-bitcast, xhlo-copy-insertion)" --split-input-file | FileCheck %s

/// A reshape feeding a GEMM and one returned are bitcasts; the one returned beside the value
/// it reshapes gets a copy (one buffer would hold two outputs), as the parameter does.
// CHECK-LABEL: func.func @unfused
// CHECK: %[[R:.*]] = "xhlo.bitcast"(%arg0) : (tensor<4x8x16xf32>) -> tensor<32x16xf32>
// CHECK: "xhlo.dot"(%[[R]], %arg1)
// CHECK: %[[E:.*]] = "xhlo.exponential"(%arg0)
// CHECK: %[[F:.*]] = "xhlo.bitcast"(%[[E]]) : (tensor<4x8x16xf32>) -> tensor<512xf32>
// CHECK: %[[RC:.*]] = "xhlo.copy"(%[[R]])
// CHECK: %[[EC:.*]] = "xhlo.copy"(%[[E]])
// CHECK: return %{{.*}}, %[[RC]], %[[F]], %[[EC]]
func.func @unfused(%x: tensor<4x8x16xf32>, %w: tensor<16x8xf32>) -> (tensor<32x8xf32>, tensor<32x16xf32>, tensor<512xf32>, tensor<4x8x16xf32>) {
  %r = stablehlo.reshape %x : (tensor<4x8x16xf32>) -> tensor<32x16xf32>
  %d = stablehlo.dot_general %r, %w, contracting_dims = [1] x [0] : (tensor<32x16xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
  %e = stablehlo.exponential %x : tensor<4x8x16xf32>
  %f = stablehlo.reshape %e : (tensor<4x8x16xf32>) -> tensor<512xf32>
  return %d, %r, %f, %e : tensor<32x8xf32>, tensor<32x16xf32>, tensor<512xf32>, tensor<4x8x16xf32>
}

// -----

/// Negative twin: a reshape fused into its consumer's kernel stays a reshape.
// CHECK-LABEL: func.func @fused
// CHECK-NOT: xhlo.bitcast
// CHECK: "xhlo.fusion"
// CHECK: "xhlo.reshape"
func.func @fused(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %r = stablehlo.reshape %x : (tensor<4x8xf32>) -> tensor<32xf32>
  %e = stablehlo.exponential %r : tensor<32xf32>
  return %e : tensor<32xf32>
}

// -----

/// A loop whose init and body result each reach two carried values through a bitcast gets
/// a copy for each (the carried buffers would alias).
// CHECK-LABEL: func.func @carried_twice
// CHECK: %[[S:.*]] = "xhlo.sine"
// CHECK: %[[B:.*]] = "xhlo.bitcast"(%[[S]])
// CHECK: %[[BC:.*]] = "xhlo.copy"(%[[B]])
// CHECK: "xhlo.while"(%{{.*}}, %[[S]], %[[BC]])
// CHECK: %[[C:.*]] = "xhlo.bitcast"
// CHECK: %[[CC:.*]] = "xhlo.copy"(%[[C]])
// CHECK: xhlo.return"(%{{.*}}, %{{.*}}, %[[CC]])
func.func @carried_twice(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<16xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %s = stablehlo.sine %x : tensor<4x4xf32>
  %sf = stablehlo.reshape %s : (tensor<4x4xf32>) -> tensor<16xf32>
  %r:3 = stablehlo.while(%i = %zero, %a = %s, %b = %sf) : tensor<i32>, tensor<4x4xf32>, tensor<16xf32>
  cond {
    %n = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c = stablehlo.cosine %a : tensor<4x4xf32>
    %cf = stablehlo.reshape %c : (tensor<4x4xf32>) -> tensor<16xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %c, %cf : tensor<i32>, tensor<4x4xf32>, tensor<16xf32>
  }
  return %r#1, %r#2 : tensor<4x4xf32>, tensor<16xf32>
}

// -----

/// A broadcast that only adds a unit dimension and feeds a scatter's indices (jax's
/// segment_max) is a bitcast too; one that repeats elements stays a broadcast.
// CHECK-LABEL: func.func @unit_broadcast
// CHECK: %[[I:.*]] = "xhlo.bitcast"(%arg1) : (tensor<64xi32>) -> tensor<64x1xi32>
// CHECK: "xhlo.scatter"(%{{.*}}, %[[I]], %arg2)
// CHECK: "xhlo.broadcast"(%arg1) {{.*}} -> tensor<64x3xi32>
func.func @unit_broadcast(%target: tensor<8xf32>, %segments: tensor<64xi32>, %x: tensor<64xf32>) -> (tensor<8xf32>, tensor<64x3xi32>) {
  %indices = stablehlo.broadcast_in_dim %segments, dims = [0] : (tensor<64xi32>) -> tensor<64x1xi32>
  %max = "stablehlo.scatter"(%target, %indices, %x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<8xf32>, tensor<64x1xi32>, tensor<64xf32>) -> tensor<8xf32>
  %repeated = stablehlo.broadcast_in_dim %segments, dims = [0] : (tensor<64xi32>) -> tensor<64x3xi32>
  return %max, %repeated : tensor<8xf32>, tensor<64x3xi32>
}
