// RUN: mlirxla-opt %s -p xhlo-copy-insertion --split-input-file | FileCheck %s

/// An in-place update of a value still live afterwards gets a copy of its operand.
// CHECK-LABEL: func.func @dus_live_operand
// CHECK: %[[A:.*]] = "xhlo.negate"
// CHECK: %[[C:.*]] = "xhlo.copy"(%[[A]])
// CHECK: "xhlo.dynamic_update_slice"(%[[C]],
func.func @dus_live_operand(%x: tensor<4xf32>, %u: tensor<1xf32>, %i: tensor<i32>) -> tensor<4xf32> {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %s = "xhlo.dynamic_update_slice"(%a, %u, %i) : (tensor<4xf32>, tensor<1xf32>, tensor<i32>) -> tensor<4xf32>
  %b = "xhlo.add"(%a, %s) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

/// Negative twin: the operand dies at the update, so no copy.
// CHECK-LABEL: func.func @no_copy_dus_dead_operand
// CHECK-NOT: xhlo.copy
func.func @no_copy_dus_dead_operand(%x: tensor<4xf32>, %u: tensor<1xf32>, %i: tensor<i32>) -> tensor<4xf32> {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %s = "xhlo.dynamic_update_slice"(%a, %u, %i) : (tensor<4xf32>, tensor<1xf32>, tensor<i32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

/// A parameter updated in place, a parameter returned and a constant returned get copies.
// CHECK-LABEL: func.func @params_and_constants
// CHECK: "xhlo.copy"(%arg0)
// CHECK-NEXT: "xhlo.dynamic_update_slice"
// CHECK: %[[P:.*]] = "xhlo.copy"(%arg0)
// CHECK: %[[K:.*]] = "xhlo.copy"(%0)
// CHECK: return %{{.*}}, %[[P]], %[[K]]
func.func @params_and_constants(%x: tensor<4xf32>, %u: tensor<1xf32>, %i: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %k = "xhlo.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %s = "xhlo.dynamic_update_slice"(%x, %u, %i) : (tensor<4xf32>, tensor<1xf32>, tensor<i32>) -> tensor<4xf32>
  return %s, %x, %k : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

/// Negative twin: a donated parameter returned as its aliased output needs no copy.
// CHECK-LABEL: func.func @no_copy_donated_output
// CHECK-NOT: xhlo.copy
func.func @no_copy_donated_output(%x: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

/// While inits: a value live after the loop, and the same value passed twice, get copies.
// CHECK-LABEL: func.func @while_aliasing
// CHECK: %[[A:.*]] = "xhlo.negate"
// CHECK: %[[C1:.*]] = "xhlo.copy"(%[[A]])
// CHECK: %[[C2:.*]] = "xhlo.copy"(%[[A]])
// CHECK: "xhlo.while"(%[[C1]], %[[C2]])
func.func @while_aliasing(%x: tensor<4xf32>, %p: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %w:2 = "xhlo.while"(%a, %a) ({
  ^bb0(%u: tensor<4xf32>, %v: tensor<4xf32>):
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%u: tensor<4xf32>, %v: tensor<4xf32>):
    %n = "xhlo.add"(%u, %v) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%n, %v) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %b = "xhlo.add"(%w#0, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b, %w#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

/// Negative twin: an init computed for the loop alone needs no copy.
// CHECK-LABEL: func.func @no_copy_while_fresh_init
// CHECK-NOT: xhlo.copy
func.func @no_copy_while_fresh_init(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %w = "xhlo.while"(%a) ({
  ^bb0(%u: tensor<4xf32>):
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%u: tensor<4xf32>):
    %n = "xhlo.add"(%u, %u) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%n) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

/// A scan's stacked output: the body updates its carried stack in place (no copy) and
/// reads nothing of it afterwards.
// CHECK-LABEL: func.func @no_copy_while_stack_updated_in_place
// CHECK-NOT: xhlo.copy
func.func @no_copy_while_stack_updated_in_place(%x: tensor<4xf32>, %v: tensor<1xf32>, %i: tensor<i32>, %p: tensor<i1>) -> tensor<4xf32> {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %w = "xhlo.while"(%a) ({
  ^bb0(%u: tensor<4xf32>):
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%u: tensor<4xf32>):
    %s = "xhlo.dynamic_update_slice"(%u, %v, %i) : (tensor<4xf32>, tensor<1xf32>, tensor<i32>) -> tensor<4xf32>
    "xhlo.return"(%s) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

/// Positive twin: the body also reads the stack in an op the update need not follow, so the
/// updated stack gets a buffer of its own and a copy back into the carried one.
// CHECK-LABEL: func.func @while_stack_read_after_update
// CHECK: %[[S:.*]] = "xhlo.dynamic_update_slice"
// CHECK: %[[C:.*]] = "xhlo.copy"(%[[S]])
// CHECK: "xhlo.return"(%[[C]],
func.func @while_stack_read_after_update(%x: tensor<4xf32>, %v: tensor<1xf32>, %i: tensor<i32>, %p: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = "xhlo.negate"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %w:2 = "xhlo.while"(%a, %b) ({
  ^bb0(%u: tensor<4xf32>, %t: tensor<4xf32>):
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%u: tensor<4xf32>, %t: tensor<4xf32>):
    %s = "xhlo.dynamic_update_slice"(%u, %v, %i) : (tensor<4xf32>, tensor<1xf32>, tensor<i32>) -> tensor<4xf32>
    %n = "xhlo.add"(%u, %t) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%s, %n) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %w#0, %w#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

/// A carried value that moves to the next position (jax's `(new_norm, norm)` in inverse
/// iteration) is read by the copies that end the body, so the new value written into its
/// buffer gets a copy too: both land through the closing copies, after every read.
// CHECK-LABEL: func.func @while_rotates_a_carried_value
// CHECK: }, {
// CHECK-NEXT: ^bb0(%[[CARRIED:.*]]: tensor<4xf32>, %{{.*}}: tensor<4xf32>):
// CHECK-NEXT: %[[N:.*]] = "xhlo.sqrt"(%[[CARRIED]])
// CHECK-DAG: %[[NEW:.*]] = "xhlo.copy"(%[[N]])
// CHECK-DAG: %[[OLD:.*]] = "xhlo.copy"(%[[CARRIED]])
// CHECK: "xhlo.return"(%[[NEW]], %[[OLD]])
func.func @while_rotates_a_carried_value(%x: tensor<4xf32>, %p: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = "xhlo.negate"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %w:2 = "xhlo.while"(%a, %b) ({
  ^bb0(%n: tensor<4xf32>, %old: tensor<4xf32>):
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%n: tensor<4xf32>, %old: tensor<4xf32>):
    %next = "xhlo.sqrt"(%n) : (tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %n) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %w#0, %w#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

/// A body returning a value of the enclosing computation (CSE merged the body's iota with one
/// outside) gets a copy: the loop writes its carried buffer, which must not be that value's.
// CHECK-LABEL: func.func @while_returns_an_outer_value
// CHECK: %[[OUTER:.*]] = "xhlo.iota"
// CHECK: }, {
// CHECK: %[[C:.*]] = "xhlo.copy"(%[[OUTER]])
// CHECK: "xhlo.return"(%[[C]])
func.func @while_returns_an_outer_value(%x: tensor<4xf32>, %p: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>) {
  %outer = "xhlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<4xf32>
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %w = "xhlo.while"(%a) ({
  ^bb0(%u: tensor<4xf32>):
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%u: tensor<4xf32>):
    "xhlo.return"(%outer) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %w, %outer : tensor<4xf32>, tensor<4xf32>
}

// -----

/// A parameter the loop writes gets a copy as its init.
// CHECK-LABEL: func.func @while_writes_parameter
// CHECK: %[[C:.*]] = "xhlo.copy"(%arg0)
// CHECK: "xhlo.while"(%[[C]])
func.func @while_writes_parameter(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %w = "xhlo.while"(%x) ({
  ^bb0(%u: tensor<4xf32>):
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%u: tensor<4xf32>):
    %n = "xhlo.negate"(%u) : (tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%n) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  %y = "xhlo.negate"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

/// Negative twin: a parameter the body passes through unchanged is never written: no copy.
// CHECK-LABEL: func.func @no_copy_while_pass_through_parameter
// CHECK-NOT: xhlo.copy
// CHECK: %[[Z:.*]] = "xhlo.negate"(%arg1)
// CHECK: "xhlo.while"(%arg0, %[[Z]])
func.func @no_copy_while_pass_through_parameter(%x: tensor<4xf32>, %y: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %z = "xhlo.negate"(%y) : (tensor<4xf32>) -> tensor<4xf32>
  %w:2 = "xhlo.while"(%x, %z) ({
  ^bb0(%u: tensor<4xf32>, %v: tensor<4xf32>):
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%u: tensor<4xf32>, %v: tensor<4xf32>):
    %n = "xhlo.add"(%u, %v) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%u, %n) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %o = "xhlo.negate"(%w#1) : (tensor<4xf32>) -> tensor<4xf32>
  return %o : tensor<4xf32>
}

// -----

/// A conditional branch returning an optimization barrier of its parameter returns a copy:
/// the barrier forwards the parameter's buffer, which without the copy is also the result's
/// and the other branch's operand's (the multiply overwrote %a; fuzz seed 93 of
/// mlirxla.fuzz.dags).
// CHECK-LABEL: func.func @branch_returns_barrier_of_parameter
// CHECK: func.func private @barrier_branch_0
// CHECK: %[[B0:.*]] = "xhlo.optimization_barrier"(%arg0)
// CHECK: %[[C0:.*]] = "xhlo.copy"(%[[B0]])
// CHECK: return %[[C0]]
// CHECK: func.func private @barrier_branch_1
// CHECK: %[[B1:.*]] = "xhlo.optimization_barrier"(%arg0)
// CHECK: %[[C1:.*]] = "xhlo.copy"(%[[B1]])
// CHECK: return %[[C1]]
module {
  func.func @branch_returns_barrier_of_parameter(%p: tensor<i1>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %m = "xhlo.multiply"(%b, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %r = "xhlo.conditional"(%p, %m, %a) {branch_computations = [@barrier_branch_0, @barrier_branch_1], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
  func.func private @barrier_branch_0(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = "xhlo.optimization_barrier"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func private @barrier_branch_1(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = "xhlo.optimization_barrier"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

/// A scatter whose operand is read only by ops the scatter depends on updates it in place (a
/// permutation swap: both rows read, then written back); read afterwards, it gets a copy.
// CHECK-LABEL: func.func @scatter_after_its_reads
// CHECK-NOT: xhlo.copy
// CHECK: "xhlo.scatter"(%[[A:.*]], %arg1, %[[R:.*]])
// CHECK-LABEL: func.func @scatter_read_afterwards
// CHECK: %[[C:.*]] = "xhlo.copy"(%[[A:.*]])
// CHECK: "xhlo.scatter"(%[[C]],
func.func @scatter_after_its_reads(%x: tensor<4xf32>, %i: tensor<1xi32>, %j: tensor<1xi32>) -> tensor<4xf32> {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %r = "xhlo.gather"(%a, %j) {dimension_numbers = {collapsed_slice_dims = array<i64: 0>, start_index_map = array<i64: 0>, index_vector_dim = 0 : i64}, slice_sizes = array<i64: 1>} : (tensor<4xf32>, tensor<1xi32>) -> tensor<f32>
  %s = "xhlo.scatter"(%a, %i, %r) ({
  ^bb0(%old: tensor<f32>, %new: tensor<f32>):
    "xhlo.return"(%new) : (tensor<f32>) -> ()
  }) {dimension_numbers = {inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 0 : i64}} : (tensor<4xf32>, tensor<1xi32>, tensor<f32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}
func.func @scatter_read_afterwards(%x: tensor<4xf32>, %i: tensor<1xi32>, %u: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = "xhlo.negate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %s = "xhlo.scatter"(%a, %i, %u) ({
  ^bb0(%old: tensor<f32>, %new: tensor<f32>):
    "xhlo.return"(%new) : (tensor<f32>) -> ()
  }) {dimension_numbers = {inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 0 : i64}} : (tensor<4xf32>, tensor<1xi32>, tensor<f32>) -> tensor<4xf32>
  %b = "xhlo.exponential"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %s, %b : tensor<4xf32>, tensor<4xf32>
}
