// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// A result layout of the wrong length is refused too.

// CHECK: func.func: result #0 layout [0] is not a permutation of the 2 dimensions of tensor<2x3xf32>

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {xhlo.layout = array<i64: 0, 1>}) -> (tensor<2x3xf32> {xhlo.layout = array<i64: 0>}) {

    return %arg0 : tensor<2x3xf32>
  }
}
