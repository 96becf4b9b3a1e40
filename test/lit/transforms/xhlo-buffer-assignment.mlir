// RUN: mlirxla-opt %s -p xhlo-buffer-assignment --split-input-file | FileCheck %s
// RUN: mlirxla-opt %s -p xhlo-scheduling,xhlo-buffer-assignment --split-input-file | FileCheck %s --check-prefix=SCHED
// RUN: rm -rf %t && mlirxla-opt %s -p xhlo-scheduling,xhlo-buffer-assignment --split-input-file --dump-to %t > /dev/null
// RUN: cat %t/*buffer-assignment.txt | FileCheck %s --check-prefix=DUMP
// RUN: cat %t/*live-range.txt | FileCheck %s --check-prefix=LIVE
// RUN: cat %t/*heap.svg | FileCheck %s --check-prefix=SVG

/// Source order keeps two 4 KiB temps live together (8 KiB slab); scheduled, one at a time
/// (4096 bytes plus a 4-byte reduce result). The analysis does not move ops.
// CHECK: xhlo.buffer_assignment = {allocations = 4 : i64, constant_bytes = 4 : i64, kernel_scratch_bytes = 0 : i64, live_out_bytes = 4 : i64, parameter_bytes = 4096 : i64, peak_live_bytes = 8192 : i64, temp_bytes = 8192 : i64, total_bytes = 12296 : i64}
// CHECK: "xhlo.exponential"
// CHECK-NEXT: "xhlo.negate"
// SCHED: xhlo.buffer_assignment = {allocations = 4 : i64, constant_bytes = 4 : i64, kernel_scratch_bytes = 0 : i64, live_out_bytes = 4 : i64, parameter_bytes = 4096 : i64, peak_live_bytes = 4100 : i64, temp_bytes = 4100 : i64, total_bytes = 8204 : i64}
// DUMP: BufferAssignment:
// DUMP: allocation 0: size 4100, preallocated-temp:
// DUMP-DAG: value: <{{[0-9]+}} exponential @0> (size=4096,offset=0): tensor<1024xf32>
// DUMP-DAG: value: <{{[0-9]+}} negate @0> (size=4096,offset=0): tensor<1024xf32>
// DUMP: allocation 1: size 4096, parameter 0, shape |tensor<1024xf32>|:
// DUMP: allocation {{[0-9]}}: size 4, constant:
// DUMP: maybe-live-out
// LIVE: HloLiveRange (max 8):
// LIVE: InstructionSequence:
// LIVE-NEXT: 0:param.0
// LIVE: BufferLiveRange:
// LIVE: exponential{}:2-3
// SVG: <svg
// SVG: >exponential</text>
func.func @main(%x: tensor<1024xf32>) -> (tensor<f32>) {
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %a = "xhlo.exponential"(%x) : (tensor<1024xf32>) -> tensor<1024xf32>
  %b = "xhlo.negate"(%x) : (tensor<1024xf32>) -> tensor<1024xf32>
  %c = "xhlo.reduce"(%a, %z) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<1024xf32>, tensor<f32>) -> tensor<f32>
  %d = "xhlo.reduce"(%b, %z) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<1024xf32>, tensor<f32>) -> tensor<f32>
  %e = "xhlo.add"(%c, %d) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %e : tensor<f32>
}

// -----

/// Bitcasts alias their operand, copies do not; a dynamic_update_slice writes in place into
/// the copy that dies there; an elementwise op takes over a dying same-size operand. So the
/// exp/negate/bitcast chain is the first output's buffer and copy/dus/exp the second's: no temps.
// CHECK-LABEL: module attributes {xhlo.buffer_assignment = {allocations = 5 : i64, constant_bytes = 0 : i64, kernel_scratch_bytes = 0 : i64, live_out_bytes = 2048 : i64, parameter_bytes = 1092 : i64, peak_live_bytes = 0 : i64, temp_bytes = 0 : i64, total_bytes = 3140 : i64}
// DUMP: allocation 1: size 1024, output shape is |tensor<256xf32>|, maybe-live-out:
// DUMP-NEXT: value: <{{[0-9]+}} exponential @0>
// DUMP-NEXT: value: <{{[0-9]+}} negate @0>
// DUMP-NEXT: value: <{{[0-9]+}} bitcast @0>
// DUMP: allocation 2: size 1024, output shape is |tensor<256xf32>|, maybe-live-out:
// DUMP-NEXT: value: <{{[0-9]+}} copy @0>
// DUMP-NEXT: value: <{{[0-9]+}} dynamic_update_slice @0>
func.func @main(%x: tensor<256xf32>, %u: tensor<16xf32>, %i: tensor<i32>) -> (tensor<16x16xf32>, tensor<256xf32>) {
  %t = "xhlo.exponential"(%x) : (tensor<256xf32>) -> tensor<256xf32>
  %a = "xhlo.negate"(%t) : (tensor<256xf32>) -> tensor<256xf32>
  %b = "xhlo.bitcast"(%a) : (tensor<256xf32>) -> tensor<16x16xf32>
  %c = "xhlo.copy"(%x) : (tensor<256xf32>) -> tensor<256xf32>
  %d = "xhlo.dynamic_update_slice"(%c, %u, %i) : (tensor<256xf32>, tensor<16xf32>, tensor<i32>) -> tensor<256xf32>
  %e = "xhlo.exponential"(%d) : (tensor<256xf32>) -> tensor<256xf32>
  return %b, %e : tensor<16x16xf32>, tensor<256xf32>
}
