"""Kernels that reduce over their rows run in blocks of columns over the threads
(`backends/cpu/column_blocks.py`): a column softmax, a batch norm over NHWC and an integer
column sum split into column blocks, and so does one moving whole rows (slices, pads,
concatenates and reverses along dimension 0); they give the reference interpreter's results
and the single-thread kernel's bits; kernels that mix columns (a reduce over the last
dimension, an iota along it, a transpose, a reverse, a slice, pad or concatenate of the
columns) and widths the threads do not divide stay whole."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import thread_split
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.context import new_context
from mlirxla.runtime.executable import Executable

from .conftest import random_arguments, reference_outputs

COLUMN_SOFTMAX = """func.func @main(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<32x64xf32>, tensor<f32>) -> tensor<64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [1] : (tensor<64xf32>) -> tensor<32x64xf32>
  %d = stablehlo.subtract %x, %mb : tensor<32x64xf32>
  %e = stablehlo.exponential %d : tensor<32x64xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<32x64xf32>, tensor<f32>) -> tensor<64xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<64xf32>) -> tensor<32x64xf32>
  %r = stablehlo.divide %e, %sb : tensor<32x64xf32>
  return %r : tensor<32x64xf32>
}"""

# jax's batch norm in training over NHWC: mean and mean of squares over N, H and W
BATCH_NORM = """func.func @main(%x: tensor<2x4x4x64xf32>, %gamma: tensor<64xf32>) -> tensor<2x4x4x64xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %count = stablehlo.constant dense<0.03125> : tensor<64xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<64xf32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<2x4x4x64xf32>, tensor<f32>) -> tensor<64xf32>
  %xx = stablehlo.multiply %x, %x : tensor<2x4x4x64xf32>
  %sq = stablehlo.reduce(%xx init: %zero) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<2x4x4x64xf32>, tensor<f32>) -> tensor<64xf32>
  %mean = stablehlo.multiply %sum, %count : tensor<64xf32>
  %meansq = stablehlo.multiply %sq, %count : tensor<64xf32>
  %m2 = stablehlo.multiply %mean, %mean : tensor<64xf32>
  %var = stablehlo.subtract %meansq, %m2 : tensor<64xf32>
  %ve = stablehlo.add %var, %eps : tensor<64xf32>
  %inv = stablehlo.rsqrt %ve : tensor<64xf32>
  %scale = stablehlo.multiply %inv, %gamma : tensor<64xf32>
  %mb = stablehlo.broadcast_in_dim %mean, dims = [3] : (tensor<64xf32>) -> tensor<2x4x4x64xf32>
  %sb = stablehlo.broadcast_in_dim %scale, dims = [3] : (tensor<64xf32>) -> tensor<2x4x4x64xf32>
  %c = stablehlo.subtract %x, %mb : tensor<2x4x4x64xf32>
  %r = stablehlo.multiply %c, %sb : tensor<2x4x4x64xf32>
  return %r : tensor<2x4x4x64xf32>
}"""

INTEGER_COLUMN_SUM = """func.func @main(%x: tensor<16x64xi32>) -> tensor<64xi32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<16x64xi32>, tensor<i32>) -> tensor<64xi32>
  return %s : tensor<64xi32>
}"""


def column_max_then(tail: str, result: str = "32x64xf32") -> str:
    """x minus its column maxima, then `tail` on `%d` giving `%r`."""
    return f"""func.func @main(%x: tensor<32x64xf32>) -> tensor<{result}> {{
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<32x64xf32>, tensor<f32>) -> tensor<64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [1] : (tensor<64xf32>) -> tensor<32x64xf32>
  %d = stablehlo.subtract %x, %mb : tensor<32x64xf32>
  {tail}
  return %r : tensor<{result}>
}}"""


ROW_SOFTMAX = COLUMN_SOFTMAX.replace("across dimensions = [0]", "across dimensions = [1]").replace(
    "tensor<64xf32>", "tensor<32xf32>").replace("dims = [1]", "dims = [0]")

# jax's associative scan down the rows moves whole rows: strided slices, interior padding,
# concatenates and reverses along dimension 0, then a column maximum
ROWS_MOVED = """func.func @main(%x: tensor<32x64xf32>) -> tensor<64x64xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %zero, low = [1, 0], high = [0, 0], interior = [1, 0] : (tensor<32x64xf32>, tensor<f32>) -> tensor<64x64xf32>
  %s = stablehlo.slice %p [1:64:2, 0:64] : (tensor<64x64xf32>) -> tensor<32x64xf32>
  %e = stablehlo.exponential %s : tensor<32x64xf32>
  %c = stablehlo.concatenate %e, %x, dim = 0 : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<64x64xf32>
  %v = stablehlo.reverse %c, dims = [0] : tensor<64x64xf32>
  %m = stablehlo.reduce(%v init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<64x64xf32>, tensor<f32>) -> tensor<64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [1] : (tensor<64xf32>) -> tensor<64x64xf32>
  %r = stablehlo.subtract %v, %mb : tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}"""

SPLIT = {
    "column softmax": (COLUMN_SOFTMAX, 2),
    "rows moved by slices, pads, concatenates and reverses": (ROWS_MOVED, 1),
    "batch norm over NHWC": (BATCH_NORM, 2),
    "integer column sum": (INTEGER_COLUMN_SUM, 1),
}

WHOLE = {
    "an iota along the last dimension": column_max_then(
        "%i = stablehlo.iota dim = 1 : tensor<32x64xf32>\n  %r = stablehlo.multiply %d, %i : tensor<32x64xf32>"),
    "a transpose": column_max_then("%r = stablehlo.transpose %d, dims = [1, 0] : (tensor<32x64xf32>) -> tensor<64x32xf32>", "64x32xf32"),
    "a reverse of the columns": column_max_then("%r = stablehlo.reverse %d, dims = [1] : tensor<32x64xf32>"),
    "a slice of the columns": column_max_then("%r = stablehlo.slice %d [0:32, 0:64:2] : (tensor<32x64xf32>) -> tensor<32x32xf32>", "32x32xf32"),
    "a pad of the columns": column_max_then(
        "%z = stablehlo.constant dense<0.0> : tensor<f32>\n  %r = stablehlo.pad %d, %z, low = [0, 1], high = [0, 0], interior = [0, 0]"
        " : (tensor<32x64xf32>, tensor<f32>) -> tensor<32x65xf32>", "32x65xf32"),
    "a concatenate of the columns": column_max_then(
        "%r = stablehlo.concatenate %d, %x, dim = 1 : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x128xf32>", "32x128xf32"),
    "a row softmax (row blocks instead)": ROW_SOFTMAX,
}


@pytest.fixture
def splits_pay(monkeypatch):
    """Every split pays (`thread_split.estimate`), so that small kernels a test checks on the
    reference interpreter take whatever split keeps them correct."""
    monkeypatch.setattr(thread_split, "estimate", lambda op, threads, bandwidth=None: thread_split.SplitEstimate(1.0, 0.0))


def compiled(text: str, threads: str, monkeypatch) -> tuple[Executable, list[str]]:
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
    program = compile_module(frontdoor.import_text(text, "columns", new_context()).module)
    return Executable.of(program), program.decisions


def column_decisions(decisions: list[str]) -> list[str]:
    return [decision for decision in decisions if "parallel column blocks" in decision]


@pytest.mark.parametrize("name", SPLIT)
def test_kernels_reducing_over_rows_run_in_column_blocks(name, monkeypatch, splits_pay):
    text, kernels = SPLIT[name]
    executable, decisions = compiled(text, "2", monkeypatch)
    split = column_decisions(decisions)
    assert len(split) == kernels and all(", 2 slices of 32 column(s)" in decision for decision in split), decisions
    module = frontdoor.import_text(text, "columns", new_context()).module
    arguments = random_arguments(module, seed=3)
    outputs = executable.execute(arguments)
    expected = reference_outputs(frontdoor.import_text(text, "reference", new_context()).module, arguments)
    for actual, wanted in zip(outputs, expected):
        np.testing.assert_allclose(actual, wanted, rtol=2e-6, atol=1e-6)
    whole, whole_decisions = compiled(text, "1", monkeypatch)
    assert not column_decisions(whole_decisions)
    for actual, single_thread in zip(outputs, whole.execute(arguments)):
        np.testing.assert_array_equal(actual, single_thread)


@pytest.mark.parametrize("name", WHOLE)
def test_kernels_mixing_columns_stay_whole(name, monkeypatch, splits_pay):
    executable, decisions = compiled(WHOLE[name], "2", monkeypatch)
    assert not column_decisions(decisions), decisions
    module = frontdoor.import_text(WHOLE[name], "columns", new_context()).module
    arguments = random_arguments(module, seed=4)
    expected = reference_outputs(module, arguments)
    for actual, wanted in zip(executable.execute(arguments), expected):
        np.testing.assert_allclose(actual, wanted, rtol=2e-6, atol=1e-6)


def test_columns_the_threads_do_not_divide_stay_whole(monkeypatch, splits_pay):
    """64 columns over three threads: no even blocks, so one kernel."""
    _, decisions = compiled(COLUMN_SOFTMAX, "3", monkeypatch)
    assert not column_decisions(decisions), decisions


def test_blocks_narrower_than_two_cache_lines_stay_whole(monkeypatch, splits_pay):
    """16 f32 columns a thread would read 64 bytes of each row, sharing cache lines."""
    _, decisions = compiled(COLUMN_SOFTMAX.replace("x64x", "x32x").replace("<64x", "<32x"), "2", monkeypatch)
    assert not column_decisions(decisions), decisions
