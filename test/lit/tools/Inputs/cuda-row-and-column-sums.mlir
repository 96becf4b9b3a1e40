func.func @main(%x: tensor<8x2048xf32>, %y: tensor<64x300xf32>) -> (tensor<8xf32>, tensor<300xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %rows = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<8x2048xf32>, tensor<f32>) -> tensor<8xf32>
  %columns = stablehlo.reduce(%y init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<64x300xf32>, tensor<f32>) -> tensor<300xf32>
  return %rows, %columns : tensor<8xf32>, tensor<300xf32>
}
