func.func @check_ops() {
  %a = stablehlo.constant dense<[1.0, -2.0, 3.5]> : tensor<3xf32>
  %b = stablehlo.abs %a : tensor<3xf32>
  check.expect_eq_const %b, dense<[1.0, 2.0, 3.5]> : tensor<3xf32>
  check.expect_almost_eq_const %b, dense<[1.00001, 2.0, 3.5]> : tensor<3xf32>
  check.expect_almost_eq %b, %b, tolerance = 0.1 : tensor<3xf32>
  check.expect_close %b, %b, max_ulp_difference = 3 : tensor<3xf32>, tensor<3xf32>
  func.return
}
