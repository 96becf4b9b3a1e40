// RUN: mlirxla-opt %s -p xhlo-multi-output-fusion --split-input-file | FileCheck %s
// RUN: mlirxla-opt %s -p 'xhlo-multi-output-fusion{producer-consumer=false}' --split-input-file | FileCheck %s --check-prefix=SIBLINGS

/// Two loop fusions reading %x, with no path between them, become one fusion with both roots.
// CHECK-LABEL: func.func @siblings
// CHECK: %[[F:.*]]:2 = "xhlo.fusion"(%arg0, %arg1)
// CHECK: xhlo.add
// CHECK: xhlo.negate
// CHECK: xhlo.multiply
// CHECK: xhlo.abs
// CHECK: "xhlo.return"(%{{.*}}, %{{.*}})
// CHECK: kind = "loop", name = "add_negate_fusion.1"
// CHECK-NOT: xhlo.fusion
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @siblings(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = "xhlo.fusion"(%x, %y) ({
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %s = "xhlo.add"(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %n = "xhlo.negate"(%s) : (tensor<8xf32>) -> tensor<8xf32>
    "xhlo.return"(%n) : (tensor<8xf32>) -> ()
  }) {kind = "loop", name = "add_negate_fusion"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = "xhlo.fusion"(%x) ({
  ^bb0(%a: tensor<8xf32>):
    %m = "xhlo.multiply"(%a, %a) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %e = "xhlo.abs"(%m) : (tensor<8xf32>) -> tensor<8xf32>
    "xhlo.return"(%e) : (tensor<8xf32>) -> ()
  }) {kind = "loop", name = "multiply_abs_fusion"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

/// Negative twin: the second sibling also reads the first one's result (a path between
/// them), so merging them as siblings would create a cycle: they stay apart (SIBLINGS, the
/// sibling rule alone). Producer-consumer fusion then makes the first, which is also
/// returned, an extra output of the second's loop: one kernel, the producer's value
/// computed once and not read back.
// SIBLINGS-LABEL: func.func @siblings_with_path
// SIBLINGS: %[[A:.*]] = "xhlo.fusion"(%arg0, %arg1)
// SIBLINGS: name = "add_negate_fusion"
// SIBLINGS: "xhlo.fusion"(%arg0, %[[A]])
// SIBLINGS: name = "multiply_abs_fusion"
// CHECK-LABEL: func.func @siblings_with_path
// CHECK: %[[F:.*]]:2 = "xhlo.fusion"(%arg0, %arg1)
// CHECK: %[[N:.*]] = "xhlo.negate"
// CHECK: %[[M:.*]] = "xhlo.multiply"(%{{.*}}, %[[N]])
// CHECK: %[[E:.*]] = "xhlo.abs"(%[[M]])
// CHECK: "xhlo.return"(%[[E]], %[[N]])
// CHECK: kind = "loop"
// CHECK-NOT: xhlo.fusion
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @siblings_with_path(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = "xhlo.fusion"(%x, %y) ({
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %s = "xhlo.add"(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %n = "xhlo.negate"(%s) : (tensor<8xf32>) -> tensor<8xf32>
    "xhlo.return"(%n) : (tensor<8xf32>) -> ()
  }) {kind = "loop", name = "add_negate_fusion"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = "xhlo.fusion"(%x, %0) ({
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %m = "xhlo.multiply"(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %e = "xhlo.abs"(%m) : (tensor<8xf32>) -> tensor<8xf32>
    "xhlo.return"(%e) : (tensor<8xf32>) -> ()
  }) {kind = "loop", name = "multiply_abs_fusion"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

/// Negative twin: siblings with different loop shapes (8 and 2x4) stay apart.
// CHECK-LABEL: func.func @siblings_different_shapes
// CHECK: "xhlo.fusion"(%arg0, %arg1)
// CHECK: name = "add_negate_fusion"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK: "xhlo.fusion"(%arg0)
// CHECK: name = "reshape_abs_fusion"} : (tensor<8xf32>) -> tensor<2x4xf32>
func.func @siblings_different_shapes(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<2x4xf32>) {
  %0 = "xhlo.fusion"(%x, %y) ({
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %s = "xhlo.add"(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %n = "xhlo.negate"(%s) : (tensor<8xf32>) -> tensor<8xf32>
    "xhlo.return"(%n) : (tensor<8xf32>) -> ()
  }) {kind = "loop", name = "add_negate_fusion"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = "xhlo.fusion"(%x) ({
  ^bb0(%a: tensor<8xf32>):
    %r = "xhlo.reshape"(%a) : (tensor<8xf32>) -> tensor<2x4xf32>
    %e = "xhlo.abs"(%r) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    "xhlo.return"(%e) : (tensor<2x4xf32>) -> ()
  }) {kind = "loop", name = "reshape_abs_fusion"} : (tensor<8xf32>) -> tensor<2x4xf32>
  return %0, %1 : tensor<8xf32>, tensor<2x4xf32>
}

// -----

/// A loop fusion and a reduce fusion over the same 4x8 input are siblings: one input fusion.
// CHECK-LABEL: func.func @sibling_reduce
// CHECK: %[[F:.*]]:2 = "xhlo.fusion"(%arg0)
// CHECK: xhlo.exponential
// CHECK: xhlo.reduce
// CHECK: kind = "input"
// CHECK-NOT: xhlo.fusion
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @sibling_reduce(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %0 = "xhlo.fusion"(%x) ({
  ^bb0(%a: tensor<4x8xf32>):
    %e = "xhlo.exponential"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "xhlo.return"(%e) : (tensor<4x8xf32>) -> ()
  }) {kind = "loop", name = "exponential_fusion"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "xhlo.fusion"(%x) ({
  ^bb0(%a: tensor<4x8xf32>):
    %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %r = "xhlo.reduce"(%a, %z) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    "xhlo.return"(%r) : (tensor<4xf32>) -> ()
  }) {kind = "input", name = "reduce_fusion"} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4xf32>
}

// -----

/// Producer-consumer: the producer is also returned, so it is fused into the reduce
/// consumer and kept as an extra output (computed once, not read back).
// CHECK-LABEL: func.func @producer_consumer
// CHECK: %[[F:.*]]:2 = "xhlo.fusion"(%arg0)
// CHECK: xhlo.multiply
// CHECK: xhlo.reduce
// CHECK: "xhlo.return"
// CHECK: kind = "input"
// CHECK-NOT: xhlo.fusion
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @producer_consumer(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %0 = "xhlo.fusion"(%x) ({
  ^bb0(%a: tensor<4x8xf32>):
    %m = "xhlo.multiply"(%a, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "xhlo.return"(%m) : (tensor<4x8xf32>) -> ()
  }) {kind = "loop", name = "multiply_fusion"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "xhlo.fusion"(%0) ({
  ^bb0(%a: tensor<4x8xf32>):
    %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %r = "xhlo.reduce"(%a, %z) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    "xhlo.return"(%r) : (tensor<4xf32>) -> ()
  }) {kind = "input", name = "reduce_fusion"} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %1, %0 : tensor<4xf32>, tensor<4x8xf32>
}

// -----

/// Negative twin: the consumer also reads the other user of the producer (a path producer ->
/// other user -> consumer), so the producer stays separate; that other user, a reverse, is
/// no elementwise loop for the producer to become an extra output of either.
// CHECK-LABEL: func.func @producer_consumer_cycle
// CHECK: %[[P:.*]] = "xhlo.fusion"(%arg0)
// CHECK: name = "multiply_fusion"
// CHECK: %[[N:.*]] = "xhlo.reverse"(%[[P]])
// CHECK: "xhlo.fusion"(%[[P]], %[[N]])
// CHECK: name = "add_reduce_fusion"
func.func @producer_consumer_cycle(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = "xhlo.fusion"(%x) ({
  ^bb0(%a: tensor<4x8xf32>):
    %m = "xhlo.multiply"(%a, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "xhlo.return"(%m) : (tensor<4x8xf32>) -> ()
  }) {kind = "loop", name = "multiply_fusion"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "xhlo.reverse"(%0) {dimensions = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = "xhlo.fusion"(%0, %1) ({
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %t = "xhlo.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %r = "xhlo.reduce"(%t, %z) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "xhlo.return"(%s) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    "xhlo.return"(%r) : (tensor<4xf32>) -> ()
  }) {kind = "input", name = "add_reduce_fusion"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
