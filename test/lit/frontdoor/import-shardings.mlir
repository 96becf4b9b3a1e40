// RUN: mlirxla-opt %programs/03_sharded_namedsharding.stablehlo.mlir | FileCheck %s --check-prefix=SDY
// RUN: mlirxla-opt %programs/04_sharded_gspmd_mhlo_sharding.stablehlo.mlir | FileCheck %s --check-prefix=GSPMD

/// Shardy (sdy.mesh / sdy.sharding) and GSPMD (mhlo.sharding) shardings both arrive as
/// xhlo.sharding strings in XLA's HloSharding syntax (the argument shardings XLA's own
/// compiled HLO shows for this program), with the partition count in the config.

// SDY: partition_count = 4 : i64
// SDY: func.func public @main(%arg0: tensor<16x64xf32> {xhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}, %arg1: tensor<64x128xf32> {xhlo.sharding = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"})
// GSPMD: partition_count = 4 : i64
// GSPMD: xhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"
// GSPMD-SAME: xhlo.sharding = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"
// GSPMD: xhlo.sharding = "{devices=[2,2]<=[4]}"
