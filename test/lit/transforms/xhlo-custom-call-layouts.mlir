// RUN: mlirxla-opt %s -p xhlo-custom-call-layouts --split-input-file | FileCheck %s

/// A batched getrf (jax's lu on 4 matrices of 3x5): the column-major matrix goes in and
/// comes out through transposes of its last two dimensions; the pivots and infos are
/// row-major already and pass as they are. The call records the order of each buffer.
// CHECK-LABEL: func.func @getrf
// CHECK-NEXT: %[[IN:.*]] = "xhlo.transpose"(%arg0) {permutation = array<i64: 0, 2, 1>} : (tensor<4x3x5xf32>) -> tensor<4x5x3xf32>
// CHECK-NEXT: %[[CALL:.*]]:3 = "xhlo.custom_call"(%[[IN]])
// CHECK-SAME: operand_layouts = [dense<[2, 1, 0]> : tensor<3xindex>]
// CHECK-SAME: result_layouts = [dense<[2, 1, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]
// CHECK-SAME: xhlo.operand_orders = [array<i64: 0, 2, 1>], xhlo.result_orders = [array<i64: 0, 2, 1>, array<i64: 0, 1>, array<i64: 0>]
// CHECK-NOT: sdy.sharding_rule
// CHECK-SAME: (tensor<4x5x3xf32>) -> (tensor<4x5x3xf32>, tensor<4x3xi32>, tensor<4xi32>)
// CHECK-NEXT: %[[OUT:.*]] = "xhlo.transpose"(%[[CALL]]#0) {permutation = array<i64: 0, 2, 1>} : (tensor<4x5x3xf32>) -> tensor<4x3x5xf32>
// CHECK-NEXT: return %[[OUT]], %[[CALL]]#1, %[[CALL]]#2
func.func @getrf(%a: tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<4x3xi32>, tensor<4xi32>) {
  %0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) {mhlo.backend_config = {}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k])->([i, l, m], [i, n], [i]) {i=4, j=3, k=5, l=3, m=5, n=3}, custom>} : (tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<4x3xi32>, tensor<4xi32>)
  return %0#0, %0#1, %0#2 : tensor<4x3x5xf32>, tensor<4x3xi32>, tensor<4xi32>
}

// -----

/// One matrix as trsm's triangle and right-hand sides: one transpose feeds both; the second
/// trsm takes the first's column-major result as it is, with no transpose back and forth.
// CHECK-LABEL: func.func @two_solves
// CHECK-NEXT: %[[IN:.*]] = "xhlo.transpose"(%arg0) {permutation = array<i64: 1, 0>}
// CHECK-NEXT: %[[FIRST:.*]] = "xhlo.custom_call"(%[[IN]], %[[IN]])
// CHECK-NEXT: %[[SECOND:.*]] = "xhlo.custom_call"(%[[IN]], %[[FIRST]])
// CHECK-NEXT: %[[OUT:.*]] = "xhlo.transpose"(%[[SECOND]]) {permutation = array<i64: 1, 0>}
// CHECK-NEXT: return %[[OUT]]
func.func @two_solves(%a: tensor<6x6xf64>) -> tensor<6x6xf64> {
  %0 = stablehlo.custom_call @lapack_dtrsm_ffi(%a, %a) {mhlo.backend_config = {diag = 85 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<6x6xf64>, tensor<6x6xf64>) -> tensor<6x6xf64>
  %1 = stablehlo.custom_call @lapack_dtrsm_ffi(%a, %0) {mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 85 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<6x6xf64>, tensor<6x6xf64>) -> tensor<6x6xf64>
  return %1 : tensor<6x6xf64>
}

// -----

/// Row-major layouts (a Python callback's) leave the call as it is.
// CHECK-LABEL: func.func @row_major
// CHECK-NOT: xhlo.transpose
// CHECK-NOT: xhlo.operand_orders
func.func @row_major(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.custom_call @xla_python_cpu_callback(%x) {backend_config = "7", operand_layouts = [dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// A token among the operands: the call is left as it is, whatever its matrix's layout.
// CHECK-LABEL: func.func @with_token
// CHECK-NOT: xhlo.transpose
// CHECK: operand_layouts = [dense<> : tensor<0xindex>, dense<[0, 1]> : tensor<2xindex>]
func.func @with_token(%t: !stablehlo.token, %x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.custom_call @some_target(%t, %x) {operand_layouts = [dense<> : tensor<0xindex>, dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (!stablehlo.token, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

/// An SVD without vectors (jax's `norm(x, 2)`): gesdd still returns the overwritten matrix,
/// u and vt, which nothing reads; only the singular values and infos are used, so no
/// transpose brings the column-major results back.
// CHECK-LABEL: func.func @singular_values
// CHECK-NEXT: %[[IN:.*]] = "xhlo.transpose"(%arg0) {permutation = array<i64: 1, 0>}
// CHECK-NEXT: %[[CALL:.*]]:5 = "xhlo.custom_call"(%[[IN]])
// CHECK-NEXT: return %[[CALL]]#1, %[[CALL]]#4
func.func @singular_values(%a: tensor<6x4xf32>) -> (tensor<4xf32>, tensor<i32>) {
  %0:5 = stablehlo.custom_call @lapack_sgesdd_ffi(%a) {mhlo.backend_config = {mode = 78 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<4xf32>, tensor<6x6xf32>, tensor<4x4xf32>, tensor<i32>)
  return %0#1, %0#4 : tensor<4xf32>, tensor<i32>
}
