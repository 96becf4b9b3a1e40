// fuzz seed 3279: mismatch: result 0 (tensor<7x2x2xbf16>): element [0, 1, 0]: 0.224609375 vs 2.296875 (a loop fusion reading its operand transposed wrote it in place)
// {"arguments": [["%arg0", [7, 2, 2], "bf16"], ["%arg1", [], "i1"]], "results": [[[7, 2, 2], "bf16"]]}
func.func @main(%arg0: tensor<7x2x2xbf16>, %arg1: tensor<i1>) -> (tensor<7x2x2xbf16>) {
  %v1 = "stablehlo.if"(%arg1) ({
      %c = "stablehlo.optimization_barrier"(%arg0) : (tensor<7x2x2xbf16>) -> tensor<7x2x2xbf16>
      %r = "stablehlo.negate"(%c) : (tensor<7x2x2xbf16>) -> tensor<7x2x2xbf16>
      "stablehlo.return"(%r) : (tensor<7x2x2xbf16>) -> ()
  }, {
      %c = "stablehlo.optimization_barrier"(%arg0) : (tensor<7x2x2xbf16>) -> tensor<7x2x2xbf16>
      %r = "stablehlo.add"(%c, %c) : (tensor<7x2x2xbf16>, tensor<7x2x2xbf16>) -> tensor<7x2x2xbf16>
      "stablehlo.return"(%r) : (tensor<7x2x2xbf16>) -> ()
  }) : (tensor<i1>) -> tensor<7x2x2xbf16>
  %v3 = "stablehlo.constant"() {value = dense<-4.0> : tensor<bf16>} : () -> tensor<bf16>
  %v4 = "stablehlo.constant"() {value = dense<4.0> : tensor<bf16>} : () -> tensor<bf16>
  %v5 = "stablehlo.clamp"(%v3, %v1, %v4) : (tensor<bf16>, tensor<7x2x2xbf16>, tensor<bf16>) -> tensor<7x2x2xbf16>
  %v8 = "stablehlo.transpose"(%v5) {permutation = array<i64: 0, 2, 1>} : (tensor<7x2x2xbf16>) -> tensor<7x2x2xbf16>
  return %v8 : tensor<7x2x2xbf16>
}
