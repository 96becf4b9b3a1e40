// fuzz seed 5186: native-error: MlirxlaError: <text>:7:9: fusion: kernel and_pad_fusion_2 failed to lower to LLVM: 'builtin.unrealized_conversion_cast' has no lowering, and the reference interpreter cannot run it in process either
// {"arguments": [["%arg0", [1, 7, 0, 7], "i32"], ["%arg1", [], "i32"]], "results": [[[4, 15, 3, 15], "i32"]]}
func.func @main(%arg0: tensor<1x7x0x7xi32>, %arg1: tensor<i32>) -> (tensor<4x15x3x15xi32>) {
  %v1 = "stablehlo.constant"() {value = dense<7> : tensor<1x7x0x7xi32>} : () -> tensor<1x7x0x7xi32>
  %v2 = "stablehlo.and"(%arg0, %v1) : (tensor<1x7x0x7xi32>, tensor<1x7x0x7xi32>) -> tensor<1x7x0x7xi32>
  %v3 = "stablehlo.constant"() {value = dense<1> : tensor<1x7x0x7xi32>} : () -> tensor<1x7x0x7xi32>
  %v4 = "stablehlo.or"(%v2, %v3) : (tensor<1x7x0x7xi32>, tensor<1x7x0x7xi32>) -> tensor<1x7x0x7xi32>
  %v5 = "stablehlo.divide"(%arg0, %v4) : (tensor<1x7x0x7xi32>, tensor<1x7x0x7xi32>) -> tensor<1x7x0x7xi32>
  %v7 = "stablehlo.pad"(%v5, %arg1) {edge_padding_low = array<i64: 2, 0, 2, 1>, edge_padding_high = array<i64: 1, 2, 1, 1>, interior_padding = array<i64: 0, 1, 1, 1>} : (tensor<1x7x0x7xi32>, tensor<i32>) -> tensor<4x15x3x15xi32>
  return %v7 : tensor<4x15x3x15xi32>
}
