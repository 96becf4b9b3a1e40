// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// An op's xhlo.sharding lists every device once.

// CHECK: xhlo.negate: device 1 appears more than once in {devices=[2]1,1}

module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = "xhlo.negate"(%arg0) {xhlo.sharding = "{devices=[2]1,1}"} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
