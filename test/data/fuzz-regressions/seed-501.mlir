// fuzz seed 501: native-error: native code calls '__truncdfbf2', which this process does not provide
// {"arguments": [["%arg0", [8, 5], "i64"]], "results": [[[8, 5], "bf16"]]}
func.func @main(%arg0: tensor<8x5xi64>) -> (tensor<8x5xbf16>) {
  %v2 = "stablehlo.convert"(%arg0) : (tensor<8x5xi64>) -> tensor<8x5xf64>
  %v3 = "stablehlo.abs"(%v2) : (tensor<8x5xf64>) -> tensor<8x5xf64>
  %v4 = "stablehlo.constant"() {value = dense<1.0> : tensor<8x5xf64>} : () -> tensor<8x5xf64>
  %v5 = "stablehlo.add"(%v3, %v4) : (tensor<8x5xf64>, tensor<8x5xf64>) -> tensor<8x5xf64>
  %v6 = "stablehlo.divide"(%v2, %v5) : (tensor<8x5xf64>, tensor<8x5xf64>) -> tensor<8x5xf64>
  %v7 = "stablehlo.convert"(%v6) : (tensor<8x5xf64>) -> tensor<8x5xbf16>
  return %v7 : tensor<8x5xbf16>
}
