// RUN: mlirxla-opt %s | FileCheck %s

/// One op of every family in docs/xhlo.md, written directly in xhlo without the derivable
/// segment sizes, parses, verifies and prints back.

module @families attributes {xhlo.config = {debug_options = {}, device_assignment = dense<[[0], [1]]> : tensor<2x1xi64>, partition_count = 1 : i64, replica_count = 2 : i64}} {
  // CHECK-LABEL: func.func public @main
  func.func public @main(%x: tensor<2x3xf32> {xhlo.layout = array<i64: 1, 0>}, %i: tensor<i32>, %p: tensor<i1>) -> tensor<2x3xf32> {
    // CHECK: "xhlo.add"(%arg0, %arg0) {result_layouts = [array<i64: 0, 1>]}
    %0 = "xhlo.add"(%x, %x) {result_layouts = [array<i64: 0, 1>]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    // CHECK: "xhlo.compare"(%0, %arg0) {compare_type = "FLOAT", comparison_direction = "GT"}
    %1 = "xhlo.compare"(%0, %x) {comparison_direction = "GT", compare_type = "FLOAT"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
    // CHECK: "xhlo.select"
    %2 = "xhlo.select"(%1, %0, %x) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    // CHECK: "xhlo.broadcast"(%{{.*}}) {dimensions = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
    %c = "xhlo.constant"() {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
    %3 = "xhlo.broadcast"(%c) {dimensions = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
    // CHECK: "xhlo.dot"
    %t = "xhlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %4 = "xhlo.dot"(%x, %t) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
    // CHECK: "xhlo.fusion"
    // CHECK: kind = "loop"
    %5 = "xhlo.fusion"(%2, %3) ({
    ^bb0(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>):
      %m = "xhlo.multiply"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      "xhlo.return"(%m) : (tensor<2x3xf32>) -> ()
    }) {kind = "loop"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    // CHECK: "xhlo.copy"
    %6 = "xhlo.copy"(%5) {result_layouts = [array<i64: 0, 1>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    // CHECK: "xhlo.bitcast"
    %7 = "xhlo.bitcast"(%6) : (tensor<2x3xf32>) -> tensor<3x2xf32>
    // CHECK: "xhlo.conditional"(%arg2, %{{[0-9]+}}, %arg0) {branch_computations = [@on_true, @on_false], branch_operand_counts = array<i64: 1, 1>
    %8 = "xhlo.conditional"(%p, %6, %x) {branch_computations = [@on_true, @on_false], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    // CHECK: "xhlo.all_reduce"
    %r = "xhlo.all_reduce"(%c) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "xhlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    func.return %8 : tensor<2x3xf32>
  }
  func.func private @on_true(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
    func.return %a : tensor<2x3xf32>
  }
  func.func private @on_false(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %n = "xhlo.negate"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %n : tensor<2x3xf32>
  }
}
