"""Loop nests of one kernel fused into one launch (`backends/cuda/loop_nest_fusion.py`): which
nests fuse and which stay apart (threads that would exchange values), and a fused kernel run
on this CPU against numpy (the `cuda-host` backend)."""

import numpy as np
import pytest

from mlirxla.backends.cuda import loop_nest_fusion
from mlirxla.context import new_context
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .test_cuda_emitters import compile_text, run_on_host


def two_nests(second_index: str = "%i", second_upper: int = 64, between: str = "", view: bool = False) -> str:
    """exp(a) into t, then t copied into b; the copy reads t at `second_index` over [0,
    second_upper) (with `view`, as the [1, 64] view %v, at [0, second_index])."""
    read = f"%v[%c0, {second_index}] : memref<1x64xf32>" if view else f"%t[{second_index}] : memref<64xf32>"
    make_view = "%v = memref.expand_shape %t [[0, 1]] output_shape [1, 64] : memref<64xf32> into memref<1x64xf32>" if view else ""
    return f"""func.func @f(%a: memref<64xf32>, %b: memref<64xf32>, %t: memref<64xf32>, %s: memref<f32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %upper = arith.constant {second_upper} : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {{
    %x = memref.load %a[%i] : memref<64xf32>
    %e = math.exp %x : f32
    memref.store %e, %t[%i] : memref<64xf32>
    scf.reduce
  }}
  {between}
  {make_view}
  scf.parallel (%i) = (%c0) to (%upper) step (%c1) {{
    %j = arith.subi %c63, %i : index
    %x = memref.load {read}
    memref.store %x, %b[%i] : memref<64xf32>
    scf.reduce
  }}
  return
}}"""


def fused_count(text: str) -> tuple[int, int]:
    """The nests fused away, and the parallel nests left."""
    with new_context():
        module = ir.Module.parse(text)
        (function,) = ops_named(module, "func.func")
        fused = loop_nest_fusion.fuse_loop_nests(function)
        module.operation.verify()
        return fused, len(ops_named(module, "scf.parallel"))


def test_a_nest_reading_what_the_one_before_wrote_at_its_own_index_joins_it():
    assert fused_count(two_nests()) == (1, 1)


def test_the_same_element_through_a_view_is_the_same_address():
    assert fused_count(two_nests(view=True)) == (1, 1)


@pytest.mark.parametrize("case", [
    dict(second_index="%j"),  # another thread's element: thread 0 would read what thread 63 writes
    dict(second_index="%c0"),  # one element every thread reads
    dict(second_index="%j", view=True),
    dict(second_upper=32),  # another iteration space
    dict(between="memref.store %zero, %s[] : memref<f32>"),  # a store between them
    dict(between="%loaded = memref.load %t[%c0] : memref<64xf32>"),  # a read between them of what the first writes
])
def test_nests_that_would_exchange_values_or_differ_stay_apart(case):
    assert fused_count(two_nests(**case)) == (0, 2)


CROSS_ENTROPY_GRADIENT = """func.func @main(%b: tensor<10xf32>, %x: tensor<16x10xf32>, %y: tensor<16x10xf32>) -> tensor<16x10xf32> {
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<10xf32>) -> tensor<16x10xf32>
  %logits = stablehlo.add %x, %bb : tensor<16x10xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%logits init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<16x10xf32>, tensor<f32>) -> tensor<16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<16xf32>) -> tensor<16x10xf32>
  %shifted = stablehlo.subtract %logits, %mb : tensor<16x10xf32>
  %e = stablehlo.exponential %shifted : tensor<16x10xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<16x10xf32>, tensor<f32>) -> tensor<16xf32>
  %sk = stablehlo.reshape %s : (tensor<16xf32>) -> tensor<16x1xf32>
  %ny = stablehlo.negate %y : tensor<16x10xf32>
  %t = stablehlo.reduce(%ny init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<16x10xf32>, tensor<f32>) -> tensor<16xf32>
  %tk = stablehlo.reshape %t : (tensor<16xf32>) -> tensor<16x1xf32>
  %q = stablehlo.divide %tk, %sk : tensor<16x1xf32>
  %qr = stablehlo.reshape %q : (tensor<16x1xf32>) -> tensor<16xf32>
  %qb = stablehlo.broadcast_in_dim %qr, dims = [0] : (tensor<16xf32>) -> tensor<16x10xf32>
  %p = stablehlo.multiply %qb, %e : tensor<16x10xf32>
  %g = stablehlo.add %y, %p : tensor<16x10xf32>
  return %g : tensor<16x10xf32>
}
"""


def test_a_kernel_the_emitters_do_not_take_is_fewer_launches_and_computes_the_same(monkeypatch):
    """A softmax cross-entropy gradient (its label sum's combiner subtracts: not the row
    emitter's) stays on the loop emitter: its nests over the same rows or elements fuse, 8
    launches become 4, and the results on this CPU match numpy."""
    program = compile_text(CROSS_ENTROPY_GRADIENT)
    (kernel,) = program.kernels
    assert len(kernel.launches) == 4
    assert any("4 loop nest(s) fused" in decision for decision in program.decisions)
    rng = np.random.default_rng(3)
    b, x, y = rng.standard_normal(10), rng.standard_normal((16, 10)), rng.standard_normal((16, 10))
    b, x, y = (v.astype(np.float32) for v in (b, x, y))
    (result,), _ = run_on_host(CROSS_ENTROPY_GRADIENT, [b, x, y], monkeypatch)
    logits = x.astype(np.float64) + b
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected = y + (-y.sum(axis=1, keepdims=True) / e.sum(axis=1, keepdims=True)) * e
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
