// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// An argument's sharding names only devices of the module (1 replica x 2 partitions).

// CHECK: func.func: argument #0 sharding: device 3 is not below the device count 2 in {devices=[2,2]<=[4]}

module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x4xf32> {mhlo.sharding = "{devices=[2,2]<=[4]}"}) -> (tensor<4x4xf32>) {

    return %arg0 : tensor<4x4xf32>
  }
}
