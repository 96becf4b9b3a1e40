#map = affine_map<(d0, d1) -> (d1)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#map2 = affine_map<(d0, d1) -> (0, d1)>
#map3 = affine_map<(d0, d1) -> (d0)>
#map4 = affine_map<(d0) -> ()>
#map5 = affine_map<(d0) -> (d0)>
#map6 = affine_map<(d0, d1) -> (d0, 0)>
#map7 = affine_map<(d0, d1) -> ()>
module @jit_dense_relu_softmax attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64x128xf32>, %arg1: tensor<128xf32>, %arg2: tensor<32x64xf32>) -> (tensor<32x128xf32> {jax.result_info = "result"}) {
    %0 = tensor.empty() : tensor<32x128xf32>
    %cst = arith.constant 0.000000e+00 : f32
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<32x128xf32>) -> tensor<32x128xf32>
    %2 = linalg.matmul ins(%arg2, %arg0 : tensor<32x64xf32>, tensor<64x128xf32>) outs(%1 : tensor<32x128xf32>) -> tensor<32x128xf32>
    %3 = tensor.empty() : tensor<1x128xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%arg1 : tensor<128xf32>) outs(%3 : tensor<1x128xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<1x128xf32>
    %5 = tensor.empty() : tensor<32x128xf32>
    %6 = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%4 : tensor<1x128xf32>) outs(%5 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32x128xf32>
    %7 = tensor.empty() : tensor<32x128xf32>
    %8 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%2, %6 : tensor<32x128xf32>, tensor<32x128xf32>) outs(%7 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %34 = arith.addf %in, %in_5 : f32
      linalg.yield %34 : f32
    } -> tensor<32x128xf32>
    %9 = call @relu(%8) : (tensor<32x128xf32>) -> tensor<32x128xf32>
    %cst_0 = arith.constant dense<0xFF800000> : tensor<f32>
    %cst_1 = arith.constant 0xFF800000 : f32
    %10 = tensor.empty() : tensor<32xf32>
    %11 = linalg.fill ins(%cst_1 : f32) outs(%10 : tensor<32xf32>) -> tensor<32xf32>
    %12 = linalg.generic {indexing_maps = [#map1, #map3], iterator_types = ["parallel", "reduction"]} ins(%9 : tensor<32x128xf32>) outs(%11 : tensor<32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %from_elements = tensor.from_elements %in : tensor<f32>
      %from_elements_5 = tensor.from_elements %out : tensor<f32>
      %extracted = tensor.extract %from_elements_5[] : tensor<f32>
      %extracted_6 = tensor.extract %from_elements[] : tensor<f32>
      %34 = arith.maximumf %extracted, %extracted_6 : f32
      %from_elements_7 = tensor.from_elements %34 : tensor<f32>
      %extracted_8 = tensor.extract %from_elements_7[] : tensor<f32>
      linalg.yield %extracted_8 : f32
    } -> tensor<32xf32>
    %cst_2 = arith.constant dense<0xFF800000> : tensor<f32>
    %13 = tensor.empty() : tensor<32xf32>
    %14 = linalg.generic {indexing_maps = [#map4, #map5], iterator_types = ["parallel"]} ins(%cst_2 : tensor<f32>) outs(%13 : tensor<32xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32xf32>
    %15 = tensor.empty() : tensor<32xf32>
    %16 = linalg.generic {indexing_maps = [#map5, #map5, #map5], iterator_types = ["parallel"]} ins(%14, %12 : tensor<32xf32>, tensor<32xf32>) outs(%15 : tensor<32xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %34 = arith.maximumf %in, %in_5 : f32
      linalg.yield %34 : f32
    } -> tensor<32xf32>
    %17 = tensor.empty() : tensor<32x1xf32>
    %18 = linalg.generic {indexing_maps = [#map3, #map1], iterator_types = ["parallel", "parallel"]} ins(%16 : tensor<32xf32>) outs(%17 : tensor<32x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32x1xf32>
    %19 = tensor.empty() : tensor<32x128xf32>
    %20 = linalg.generic {indexing_maps = [#map6, #map1], iterator_types = ["parallel", "parallel"]} ins(%18 : tensor<32x1xf32>) outs(%19 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32x128xf32>
    %21 = tensor.empty() : tensor<32x128xf32>
    %22 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%9, %20 : tensor<32x128xf32>, tensor<32x128xf32>) outs(%21 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %34 = arith.subf %in, %in_5 : f32
      linalg.yield %34 : f32
    } -> tensor<32x128xf32>
    %23 = tensor.empty() : tensor<32x128xf32>
    %24 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%22 : tensor<32x128xf32>) outs(%23 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %out: f32):
      %34 = math.exp %in : f32
      linalg.yield %34 : f32
    } -> tensor<32x128xf32>
    %cst_3 = arith.constant dense<0.000000e+00> : tensor<f32>
    %cst_4 = arith.constant 0.000000e+00 : f32
    %25 = tensor.empty() : tensor<32xf32>
    %26 = linalg.fill ins(%cst_4 : f32) outs(%25 : tensor<32xf32>) -> tensor<32xf32>
    %27 = linalg.generic {indexing_maps = [#map1, #map3], iterator_types = ["parallel", "reduction"]} ins(%24 : tensor<32x128xf32>) outs(%26 : tensor<32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %from_elements = tensor.from_elements %in : tensor<f32>
      %from_elements_5 = tensor.from_elements %out : tensor<f32>
      %extracted = tensor.extract %from_elements_5[] : tensor<f32>
      %extracted_6 = tensor.extract %from_elements[] : tensor<f32>
      %34 = arith.addf %extracted, %extracted_6 : f32
      %from_elements_7 = tensor.from_elements %34 : tensor<f32>
      %extracted_8 = tensor.extract %from_elements_7[] : tensor<f32>
      linalg.yield %extracted_8 : f32
    } -> tensor<32xf32>
    %28 = tensor.empty() : tensor<32x1xf32>
    %29 = linalg.generic {indexing_maps = [#map3, #map1], iterator_types = ["parallel", "parallel"]} ins(%27 : tensor<32xf32>) outs(%28 : tensor<32x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32x1xf32>
    %30 = tensor.empty() : tensor<32x128xf32>
    %31 = linalg.generic {indexing_maps = [#map6, #map1], iterator_types = ["parallel", "parallel"]} ins(%29 : tensor<32x1xf32>) outs(%30 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32x128xf32>
    %32 = tensor.empty() : tensor<32x128xf32>
    %33 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%24, %31 : tensor<32x128xf32>, tensor<32x128xf32>) outs(%32 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %34 = arith.divf %in, %in_5 : f32
      linalg.yield %34 : f32
    } -> tensor<32x128xf32>
    return %33 : tensor<32x128xf32>
  }
  func.func private @relu(%arg0: tensor<32x128xf32>) -> tensor<32x128xf32> {
    %cst = arith.constant dense<0.000000e+00> : tensor<f32>
    %0 = tensor.empty() : tensor<32x128xf32>
    %1 = linalg.generic {indexing_maps = [#map7, #map1], iterator_types = ["parallel", "parallel"]} ins(%cst : tensor<f32>) outs(%0 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<32x128xf32>
    %2 = tensor.empty() : tensor<32x128xf32>
    %3 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%arg0, %1 : tensor<32x128xf32>, tensor<32x128xf32>) outs(%2 : tensor<32x128xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %4 = arith.maximumf %in, %in_0 : f32
      linalg.yield %4 : f32
    } -> tensor<32x128xf32>
    return %3 : tensor<32x128xf32>
  }
}

