// RUN: mlirxla-opt %s -p xhlo-priority-fusion --split-input-file | FileCheck %s

/// An elementwise chain becomes one loop fusion.
// CHECK-LABEL: func.func @chain
// CHECK: "xhlo.fusion"(%arg0, %arg1)
// CHECK: xhlo.add
// CHECK: xhlo.multiply
// CHECK: xhlo.negate
// CHECK: kind = "loop", name = "add_negate_fusion"
// CHECK-NOT: xhlo.fusion
func.func @chain(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "xhlo.add"(%x, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = "xhlo.multiply"(%0, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = "xhlo.negate"(%1) : (tensor<8xf32>) -> tensor<8xf32>
  return %2 : tensor<8xf32>
}

// -----

/// A reduce consumer makes an input fusion.
// CHECK-LABEL: func.func @reduce_consumer
// CHECK: "xhlo.fusion"
// CHECK: xhlo.multiply
// CHECK: xhlo.reduce
// CHECK: kind = "input"
func.func @reduce_consumer(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = "xhlo.multiply"(%x, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "xhlo.reduce"(%0, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

/// A dot is a library call: it is not fused as a producer.
// CHECK-LABEL: func.func @dot_producer
// CHECK: %[[D:.*]] = "xhlo.dot"
// CHECK: "xhlo.fusion"(%[[D]]
// CHECK-NOT: xhlo.dot
// CHECK: kind = "loop"
func.func @dot_producer(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %0 = "xhlo.dot"(%x, %w) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = "xhlo.negate"(%0) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = "xhlo.abs"(%1) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %2 : tensor<4x4xf32>
}

// -----

/// An expensive producer (exp) with two users is not duplicated into them.
// CHECK-LABEL: func.func @shared_expensive
// CHECK: %[[E:.*]] = "xhlo.exponential"(%arg0)
// CHECK-DAG: "xhlo.fusion"(%[[E]]
// CHECK-DAG: "xhlo.fusion"(%[[E]]
func.func @shared_expensive(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = "xhlo.exponential"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %1 = "xhlo.negate"(%0) : (tensor<8xf32>) -> tensor<8xf32>
  %2 = "xhlo.abs"(%1) : (tensor<8xf32>) -> tensor<8xf32>
  %3 = "xhlo.sine"(%0) : (tensor<8xf32>) -> tensor<8xf32>
  %4 = "xhlo.abs"(%3) : (tensor<8xf32>) -> tensor<8xf32>
  return %2, %4 : tensor<8xf32>, tensor<8xf32>
}

// -----

/// A softmax: reductions over the same rows (trailing dimension) join one kernel, since each
/// row's results depend on that row alone.
// CHECK-LABEL: func.func @row_softmax_one_kernel
// CHECK-COUNT-1: "xhlo.fusion"
// CHECK-NOT: "xhlo.fusion"
// CHECK: return
func.func @row_softmax_one_kernel(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ninf = "xhlo.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %zero = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %max = "xhlo.reduce"(%x, %ninf) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = "xhlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%m) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %bmax = "xhlo.broadcast"(%max) {dimensions = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %shifted = "xhlo.subtract"(%x, %bmax) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = "xhlo.exponential"(%shifted) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = "xhlo.reduce"(%e, %zero) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %bsum = "xhlo.broadcast"(%sum) {dimensions = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %y = "xhlo.divide"(%e, %bsum) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

/// Negative twin: when the second reduction runs over the other dimension (columns), rows
/// are no longer independent and the two reductions stay in separate kernels.
// CHECK-LABEL: func.func @no_row_fusion_across_dimensions
// CHECK-COUNT-2: "xhlo.fusion"
func.func @no_row_fusion_across_dimensions(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %ninf = "xhlo.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %zero = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %max = "xhlo.reduce"(%x, %ninf) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = "xhlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%m) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %bmax = "xhlo.broadcast"(%max) {dimensions = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %shifted = "xhlo.subtract"(%x, %bmax) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = "xhlo.exponential"(%shifted) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = "xhlo.reduce"(%e, %zero) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
  return %sum : tensor<8xf32>
}
