// RUN: mlirxla-opt %s --verify-diagnostics

/// Any other captured value has no HLO form.
func.func @reducer_captures_an_argument(%x: tensor<5xf32>, %y: tensor<f32>) -> tensor<f32> {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  // expected-error @+1 {{stablehlo.reduce: its computation uses a value defined outside it (HLO computations take only their arguments)}}
  %0 = stablehlo.reduce(%x init: %init) across dimensions = [0] : (tensor<5xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %a, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  return %0 : tensor<f32>
}
