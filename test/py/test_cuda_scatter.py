"""Scatter on the GPU (`backends/cpu/scatter_kernel.py`, `parallel`): a thread per update
element, combined into its target atomically; run on this CPU (the `cuda-host` backend)
against numpy's unbuffered `ufunc.at`, with targets repeated, one out of bounds (skipped)
and the PTX assembled by ptxas for sm_90."""

from typing import NamedTuple

import ml_dtypes
import numpy as np
import pytest

from .test_cuda_emitters import compile_text, needs_ptxas, run_on_host

ROWS, WIDTH = 8, 6
TARGETS = np.array([[1], [3], [1], [7], [9], [3]], dtype=np.int32)  # 9 is out of bounds: that row is skipped
UNIQUE_TARGETS = np.array([[1], [3], [0], [7], [9], [5]], dtype=np.int32)


def scatter_text(element: str, body: str, combined: str = "%c") -> str:
    """A scatter of rows of `updates` into the rows `indices` name, combined by `body`
    (reading %a, the target, and %b, the update; its result `combined`)."""
    operand, updates = f"tensor<{ROWS}x{WIDTH}x{element}>", f"tensor<{len(TARGETS)}x{WIDTH}x{element}>"
    return f"""func.func @main(%x: {operand}, %i: tensor<{len(TARGETS)}x1xi32>, %u: {updates}) -> {operand} {{
  %r = "stablehlo.scatter"(%x, %i, %u) ({{
    ^bb0(%a: tensor<{element}>, %b: tensor<{element}>):
      {body.replace("T", f"tensor<{element}>")}
      stablehlo.return {combined} : tensor<{element}>
  }}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
       scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}} : ({operand}, tensor<{len(TARGETS)}x1xi32>, {updates}) -> {operand}
  return %r : {operand}
}}
"""


def combine_at(at, operand: np.ndarray, targets: np.ndarray, updates: np.ndarray) -> np.ndarray:
    result = operand.copy()
    inside = targets[:, 0] < ROWS
    at(result, targets[inside, 0], updates[inside])
    return result


def square_added(result, rows, values):
    np.add.at(result, rows, values * values)


def replaced(result, rows, values):
    result[rows] = values


class Combiner(NamedTuple):
    body: str  # StableHLO reading %a (the target) and %b (the update), its result %c
    at: object  # numpy's unbuffered combine at repeated positions


ADD = Combiner("%c = stablehlo.add %a, %b : T", np.add.at)
MAXIMUM = Combiner("%c = stablehlo.maximum %a, %b : T", np.maximum.at)
MINIMUM = Combiner("%c = stablehlo.minimum %a, %b : T", np.minimum.at)
MULTIPLY = Combiner("%c = stablehlo.multiply %a, %b : T", np.multiply.at)
OR = Combiner("%c = stablehlo.or %a, %b : T", np.bitwise_or.at)
SQUARE_ADDED = Combiner("%s = stablehlo.multiply %b, %b : T\n      %c = stablehlo.add %a, %s : T", square_added)


@pytest.mark.parametrize("element, dtype, combiner, atomic", [
    ("f32", np.float32, ADD, "addf"),
    ("f64", np.float64, MAXIMUM, "maximumf"),
    ("i32", np.int32, ADD, "addi"),
    ("ui32", np.uint32, MINIMUM, "minu"),
    ("i64", np.int64, OR, "ori"),
    ("f32", np.float32, MULTIPLY, "compare-and-swap"),
    ("f16", np.float16, ADD, "addf"),
    ("bf16", ml_dtypes.bfloat16, ADD, "addf"),
    ("i8", np.int8, MAXIMUM, "maxs"),
    ("f32", np.float32, SQUARE_ADDED, "compare-and-swap"),
])
def test_repeated_targets_combine_atomically_and_match_numpy(element, dtype, combiner, atomic, monkeypatch):
    """Small whole numbers: every order of combining gives the same exact result."""
    text = scatter_text(element, combiner.body)
    program = compile_text(text)
    assert any(f"a thread per update element ({atomic})" in d for d in program.decisions)
    generator = np.random.default_rng(11)
    operand = generator.integers(1, 5, (ROWS, WIDTH)).astype(dtype)
    updates = generator.integers(1, 4, (len(TARGETS), WIDTH)).astype(dtype)
    (result,), _ = run_on_host(text, [operand, TARGETS, updates], monkeypatch)
    np.testing.assert_array_equal(result, combine_at(combiner.at, operand, TARGETS, updates))


def test_set_writes_each_unique_target(monkeypatch):
    text = scatter_text("f32", "", combined="%b")
    generator = np.random.default_rng(12)
    operand = generator.standard_normal((ROWS, WIDTH)).astype(np.float32)
    updates = generator.standard_normal((len(UNIQUE_TARGETS), WIDTH)).astype(np.float32)
    program = compile_text(text)
    assert any("a thread per update element (set)" in d for d in program.decisions)
    (result,), _ = run_on_host(text, [operand, UNIQUE_TARGETS, updates], monkeypatch)
    np.testing.assert_array_equal(result, combine_at(replaced, operand, UNIQUE_TARGETS, updates))


def test_complex_elements_keep_one_thread_and_say_so(monkeypatch):
    text = scatter_text("complex<f32>", "%c = stablehlo.add %a, %b : T")
    program = compile_text(text)
    assert any("one thread (no atomic update of its elements)" in d for d in program.decisions)
    generator = np.random.default_rng(13)
    operand = (generator.integers(1, 5, (ROWS, WIDTH)) + 1j).astype(np.complex64)
    updates = (generator.integers(1, 4, (len(TARGETS), WIDTH)) * 1j).astype(np.complex64)
    (result,), _ = run_on_host(text, [operand, TARGETS, updates], monkeypatch)
    np.testing.assert_array_equal(result, combine_at(np.add.at, operand, TARGETS, updates))


@needs_ptxas
@pytest.mark.parametrize("element, body", [
    ("f32", ADD.body), ("f64", MAXIMUM.body), ("ui32", MINIMUM.body), ("f16", ADD.body), ("bf16", ADD.body),
    ("i8", MAXIMUM.body), ("f32", MULTIPLY.body), ("f32", SQUARE_ADDED.body),
])
def test_the_atomic_updates_assemble_for_sm_90(element, body):
    program = compile_text(scatter_text(element, body))
    assert program.cubin is not None
    assert "atom." in program.ptx
