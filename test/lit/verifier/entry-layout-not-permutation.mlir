// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// The entry computation layout: xhlo.layout on an argument is a minor-to-major
// permutation of its rank.

// CHECK: entry-layout-not-permutation.mlir:{{[0-9]+}}:{{[0-9]+}}: func.func: argument #0 layout [0, 0] is not a permutation of the 2 dimensions of tensor<2x3xf32>

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {xhlo.layout = array<i64: 0, 0>}) -> (tensor<2x3xf32>) {

    return %arg0 : tensor<2x3xf32>
  }
}
