// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// A result sharding that is not XLA's syntax is refused with its position.

// CHECK: func.func: result #0: invalid HloSharding '{devices=[2]0,1 bogus}'

module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32> {mhlo.sharding = "{devices=[2]0,1 bogus}"}) {

    return %arg0 : tensor<4xf32>
  }
}
