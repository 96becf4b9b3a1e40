// RUN: mlirxla-opt %s -p "builtin.module(xhlo-transpose-sinking)" --split-input-file | FileCheck %s

/// LU factors back from column-major (jax's getrf through `xhlo-custom-call-layouts`), masked
/// where the factorization failed and transposed again for the next call: the select sinks
/// below the transpose, which then meets its inverse, and no transpose is left.
// CHECK-LABEL: func.func @masked_factors
// CHECK: %[[MASK:.*]] = "xhlo.broadcast"(%{{.*}}) {dimensions = array<i64: 0>} : (tensor<4xi1>) -> tensor<4x3x3xi1>
// CHECK: %[[NAN:.*]] = "xhlo.constant"() {value = dense<0x7FC00000> : tensor<4x3x3xf32>}
// CHECK: %[[S:.*]] = "xhlo.select"(%[[MASK]], %arg0, %[[NAN]])
// CHECK-NOT: xhlo.transpose
// CHECK: return %[[S]]
func.func @masked_factors(%lu: tensor<4x3x3xf32>, %info: tensor<4xi32>) -> tensor<4x3x3xf32> {
  %zero = stablehlo.constant dense<0> : tensor<4xi32>
  %ok = stablehlo.compare GE, %info, %zero, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %mask = stablehlo.broadcast_in_dim %ok, dims = [0] : (tensor<4xi1>) -> tensor<4x3x3xi1>
  %rows = stablehlo.transpose %lu, dims = [0, 2, 1] : (tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<4x3x3xf32>
  %masked = stablehlo.select %mask, %rows, %nan : tensor<4x3x3xi1>, tensor<4x3x3xf32>
  %columns = stablehlo.transpose %masked, dims = [0, 2, 1] : (tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  return %columns : tensor<4x3x3xf32>
}

// -----

/// Two transposed operands, a sum and its exponential, then a transpose that is not the
/// inverse: both ops sink (the sum because the exponential reads it), each computes in the
/// operands' [2, 3, 4] order, and the two transposes after them compose into one.
// CHECK-LABEL: func.func @two_ops_between
// CHECK: %[[S:.*]] = "xhlo.add"(%arg0, %arg1) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[E:.*]] = "xhlo.exponential"(%[[S]]) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[T:.*]] = "xhlo.transpose"(%[[E]]) {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
// CHECK-NEXT: return %[[T]]
func.func @two_ops_between(%x: tensor<2x3x4xf32>, %y: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  %tx = stablehlo.transpose %x, dims = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %ty = stablehlo.transpose %y, dims = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %s = stablehlo.add %tx, %ty : tensor<4x2x3xf32>
  %e = stablehlo.exponential %s : tensor<4x2x3xf32>
  %back = stablehlo.transpose %e, dims = [2, 1, 0] : (tensor<4x2x3xf32>) -> tensor<3x2x4xf32>
  return %back : tensor<3x2x4xf32>
}

// -----

/// What stays: an operand that is no transpose (a parameter), and a broadcast whose
/// dimensions would not stay increasing in the operands' order.
// CHECK-LABEL: func.func @left_alone
// CHECK: %[[T:.*]] = "xhlo.transpose"(%arg0)
// CHECK-NEXT: "xhlo.add"(%[[T]], %arg1) : (tensor<3x2xf32>, tensor<3x2xf32>)
// CHECK-NEXT: "xhlo.transpose"
// CHECK-NEXT: "xhlo.broadcast"
// CHECK-NEXT: "xhlo.multiply"(%[[T]], %{{.*}}) : (tensor<3x2xf32>, tensor<3x2xf32>)
// CHECK-NEXT: "xhlo.transpose"
func.func @left_alone(%x: tensor<2x3xf32>, %y: tensor<3x2xf32>, %v: tensor<3x2xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %tx = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %s = stablehlo.add %tx, %y : tensor<3x2xf32>
  %back = stablehlo.transpose %s, dims = [1, 0] : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %b = stablehlo.broadcast_in_dim %v, dims = [0, 1] : (tensor<3x2xf32>) -> tensor<3x2xf32>
  %m = stablehlo.multiply %tx, %b : tensor<3x2xf32>
  %back2 = stablehlo.transpose %m, dims = [1, 0] : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %back, %back2 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

/// A clamp between scalar bounds keeps its place: its bounds are not of its shape.
// CHECK-LABEL: func.func @scalar_bounds
// CHECK: %[[T:.*]] = "xhlo.transpose"(%arg0)
// CHECK: %[[C:.*]] = "xhlo.clamp"(%{{.*}}, %[[T]], %{{.*}}) : (tensor<f32>, tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
// CHECK-NEXT: "xhlo.transpose"(%[[C]])
func.func @scalar_bounds(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %low = stablehlo.constant dense<0.0> : tensor<f32>
  %high = stablehlo.constant dense<6.0> : tensor<f32>
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %c = stablehlo.clamp %low, %t, %high : (tensor<f32>, tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %back = stablehlo.transpose %c, dims = [1, 0] : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %back : tensor<2x3xf32>
}
