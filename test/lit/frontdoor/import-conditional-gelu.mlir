// RUN: mlirxla-opt %programs/02_scan_while_cond_gelu.stablehlo.mlir | FileCheck %s

/// stablehlo.case becomes xhlo.conditional whose branches are outlined computations taking
/// the values they capture; chlo.erfc becomes an xhlo composition; the while loops carry
/// values of different types.

// CHECK-LABEL: func.func public @main
// CHECK: "xhlo.while"
// CHECK: "xhlo.dynamic_slice"
// CHECK: "xhlo.dynamic_update_slice"
// CHECK: %[[SEL:.*]] = "xhlo.convert"
// CHECK: "xhlo.conditional"(%[[SEL]], %{{.*}}, %{{.*}}) {branch_computations = [@branch_0, @branch_1], branch_operand_counts = array<i64: 1, 1>} : (tensor<i32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
// CHECK-NOT: chlo.
// CHECK: func.func private @branch_0(%arg0: tensor<16xf32>) -> tensor<16xf32>
// CHECK: "xhlo.exponential"
// CHECK: return
// CHECK: func.func private @branch_1(%arg0: tensor<16xf32>) -> tensor<16xf32>
// CHECK: "xhlo.tanh"
