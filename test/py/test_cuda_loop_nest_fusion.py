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


EXTREMES_OF_ROWS = """func.func @main(%x: tensor<64x128xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %e = stablehlo.exponential %x : tensor<64x128xf32>
  %r:2 = stablehlo.reduce(%e init: %inf), (%e init: %ninf) across dimensions = [1] : (tensor<64x128xf32>, tensor<64x128xf32>, tensor<f32>, tensor<f32>) -> (tensor<64xf32>, tensor<64xf32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<f32>, %d: tensor<f32>) {
      %low = stablehlo.minimum %a, %b : tensor<f32>
      %high = stablehlo.maximum %c, %d : tensor<f32>
      stablehlo.return %low, %high : tensor<f32>, tensor<f32>
    }
  return %r#0, %r#1 : tensor<64xf32>, tensor<64xf32>
}
"""


def test_a_kernel_the_emitters_do_not_take_is_fewer_launches_and_computes_the_same(monkeypatch):
    """The least and the largest exponential of each row in one variadic reduce, whose two
    accumulators share a type (which no emitter takes): the two accumulators' fills join the
    reduction's nest, 3 launches become 1; the results on this CPU match numpy."""
    program = compile_text(EXTREMES_OF_ROWS)
    (kernel,) = program.kernels
    assert len(kernel.launches) == 1
    assert any("2 loop nest(s) fused" in decision for decision in program.decisions)
    x = np.random.default_rng(3).standard_normal((64, 128)).astype(np.float32)
    (low, high), _ = run_on_host(EXTREMES_OF_ROWS, [x], monkeypatch)
    np.testing.assert_allclose(low, np.exp(x).min(axis=1), rtol=1e-6)
    np.testing.assert_allclose(high, np.exp(x).max(axis=1), rtol=1e-6)
