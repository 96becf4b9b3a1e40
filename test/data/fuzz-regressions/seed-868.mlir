// fuzz seed 868: native-error: native code calls '__truncdfhf2', which this process does not provide
// {"arguments": [["%arg0", [1, 4], "f64"]], "results": [[[1, 4], "f16"]]}
func.func @main(%arg0: tensor<1x4xf64>) -> (tensor<1x4xf16>) {
  %v1 = "stablehlo.convert"(%arg0) : (tensor<1x4xf64>) -> tensor<1x4xf16>
  return %v1 : tensor<1x4xf16>
}
