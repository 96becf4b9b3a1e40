func.func @f(%x: tensor<2xf32>) -> tensor<2xf16> {
  // expected-error @+1 {{something else entirely}}
  %0 = "xhlo.negate"(%x) : (tensor<2xf32>) -> tensor<2xf16>
  return %0 : tensor<2xf16>
}
