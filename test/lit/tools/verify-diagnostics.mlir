// RUN: mlirxla-opt %s --split-input-file --verify-diagnostics
// RUN: not mlirxla-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=PLAIN

/// Each chunk's error is matched against its expected-error comment, on the right line.

func.func @bad_transpose(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{xhlo.transpose: permutation [0, 0] is not a permutation of rank 2}}
  %0 = "xhlo.transpose"(%x) {permutation = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @bad_reshape(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  %0 = "xhlo.reshape"(%x) : (tensor<2x3xf32>) -> tensor<7xf32> // expected-error {{element count changes}}
  return %0 : tensor<7xf32>
}

// PLAIN: mlirxla-opt: error: {{.*}}verify-diagnostics.mlir:8:8: xhlo.transpose: permutation [0, 0]
