// RUN: mlirxla-opt %s -p "builtin.module(xhlo-reshape-sinking)" --split-input-file | FileCheck %s

/// A 1-D convolution's result reshaped back, doubled, and reshaped for the next 2-D
/// convolution: the product computes in the convolution's shape and both reshapes fold away.
// CHECK-LABEL: func.func @doubled
// CHECK: %[[C:.*]] = "xhlo.convolution"
// CHECK-NEXT: %[[TWO:.*]] = "xhlo.constant"() {value = dense<2.000000e+00> : tensor<f32>}
// CHECK-NEXT: %[[B:.*]] = "xhlo.broadcast"(%[[TWO]]) {dimensions = array<i64>} : (tensor<f32>) -> tensor<2x1x4x3xf32>
// CHECK-NEXT: %[[M:.*]] = "xhlo.multiply"(%[[B]], %[[C]]) : (tensor<2x1x4x3xf32>, tensor<2x1x4x3xf32>) -> tensor<2x1x4x3xf32>
// CHECK-NOT: xhlo.reshape
// CHECK: return %[[M]]
func.func @doubled(%x: tensor<2x1x8x3xf32>, %k: tensor<1x2x3x3xf32>) -> tensor<2x1x4x3xf32> {
  %c = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x1x8x3xf32>, tensor<1x2x3x3xf32>) -> tensor<2x1x4x3xf32>
  %r = stablehlo.reshape %c : (tensor<2x1x4x3xf32>) -> tensor<2x4x3xf32>
  %two = stablehlo.constant dense<2.0> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %two, dims = [] : (tensor<f32>) -> tensor<2x4x3xf32>
  %m = stablehlo.multiply %b, %r : tensor<2x4x3xf32>
  %back = stablehlo.reshape %m : (tensor<2x4x3xf32>) -> tensor<2x1x4x3xf32>
  return %back : tensor<2x1x4x3xf32>
}

// -----

/// Two reshapes from one shape, then a splat constant: the sum sinks (an elementwise op reads
/// it), then the maximum, the constant splat in the operands' shape; the two reshapes after
/// it fold into one to the third shape.
// CHECK-LABEL: func.func @two_reshapes_and_a_constant
// CHECK: %[[S:.*]] = "xhlo.add"(%arg0, %arg1) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[K:.*]] = "xhlo.constant"() {value = dense<1.500000e+00> : tensor<4x6xf32>}
// CHECK: %[[T:.*]] = "xhlo.maximum"(%[[S]], %[[K]]) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[R:.*]] = "xhlo.reshape"(%[[T]]) : (tensor<4x6xf32>) -> tensor<3x8xf32>
// CHECK: return %[[R]]
func.func @two_reshapes_and_a_constant(%a: tensor<4x6xf32>, %b: tensor<4x6xf32>) -> tensor<3x8xf32> {
  %ra = stablehlo.reshape %a : (tensor<4x6xf32>) -> tensor<24xf32>
  %rb = stablehlo.reshape %b : (tensor<4x6xf32>) -> tensor<24xf32>
  %s = stablehlo.add %ra, %rb : tensor<24xf32>
  %k = stablehlo.constant dense<1.5> : tensor<24xf32>
  %t = stablehlo.maximum %s, %k : tensor<24xf32>
  %r = stablehlo.reshape %t : (tensor<24xf32>) -> tensor<3x8xf32>
  return %r : tensor<3x8xf32>
}

// -----

/// A complex splat constant takes the operands' shape too, its parts kept (NaN's bits too).
// CHECK-LABEL: func.func @reshapes_and_a_complex_constant
// CHECK: %[[K:.*]] = "xhlo.constant"() {value = dense<(0x7FC00000,-2.500000e+00)> : tensor<1xcomplex<f32>>}
// CHECK: %[[T:.*]] = "xhlo.add"(%{{.*}}, %[[K]]) : (tensor<1xcomplex<f32>>, tensor<1xcomplex<f32>>) -> tensor<1xcomplex<f32>>
// CHECK: %[[R:.*]] = "xhlo.reshape"(%[[T]]) : (tensor<1xcomplex<f32>>) -> tensor<1x1xcomplex<f32>>
// CHECK: return %[[R]]
func.func @reshapes_and_a_complex_constant(%a: tensor<1xcomplex<f32>>, %b: tensor<1xcomplex<f32>>) -> tensor<1x1xcomplex<f32>> {
  %ra = stablehlo.reshape %a : (tensor<1xcomplex<f32>>) -> tensor<complex<f32>>
  %rb = stablehlo.reshape %b : (tensor<1xcomplex<f32>>) -> tensor<complex<f32>>
  %s = stablehlo.multiply %ra, %rb : tensor<complex<f32>>
  %k = stablehlo.constant dense<(0x7FC00000, -2.5)> : tensor<complex<f32>>
  %t = stablehlo.add %s, %k : tensor<complex<f32>>
  %r = stablehlo.reshape %t : (tensor<complex<f32>>) -> tensor<1x1xcomplex<f32>>
  return %r : tensor<1x1xcomplex<f32>>
}

// -----

/// An operand that is neither a reshape nor a scalar keeps the op where it is, and so does
/// a result no reshape reads.
// CHECK-LABEL: func.func @kept
// CHECK: %[[R:.*]] = "xhlo.reshape"(%arg0) : (tensor<4x6xf32>) -> tensor<24xf32>
// CHECK: "xhlo.add"(%[[R]], %arg1) : (tensor<24xf32>, tensor<24xf32>)
// CHECK: "xhlo.negate"(%[[R]]) : (tensor<24xf32>)
func.func @kept(%a: tensor<4x6xf32>, %v: tensor<24xf32>) -> (tensor<2x12xf32>, tensor<24xf32>) {
  %r = stablehlo.reshape %a : (tensor<4x6xf32>) -> tensor<24xf32>
  %s = stablehlo.add %r, %v : tensor<24xf32>
  %back = stablehlo.reshape %s : (tensor<24xf32>) -> tensor<2x12xf32>
  %n = stablehlo.negate %r : tensor<24xf32>
  return %back, %n : tensor<2x12xf32>, tensor<24xf32>
}

// -----

/// An op with attributes keeps them: a comparison sinks with its direction, and the select
/// reading it sinks after it.
// CHECK-LABEL: func.func @compare_and_select
// CHECK: %[[C:.*]] = "xhlo.compare"(%arg0, %{{.*}}) {comparison_direction = "GT"} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xi1>
// CHECK: %[[S:.*]] = "xhlo.select"(%[[C]], %arg0, %{{.*}}) : (tensor<4x6xi1>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: "xhlo.reshape"(%[[S]]) : (tensor<4x6xf32>) -> tensor<2x12xf32>
func.func @compare_and_select(%a: tensor<4x6xf32>) -> tensor<2x12xf32> {
  %r = stablehlo.reshape %a : (tensor<4x6xf32>) -> tensor<24xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<24xf32>
  %positive = stablehlo.compare GT, %r, %zero : (tensor<24xf32>, tensor<24xf32>) -> tensor<24xi1>
  %relu = stablehlo.select %positive, %r, %zero : tensor<24xi1>, tensor<24xf32>
  %back = stablehlo.reshape %relu : (tensor<24xf32>) -> tensor<2x12xf32>
  return %back : tensor<2x12xf32>
}

// -----

/// A reshape read twice by one op (a square) is erased once.
// CHECK-LABEL: func.func @squared
// CHECK-NEXT: %[[M:.*]] = "xhlo.multiply"(%arg0, %arg0) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: return %[[M]]
func.func @squared(%a: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %r = stablehlo.reshape %a : (tensor<4x6xf32>) -> tensor<24xf32>
  %m = stablehlo.multiply %r, %r : tensor<24xf32>
  %back = stablehlo.reshape %m : (tensor<24xf32>) -> tensor<4x6xf32>
  return %back : tensor<4x6xf32>
}
