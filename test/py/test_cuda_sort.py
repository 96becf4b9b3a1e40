"""Whole sorts on the GPU (`backends/cpu/emitters/bitonic_sort.py`): a bitonic network of
parallel compare-exchange steps per row, its steps within tiles run in workgroup memory as
block programs (`backends/cuda/block_programs.py`), run on this CPU (the `cuda-host`
backend) against numpy's stable sorts, with ties, NaNs and signed zeros, rows of lengths that
are not powers of two, sorts along a leading dimension, descending keys and two keys, tiles
smaller than a row; the PTX assembled by ptxas for sm_90, with its barriers and shared
tiles."""

import re

import numpy as np
import pytest

from mlirxla.backends.cpu.emitters import bitonic_sort
from mlirxla.backends.cpu.emitters.bitonic_sort import network_launches, network_steps, tile_size

from .test_cuda_emitters import compile_text, needs_ptxas, run_on_host


def sort_text(shape: list[int], dimension: int, elements: list[str], comparator: str, stable: bool = True) -> str:
    """A sort of one operand per element type along `dimension`; `comparator` reads %a0, %b0,
    %a1, %b1, ... and yields %c."""
    types = [f"tensor<{'x'.join(map(str, shape))}x{element}>" for element in elements]
    arguments = ", ".join(f"%x{i}: {t}" for i, t in enumerate(types))
    block = ", ".join(f"%a{i}: tensor<{e}>, %b{i}: tensor<{e}>" for i, e in enumerate(elements))
    results = ", ".join(types)
    names = ", ".join(f"%r#{i}" for i in range(len(types))) if len(types) > 1 else "%r"
    return f"""func.func @main({arguments}) -> ({results}) {{
  %r{':' + str(len(types)) if len(types) > 1 else ''} = "stablehlo.sort"({', '.join(f'%x{i}' for i in range(len(types)))}) ({{
    ^bb0({block}):
      {comparator}
      stablehlo.return %c : tensor<i1>
  }}) {{dimension = {dimension} : i64, is_stable = {'true' if stable else 'false'}}} : ({results}) -> ({results})
  return {names} : {results}
}}
"""


LESS = "%c = stablehlo.compare LT, %a0, %b0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>"
TOTAL_ORDER = "%c = stablehlo.compare LT, %a0, %b0, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>"
GREATER_INT = "%c = stablehlo.compare GT, %a0, %b0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>"
TWO_KEYS = """%lt = stablehlo.compare LT, %a0, %b0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a0, %b0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %lt1 = stablehlo.compare LT, %a1, %b1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt1 : tensor<i1>
      %c = stablehlo.or %lt, %tie : tensor<i1>"""


def test_the_network_has_log_n_times_log_n_plus_one_over_two_steps_in_fewer_launches():
    """Steps whose pairs stay within a tile run in one launch: rows of 4096 take 78 steps in
    3 launches with tiles of 2048 (XLA:GPU's count), a row that fits a tile one."""
    assert len(network_steps(4096)) == 78 and len(network_steps(128)) == 28
    assert network_steps(8) == [("flip", 2), ("flip", 4), ("half", 1), ("flip", 8), ("half", 2), ("half", 1)]
    launches = network_launches(4096, 2048)
    assert [len(steps) for steps in launches] == [66, 1, 11] and launches[1] == [("flip", 4096)]
    assert network_launches(128, 128) == [network_steps(128)]
    assert network_launches(128, 64)[1:] == [[("flip", 128)], [("half", 32), ("half", 16), ("half", 8), ("half", 4), ("half", 2), ("half", 1)]]


def test_a_tile_is_as_large_as_workgroup_memory_and_the_row_allow():
    """f32 keys and their i64 positions: 12 bytes a position, tiles of 2048 (24 KiB); wider
    elements halve it; a row of 2 still gets two threads; what fits no tile of 4 is 0."""
    assert tile_size(4096, 12) == 2048 and tile_size(4096, 40) == 1024 and tile_size(128, 12) == 128
    assert tile_size(2, 12) == 4 and tile_size(1 << 20, 48 * 1024) == 0


@pytest.mark.parametrize("max_tile, launches, tiled", [(2048, 1, 1), (16, 10, 4)])
def test_argsort_with_ties_is_stable_over_a_row_of_100(max_tile, launches, tiled, monkeypatch):
    """jax's argsort: (keys, iota) by the keys, stable; 100 elements (padded to 128), many
    ties; in one tile, and in tiles of 16 (8 a row, between launches of single steps in
    global memory)."""
    monkeypatch.setattr(bitonic_sort, "MAX_TILE", max_tile)
    text = sort_text([3, 100], 1, ["f32", "i32"], LESS)
    keys = np.random.default_rng(1).integers(0, 5, (3, 100)).astype(np.float32)
    positions = np.tile(np.arange(100, dtype=np.int32), (3, 1))
    program = compile_text(text)
    decision = (f"sort as a bitonic network over rows of 100, 28 compare-exchange steps in {launches} launch(es), "
                f"{tiled} of them in shared-memory tiles of {min(max_tile, 128)} positions")
    assert any(decision in d for d in program.decisions), program.decisions
    assert sum(len(k.launches) for k in program.kernels) == launches
    (values, order), _ = run_on_host(text, [keys, positions], monkeypatch)
    expected = np.argsort(keys, axis=1, kind="stable")
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(values, np.take_along_axis(keys, expected, 1))


@pytest.mark.parametrize("comparator, element, dimension, shape", [
    (LESS, "f32", 0, [37, 4]),  # along the leading dimension, 37 padded to 64
    (TOTAL_ORDER, "f32", 1, [2, 70]),  # NaNs and signed zeros in IEEE total order
    (GREATER_INT, "i32", 1, [4, 65]),  # descending integers
])
def test_a_whole_sort_matches_numpy(comparator, element, dimension, shape, monkeypatch):
    generator = np.random.default_rng(2)
    if element == "f32":
        x = generator.standard_normal(shape).astype(np.float32)
        x.flat[::7], x.flat[3::11], x.flat[5::13] = np.nan, -0.0, 0.0
    else:
        x = generator.integers(-20, 20, shape).astype(np.int32)
    (result,), _ = run_on_host(sort_text(shape, dimension, [element], comparator), [x], monkeypatch)
    if comparator == GREATER_INT:
        expected = -np.sort(-x, axis=dimension, kind="stable")
    elif comparator == TOTAL_ORDER:
        bits = x.view(np.int32)
        expected = np.take_along_axis(x, np.argsort(np.where(bits < 0, bits ^ 0x7FFFFFFF, bits), axis=dimension, kind="stable"), dimension)
    else:
        expected = np.sort(x, axis=dimension, kind="stable")
    if element == "f32":  # the bits: signed zeros and NaNs where they belong
        result, expected = result.view(np.int32), expected.view(np.int32)
    np.testing.assert_array_equal(result, expected)


def test_two_keys_sort_lexicographically(monkeypatch):
    text = sort_text([2, 50], 1, ["i32", "f32"], TWO_KEYS)
    generator = np.random.default_rng(3)
    first = generator.integers(0, 4, (2, 50)).astype(np.int32)
    second = generator.standard_normal((2, 50)).astype(np.float32)
    (a, b), _ = run_on_host(text, [first, second], monkeypatch)
    order = np.stack([np.lexsort((second[r], first[r])) for r in range(2)])
    np.testing.assert_array_equal(a, np.take_along_axis(first, order, 1))
    np.testing.assert_array_equal(b, np.take_along_axis(second, order, 1))


def test_a_row_of_two_and_a_single_row_sort_with_idle_threads_and_blocks(monkeypatch):
    """Rows of 2 (a tile of 4: a thread's pair is past the row) and one row (a block of two,
    the other idle): loops of one iteration would be folded away."""
    for shape in ([5, 2], [1, 37]):
        x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
        (result,), _ = run_on_host(sort_text(shape, 1, ["f32"], LESS), [x], monkeypatch)
        np.testing.assert_array_equal(result, np.sort(x, axis=1))


@needs_ptxas
def test_the_network_assembles_for_sm_90_with_tiles_in_shared_memory():
    """Rows of 5000 (padded to 8192): tiles of 2048 f32 keys, i32 values and i64 positions
    (32 KiB of shared memory), 91 steps in 6 launches: 3 tiled with barriers between their
    phases, 3 in global memory (the flips of 4096 and 8192, the half step of 2048)."""
    program = compile_text(sort_text([4, 5000], 1, ["f32", "i32"], LESS))
    (kernel,) = program.kernels
    tile, step = (4 * 4, (1024, 1, 1)), (4 * 8192 // 2 // 256, (256, 1, 1))  # a block a tile; a thread a pair
    assert [(nest.grid[0], nest.block) for nest in kernel.launches] == [tile, step, tile, step, step, tile]
    assert program.cubin is not None
    tiled = [r for r in program.cubin.resources if r.shared_bytes]
    assert [r.shared_bytes for r in tiled] == [2048 * 16] * 3 and all(r.spill_bytes == 0 for r in program.cubin.resources)
    assert program.ptx.count("bar.sync") >= 66 + 1 and len(re.findall(r"\.shared \.align \d+ \.b8 \w+\[16384\]", program.ptx)) == 3
