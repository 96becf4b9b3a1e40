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


RELU_AND_BIAS_GRADIENTS = """func.func @main(%h: tensor<64x128xf32>, %dy: tensor<64x128xf32>) -> (tensor<64x128xf32>, tensor<128xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %zeros = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<64x128xf32>
  %active = stablehlo.compare GT, %h, %zeros : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xi1>
  %g = stablehlo.select %active, %dy, %zeros : tensor<64x128xi1>, tensor<64x128xf32>
  %db = stablehlo.reduce(%g init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<64x128xf32>, tensor<f32>) -> tensor<128xf32>
  return %g, %db : tensor<64x128xf32>, tensor<128xf32>
}
"""


def test_a_kernel_the_emitters_do_not_take_is_fewer_launches_and_computes_the_same(monkeypatch):
    """A ReLU's gradient and its bias's (the column sum of it) in one kernel, which neither the
    row nor the column emitter takes (an elementwise nest over the whole [64, 128] beside the
    column sums): the sums' fill and reduction nests are one, 3 launches become 2, and the
    results on this CPU match numpy."""
    program = compile_text(RELU_AND_BIAS_GRADIENTS)
    (kernel,) = program.kernels
    assert len(kernel.launches) == 2
    assert any("1 loop nest(s) fused" in decision for decision in program.decisions)
    rng = np.random.default_rng(3)
    h, dy = (rng.standard_normal((64, 128)).astype(np.float32) for _ in range(2))
    (g, db), _ = run_on_host(RELU_AND_BIAS_GRADIENTS, [h, dy], monkeypatch)
    expected = np.where(h > 0, dy, 0)
    np.testing.assert_array_equal(g, expected)
    np.testing.assert_allclose(db, expected.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-5)
