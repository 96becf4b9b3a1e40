"""Masked loops split where the mask changes (`backends/cpu/masked_loop_splitting.py`): the
kernel's results bit for bit those of the unsplit kernel, for masks holding on a prefix or a
suffix of the row, bounds inside and outside the row, f32 and bf16; the split reported in
the decisions only where a mask compares positions in a loop with math."""

import ml_dtypes
import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import kernel_cache, masked_loop_splitting
from mlirxla.context import new_context
from mlirxla.runtime.client import Client, CompileOptions

from .conftest import reference_outputs

DECISION = "split where their mask of positions changes"

# a causal-style mask of query i and key j, then a masked softmax's numerator, as jax writes it
POSITION_MASK = """func.func @main(%scores: tensor<4x{n}x{n}x{t}>) -> tensor<4x{n}x{n}x{t}> {{
  %eight = stablehlo.constant dense<8.0> : tensor<4x{n}x{n}x{t}>
  %s = stablehlo.divide %scores, %eight : tensor<4x{n}x{n}x{t}>
  %i = stablehlo.iota dim = 0 : tensor<{n}x{n}xi32>
  %j = stablehlo.iota dim = 1 : tensor<{n}x{n}xi32>
  %mask = stablehlo.compare {direction}, %i, %j, SIGNED : (tensor<{n}x{n}xi32>, tensor<{n}x{n}xi32>) -> tensor<{n}x{n}xi1>
  %masks = stablehlo.broadcast_in_dim %mask, dims = [1, 2] : (tensor<{n}x{n}xi1>) -> tensor<4x{n}x{n}xi1>
  %floor = stablehlo.constant dense<-1.0e+30> : tensor<4x{n}x{n}x{t}>
  %x = stablehlo.select %masks, %s, %floor : tensor<4x{n}x{n}xi1>, tensor<4x{n}x{n}x{t}>
  %lowest = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %low = stablehlo.convert %lowest : (tensor<f32>) -> tensor<{t}>
  %max = stablehlo.reduce(%x init: %low) applies stablehlo.maximum across dimensions = [2] : (tensor<4x{n}x{n}x{t}>, tensor<{t}>) -> tensor<4x{n}x{t}>
  %lows = stablehlo.broadcast_in_dim %low, dims = [] : (tensor<{t}>) -> tensor<4x{n}x{t}>
  %top = stablehlo.maximum %lows, %max : tensor<4x{n}x{t}>
  %maxes = stablehlo.broadcast_in_dim %top, dims = [0, 1] : (tensor<4x{n}x{t}>) -> tensor<4x{n}x{n}x{t}>
  %d = stablehlo.subtract %x, %maxes : tensor<4x{n}x{n}x{t}>
  %e = stablehlo.exponential %d : tensor<4x{n}x{n}x{t}>
  return %e : tensor<4x{n}x{n}x{t}>
}}"""

# keys past each sequence's length masked out: the bound is loaded in the loop
LENGTH_MASK = """func.func @main(%s: tensor<4x64x{n}xf32>, %lengths: tensor<4xi32>) -> tensor<4x64x{n}xf32> {{
  %k = stablehlo.iota dim = 2 : tensor<4x64x{n}xi32>
  %bound = stablehlo.broadcast_in_dim %lengths, dims = [0] : (tensor<4xi32>) -> tensor<4x64x{n}xi32>
  %mask = stablehlo.compare LT, %k, %bound, SIGNED : (tensor<4x64x{n}xi32>, tensor<4x64x{n}xi32>) -> tensor<4x64x{n}xi1>
  %e = stablehlo.exponential %s : tensor<4x64x{n}xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<4x64x{n}xf32>
  %r = stablehlo.select %mask, %e, %zero : tensor<4x64x{n}xi1>, tensor<4x64x{n}xf32>
  return %r : tensor<4x64x{n}xf32>
}}"""


def compile_both(text: str, tmp_path, monkeypatch):
    """The program compiled with the split and without it, and the decisions of the first."""
    split = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    decisions = next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    with monkeypatch.context() as patch:
        patch.setattr(masked_loop_splitting, "split_masked_loops", lambda module: 0)
        kernel_cache.KERNELS.clear()  # the kernels lowered again, without the split
        whole = Client().compile(text)
    return split, whole, decisions


@pytest.mark.parametrize("direction", ["GE", "GT", "LE", "LT"])
@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_position_masks_split_bit_for_bit(direction, element, tmp_path, monkeypatch):
    text = POSITION_MASK.format(n=256, t=element, direction=direction)
    split, whole, decisions = compile_both(text, tmp_path, monkeypatch)
    assert DECISION in decisions
    s = (np.random.default_rng(1).standard_normal((4, 256, 256)) * 40).astype(ml_dtypes.bfloat16 if element == "bf16" else np.float32)
    s[0, 3, :] = np.nan  # a NaN row: its max is NaN, every exponential NaN
    s[1, :, 5] = -np.inf
    bits = np.uint16 if element == "bf16" else np.uint32
    np.testing.assert_array_equal(split.execute_numpy([s])[0].view(bits), whole.execute_numpy([s])[0].view(bits))


def test_position_mask_matches_the_reference_interpreter(tmp_path, monkeypatch):
    text = POSITION_MASK.format(n=128, t="f32", direction="GE")
    split, _, decisions = compile_both(text, tmp_path, monkeypatch)
    assert DECISION in decisions
    s = np.random.default_rng(2).standard_normal((4, 128, 128)).astype(np.float32)
    np.testing.assert_allclose(split.execute_numpy([s])[0], reference_outputs(frontdoor.import_text(text, "mask", new_context()).module, [s])[0], rtol=2e-7, atol=0)


@pytest.mark.parametrize("lengths", [[0, 1, 63, 64], [-5, 200, 255, 256], [65, 127, 128, 1000]])
def test_length_masks_split_bit_for_bit(lengths, tmp_path, monkeypatch):
    text = LENGTH_MASK.format(n=256)
    split, whole, decisions = compile_both(text, tmp_path, monkeypatch)
    assert DECISION in decisions
    s = np.random.default_rng(3).standard_normal((4, 64, 256)).astype(np.float32) * 30
    bound = np.array(lengths, np.int32)
    got = split.execute_numpy([s, bound])[0]
    np.testing.assert_array_equal(got.view(np.uint32), whole.execute_numpy([s, bound])[0].view(np.uint32))
    with np.errstate(over="ignore", under="ignore"):
        exact = np.exp(s.astype(np.float64)).astype(np.float32)  # overflowing to inf as f32 does
    flushed = np.where(exact < np.finfo(np.float32).tiny, np.float32(0.0), exact)  # kernels flush denormals, as XLA:CPU's
    np.testing.assert_allclose(got, np.where(np.arange(256) < bound[:, None, None], flushed, 0), rtol=2e-7)


@pytest.mark.parametrize("n", [96, 100])
def test_rows_shorter_than_two_blocks_or_not_whole_blocks_stay_whole(n, tmp_path, monkeypatch):
    """96 positions are not two whole blocks of 64, 100 not whole blocks at all: no part
    would run without a scalar remainder, so the loop is left as it was."""
    split, _, decisions = compile_both(LENGTH_MASK.format(n=n), tmp_path, monkeypatch)
    assert DECISION not in decisions


def test_mask_without_math_stays_whole(tmp_path, monkeypatch):
    """A masked select alone skips no work once split."""
    text = LENGTH_MASK.format(n=256).replace("%e = stablehlo.exponential %s", "%e = stablehlo.negate %s")
    _, _, decisions = compile_both(text, tmp_path, monkeypatch)
    assert DECISION not in decisions
