module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<6xf32>, %arg1: tensor<3x6xi1>, %arg2: tensor<f32>, %arg3: tensor<i32>, %arg4: tensor<f32>) -> (tensor<6xf32> {jax.result_info = "result[0]"}) {
    %cst = stablehlo.constant dense<[4.65128578E-5, 0.0073158904, 0.133847639, 0.879691302, 2.7114985, 4.25697136, 3.29771352, 1.000000e+00]> : tensor<8xf32>
    %cst_0 = stablehlo.constant dense<[6.90990476E-4, 0.0254043769, 0.282974869, 1.411726, 3.63800526, 5.03278875, 3.54771352, 1.000000e+00]> : tensor<8xf32>
    %c = stablehlo.constant dense<false> : tensor<i1>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<1x6xi1>
    %1 = stablehlo.concatenate %0, %arg1, dim = 0 : (tensor<1x6xi1>, tensor<3x6xi1>) -> tensor<4x6xi1>
    %2 = call @cumsum(%1) : (tensor<4x6xi1>) -> tensor<4x6xi32>
    %3 = call @argmax(%2) : (tensor<4x6xi32>) -> tensor<6xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<3> : tensor<i32>
    %4 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %5 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %6 = stablehlo.clamp %4, %3, %5 : tensor<6xi32>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [1] : (tensor<8xf32>) -> tensor<6x8xf32>
    %8 = stablehlo.broadcast_in_dim %cst_0, dims = [1] : (tensor<8xf32>) -> tensor<6x8xf32>
    %9 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %10 = stablehlo.broadcast_in_dim %arg3, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %11 = stablehlo.broadcast_in_dim %arg4, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %12 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %13 = stablehlo.compare EQ, %6, %12, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0] : (tensor<6xi1>) -> tensor<6x8xi1>
    %15 = stablehlo.select %14, %7, %7 : tensor<6x8xi1>, tensor<6x8xf32>
    %16 = stablehlo.broadcast_in_dim %13, dims = [0] : (tensor<6xi1>) -> tensor<6x8xi1>
    %17 = stablehlo.select %16, %8, %8 : tensor<6x8xi1>, tensor<6x8xf32>
    %18 = stablehlo.select %13, %arg0, %arg0 : tensor<6xi1>, tensor<6xf32>
    %cst_4 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %20 = stablehlo.compare GT, %18, %19, FLOAT : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xi1>
    %21 = stablehlo.broadcast_in_dim %20, dims = [0] : (tensor<6xi1>) -> tensor<6x1xi1>
    %22 = call @_piecewise(%18, %21) : (tensor<6xf32>, tensor<6x1xi1>) -> tensor<6xf32>
    %cst_5 = stablehlo.constant dense<1.500000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %24 = stablehlo.compare GT, %22, %23, FLOAT : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xi1>
    %cst_6 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %26 = stablehlo.compare LT, %22, %25, FLOAT : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xi1>
    %27 = stablehlo.or %20, %24 : tensor<6xi1>
    %28 = stablehlo.broadcast_in_dim %24, dims = [0] : (tensor<6xi1>) -> tensor<6x1xi1>
    %29 = stablehlo.broadcast_in_dim %26, dims = [0] : (tensor<6xi1>) -> tensor<6x1xi1>
    %30 = stablehlo.concatenate %28, %29, dim = 1 : (tensor<6x1xi1>, tensor<6x1xi1>) -> tensor<6x2xi1>
    %31 = call @_piecewise_4(%22, %30) : (tensor<6xf32>, tensor<6x2xi1>) -> tensor<6xf32>
    %32 = stablehlo.negate %31 : tensor<6xf32>
    %33 = call @polyval(%15, %31) : (tensor<6x8xf32>, tensor<6xf32>) -> tensor<6xf32>
    %34 = stablehlo.multiply %32, %33 : tensor<6xf32>
    %35 = call @polyval(%17, %31) : (tensor<6x8xf32>, tensor<6xf32>) -> tensor<6xf32>
    %36 = stablehlo.divide %34, %35 : tensor<6xf32>
    %37 = stablehlo.log %22 : tensor<6xf32>
    %cst_7 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %38 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %39 = stablehlo.subtract %38, %22 : tensor<6xf32>
    %40 = stablehlo.log %39 : tensor<6xf32>
    %41 = stablehlo.multiply %37, %40 : tensor<6xf32>
    %cst_8 = stablehlo.constant dense<1.64493406> : tensor<f32>
    %42 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %43 = stablehlo.subtract %42, %41 : tensor<6xf32>
    %44 = stablehlo.subtract %43, %36 : tensor<6xf32>
    %45 = call @_where(%26, %44, %36) : (tensor<6xi1>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %46 = stablehlo.log %22 : tensor<6xf32>
    %47 = stablehlo.multiply %46, %46 : tensor<6xf32>
    %cst_9 = stablehlo.constant dense<-5.000000e-01> : tensor<f32>
    %48 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %49 = stablehlo.multiply %48, %47 : tensor<6xf32>
    %50 = stablehlo.subtract %49, %45 : tensor<6xf32>
    %51 = call @_where(%27, %50, %45) : (tensor<6xi1>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %c_10 = stablehlo.constant dense<1> : tensor<i32>
    %52 = stablehlo.broadcast_in_dim %c_10, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %53 = stablehlo.compare EQ, %6, %52, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %54 = stablehlo.select %53, %9, %9 : tensor<6xi1>, tensor<6xf32>
    %c_11 = stablehlo.constant dense<2> : tensor<i32>
    %55 = stablehlo.broadcast_in_dim %c_11, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %56 = stablehlo.compare EQ, %6, %55, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %57 = stablehlo.select %56, %10, %10 : tensor<6xi1>, tensor<6xi32>
    %58 = stablehlo.convert %57 : (tensor<6xi32>) -> tensor<6xf32>
    %c_12 = stablehlo.constant dense<3> : tensor<i32>
    %59 = stablehlo.broadcast_in_dim %c_12, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %60 = stablehlo.compare EQ, %6, %59, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %61 = stablehlo.select %60, %11, %11 : tensor<6xi1>, tensor<6xf32>
    %c_13 = stablehlo.constant dense<2> : tensor<i32>
    %62 = stablehlo.broadcast_in_dim %c_13, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %63 = stablehlo.compare LT, %6, %62, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %c_14 = stablehlo.constant dense<1> : tensor<i32>
    %64 = stablehlo.broadcast_in_dim %c_14, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %65 = stablehlo.compare LT, %6, %64, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %66 = stablehlo.select %65, %51, %54 : tensor<6xi1>, tensor<6xf32>
    %c_15 = stablehlo.constant dense<3> : tensor<i32>
    %67 = stablehlo.broadcast_in_dim %c_15, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %68 = stablehlo.compare LT, %6, %67, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %69 = stablehlo.select %68, %58, %61 : tensor<6xi1>, tensor<6xf32>
    %70 = stablehlo.select %63, %66, %69 : tensor<6xi1>, tensor<6xf32>
    return %70 : tensor<6xf32>
  }
  func.func private @cumsum(%arg0: tensor<4x6xi1>) -> tensor<4x6xi32> {
    %0 = stablehlo.convert %arg0 : (tensor<4x6xi1>) -> tensor<4x6xi32>
    %1 = call @cumsum_0(%0) : (tensor<4x6xi32>) -> tensor<4x6xi32>
    return %1 : tensor<4x6xi32>
  }
  func.func private @cumsum_0(%arg0: tensor<4x6xi32>) -> tensor<4x6xi32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1, 1>, padding = dense<[[3, 0], [0, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 4, 1>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %2 = stablehlo.add %arg1, %arg2 : tensor<i32>
      stablehlo.return %2 : tensor<i32>
    }) : (tensor<4x6xi32>, tensor<i32>) -> tensor<4x6xi32>
    return %1 : tensor<4x6xi32>
  }
  func.func private @argmax(%arg0: tensor<4x6xi32>) -> tensor<6xi32> {
    %0 = stablehlo.iota dim = 0 : tensor<4x6xi32>
    %c = stablehlo.constant dense<-2147483648> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %c), (%0 init: %c_0) across dimensions = [0] : (tensor<4x6xi32>, tensor<4x6xi32>, tensor<i32>, tensor<i32>) -> (tensor<6xi32>, tensor<6xi32>)
     reducer(%arg1: tensor<i32>, %arg3: tensor<i32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<i32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<i32>, tensor<i32>
    }
    return %1#1 : tensor<6xi32>
  }
  func.func private @_piecewise(%arg0: tensor<6xf32>, %arg1: tensor<6x1xi1>) -> tensor<6xf32> {
    %c = stablehlo.constant dense<false> : tensor<i1>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<1xi1>
    %1 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<1xi1>) -> tensor<6x1xi1>
    %2 = stablehlo.concatenate %1, %arg1, dim = 1 : (tensor<6x1xi1>, tensor<6x1xi1>) -> tensor<6x2xi1>
    %3 = call @cumsum_1(%2) : (tensor<6x2xi1>) -> tensor<6x2xi32>
    %4 = call @argmax_3(%3) : (tensor<6x2xi32>) -> tensor<6xi32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %6 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %7 = stablehlo.clamp %5, %4, %6 : tensor<6xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %8 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %9 = stablehlo.compare EQ, %7, %8, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %10 = stablehlo.select %9, %arg0, %arg0 : tensor<6xi1>, tensor<6xf32>
    %c_3 = stablehlo.constant dense<1> : tensor<i32>
    %11 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %12 = stablehlo.compare EQ, %7, %11, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %13 = stablehlo.select %12, %arg0, %arg0 : tensor<6xi1>, tensor<6xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %15 = stablehlo.divide %14, %13 : tensor<6xf32>
    %c_4 = stablehlo.constant dense<1> : tensor<i32>
    %16 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %17 = stablehlo.compare LT, %7, %16, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %18 = stablehlo.select %17, %10, %15 : tensor<6xi1>, tensor<6xf32>
    return %18 : tensor<6xf32>
  }
  func.func private @cumsum_1(%arg0: tensor<6x2xi1>) -> tensor<6x2xi32> {
    %0 = stablehlo.convert %arg0 : (tensor<6x2xi1>) -> tensor<6x2xi32>
    %1 = call @cumsum_2(%0) : (tensor<6x2xi32>) -> tensor<6x2xi32>
    return %1 : tensor<6x2xi32>
  }
  func.func private @cumsum_2(%arg0: tensor<6x2xi32>) -> tensor<6x2xi32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1, 1>, padding = dense<[[0, 0], [1, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %2 = stablehlo.add %arg1, %arg2 : tensor<i32>
      stablehlo.return %2 : tensor<i32>
    }) : (tensor<6x2xi32>, tensor<i32>) -> tensor<6x2xi32>
    return %1 : tensor<6x2xi32>
  }
  func.func private @argmax_3(%arg0: tensor<6x2xi32>) -> tensor<6xi32> {
    %0 = stablehlo.iota dim = 1 : tensor<6x2xi32>
    %c = stablehlo.constant dense<-2147483648> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %c), (%0 init: %c_0) across dimensions = [1] : (tensor<6x2xi32>, tensor<6x2xi32>, tensor<i32>, tensor<i32>) -> (tensor<6xi32>, tensor<6xi32>)
     reducer(%arg1: tensor<i32>, %arg3: tensor<i32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<i32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<i32>, tensor<i32>
    }
    return %1#1 : tensor<6xi32>
  }
  func.func private @_piecewise_4(%arg0: tensor<6xf32>, %arg1: tensor<6x2xi1>) -> tensor<6xf32> {
    %c = stablehlo.constant dense<false> : tensor<i1>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<1xi1>
    %1 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<1xi1>) -> tensor<6x1xi1>
    %2 = stablehlo.concatenate %1, %arg1, dim = 1 : (tensor<6x1xi1>, tensor<6x2xi1>) -> tensor<6x3xi1>
    %3 = call @cumsum_5(%2) : (tensor<6x3xi1>) -> tensor<6x3xi32>
    %4 = call @argmax_7(%3) : (tensor<6x3xi32>) -> tensor<6xi32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<2> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %6 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %7 = stablehlo.clamp %5, %4, %6 : tensor<6xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %8 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %9 = stablehlo.compare EQ, %7, %8, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %10 = stablehlo.select %9, %arg0, %arg0 : tensor<6xi1>, tensor<6xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %12 = stablehlo.subtract %10, %11 : tensor<6xf32>
    %c_3 = stablehlo.constant dense<1> : tensor<i32>
    %13 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %14 = stablehlo.compare EQ, %7, %13, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %15 = stablehlo.select %14, %arg0, %arg0 : tensor<6xi1>, tensor<6xf32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %17 = stablehlo.divide %16, %15 : tensor<6xf32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %18 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %19 = stablehlo.subtract %17, %18 : tensor<6xf32>
    %c_6 = stablehlo.constant dense<2> : tensor<i32>
    %20 = stablehlo.broadcast_in_dim %c_6, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %21 = stablehlo.compare EQ, %7, %20, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %22 = stablehlo.select %21, %arg0, %arg0 : tensor<6xi1>, tensor<6xf32>
    %23 = stablehlo.negate %22 : tensor<6xf32>
    %c_7 = stablehlo.constant dense<1> : tensor<i32>
    %24 = stablehlo.broadcast_in_dim %c_7, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %25 = stablehlo.compare LT, %7, %24, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %c_8 = stablehlo.constant dense<2> : tensor<i32>
    %26 = stablehlo.broadcast_in_dim %c_8, dims = [] : (tensor<i32>) -> tensor<6xi32>
    %27 = stablehlo.compare LT, %7, %26, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %28 = stablehlo.select %27, %19, %23 : tensor<6xi1>, tensor<6xf32>
    %29 = stablehlo.select %25, %12, %28 : tensor<6xi1>, tensor<6xf32>
    return %29 : tensor<6xf32>
  }
  func.func private @cumsum_5(%arg0: tensor<6x3xi1>) -> tensor<6x3xi32> {
    %0 = stablehlo.convert %arg0 : (tensor<6x3xi1>) -> tensor<6x3xi32>
    %1 = call @cumsum_6(%0) : (tensor<6x3xi32>) -> tensor<6x3xi32>
    return %1 : tensor<6x3xi32>
  }
  func.func private @cumsum_6(%arg0: tensor<6x3xi32>) -> tensor<6x3xi32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1, 1>, padding = dense<[[0, 0], [2, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 1, 3>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %2 = stablehlo.add %arg1, %arg2 : tensor<i32>
      stablehlo.return %2 : tensor<i32>
    }) : (tensor<6x3xi32>, tensor<i32>) -> tensor<6x3xi32>
    return %1 : tensor<6x3xi32>
  }
  func.func private @argmax_7(%arg0: tensor<6x3xi32>) -> tensor<6xi32> {
    %0 = stablehlo.iota dim = 1 : tensor<6x3xi32>
    %c = stablehlo.constant dense<-2147483648> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %c), (%0 init: %c_0) across dimensions = [1] : (tensor<6x3xi32>, tensor<6x3xi32>, tensor<i32>, tensor<i32>) -> (tensor<6xi32>, tensor<6xi32>)
     reducer(%arg1: tensor<i32>, %arg3: tensor<i32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<i32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<i32>, tensor<i32>
    }
    return %1#1 : tensor<6xi32>
  }
  func.func private @polyval(%arg0: tensor<6x8xf32>, %arg1: tensor<6xf32>) -> tensor<6xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %1 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<6x8xf32>) -> tensor<8x6xf32>
    %2 = stablehlo.slice %1 [0:0, 0:6] : (tensor<8x6xf32>) -> tensor<0x6xf32>
    %3 = stablehlo.slice %1 [0:8, 0:6] : (tensor<8x6xf32>) -> tensor<8x6xf32>
    %4 = stablehlo.slice %3 [0:1, 0:6] : (tensor<8x6xf32>) -> tensor<1x6xf32>
    %5 = stablehlo.reshape %4 : (tensor<1x6xf32>) -> tensor<6xf32>
    %6 = call @closed_call(%arg1, %0, %5) : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %7 = stablehlo.slice %3 [1:2, 0:6] : (tensor<8x6xf32>) -> tensor<1x6xf32>
    %8 = stablehlo.reshape %7 : (tensor<1x6xf32>) -> tensor<6xf32>
    %9 = call @closed_call(%arg1, %6, %8) : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %10 = stablehlo.slice %3 [2:3, 0:6] : (tensor<8x6xf32>) -> tensor<1x6xf32>
    %11 = stablehlo.reshape %10 : (tensor<1x6xf32>) -> tensor<6xf32>
    %12 = call @closed_call(%arg1, %9, %11) : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %13 = stablehlo.slice %3 [3:4, 0:6] : (tensor<8x6xf32>) -> tensor<1x6xf32>
    %14 = stablehlo.reshape %13 : (tensor<1x6xf32>) -> tensor<6xf32>
    %15 = call @closed_call(%arg1, %12, %14) : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %16 = stablehlo.slice %3 [4:5, 0:6] : (tensor<8x6xf32>) -> tensor<1x6xf32>
    %17 = stablehlo.reshape %16 : (tensor<1x6xf32>) -> tensor<6xf32>
    %18 = call @closed_call(%arg1, %15, %17) : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %19 = stablehlo.slice %3 [5:6, 0:6] : (tensor<8x6xf32>) -> tensor<1x6xf32>
    %20 = stablehlo.reshape %19 : (tensor<1x6xf32>) -> tensor<6xf32>
    %21 = call @closed_call(%arg1, %18, %20) : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %22 = stablehlo.slice %3 [6:7, 0:6] : (tensor<8x6xf32>) -> tensor<1x6xf32>
    %23 = stablehlo.reshape %22 : (tensor<1x6xf32>) -> tensor<6xf32>
    %24 = call @closed_call(%arg1, %21, %23) : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %25 = stablehlo.slice %3 [7:8, 0:6] : (tensor<8x6xf32>) -> tensor<1x6xf32>
    %26 = stablehlo.reshape %25 : (tensor<1x6xf32>) -> tensor<6xf32>
    %27 = call @closed_call(%arg1, %24, %26) : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    return %27 : tensor<6xf32>
  }
  func.func private @closed_call(%arg0: tensor<6xf32>, %arg1: tensor<6xf32>, %arg2: tensor<6xf32>) -> tensor<6xf32> {
    %0 = stablehlo.multiply %arg1, %arg0 : tensor<6xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<6xf32>
    return %1 : tensor<6xf32>
  }
  func.func private @_where(%arg0: tensor<6xi1>, %arg1: tensor<6xf32>, %arg2: tensor<6xf32>) -> tensor<6xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<6xi1>, tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}
