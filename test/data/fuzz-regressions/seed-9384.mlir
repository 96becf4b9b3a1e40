// fuzz seed 9384: mismatch: result 0 (tensor<7x5x8xbf16>): element [np.int64(5), np.int64(0), np.int64(1)]: -1.625 vs -0.0 (tolerance 0.05)
// {"arguments": [["%arg0", [7, 5, 8], "bf16"], ["%arg1", [5, 1], "i32"], ["%arg2", [5, 5, 8], "bf16"], ["%arg3", [7, 5, 8], "bf16"]], "results": [[[7, 5, 8], "bf16"]]}
func.func @main(%arg0: tensor<7x5x8xbf16>, %arg1: tensor<5x1xi32>, %arg2: tensor<5x5x8xbf16>, %arg3: tensor<7x5x8xbf16>) -> (tensor<7x5x8xbf16>) {
  %v1 = "stablehlo.scatter"(%arg0, %arg1, %arg2) ({
    ^bb0(%lhs: tensor<bf16>, %rhs: tensor<bf16>):
      %combined = "stablehlo.maximum"(%lhs, %rhs) : (tensor<bf16>, tensor<bf16>) -> tensor<bf16>
      "stablehlo.return"(%combined) : (tensor<bf16>) -> ()
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<7x5x8xbf16>, tensor<5x1xi32>, tensor<5x5x8xbf16>) -> tensor<7x5x8xbf16>
  %v2 = "stablehlo.abs"(%arg3) : (tensor<7x5x8xbf16>) -> tensor<7x5x8xbf16>
  %v3 = "stablehlo.constant"() {value = dense<1.0> : tensor<7x5x8xbf16>} : () -> tensor<7x5x8xbf16>
  %v4 = "stablehlo.add"(%v2, %v3) : (tensor<7x5x8xbf16>, tensor<7x5x8xbf16>) -> tensor<7x5x8xbf16>
  %v5 = "stablehlo.remainder"(%v1, %v4) : (tensor<7x5x8xbf16>, tensor<7x5x8xbf16>) -> tensor<7x5x8xbf16>
  return %v5 : tensor<7x5x8xbf16>
}
