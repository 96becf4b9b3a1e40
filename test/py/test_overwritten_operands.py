"""Kernels writing a result over an operand they read (`backends/cpu/overwritten_operands.py`):
each kernel here reads operand A through the argument of the result that overwrites it, as
`kernel_source` writes an in-place pair; it is lowered, compiled and run on A's memory, and
its results are compared with numpy's. Without the rewrite, each of them read A after a loop
nest had overwritten it."""

import ctypes

import numpy as np
import pytest

from mlirxla.backends.cpu import llvm_jit, lowering, overwritten_operands
from mlirxla.context import new_context
from mlirxla.mlir import ir

N = 64

# B is read-only; A's memory is r0's; r1 is fresh. `BODY` computes %x (into r0, through a view
# of it, as `materialization.unreshaped_result` writes a reshaped result) and %y.
KERNEL = """
func.func @k(%a: memref<64xf32>, %b: memref<64xf32>, %r0: memref<64xf32> {llvm.noalias}, %r1: memref<64xf32> {llvm.noalias}) {
  %A = bufferization.to_tensor %r0 restrict writable : memref<64xf32> to tensor<64xf32>
  %B = bufferization.to_tensor %b restrict : memref<64xf32> to tensor<64xf32>
  BODY
  %view = memref.reinterpret_cast %r0 to offset: [0], sizes: [64], strides: [1] : memref<64xf32> to memref<64xf32, strided<[1]>>
  bufferization.materialize_in_destination %x in restrict writable %view : (tensor<64xf32>, memref<64xf32, strided<[1]>>) -> ()
  bufferization.materialize_in_destination %y in restrict writable %r1 : (tensor<64xf32>, memref<64xf32>) -> ()
  return
}
"""

KERNELS = {
    # jax's binary search: both results read both bounds elementwise (one loop nest)
    "siblings": ("""%x = stablehlo.add %A, %B : tensor<64xf32>
  %y = stablehlo.multiply %A, %B : tensor<64xf32>""",
                 lambda a, b: (a + b, a * b), (1, 0)),
    # the second result reads A reversed: no one loop nest can read it before x overwrites it
    "reversed": ("""%x = stablehlo.add %A, %B : tensor<64xf32>
  %z = stablehlo.reverse %A, dims = [0] : tensor<64xf32>
  %y = stablehlo.multiply %z, %B : tensor<64xf32>""",
                 lambda a, b: (a + b, a[::-1] * b), (0, 1)),
    # x's loop nests chain through one buffer (`write_over_dying_operands`): the first of
    # them, the reduction's initial zeros, writes A's memory before the last one reads A
    "chained": ("""%wide = stablehlo.broadcast_in_dim %B, dims = [0] : (tensor<64xf32>) -> tensor<64x4xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%wide init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<64x4xf32>, tensor<f32>) -> tensor<64xf32>
  %x = stablehlo.subtract %sum, %A : tensor<64xf32>
  %y = stablehlo.negate %B : tensor<64xf32>""",
                lambda a, b: (4 * b - a, -b), (0, 1)),
}


def run_kernel(body: str, rewrite: bool) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """The kernel lowered (with or without the rewrite), run with A in r0's memory."""
    rewritten = (0, 0)
    keep = overwritten_operands.keep_overwritten_operands_readable

    def counted(module):
        nonlocal rewritten
        rewritten = keep(module) if rewrite else (0, 0)
        return rewritten

    with new_context():
        module = ir.Module.parse(KERNEL.replace("BODY", body))
        overwritten_operands.keep_overwritten_operands_readable = counted
        try:
            lowered = lowering.lower_to_llvm_dialect(module, "k")
        finally:
            overwritten_operands.keep_overwritten_operands_readable = keep
        text = lowering.translate(module, "k")
    kernel = llvm_jit.compile_native("k", text)
    engine = llvm_jit.JitEngine(kernel.object_code)
    scratch = [np.zeros(s.size, np.uint8) for s in lowered.scratch.get("k", [])]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    r0, r1 = a.copy(), np.zeros(N, np.float32)
    arguments = [np.zeros(N, np.float32), b, r0, r1] + scratch
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(arguments))(engine.address("k"))
    function(*[array.ctypes.data for array in arguments])
    return (r0, r1), (a, b), rewritten


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_result_written_over_an_operand_leaves_the_operand_readable(name):
    body, expected, rewrites = KERNELS[name]
    (x, y), (a, b), made = run_kernel(body, rewrite=True)
    want_x, want_y = expected(a, b)
    np.testing.assert_allclose(x, want_x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    assert made == rewrites


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_without_the_rewrite_the_operand_was_read_overwritten(name):
    """The cases are the ones bufferization alone gets wrong."""
    body, expected, _ = KERNELS[name]
    (x, y), (a, b), _ = run_kernel(body, rewrite=False)
    want_x, want_y = expected(a, b)
    assert not (np.allclose(x, want_x, rtol=1e-5, atol=1e-5) and np.allclose(y, want_y, rtol=1e-5, atol=1e-5))


# A fusion of three dead dot results whose third result is its first operand unchanged
# (f32 rounded to f32) written into the second operand's buffer, which the other results read
# (jax's `checkpoint_dots` gradients, api_test.py's RematTest): the copy writing that buffer
# came before the operand's view, and copying the operand for its readers once more each
# round never ended the compile.
OPERAND_INTO_ANOTHER = """
func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
  %0 = stablehlo.dot %a, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %1 = stablehlo.dot %b, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %2 = stablehlo.dot %a, %b : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %s = stablehlo.sine %0 : tensor<2x2xf32>
  %c = stablehlo.cosine %0 : tensor<2x2xf32>
  %t = stablehlo.add %1, %2 : tensor<2x2xf32>
  %u = stablehlo.multiply %t, %c : tensor<2x2xf32>
  %k = stablehlo.reduce_precision %0, format = e8m23 : tensor<2x2xf32>
  %r = stablehlo.reduce_precision %t, format = e8m23 : tensor<2x2xf32>
  return %s, %u, %k, %r : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
}
"""


@pytest.mark.timeout(60)
def test_an_operand_written_unchanged_over_another_is_copied_once():
    from mlirxla.runtime.client import Client

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 2)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32)
    outputs = Client().compile(OPERAND_INTO_ANOTHER).execute_numpy([a, b])
    aa, t = a @ a, b @ a + a @ b
    for got, want in zip(outputs, (np.sin(aa), t * np.cos(aa), aa, t)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
