// RUN: mlirxla-run %s | FileCheck %s
// RUN: mlirxla-run %s --backend reference | FileCheck %s

/// Quantized tensors become integer arithmetic at the front door (StableHLO's own
/// legalizations): per-tensor and per-axis quantize, dequantize, and an add of two quantized
/// operands computed as dequantize -> add -> quantize. Values from the StableHLO spec's
/// examples: 4.0 / 0.1 - 30 = 10 and 15.0 / 0.5 - 20 = 10; (1 + 3) / 0.5 - 20 = -12.
// CHECK: checks: 3 of 3 hold
func.func @main() {
  %x = stablehlo.constant dense<[4.0, 15.0]> : tensor<2xf32>
  %per_axis = "stablehlo.uniform_quantize"(%x) : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>
  %per_axis_bits = "stablehlo.bitcast_convert"(%per_axis) : (tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>) -> tensor<2xi8>
  check.expect_eq_const %per_axis_bits, dense<[10, 10]> : tensor<2xi8>
  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = stablehlo.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %qa = "stablehlo.uniform_quantize"(%a) : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.1:-30>>
  %qb = "stablehlo.uniform_quantize"(%b) : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.5:-20>>
  %sum = "stablehlo.add"(%qa, %qb) : (tensor<2x!quant.uniform<i8:f32, 0.1:-30>>, tensor<2x!quant.uniform<i8:f32, 0.5:-20>>) -> tensor<2x!quant.uniform<i8:f32, 0.5:-20>>
  %sum_bits = "stablehlo.bitcast_convert"(%sum) : (tensor<2x!quant.uniform<i8:f32, 0.5:-20>>) -> tensor<2xi8>
  check.expect_eq_const %sum_bits, dense<[-12, -8]> : tensor<2xi8>
  %back = "stablehlo.uniform_dequantize"(%sum) : (tensor<2x!quant.uniform<i8:f32, 0.5:-20>>) -> tensor<2xf32>
  check.expect_almost_eq_const %back, dense<[4.0, 6.0]> : tensor<2xf32>
  func.return
}
