// RUN: env MLIRXLA_CPU_THREADS=2 mlirxla-opt %s -p "builtin.module(xhlo-priority-fusion, xhlo-output-fusion, xhlo-widening-gemm-fusion)" --split-input-file | FileCheck %s

/// A bf16 weight's convert joins its dot: the weight is read as it lies, widened panel by
/// panel by the backend; the activations stay f32.
// CHECK-LABEL: func.func @weight
// CHECK: %[[F:.*]] = "xhlo.fusion"(%arg0, %arg1)
// CHECK-NEXT: ^bb0(%[[W:.*]]: tensor<512x1536xbf16>, %[[X:.*]]: tensor<256x512xf32>):
// CHECK-NEXT: %[[WF:.*]] = "xhlo.convert"(%[[W]])
// CHECK-NEXT: %[[Y:.*]] = "xhlo.dot"(%[[X]], %[[WF]])
// CHECK-NEXT: "xhlo.return"(%[[Y]])
// CHECK: kind = "output", name = "convert_dot_fusion"
// CHECK: return %[[F]]
func.func @weight(%w: tensor<512x1536xbf16>, %x: tensor<256x512xf32>) -> tensor<256x1536xf32> {
  %wf = stablehlo.convert %w : (tensor<512x1536xbf16>) -> tensor<512x1536xf32>
  %y = stablehlo.dot_general %x, %wf, contracting_dims = [1] x [0] : (tensor<256x512xf32>, tensor<512x1536xf32>) -> tensor<256x1536xf32>
  return %y : tensor<256x1536xf32>
}

// -----

/// A weight two dots read is widened once, by a kernel of its own.
// CHECK-LABEL: func.func @shared_weight
// CHECK: "xhlo.convert"
// CHECK-NOT: xhlo.fusion
func.func @shared_weight(%w: tensor<512x1536xbf16>, %x: tensor<256x512xf32>, %z: tensor<64x512xf32>) -> (tensor<256x1536xf32>, tensor<64x1536xf32>) {
  %wf = stablehlo.convert %w : (tensor<512x1536xbf16>) -> tensor<512x1536xf32>
  %y = stablehlo.dot_general %x, %wf, contracting_dims = [1] x [0] : (tensor<256x512xf32>, tensor<512x1536xf32>) -> tensor<256x1536xf32>
  %v = stablehlo.dot_general %z, %wf, contracting_dims = [1] x [0] : (tensor<64x512xf32>, tensor<512x1536xf32>) -> tensor<64x1536xf32>
  return %y, %v : tensor<256x1536xf32>, tensor<64x1536xf32>
}

// -----

/// The bias-and-relu epilogue's output fusion takes the convert in as well; a weight of 16
/// columns has no panel for each of two threads, so the other dot keeps its convert.
// CHECK-LABEL: func.func @epilogue_and_narrow
// CHECK: "xhlo.fusion"
// CHECK: "xhlo.convert"
// CHECK: "xhlo.dot"
// CHECK: "xhlo.add"
// CHECK: "xhlo.maximum"
// CHECK: kind = "output"
// CHECK: %[[N:.*]] = "xhlo.convert"(%arg3)
// CHECK-NEXT: "xhlo.dot"(%{{.*}}, %[[N]])
func.func @epilogue_and_narrow(%w: tensor<128x256xbf16>, %x: tensor<64x128xf32>, %b: tensor<256xf32>, %v: tensor<256x16xbf16>) -> tensor<64x16xf32> {
  %wf = stablehlo.convert %w : (tensor<128x256xbf16>) -> tensor<128x256xf32>
  %y = stablehlo.dot_general %x, %wf, contracting_dims = [1] x [0] : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<256xf32>) -> tensor<64x256xf32>
  %s = stablehlo.add %y, %bb : tensor<64x256xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<64x256xf32>
  %r = stablehlo.maximum %s, %zero : tensor<64x256xf32>
  %vf = stablehlo.convert %v : (tensor<256x16xbf16>) -> tensor<256x16xf32>
  %o = stablehlo.dot_general %r, %vf, contracting_dims = [1] x [0] : (tensor<64x256xf32>, tensor<256x16xf32>) -> tensor<64x16xf32>
  return %o : tensor<64x16xf32>
}
