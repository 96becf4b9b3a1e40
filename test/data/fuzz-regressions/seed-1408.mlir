// fuzz seed 1408: mismatch: result 0 (tensor<5x1xf16>): element [3, 0]: 0.615234375 vs 0.0229339599609375
// {"arguments": [["%arg0", [5], "f16"], ["%arg1", [], "i32"], ["%arg2", [], "i32"], ["%arg3", [4, 1], "i32"], ["%arg4", [4, 1], "f16"]], "results": [[[5, 1], "f16"]]}
func.func @main(%arg0: tensor<5xf16>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<4x1xi32>, %arg4: tensor<4x1xf16>) -> (tensor<5x1xf16>) {
  %v1 = "stablehlo.broadcast_in_dim"(%arg0) {broadcast_dimensions = array<i64: 0>} : (tensor<5xf16>) -> tensor<5x1xf16>
  %v2 = "stablehlo.dynamic_slice"(%v1, %arg1, %arg2) {slice_sizes = array<i64: 5, 1>} : (tensor<5x1xf16>, tensor<i32>, tensor<i32>) -> tensor<5x1xf16>
  %v5 = "stablehlo.scatter"(%v2, %arg3, %arg4) ({
    ^bb0(%lhs: tensor<f16>, %rhs: tensor<f16>):
      %combined = "stablehlo.minimum"(%lhs, %rhs) : (tensor<f16>, tensor<f16>) -> tensor<f16>
      "stablehlo.return"(%combined) : (tensor<f16>) -> ()
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<5x1xf16>, tensor<4x1xi32>, tensor<4x1xf16>) -> tensor<5x1xf16>
  %v7 = "stablehlo.logistic"(%v5) : (tensor<5x1xf16>) -> tensor<5x1xf16>
  %v8 = "stablehlo.reverse"(%v7) {dimensions = array<i64: 0, 1>} : (tensor<5x1xf16>) -> tensor<5x1xf16>
  return %v8 : tensor<5x1xf16>
}
