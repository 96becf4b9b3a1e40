module @jit_scan_loop_and_gelu_branch attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x16xf32>, %arg1: tensor<i32>) -> (tensor<16xf32> {jax.result_info = "result[0]"}, tensor<8xf32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %2:4 = stablehlo.while(%iterArg = %arg0, %iterArg_4 = %c, %iterArg_5 = %0, %iterArg_6 = %1) : tensor<8x16xf32>, tensor<i32>, tensor<16xf32>, tensor<8xf32>
    cond {
      %c_7 = stablehlo.constant dense<8> : tensor<i32>
      %8 = stablehlo.compare LT, %iterArg_4, %c_7, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %8 : tensor<i1>
    } do {
      %8 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_4) : (tensor<8x16xf32>, tensor<i32>) -> tensor<16xf32>
      %9:2 = func.call @closed_call(%iterArg_5, %8) : (tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<f32>)
      %10 = func.call @dynamic_update_index_in_dim(%iterArg_6, %9#1, %iterArg_4) : (tensor<8xf32>, tensor<f32>, tensor<i32>) -> tensor<8xf32>
      %c_7 = stablehlo.constant dense<1> : tensor<i32>
      %11 = stablehlo.add %iterArg_4, %c_7 : tensor<i32>
      stablehlo.return %iterArg, %11, %9#0, %10 : tensor<8x16xf32>, tensor<i32>, tensor<16xf32>, tensor<8xf32>
    }
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %3:3 = stablehlo.while(%iterArg = %arg1, %iterArg_4 = %c_1, %iterArg_5 = %2#2) : tensor<i32>, tensor<i32>, tensor<16xf32>
    cond {
      %8 = stablehlo.compare LT, %iterArg_4, %iterArg, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %8 : tensor<i1>
    } do {
      %c_6 = stablehlo.constant dense<1> : tensor<i32>
      %8 = stablehlo.add %iterArg_4, %c_6 : tensor<i32>
      %cst_7 = stablehlo.constant dense<1.010000e+00> : tensor<f32>
      %9 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<16xf32>
      %10 = stablehlo.multiply %iterArg_5, %9 : tensor<16xf32>
      stablehlo.return %iterArg, %8, %10 : tensor<i32>, tensor<i32>, tensor<16xf32>
    }
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%3#2 init: %cst_2) applies stablehlo.add across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.compare GT, %4, %cst_3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %6 = stablehlo.convert %5 : (tensor<i1>) -> tensor<i32>
    %7 = "stablehlo.case"(%6) ({
      %cst_4 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
      %8 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<16xf32>
      %9 = stablehlo.multiply %8, %3#2 : tensor<16xf32>
      %10 = stablehlo.negate %3#2 : tensor<16xf32>
      %cst_5 = stablehlo.constant dense<0.707106769> : tensor<f32>
      %11 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<16xf32>
      %12 = stablehlo.multiply %10, %11 : tensor<16xf32>
      %13 = chlo.erfc %12 : tensor<16xf32> -> tensor<16xf32>
      %14 = stablehlo.multiply %9, %13 : tensor<16xf32>
      stablehlo.return %14 : tensor<16xf32>
    }, {
      %8 = stablehlo.multiply %3#2, %3#2 : tensor<16xf32>
      %9 = stablehlo.multiply %8, %3#2 : tensor<16xf32>
      %cst_4 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
      %10 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<16xf32>
      %11 = stablehlo.multiply %10, %9 : tensor<16xf32>
      %12 = stablehlo.add %3#2, %11 : tensor<16xf32>
      %cst_5 = stablehlo.constant dense<0.797884583> : tensor<f32>
      %13 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<16xf32>
      %14 = stablehlo.multiply %13, %12 : tensor<16xf32>
      %15 = stablehlo.tanh %14 : tensor<16xf32>
      %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %16 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<16xf32>
      %17 = stablehlo.add %16, %15 : tensor<16xf32>
      %cst_7 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
      %18 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<16xf32>
      %19 = stablehlo.multiply %18, %17 : tensor<16xf32>
      %20 = stablehlo.multiply %3#2, %19 : tensor<16xf32>
      stablehlo.return %20 : tensor<16xf32>
    }) : (tensor<i32>) -> tensor<16xf32>
    return %7, %2#3 : tensor<16xf32>, tensor<8xf32>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<8x16xf32>, %arg1: tensor<i32>) -> tensor<16xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [1, 16] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<1x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x16xf32>) -> tensor<16xf32>
    return %1 : tensor<16xf32>
  }
  func.func private @closed_call(%arg0: tensor<16xf32>, %arg1: tensor<16xf32>) -> (tensor<16xf32>, tensor<f32>) {
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<16xf32>
    %2 = stablehlo.add %1, %arg1 : tensor<16xf32>
    %3 = stablehlo.tanh %2 : tensor<16xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%3 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
    return %3, %4 : tensor<16xf32>, tensor<f32>
  }
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<8xf32>, %arg1: tensor<f32>, %arg2: tensor<i32>) -> tensor<8xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2 : (tensor<8xf32>, tensor<1xf32>, tensor<i32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}
