// RUN: mlirxla-opt %s -p xhlo-while-loop-simplifier --split-input-file | FileCheck %s

/// A carried value whose result is unused and that only updates itself is dropped from the loop.
// CHECK-LABEL: @remove_dead_carried_value
// CHECK: %[[W:.*]]:2 = "xhlo.while"(%{{.*}}, %arg0)
// CHECK-NOT: "xhlo.multiply"
// CHECK: return %[[W]]#1
func.func @remove_dead_carried_value(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
  %z = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %w:3 = "xhlo.while"(%z, %x, %x) ({
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>, %c: tensor<4xf32>):
    %p = "xhlo.compare"(%i, %n) {compare_type = "SIGNED", comparison_direction = "LT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>, %c: tensor<4xf32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %next = "xhlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %cc = "xhlo.multiply"(%c, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %s, %cc) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4xf32>)
  return %w#1 : tensor<4xf32>
}

// -----

/// The same self-updating value stays when the loop's result for it is used.
// CHECK-LABEL: @no_remove_used_result
// CHECK: %[[W:.*]]:3 = "xhlo.while"
// CHECK: "xhlo.multiply"
// CHECK: return %[[W]]#1, %[[W]]#2
func.func @no_remove_used_result(%x: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %z = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %w:3 = "xhlo.while"(%z, %x, %x) ({
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>, %c: tensor<4xf32>):
    %p = "xhlo.compare"(%i, %n) {compare_type = "SIGNED", comparison_direction = "LT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>, %c: tensor<4xf32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %next = "xhlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %cc = "xhlo.multiply"(%c, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %s, %cc) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4xf32>)
  return %w#1, %w#2 : tensor<4xf32>, tensor<4xf32>
}

// -----

/// A passed-through value is live when the body reads it for a live value (a scan's xs).
// CHECK-LABEL: @no_remove_value_read_by_live_value
// CHECK: %[[W:.*]]:3 = "xhlo.while"(%{{.*}}, %arg0, %arg1)
// CHECK: "xhlo.return"(%{{.*}}, %{{.*}}, %arg5)
func.func @no_remove_value_read_by_live_value(%x: tensor<4xf32>, %y: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
  %z = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %w:3 = "xhlo.while"(%z, %x, %y) ({
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>, %b: tensor<4xf32>):
    %p = "xhlo.compare"(%i, %n) {compare_type = "SIGNED", comparison_direction = "LT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>, %b: tensor<4xf32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %next = "xhlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %s, %b) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4xf32>)
  return %w#1 : tensor<4xf32>
}

// -----

/// `i = 0; while i < 1: i = i + 1` runs once: the body is inlined on the init values.
// CHECK-LABEL: @inline_trip_count_one
// CHECK-NOT: "xhlo.while"
// CHECK: %[[S:.*]] = "xhlo.add"(%arg0, %arg0)
// CHECK: return %[[S]]
func.func @inline_trip_count_one(%x: tensor<4xf32>) -> tensor<4xf32> {
  %z = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %w:2 = "xhlo.while"(%z, %x) ({
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %n = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %p = "xhlo.compare"(%i, %n) {compare_type = "SIGNED", comparison_direction = "LT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %next = "xhlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %s) : (tensor<i32>, tensor<4xf32>) -> ()
  }) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
  return %w#1 : tensor<4xf32>
}

// -----

/// `i = 0; while i < 2: i = i + 1` runs twice: the loop stays.
// CHECK-LABEL: @no_inline_trip_count_two
// CHECK: "xhlo.while"
func.func @no_inline_trip_count_two(%x: tensor<4xf32>) -> tensor<4xf32> {
  %z = "xhlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %w:2 = "xhlo.while"(%z, %x) ({
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %n = "xhlo.constant"() {value = dense<2> : tensor<i32>} : () -> tensor<i32>
    %p = "xhlo.compare"(%i, %n) {compare_type = "SIGNED", comparison_direction = "LT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %next = "xhlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %s) : (tensor<i32>, tensor<4xf32>) -> ()
  }) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
  return %w#1 : tensor<4xf32>
}

// -----

/// `i = 3; while 3 > i` is false on entry (bound on the left): the results are the init values.
// CHECK-LABEL: @skip_trip_count_zero
// CHECK-NOT: "xhlo.while"
// CHECK: return %arg0
func.func @skip_trip_count_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %z = "xhlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
  %w:2 = "xhlo.while"(%z, %x) ({
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %n = "xhlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
    %p = "xhlo.compare"(%n, %i) {compare_type = "SIGNED", comparison_direction = "GT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %next = "xhlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %s) : (tensor<i32>, tensor<4xf32>) -> ()
  }) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
  return %w#1 : tensor<4xf32>
}

// -----

/// A bound that is an argument is unknown at compile time: the loop stays.
// CHECK-LABEL: @no_skip_unknown_bound
// CHECK: "xhlo.while"
func.func @no_skip_unknown_bound(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
  %z = "xhlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
  %w:2 = "xhlo.while"(%z, %x) ({
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %p = "xhlo.compare"(%n, %i) {compare_type = "SIGNED", comparison_direction = "GT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %one = "xhlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %next = "xhlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %s) : (tensor<i32>, tensor<4xf32>) -> ()
  }) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
  return %w#1 : tensor<4xf32>
}
