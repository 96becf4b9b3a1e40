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


ARGMAX_OF_ROWS = """func.func @main(%x: tensor<64x128xf32>) -> (tensor<64xf32>, tensor<64xi32>) {
  %iota = stablehlo.iota dim = 1 : tensor<64x128xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %ninf), (%iota init: %zero) across dimensions = [1] : (tensor<64x128xf32>, tensor<64x128xi32>, tensor<f32>, tensor<i32>) -> (tensor<64xf32>, tensor<64xi32>)
    reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>) {
      %gt = stablehlo.compare GT, %a, %c : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %c : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %b, %d : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %take = stablehlo.or %gt, %tie : tensor<i1>
      %v = stablehlo.select %take, %a, %c : tensor<i1>, tensor<f32>
      %i = stablehlo.select %take, %b, %d : tensor<i1>, tensor<i32>
      stablehlo.return %v, %i : tensor<f32>, tensor<i32>
    }
  return %r#0, %r#1 : tensor<64xf32>, tensor<64xi32>
}
"""


def test_a_kernel_the_emitters_do_not_take_is_fewer_launches_and_computes_the_same(monkeypatch):
    """An argmax over rows with its positions generated (a variadic reduce, which no emitter
    takes): the two accumulators' fills join the reduction's nest, and so do the nests after
    it, 6 launches become 2; the results on this CPU match numpy, ties going to the first
    position."""
    program = compile_text(ARGMAX_OF_ROWS)
    (kernel,) = program.kernels
    assert len(kernel.launches) == 2
    assert any("4 loop nest(s) fused" in decision for decision in program.decisions)
    x = np.random.default_rng(3).standard_normal((64, 128)).astype(np.float32)
    x[3, 7] = x[3, 90] = 9
    (values, positions), _ = run_on_host(ARGMAX_OF_ROWS, [x], monkeypatch)
    np.testing.assert_array_equal(values, x.max(axis=1))
    np.testing.assert_array_equal(positions, x.argmax(axis=1))
