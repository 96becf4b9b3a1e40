// A module in the StableHLO testdata convention: @main compares its result with @expected()
// through a custom call named after a check op.
module @jit_main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> (tensor<4xf32> {jax.result_info = ""}) {
    %0 = call @inputs() : () -> tensor<4xf32>
    %1 = call @expected() : () -> tensor<4xf32>
    %2 = stablehlo.abs %0 : tensor<4xf32>
    stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
    stablehlo.custom_call @check.expect_eq(%2, %1) {has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
    return %2 : tensor<4xf32>
  }
  func.func private @inputs() -> tensor<4xf32> {
    %cst = stablehlo.constant dense<[-1.5, 0.0, 2.25, -3.0]> : tensor<4xf32>
    return %cst : tensor<4xf32>
  }
  func.func private @expected() -> tensor<4xf32> {
    %cst = stablehlo.constant dense<[1.5, 0.0, 2.5, 3.0]> : tensor<4xf32>
    return %cst : tensor<4xf32>
  }
}
