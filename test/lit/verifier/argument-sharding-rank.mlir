// RUN: not mlirxla-opt %s 2>&1 | FileCheck %s

// A tiled sharding tiles as many dimensions as the value has.

// CHECK: func.func: argument #0 sharding: sharding {devices=[2,1,2]<=[4] last_tile_dim_replicate} tiles 2 dimensions but the value has rank 1

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}) -> (tensor<4xf32>) {

    return %arg0 : tensor<4xf32>
  }
}
