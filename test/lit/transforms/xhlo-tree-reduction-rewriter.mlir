// RUN: mlirxla-opt %s -p "builtin.module(xhlo-tree-reduction-rewriter)" --split-input-file | FileCheck %s

/// A batch norm's channel sums: 64 channels (2 blocks of 32 columns) over 65536 positions.
/// The reduced dimensions split between N and H, W: the inner reduction keeps N and C (4096
/// columns), no reshape.
// CHECK-LABEL: func.func @channel_sums
// CHECK: %[[INNER:.*]] = "xhlo.reduce"(%arg0, %{{.*}})
// CHECK: dimensions = array<i64: 1, 2>
// CHECK-SAME: -> tensor<64x64xf32>
// CHECK: %[[OUTER:.*]] = "xhlo.reduce"(%[[INNER]], %{{.*}})
// CHECK: dimensions = array<i64: 0>
// CHECK-SAME: -> tensor<64xf32>
// CHECK: return %[[OUTER]]
func.func @channel_sums(%x: tensor<64x32x32x64xf32>) -> tensor<64xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<64x32x32x64xf32>, tensor<f32>) -> tensor<64xf32>
  return %s : tensor<64xf32>
}

// -----

/// One reduced dimension of 65536 rows reshaped into 256 x 256: the inner reduction keeps
/// 256 x 16 columns.
// CHECK-LABEL: func.func @long_columns
// CHECK: %[[R:.*]] = "xhlo.reshape"(%arg0) : (tensor<65536x16xf32>) -> tensor<256x256x16xf32>
// CHECK: %[[INNER:.*]] = "xhlo.reduce"(%[[R]], %{{.*}})
// CHECK: dimensions = array<i64: 1>
// CHECK-SAME: -> tensor<256x16xf32>
// CHECK: "xhlo.reduce"(%[[INNER]], %{{.*}})
// CHECK: dimensions = array<i64: 0>
// CHECK-SAME: -> tensor<16xf32>
func.func @long_columns(%x: tensor<65536x16xf32>) -> tensor<16xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %s = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<65536x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %s : tensor<16xf32>
}

// -----

/// Negative twins: columns enough to fill the GPU (8192 / 32 = 256 blocks), too few rows to
/// be worth a second kernel, too small an input (a mean over 4096 losses), and a prime
/// number of rows (no divisor near its root).
// CHECK-LABEL: func.func @kept_whole
// CHECK-COUNT-4: "xhlo.reduce"
// CHECK-NOT: "xhlo.reduce"
// CHECK-NOT: xhlo.reshape
func.func @kept_whole(%wide: tensor<4096x8192xf32>, %short: tensor<1024x8xf32>, %losses: tensor<4096xf32>, %prime: tensor<65521x16xf32>) -> (tensor<8192xf32>, tensor<8xf32>, tensor<f32>, tensor<16xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %a = stablehlo.reduce(%wide init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<4096x8192xf32>, tensor<f32>) -> tensor<8192xf32>
  %b = stablehlo.reduce(%short init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<1024x8xf32>, tensor<f32>) -> tensor<8xf32>
  %c = stablehlo.reduce(%losses init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<4096xf32>, tensor<f32>) -> tensor<f32>
  %d = stablehlo.reduce(%prime init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<65521x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %a, %b, %c, %d : tensor<8192xf32>, tensor<8xf32>, tensor<f32>, tensor<16xf32>
}

// -----

/// Two reduced dimensions no boundary splits evenly (8192 x 2: the inner part would be 2
/// elements, the outer 8192): reshaped into 128 x 128 instead.
// CHECK-LABEL: func.func @uneven_dimensions
// CHECK: %[[R:.*]] = "xhlo.reshape"(%arg0) : (tensor<8192x2x64xf32>) -> tensor<128x128x64xf32>
// CHECK: "xhlo.reduce"(%[[R]], %{{.*}})
// CHECK: dimensions = array<i64: 1>
func.func @uneven_dimensions(%x: tensor<8192x2x64xf32>) -> tensor<64xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<8192x2x64xf32>, tensor<f32>) -> tensor<64xf32>
  return %s : tensor<64xf32>
}
