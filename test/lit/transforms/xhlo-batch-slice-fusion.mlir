// RUN: mlirxla-opt %s -p "builtin.module(xhlo-priority-fusion, xhlo-output-fusion, xhlo-batch-slice-fusion{min-intermediate-bytes=64 max-slice-bytes=4096})" --split-input-file | FileCheck %s
// RUN: mlirxla-opt %s -p "builtin.module(xhlo-priority-fusion, xhlo-output-fusion, xhlo-batch-slice-fusion{min-intermediate-bytes=64 max-slice-bytes=1024})" --split-input-file | FileCheck %s --check-prefix=SMALL

/// A conv net's body: conv, bias, relu, conv, relu and the pooling sum keep each image
/// apart, so they become one kernel that runs image by image; its scratch is one image's
/// two convolution outputs and its reduction (576 + 1152 bytes; the reduce is returned).
// CHECK-LABEL: func.func @conv_chain
// CHECK: %[[F:.*]] = "xhlo.fusion"(%arg0, %arg1, %arg2, %arg3)
// CHECK-COUNT-2: xhlo.convolution
// CHECK: xhlo.reduce
// CHECK: custom = "batch_slices", kind = "custom", name = "convolution_reduce_fusion", scratch_bytes = 1728 : i64
// CHECK-NOT: xhlo.fusion
// CHECK: return %[[F]]
/// With a 1024-byte budget the two kernels' weights (288 + 1152 bytes, read again for every
/// image) and one image of the second convolution's output (1152 bytes) no longer fit:
/// nothing merges.
// SMALL-LABEL: func.func @conv_chain
// SMALL: kind = "output", name = "convolution_maximum_fusion"
// SMALL: "xhlo.convolution"
// SMALL: kind = "input"
// SMALL-NOT: batch_slices
func.func @conv_chain(%x: tensor<4x6x6x2xf32>, %k1: tensor<3x3x2x4xf32>, %b1: tensor<4xf32>, %k2: tensor<3x3x4x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.convolution(%x, %k1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x6x6x2xf32>, tensor<3x3x2x4xf32>) -> tensor<4x6x6x4xf32>
  %1 = stablehlo.broadcast_in_dim %b1, dims = [3] : (tensor<4xf32>) -> tensor<4x6x6x4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x6x6x4xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<4x6x6x4xf32>
  %3 = stablehlo.maximum %2, %zero : tensor<4x6x6x4xf32>
  %4 = stablehlo.convolution(%3, %k2) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x6x6x4xf32>, tensor<3x3x4x8xf32>) -> tensor<4x6x6x8xf32>
  %zero8 = stablehlo.constant dense<0.0> : tensor<4x6x6x8xf32>
  %5 = stablehlo.maximum %4, %zero8 : tensor<4x6x6x8xf32>
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %6 = stablehlo.reduce(%5 init: %init) applies stablehlo.add across dimensions = [1, 2] : (tensor<4x6x6x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// -----

/// Negative twin: the reduction sums over the batch (dimension 0), so slice b of the result
/// needs every image: the convolution and the reduction stay apart.
// CHECK-LABEL: func.func @reduce_over_batch
// CHECK: "xhlo.convolution"
// CHECK: kind = "input"
// CHECK-NOT: batch_slices
func.func @reduce_over_batch(%x: tensor<4x6x6x2xf32>, %k1: tensor<3x3x2x4xf32>) -> tensor<6x6x4xf32> {
  %0 = stablehlo.convolution(%x, %k1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x6x6x2xf32>, tensor<3x3x2x4xf32>) -> tensor<4x6x6x4xf32>
  %1 = stablehlo.exponential %0 : tensor<4x6x6x4xf32>
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %2 = stablehlo.reduce(%1 init: %init) applies stablehlo.add across dimensions = [0] : (tensor<4x6x6x4xf32>, tensor<f32>) -> tensor<6x6x4xf32>
  return %2 : tensor<6x6x4xf32>
}

// -----

/// A dot of [rows, features] rows feeding an epilogue with a row reduction (a pairwise
/// distance matrix): sliced, each slice would multiply one row, a matrix-vector product
/// streaming the rhs again; the dot stays a GEMM and the epilogue its own kernel.
// CHECK-LABEL: func.func @row_dot
// SMALL-LABEL: func.func @row_dot
// CHECK: "xhlo.dot"
// CHECK: kind = "loop"
// CHECK-NOT: batch_slices
func.func @row_dot(%a: tensor<64x8xf32>, %w: tensor<8x16xf32>) -> tensor<64x16xf32> {
  %d = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0] : (tensor<64x8xf32>, tensor<8x16xf32>) -> tensor<64x16xf32>
  %sq = stablehlo.multiply %a, %a : tensor<64x8xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<64x8xf32>, tensor<f32>) -> tensor<64xf32>
  %nb = stablehlo.broadcast_in_dim %n, dims = [0] : (tensor<64xf32>) -> tensor<64x16xf32>
  %r = stablehlo.subtract %nb, %d : tensor<64x16xf32>
  %t = stablehlo.sqrt %r : tensor<64x16xf32>
  return %t : tensor<64x16xf32>
}

// -----

/// Its twin over [batch, 16, features]: each slice multiplies 16 rows, merged.
// CHECK-LABEL: func.func @sequence_dot
// CHECK: custom = "batch_slices"
// SMALL-LABEL: func.func @sequence_dot
// SMALL: custom = "batch_slices"
func.func @sequence_dot(%a: tensor<4x16x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16x16xf32> {
  %d = stablehlo.dot_general %a, %w, contracting_dims = [2] x [0] : (tensor<4x16x8xf32>, tensor<8x16xf32>) -> tensor<4x16x16xf32>
  %sq = stablehlo.multiply %a, %a : tensor<4x16x8xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<4x16x8xf32>, tensor<f32>) -> tensor<4x16xf32>
  %nb = stablehlo.broadcast_in_dim %n, dims = [0, 1] : (tensor<4x16xf32>) -> tensor<4x16x16xf32>
  %r = stablehlo.subtract %nb, %d : tensor<4x16x16xf32>
  %t = stablehlo.sqrt %r : tensor<4x16x16xf32>
  return %t : tensor<4x16x16xf32>
}
