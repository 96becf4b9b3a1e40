"""The cuda backend's row, column and transpose emitters and its vectorized loop emitter without a GPU: which kernels they take (and why
others keep the loop emitter), the PTX they make (warp shuffles `shfl.sync.bfly`, `.shared`
memory and barriers) assembled by ptxas for sm_90, their algorithms run on this CPU against
numpy (the `cuda-host` backend, barriers and shuffles emulated: `thread_program.py`), and
their tiling read from an autotune results file."""

import json
import re

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cuda import autotune, compiler, lowering, ptxas
from mlirxla.context import new_context
from mlirxla.mlir import ir
from mlirxla.pipelines.runner import RunOptions
from mlirxla.runtime.client import Client

from .test_indexed_reads import bag_text

needs_ptxas = pytest.mark.skipif(ptxas.unavailable() is not None, reason=ptxas.unavailable() or "")


def compile_text(text: str) -> compiler.CudaProgram:
    imported = frontdoor.import_bytes(text.encode(), "test.mlir", new_context())
    return compiler.compile_program(imported.module, RunOptions(backend="cuda"))


def run_on_host(text: str, arguments: list, monkeypatch) -> tuple[list, list[str]]:
    """The cuda-host backend's outputs and the mapping notes of its kernels (which emitter
    made each, from the host flavour of the mapping)."""
    notes = []
    original = lowering.emit_rows

    def recording(module, symbol, host, *rest):
        assert host, "the cuda-host backend maps its loops with the host emulation"
        emitted, made = original(module, symbol, host, *rest)
        notes.extend(made)
        return emitted, made

    monkeypatch.setattr(lowering, "emit_rows", recording)
    executable = Client(backend="cuda-host").compile(text)
    assert "interpret" not in executable.thunk_sequence(), "a kernel fell back to the reference interpreter"
    return executable.execute_numpy(arguments), notes


def reduce_text(shape, dimensions, dtype="f32", combiner="add", init="0.0") -> str:
    kept = [n for d, n in enumerate(shape) if d not in dimensions]
    source = f"tensor<{'x'.join(map(str, shape))}x{dtype}>"
    result = f"tensor<{'x'.join(map(str, kept))}x{dtype}>" if kept else f"tensor<{dtype}>"
    return f"""func.func @main(%x: {source}) -> {result} {{
  %init = stablehlo.constant dense<{init}> : tensor<{dtype}>
  %r = stablehlo.reduce(%x init: %init) applies stablehlo.{combiner} across dimensions = {list(dimensions)} : ({source}, tensor<{dtype}>) -> {result}
  return %r : {result}
}}
"""


SOFTMAX = """func.func @main(%x: tensor<5x1024xf32>) -> tensor<5x1024xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<5x1024xf32>, tensor<f32>) -> tensor<5xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<5xf32>) -> tensor<5x1024xf32>
  %d = stablehlo.subtract %x, %mb : tensor<5x1024xf32>
  %e = stablehlo.exponential %d : tensor<5x1024xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<5x1024xf32>, tensor<f32>) -> tensor<5xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<5xf32>) -> tensor<5x1024xf32>
  %r = stablehlo.divide %e, %sb : tensor<5x1024xf32>
  return %r : tensor<5x1024xf32>
}
"""


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@needs_ptxas
def test_softmax_is_one_kernel_of_block_wide_row_reductions():
    """max-reduce, exp(x - max), sum-reduce and divide of a row in one launch: a block of 256
    threads per row, warp butterflies (shfl.sync.bfly), the warps' values through shared
    memory between barriers."""
    program = compile_text(SOFTMAX)
    (kernel,) = program.kernels
    assert kernel.emitters == ("row",)
    (launch,) = kernel.launches
    assert (launch.grid, launch.block) == ((5, 1, 1), (256, 1, 1))
    assert any("row emitter: 6 phase(s), 5 row(s), 256 thread(s) per row" in d for d in program.decisions)
    # two reductions, each 5 rounds over the warp and 3 over the block's 8 warps
    assert program.ptx.count("shfl.sync.bfly.b32") == 16
    assert len(re.findall(r"\.shared \.align \d+ \.b8 \w+\[32\]", program.ptx)) == 2  # 8 warps' f32 values each
    assert program.ptx.count("bar.sync") >= 5  # between the 6 phases, and inside the 2 reductions
    (resources,) = program.cubin.resources
    assert resources.shared_bytes == 64 and resources.spill_bytes == 0


def test_softmax_rows_on_the_host_match_numpy(monkeypatch):
    x = np.random.default_rng(0).standard_normal((5, 1024)).astype(np.float32) * 4
    (result,), notes = run_on_host(SOFTMAX, [x], monkeypatch)
    assert any("row emitter" in note for note in notes)
    np.testing.assert_allclose(result, softmax(x), rtol=2e-6, atol=1e-7)


def test_a_causally_masked_softmax_is_one_row_kernel_on_the_host(monkeypatch):
    """The mask (iotas compared, broadcast over the heads) rides along in the row kernel."""
    from .test_fusion import CAUSAL_SOFTMAX

    scores = np.random.default_rng(4).standard_normal((2, 64, 64)).astype(np.float32) * 3
    (result,), notes = run_on_host(CAUSAL_SOFTMAX, [scores], monkeypatch)
    (note,) = [note for note in notes if "emitter" in note]
    assert "row emitter" in note and "128 row(s)" in note
    masked = np.where(np.tril(np.ones((64, 64), bool)), scores, -1e30)
    np.testing.assert_allclose(result, softmax(masked), rtol=2e-6, atol=1e-7)


@needs_ptxas
def test_short_rows_share_a_warp_and_the_last_block_is_guarded(monkeypatch):
    """37 rows of 40 f64: 8 threads per row, 32 rows per block (2 blocks, the second
    guarded), f64 shuffled as two 32-bit halves; the sums match numpy to the last bits."""
    text = reduce_text([37, 40], [1], "f64")
    program = compile_text(text)
    (launch,) = program.kernels[0].launches
    assert (launch.grid, launch.block) == ((2, 1, 1), (256, 1, 1))
    assert program.ptx.count("shfl.sync.bfly.b32") == 6 and ".shared" not in program.ptx
    x = np.random.default_rng(1).standard_normal((37, 40))
    (result,), notes = run_on_host(text, [x], monkeypatch)
    assert any("8 thread(s) per row, 32 row(s) per block" in note for note in notes)
    np.testing.assert_allclose(result, x.sum(axis=1), rtol=1e-13)


@needs_ptxas
def test_integer_max_over_the_two_minor_dimensions(monkeypatch):
    text = reduce_text([6, 7, 9], [1, 2], "i32", "maximum", "-2147483648")
    assert compile_text(text).kernels[0].emitters == ("row",)
    x = np.random.default_rng(2).integers(-1000, 1000, (6, 7, 9)).astype(np.int32)
    (result,), notes = run_on_host(text, [x], monkeypatch)
    np.testing.assert_array_equal(result, x.max(axis=(1, 2)))


@needs_ptxas
def test_a_full_reduction_is_one_block_not_one_thread(monkeypatch):
    """1000 elements: one block of 128 threads (about 4 elements each), not one thread."""
    text = reduce_text([1000], [0])
    program = compile_text(text)
    assert [(launch.grid, launch.block) for launch in program.kernels[0].launches] == [((1, 1, 1), (128, 1, 1))]
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    (result,), _ = run_on_host(text, [x], monkeypatch)
    np.testing.assert_allclose(result, x.sum(), rtol=1e-5)


def argmax_text(rows: int, length: int, dimension: int = 1) -> str:
    """jnp.argmax's reduce along `dimension` of a rows x length operand: the values and their
    positions (an iota, fused), the larger value and on a tie the smaller position."""
    kept = length if dimension == 0 else rows
    return f"""func.func @main(%x: tensor<{rows}x{length}xf32>) -> (tensor<{kept}xf32>, tensor<{kept}xi32>) {{
  %i = stablehlo.iota dim = {dimension} : tensor<{rows}x{length}xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %ninf), (%i init: %zero) across dimensions = [{dimension}] : (tensor<{rows}x{length}xf32>, tensor<{rows}x{length}xi32>, tensor<f32>, tensor<i32>) -> (tensor<{kept}xf32>, tensor<{kept}xi32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%ai: tensor<i32>, %bi: tensor<i32>) {{
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %ai, %bi : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %take = stablehlo.or %gt, %tie : tensor<i1>
      %m = stablehlo.select %take, %a, %b : tensor<i1>, tensor<f32>
      %mi = stablehlo.select %take, %ai, %bi : tensor<i1>, tensor<i32>
      stablehlo.return %m, %mi : tensor<f32>, tensor<i32>
    }}
  return %r#0, %r#1 : tensor<{kept}xf32>, tensor<{kept}xi32>
}}
"""


@pytest.mark.parametrize("rows, length, phrase", [
    (6, 50, "6 row(s), 8 thread(s) per row"),  # lanes within a warp
    (3, 3000, "3 row(s), 512 thread(s) per row"),  # warps through shared memory too
])
def test_an_argmax_is_one_row_launch_exchanging_both_accumulators(rows, length, phrase, monkeypatch):
    """Values and positions folded by each lane, exchanged together in each butterfly round:
    numpy's argmax (the first position of the maximum) with many ties."""
    text = argmax_text(rows, length)
    program = compile_text(text)
    assert [kernel.emitters for kernel in program.kernels] == [("row",)]
    assert any(phrase in d for d in program.decisions), program.decisions
    x = np.random.default_rng(4).integers(0, 7, (rows, length)).astype(np.float32)
    (values, positions), notes = run_on_host(text, [x], monkeypatch)
    assert any("row emitter" in note for note in notes)
    np.testing.assert_array_equal(positions, x.argmax(axis=1))
    np.testing.assert_array_equal(values, x.max(axis=1))


def test_an_argmax_over_columns_is_one_column_launch_with_a_tile_for_each_accumulator(monkeypatch):
    """300 x 70 reduced over rows (70 columns: a guarded last block of 32), many ties."""
    text = argmax_text(300, 70, dimension=0)
    program = compile_text(text)
    assert [kernel.emitters for kernel in program.kernels] == [("column",)]
    x = np.random.default_rng(6).integers(0, 5, (300, 70)).astype(np.float32)
    (values, positions), _ = run_on_host(text, [x], monkeypatch)
    np.testing.assert_array_equal(positions, x.argmax(axis=0))
    np.testing.assert_array_equal(values, x.max(axis=0))


def test_a_bag_of_embeddings_takes_the_column_emitter_whose_lanes_read_table_rows_coalesced(monkeypatch):
    """Rows (example, feature) summed over the bag read `table[id, feature]`: the features
    vary fastest in the table, so lanes go along them (the column emitter), not along the bag
    (the row emitter's lanes, 4 bytes a table row)."""
    text = bag_text(100, 64, 8, 16)
    program = compile_text(text)
    assert [kernel.emitters for kernel in program.kernels] == [("column",)]
    generator = np.random.default_rng(7)
    table = generator.standard_normal((100, 64)).astype(np.float32)
    ids = generator.integers(-100, 100, (8, 16)).astype(np.int32)
    (result,), _ = run_on_host(text, [table, ids], monkeypatch)
    np.testing.assert_allclose(result, table[ids].sum(axis=1), rtol=1e-6, atol=1e-6)


@needs_ptxas
def test_an_argmax_shuffles_both_accumulators():
    """Rows of 50, 8 lanes a row: 3 butterfly rounds, each shuffling the value and the
    position; over columns, two shared tiles and 5 rounds."""
    program = compile_text(argmax_text(6, 50))
    assert program.cubin is not None and program.ptx.count("shfl.sync.bfly.b32") == 2 * 3
    columns = compile_text(argmax_text(300, 70, dimension=0))  # 32 partial values a column: 5 rounds, two tiles
    assert columns.cubin is not None and columns.ptx.count("shfl.sync.bfly.b32") == 2 * 5
    assert [r.shared_bytes for r in columns.cubin.resources] == [2 * 32 * 33 * 4]


MIN_AND_MAX = """func.func @main(%x: tensor<4x50xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %r:2 = stablehlo.reduce(%x init: %inf), (%x init: %ninf) across dimensions = [1] : (tensor<4x50xf32>, tensor<4x50xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<f32>, %d: tensor<f32>) {
      %low = stablehlo.minimum %a, %b : tensor<f32>
      %high = stablehlo.maximum %c, %d : tensor<f32>
      stablehlo.return %low, %high : tensor<f32>, tensor<f32>
    }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}
"""


def test_a_variadic_reduce_of_accumulators_of_one_type_keeps_the_loop_emitter_and_says_why(monkeypatch):
    program = compile_text(MIN_AND_MAX)
    assert all(emitter.startswith("loop") for kernel in program.kernels for emitter in kernel.emitters)
    assert any("elements cannot be told apart by type" in d for d in program.decisions), program.decisions
    x = np.random.default_rng(5).standard_normal((4, 50)).astype(np.float32)
    (low, high), _ = run_on_host(MIN_AND_MAX, [x], monkeypatch)
    np.testing.assert_array_equal(low, x.min(axis=1))
    np.testing.assert_array_equal(high, x.max(axis=1))


@needs_ptxas
def test_a_column_reduction_reads_coalesced_rows_and_reduces_through_a_padded_tile(monkeypatch):
    """64 x 300 summed over rows: blocks of 32 columns x 32 threads, partial values through a
    32 x 33 shared tile (bank-conflict padding), then a butterfly per column."""
    text = reduce_text([64, 300], [0])
    program = compile_text(text)
    (kernel,) = program.kernels
    assert kernel.emitters == ("column",)
    assert any("column emitter: 2 phase(s), 300 column(s), 32 columns per block, 32 thread(s) per column" in d
               for d in program.decisions)
    assert re.search(r"\.shared \.align \d+ \.b8 \w+\[4224\]", program.ptx)  # 32 x 33 f32
    assert program.ptx.count("shfl.sync.bfly.b32") == 5 and "bar.sync" in program.ptx
    x = np.random.default_rng(6).standard_normal((64, 300)).astype(np.float32)
    (result,), notes = run_on_host(text, [x], monkeypatch)
    assert any("column emitter" in note for note in notes)
    np.testing.assert_allclose(result, x.sum(axis=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, dimensions, dtype, combiner, init", [
    # 8 threads per column: fewer rows than a warp (and more than the 8 a reduce is unrolled over)
    ([12, 50], [0], "f32", "maximum", "0xFF800000"),
    ([3, 5, 7, 4], [1, 2], "f32", "add", "0.0"),  # a pool over the middle dimensions, kept ones around them
    ([100, 33], [0], "i32", "add", "0"),  # a guarded last block of columns
])
def test_column_reductions_on_the_host_match_numpy(shape, dimensions, dtype, combiner, init, monkeypatch):
    generator = np.random.default_rng(7)
    x = generator.integers(-9, 9, shape).astype(np.int32) if dtype == "i32" else generator.standard_normal(shape).astype(np.float32)
    (result,), notes = run_on_host(reduce_text(shape, dimensions, dtype, combiner, init), [x], monkeypatch)
    assert any("column emitter" in note for note in notes)
    reduce = np.max if combiner == "maximum" else np.sum
    np.testing.assert_allclose(result, reduce(x, axis=tuple(dimensions)), rtol=1e-5, atol=1e-5)


def relu_and_bias_gradients(shape: list[int], dimensions: list[int]) -> str:
    """A ReLU's gradient and its bias's (the sum of it over `dimensions`), one fusion."""
    full = f"tensor<{'x'.join(map(str, shape))}xf32>"
    mask = f"tensor<{'x'.join(map(str, shape))}xi1>"
    kept = f"tensor<{'x'.join(str(n) for d, n in enumerate(shape) if d not in dimensions)}xf32>"
    return f"""func.func @main(%h: {full}, %dy: {full}) -> ({full}, {kept}) {{
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %zeros = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> {full}
  %active = stablehlo.compare GT, %h, %zeros : ({full}, {full}) -> {mask}
  %g = stablehlo.select %active, %dy, %zeros : {mask}, {full}
  %db = stablehlo.reduce(%g init: %zero) applies stablehlo.add across dimensions = {dimensions} : ({full}, tensor<f32>) -> {kept}
  return %g, %db : {full}, {kept}
}}
"""


@pytest.mark.parametrize("shape, dimensions", [
    ([64, 128], [0]),
    ([60, 100], [0]),  # lanes past the last column store no side output
    ([4, 6, 40], [0, 1]),  # the side output's dimensions are the reduction's permuted
])
def test_a_column_sum_beside_its_elementwise_operand_is_one_launch_writing_both(shape, dimensions, monkeypatch):
    """XLA's multi-output reduction fusion: the ReLU's gradient is a side output of the column
    emitter, computed and stored by the thread that folds it into the bias's gradient (the
    loop emitter made two launches, the second reading the first's output back with a
    thread per column); on this CPU both results match numpy."""
    text = relu_and_bias_gradients(shape, dimensions)
    (kernel,) = compile_text(text).kernels
    assert kernel.emitters == ("column",)
    generator = np.random.default_rng(8)
    h, dy = (generator.standard_normal(shape).astype(np.float32) for _ in range(2))
    (g, db), notes = run_on_host(text, [h, dy], monkeypatch)
    assert any("column emitter" in note for note in notes), notes
    expected = np.where(h > 0, dy, 0)
    np.testing.assert_array_equal(g, expected)
    np.testing.assert_allclose(db, expected.astype(np.float64).sum(axis=tuple(dimensions)), rtol=1e-5, atol=1e-5)


EXPONENTIAL_BESIDE_COLUMN_SUM = """func.func @main(%x: tensor<64x128xf32>) -> (tensor<64x128xf32>, tensor<128xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %e = stablehlo.exponential %x : tensor<64x128xf32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<64x128xf32>, tensor<f32>) -> tensor<128xf32>
  return %e, %s : tensor<64x128xf32>, tensor<128xf32>
}
"""


def test_an_elementwise_nest_the_column_sum_does_not_read_keeps_the_loop_emitter_and_says_why(monkeypatch):
    """Siblings sharing their operand: the sum reads x, not the exponential, so no reduction
    element tells where the exponential's element is computed; the loop emitter runs them
    (as one launch: they are independent), computing what numpy does."""
    program = compile_text(EXPONENTIAL_BESIDE_COLUMN_SUM)
    assert any("not columns (an elementwise loop nest over more than the kept elements" in d for d in program.decisions)
    assert [len(kernel.launches) for kernel in program.kernels] == [1]
    x = np.random.default_rng(9).standard_normal((64, 128)).astype(np.float32)
    (e, total), _ = run_on_host(EXPONENTIAL_BESIDE_COLUMN_SUM, [x], monkeypatch)
    np.testing.assert_allclose(e, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(total, x.sum(axis=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, dimensions, emitters", [
    ([16, 32, 32, 64], [0, 1, 2], ("column", "column")),  # 64 channels: split between N and H, W
    ([65536, 16], [0], ("column", "column")),  # one long dimension, reshaped into 256 x 256
    ([16, 65536], [1], ("row", "row")),  # 16 long rows
])
def test_a_reduction_that_would_leave_the_gpu_idle_is_two_and_matches_numpy(shape, dimensions, emitters, monkeypatch):
    """The tree reduction rewriter's split (`transforms/tree_reduction_rewriter.py`): an inner
    reduction keeping enough elements to fill the GPU, then an outer one, each taken by an
    emitter; on this CPU the sums match numpy."""
    text = reduce_text(shape, dimensions)
    program = compile_text(text)
    assert tuple(e for kernel in program.kernels for e in kernel.emitters) == emitters
    x = np.random.default_rng(10).standard_normal(shape).astype(np.float32)
    (result,), _ = run_on_host(text, [x], monkeypatch)
    np.testing.assert_allclose(result, x.astype(np.float64).sum(axis=tuple(dimensions)), rtol=1e-4, atol=1e-3)


def test_views_of_a_written_buffer_agree_up_to_unit_dimensions():
    """A row kernel may read what it writes through views that differ by unit dimensions (a
    layer norm gradient's statistics as [128] and [128, 1]: its kernel was 3 launches and is
    one row launch), not through views that regroup elements or skip some."""
    from mlirxla.backends.cuda.row_emitter import contiguous_view

    with new_context():
        def view(text):
            return contiguous_view(ir.Type.parse(text))

        assert view("memref<128xf32>") == view("memref<128x1xf32>") == view("memref<1x128x1xf32>")
        assert view("memref<128x256xf32>") != view("memref<256x128xf32>")
        assert view("memref<128xf32>") != view("memref<128xi32>")
        assert view("memref<128x1xf32, strided<[2, 1]>>") != view("memref<128xf32>")
        assert view("memref<128xf32, strided<[1], offset: 128>>") != view("memref<128xf32>")


def test_default_tiling_keeps_every_lane_busy():
    assert autotune.default_row_tiling(4096, 1024) == autotune.RowTiling(256, 1)
    assert autotune.default_row_tiling(37, 40) == autotune.RowTiling(8, 32)
    assert autotune.default_row_tiling(1, 3) == autotune.RowTiling(1, 1)
    assert autotune.default_row_tiling(100000, 100000) == autotune.RowTiling(512, 1)
    for rows, length in ((4096, 1024), (37, 40), (1, 3), (7, 100000)):
        candidates = autotune.candidate_row_tilings(rows, length)
        assert autotune.default_row_tiling(rows, length) in candidates
        assert all(c.valid_for(length) for c in candidates)


@needs_ptxas
def test_an_autotune_results_file_changes_the_launch_and_the_ptx(tmp_path, monkeypatch):
    default = compile_text(SOFTMAX)
    (decision,) = [d for d in default.decisions if "row emitter" in d]
    print_ = re.search(r"fingerprint (\w+)", decision).group(1)
    cache = tmp_path / "autotune.json"
    cache.write_text(json.dumps({"format": autotune.FORMAT, "version": 1, "results": {
        "NVIDIA H200": {print_: {"threads_per_row": 64, "rows_per_block": 2, "ms": 0.01}},
        "NVIDIA A100-SXM4-80GB": {print_: {"threads_per_row": 32, "rows_per_block": 1, "ms": 0.02}}}}))
    monkeypatch.setenv(autotune.ENVIRONMENT, str(cache))
    tuned = compile_text(SOFTMAX)
    (launch,) = tuned.kernels[0].launches
    assert (launch.grid, launch.block) == ((3, 1, 1), (128, 1, 1))
    assert any("64 thread(s) per row, 2 row(s) per block (autotuned" in d for d in tuned.decisions)
    assert tuned.ptx != default.ptx and tuned.ptx.count("shfl.sync.bfly.b32") == 2 * (5 + 1)
    x = np.random.default_rng(5).standard_normal((5, 1024)).astype(np.float32)
    (result,), _ = run_on_host(SOFTMAX, [x], monkeypatch)  # the host path reads the same file
    np.testing.assert_allclose(result, softmax(x), rtol=2e-6, atol=1e-7)


def test_an_entry_measured_on_another_gpu_of_the_architecture_serves_when_the_target_has_none(tmp_path, monkeypatch):
    default = compile_text(SOFTMAX)
    print_ = re.search(r"fingerprint (\w+)", next(d for d in default.decisions if "row emitter" in d)).group(1)
    cache = tmp_path / "autotune.json"
    results = {"NVIDIA A100-SXM4-80GB": {print_: {"threads_per_row": 32, "rows_per_block": 1}},
               "NVIDIA H100 80GB HBM3": {print_: {"threads_per_row": 64, "rows_per_block": 2}}}
    cache.write_text(json.dumps({"format": autotune.FORMAT, "version": 1, "results": results}))
    monkeypatch.setenv(autotune.ENVIRONMENT, str(cache))
    tuned = compile_text(SOFTMAX)
    assert tuned.kernels[0].launches[0].block == (128, 1, 1)
    assert any("2 row(s) per block (autotuned on NVIDIA H100 80GB HBM3" in d for d in tuned.decisions)
    del results["NVIDIA H100 80GB HBM3"]  # an sm_80 measurement never serves sm_90
    cache.write_text(json.dumps({"format": autotune.FORMAT, "version": 1, "results": results}))
    assert compile_text(SOFTMAX).kernels[0].launches == default.kernels[0].launches


def test_an_unusable_autotune_entry_falls_back_and_a_bad_file_is_refused(tmp_path, monkeypatch):
    default = compile_text(SOFTMAX)
    print_ = re.search(r"fingerprint (\w+)", next(d for d in default.decisions if "row emitter" in d)).group(1)
    cache = tmp_path / "autotune.json"
    cache.write_text(json.dumps({"format": autotune.FORMAT, "version": 1,
                                 "results": {"NVIDIA H200": {print_: {"threads_per_row": 48, "rows_per_block": 1}}}}))
    monkeypatch.setenv(autotune.ENVIRONMENT, str(cache))
    assert compile_text(SOFTMAX).kernels[0].launches == default.kernels[0].launches
    cache.write_text("{}")
    from mlirxla.errors import MlirxlaError

    with pytest.raises(MlirxlaError, match="not an mlirxla-cuda-autotune version 1 file"):
        compile_text(SOFTMAX)


def transpose_text(shape, permutation) -> str:
    def kind(sizes):
        return f"tensor<{'x'.join(map(str, sizes))}xf32>"

    out = [shape[p] for p in permutation]
    return f"""func.func @main(%x: {kind(shape)}, %y: {kind(out)}) -> {kind(out)} {{
  %t = stablehlo.transpose %x, dims = {permutation} : ({kind(shape)}) -> {kind(out)}
  %e = stablehlo.exponential %t : {kind(out)}
  %r = stablehlo.add %e, %y : {kind(out)}
  return %r : {kind(out)}
}}
"""


@needs_ptxas
def test_a_transpose_of_the_minor_dimensions_goes_through_a_padded_shared_tile():
    """70 x 50 from 50 x 70: 3 x 2 tiles of 32 x 32, 256 threads (8 tile rows per pass),
    a 32 x 33 f32 tile in shared memory and one barrier between reading and writing."""
    program = compile_text(transpose_text([50, 70], [1, 0]))
    transposes = [k for k in program.kernels if "transpose" in k.emitters]
    assert len(transposes) == 1
    (launch,) = transposes[0].launches
    assert (launch.grid, launch.block) == ((6, 1, 1), (256, 1, 1))
    assert re.search(r"\.shared \.align \d+ \.b8 \w+\[4224\]", program.ptx) and "shfl" not in program.ptx
    assert [r.shared_bytes for r in program.cubin.resources if r.name == launch.kernel] == [4224]


@pytest.mark.parametrize("shape, permutation", [([50, 70], [1, 0]), ([3, 40, 37], [0, 2, 1]), ([64, 8, 33], [1, 2, 0]),
                                                ([2, 3, 4, 5], [3, 1, 2, 0])])
def test_transposes_on_the_host_match_numpy(shape, permutation, monkeypatch):
    generator = np.random.default_rng(8)
    x = generator.standard_normal(shape).astype(np.float32)
    y = generator.standard_normal([shape[p] for p in permutation]).astype(np.float32)
    (result,), notes = run_on_host(transpose_text(shape, permutation), [x, y], monkeypatch)
    assert any("transpose emitter" in note for note in notes)
    np.testing.assert_allclose(result, np.exp(np.transpose(x, permutation)) + y, rtol=1e-5, atol=1e-6)


def test_a_transpose_keeping_the_minor_dimension_keeps_the_loop_emitter():
    program = compile_text(transpose_text([8, 256, 64], [1, 0, 2]))
    assert all(emitter.startswith("loop") for kernel in program.kernels for emitter in kernel.emitters)


def elementwise_text(shape) -> str:
    kind = f"tensor<{'x'.join(map(str, shape))}xf32>"
    return f"""func.func @main(%x: {kind}, %y: {kind}) -> {kind} {{
  %m = stablehlo.multiply %x, %y : {kind}
  %r = stablehlo.add %m, %x : {kind}
  return %r : {kind}
}}
"""


@needs_ptxas
def test_a_contiguous_elementwise_loop_takes_four_elements_per_thread_in_vector_loads(monkeypatch):
    """256 x 1024 f32: 65536 threads of 4 consecutive elements (256 blocks of 256), each
    operand read with one ld.global.v4 and the result written with one st.global.v4."""
    program = compile_text(elementwise_text([256, 1024]))
    (kernel,) = program.kernels
    assert kernel.emitters == ("loop.v4",)
    assert [(launch.grid, launch.block) for launch in kernel.launches] == [((256, 1, 1), (256, 1, 1))]
    assert program.ptx.count("ld.global.v4.b32") == 2 and program.ptx.count("st.global.v4.b32") == 1
    assert "ld.global.b32" not in program.ptx and "ld.global.f32" not in program.ptx
    x, y = np.random.default_rng(9).standard_normal((2, 256, 1024)).astype(np.float32)
    (result,), _ = run_on_host(elementwise_text([256, 1024]), [x, y], monkeypatch)
    # x y + x is one fused multiply-add, rounded once (`fused_multiply_adds.py`)
    np.testing.assert_allclose(result, (x.astype(np.float64) * y + x).astype(np.float32), rtol=1e-6)


def test_a_minor_dimension_not_a_multiple_of_four_keeps_one_element_per_thread():
    program = compile_text(elementwise_text([6, 7]))
    assert program.kernels[0].emitters == ("loop",)
    assert [(launch.grid, launch.block) for launch in program.kernels[0].launches] == [((1, 1, 1), (42, 1, 1))]


@needs_ptxas
def test_tuning_jobs_compile_every_candidate_of_column_and_transpose_kernels():
    """What gpu-pack gives the tuner: per kernel one PTX per candidate tiling, the default
    flagged once, launches whose block is the tiling's, all assembled by ptxas."""
    from mlirxla.backends.cuda import ptx, tuning

    text = """func.func @main(%x: tensor<64x300xf32>, %y: tensor<50x70xf32>) -> (tensor<300xf32>, tensor<70x50xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<64x300xf32>, tensor<f32>) -> tensor<300xf32>
  %t = stablehlo.transpose %y, dims = [1, 0] : (tensor<50x70xf32>) -> tensor<70x50xf32>
  %n = stablehlo.negate %t : tensor<70x50xf32>
  return %s, %n : tensor<300xf32>, tensor<70x50xf32>
}
"""
    imported = frontdoor.import_bytes(text.encode(), "test.mlir", new_context())
    jobs = {job.candidates[0].emitter: job for job in tuning.tuning_jobs(imported.module)}
    assert sorted(jobs) == ["column", "transpose"]
    for emitter, job in jobs.items():
        assert sum(c.default for c in job.candidates) == 1 and len(job.candidates) >= 3
        for candidate in job.candidates:
            assert candidate.block[0] == 32 * candidate.tiling["rows_per_pass"]
            assert ptx.kernel_names(candidate.ptx) == [candidate.entry]
            ptxas.assemble(candidate.ptx)
        assert all(size > 0 for size in job.buffer_bytes) and max(max(c.arguments) for c in job.candidates) < len(job.buffer_bytes)


def convolution_text(size: int, stride: int, padding: tuple[int, int], lhs_dilation: int, rhs_dilation: int) -> str:
    """A 4 x size x size x 32 input by a 3 x 3 x 32 x 64 kernel, NHWC x HWIO (large enough for
    the cuda pipeline to choose im2col and a GEMM)."""
    out = ((size - 1) * lhs_dilation + 1 + sum(padding) - (3 - 1) * rhs_dilation - 1) // stride + 1
    pad = f"[{padding[0]}, {padding[1]}]"
    return f"""func.func @main(%x: tensor<4x{size}x{size}x32xf32>, %k: tensor<3x3x32x64xf32>) -> tensor<4x{out}x{out}x64xf32> {{
  %y = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {{stride = [{stride}, {stride}], pad = [{pad}, {pad}], lhs_dilate = [{lhs_dilation}, {lhs_dilation}], rhs_dilate = [{rhs_dilation}, {rhs_dilation}]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<4x{size}x{size}x32xf32>, tensor<3x3x32x64xf32>) -> tensor<4x{out}x{out}x64xf32>
  return %y : tensor<4x{out}x{out}x64xf32>
}}
"""


@pytest.mark.parametrize("stride, padding, lhs_dilation, rhs_dilation", [
    (1, (1, 1), 1, 1),  # same padding
    (2, (1, 0), 1, 1),  # strided, padded on one side
    (1, (2, 2), 1, 2),  # a dilated window
    (1, (2, 2), 2, 1),  # a dilated input (a strided layer's input gradient)
])
def test_im2col_reads_the_input_where_taps_fall_on_it_in_one_launch(stride, padding, lhs_dilation, rhs_dilation, monkeypatch):
    """The im2col rows are one launch, zeros where a tap falls on padding or between dilated
    rows (no padded input made first), its 4 channels a thread read and written with vector
    accesses (the stores through the rows' 6-D view declared aligned), and the convolution
    matches its definition."""
    text = convolution_text(24, stride, padding, lhs_dilation, rhs_dilation)
    program = compile_text(text)
    (im2col,) = [kernel for kernel in program.kernels if kernel.symbol.endswith("im2col")]
    assert len(im2col.launches) == 1 and not im2col.scratch
    assert "ld.global.v4.b32" in program.ptx and "st.global.v4.b32" in program.ptx  # 4 channels a thread, aligned
    rng = np.random.default_rng(2)
    x, k = rng.standard_normal((4, 24, 24, 32)).astype(np.float32), rng.standard_normal((3, 3, 32, 64)).astype(np.float32)
    (result,), _ = run_on_host(text, [x, k], monkeypatch)
    np.testing.assert_allclose(result, convolution(x, k, stride, padding, lhs_dilation, rhs_dilation), rtol=1e-4, atol=1e-4)


def convolution(x, k, stride, padding, lhs_dilation, rhs_dilation):
    """NHWC x HWIO in float64 by its definition: the input dilated and padded, each output the
    sum over the window's taps."""
    n, h, w, c = x.shape
    dilated = np.zeros((n, (h - 1) * lhs_dilation + 1, (w - 1) * lhs_dilation + 1, c))
    dilated[:, ::lhs_dilation, ::lhs_dilation] = x
    padded = np.pad(dilated, ((0, 0), padding, padding, (0, 0)))
    span = (k.shape[0] - 1) * rhs_dilation + 1
    out = (padded.shape[1] - span) // stride + 1
    result = np.zeros((n, out, out, k.shape[3]))
    for p in range(k.shape[0]):
        for q in range(k.shape[1]):
            taps = padded[:, p * rhs_dilation::stride, q * rhs_dilation::stride][:, :out, :out]
            result += taps @ k[p, q].astype(np.float64)
    return result


def triangular_solve_text(batch: list[int], n: int, m: int, element: str, left_side: bool, lower: bool, unit: bool,
                          transpose: str) -> str:
    b_shape = batch + ([n, m] if left_side else [m, n])
    a_type = f"tensor<{'x'.join(map(str, batch + [n, n]))}x{element}>"
    b_type = f"tensor<{'x'.join(map(str, b_shape))}x{element}>"
    return f"""func.func @main(%a: {a_type}, %b: {b_type}) -> {b_type} {{
  %x = "stablehlo.triangular_solve"(%a, %b) {{left_side = {str(left_side).lower()}, lower = {str(lower).lower()}, unit_diagonal = {str(unit).lower()}, transpose_a = #stablehlo<transpose {transpose}>}} : ({a_type}, {b_type}) -> {b_type}
  return %x : {b_type}
}}
"""


@pytest.mark.parametrize("element, left_side, lower, unit, transpose", [
    ("f32", True, True, False, "NO_TRANSPOSE"),
    ("f64", False, True, True, "TRANSPOSE"),
    ("f64", True, False, False, "TRANSPOSE"),
    ("complex<f32>", False, False, False, "ADJOINT"),
])
def test_a_triangular_solve_is_one_launch_of_a_thread_per_right_hand_side(element, left_side, lower, unit, transpose,
                                                                         monkeypatch):
    """The cuda backend runs no host calls, so a triangular solve (LAPACK's trsm on the CPU)
    is a kernel: 2 x 3 batches of 5 right-hand sides, each thread substituting through 24
    rows, forward or backward; its results match numpy's solve of the same systems."""
    text = triangular_solve_text([2, 3], 24, 5, element, left_side, lower, unit, transpose)
    program = compile_text(text)
    (kernel,) = program.kernels
    assert [launch.block for launch in kernel.launches] == [(30, 1, 1)]
    assert any("triangular solve as a kernel" in decision for decision in program.decisions)
    dtype = {"f32": np.float32, "f64": np.float64, "complex<f32>": np.complex64}[element]
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 24, 24)) + 6 * np.eye(24)  # well conditioned on both triangles
    b = rng.standard_normal((2, 3, 24, 5) if left_side else (2, 3, 5, 24))
    if dtype is np.complex64:
        a, b = a + 1j * rng.standard_normal(a.shape), b + 1j * rng.standard_normal(b.shape)
    a, b = a.astype(dtype), b.astype(dtype)
    (result,), _ = run_on_host(text, [a, b], monkeypatch)
    triangle = np.tril(a) if lower else np.triu(a)
    if unit:
        triangle = triangle - triangle * np.eye(24) + np.eye(24)
    op = {"NO_TRANSPOSE": triangle, "TRANSPOSE": np.swapaxes(triangle, -1, -2),
          "ADJOINT": np.conj(np.swapaxes(triangle, -1, -2))}[transpose].astype(np.complex128)
    if left_side:
        expected = np.linalg.solve(op, b.astype(np.complex128))
    else:
        expected = np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2).astype(np.complex128)), -1, -2)
    tolerance = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    np.testing.assert_allclose(result, expected if np.iscomplexobj(a) else expected.real, rtol=tolerance, atol=tolerance)


TOP_K = """func.func @main(%x: tensor<6x100xf32>) -> (tensor<6x5xf32>, tensor<6x5xi32>) {
  %values, %indices = chlo.top_k(%x, k = 5) : tensor<6x100xf32> -> (tensor<6x5xf32>, tensor<6x5xi32>)
  return %values, %indices : tensor<6x5xf32>, tensor<6x5xi32>
}
"""


def test_top_k_selects_a_row_a_thread_with_a_buffer_of_its_own(monkeypatch):
    """The top-k selection kernel (a host-looped kernel with one stack buffer on the CPU) runs
    its rows as one parallel loop, each thread with its own k-entry buffer in local memory:
    6 threads; ties go to the earlier position, as the stable sort's order."""
    program = compile_text(TOP_K)
    (selection,) = [kernel for kernel in program.kernels if kernel.symbol == "sort"]
    assert [launch.block for launch in selection.launches] == [(6, 1, 1)]
    x = np.round(np.random.default_rng(7).standard_normal((6, 100)) * 4).astype(np.float32)  # many ties
    (values, indices), _ = run_on_host(TOP_K, [x], monkeypatch)
    order = np.argsort(-x, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, axis=1))


@pytest.mark.parametrize("rows, length, k", [(6, 500, 5), (3, 1000, 16), (2, 4096, 1)])
def test_top_k_of_long_rows_takes_32_lanes_a_row_and_merges_them(rows, length, k, monkeypatch):
    """Rows of at least 32 k: 32 threads a row each select the first k of their strided
    positions, then a thread a row merges the 32 lists by key and position (two launches,
    32 times the rows' threads in the first); ties still go to the earlier position."""
    text = TOP_K.replace("6x100", f"{rows}x{length}").replace("6x5", f"{rows}x{k}").replace("k = 5", f"k = {k}")
    program = compile_text(text)
    (selection,) = [kernel for kernel in program.kernels if kernel.symbol == "sort"]
    assert [launch.grid[0] * launch.block[0] for launch in selection.launches] == [rows * 32, rows]
    x = np.round(np.random.default_rng(8).standard_normal((rows, length)) * 3).astype(np.float32)  # many ties
    (values, indices), _ = run_on_host(text, [x], monkeypatch)
    order = np.argsort(-x, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, axis=1))


@pytest.mark.parametrize("length, k", [(100, 5), (4096, 16)])
def test_top_k_of_a_vector_is_one_row(length, k, monkeypatch):
    """A 1-D operand has no row dimensions: its row loops are loops of one iteration (an
    `scf.parallel` needs a dimension), a thread for it or 32 lanes."""
    text = f"""func.func @main(%x: tensor<{length}xf32>) -> (tensor<{k}xf32>, tensor<{k}xi32>) {{
  %values, %indices = chlo.top_k(%x, k = {k}) : tensor<{length}xf32> -> (tensor<{k}xf32>, tensor<{k}xi32>)
  return %values, %indices : tensor<{k}xf32>, tensor<{k}xi32>
}}
"""
    x = np.round(np.random.default_rng(9).standard_normal(length) * 3).astype(np.float32)
    (values, indices), _ = run_on_host(text, [x], monkeypatch)
    order = np.argsort(-x, kind="stable")[:k]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, x[order])


PADDING_MASKED_SOFTMAX = """func.func @main(%scores: tensor<2x4x64x64xf32>, %lengths: tensor<2xi32>) -> tensor<2x4x64x64xf32> {
  %positions = stablehlo.iota dim = 0 : tensor<64xi32>
  %keys = stablehlo.broadcast_in_dim %positions, dims = [1] : (tensor<64xi32>) -> tensor<2x64xi32>
  %limits = stablehlo.broadcast_in_dim %lengths, dims = [0] : (tensor<2xi32>) -> tensor<2x64xi32>
  %valid = stablehlo.compare LT, %keys, %limits, SIGNED : (tensor<2x64xi32>, tensor<2x64xi32>) -> tensor<2x64xi1>
  %mask = stablehlo.broadcast_in_dim %valid, dims = [0, 3] : (tensor<2x64xi1>) -> tensor<2x4x64x64xi1>
  %hidden = stablehlo.constant dense<-1.0e9> : tensor<2x4x64x64xf32>
  %x = stablehlo.select %mask, %scores, %hidden : tensor<2x4x64x64xi1>, tensor<2x4x64x64xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x64x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x64xf32>) -> tensor<2x4x64x64xf32>
  %d = stablehlo.subtract %x, %mb : tensor<2x4x64x64xf32>
  %e = stablehlo.exponential %d : tensor<2x4x64x64xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x64x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0, 1, 2] : (tensor<2x4x64xf32>) -> tensor<2x4x64x64xf32>
  %r = stablehlo.divide %e, %sb : tensor<2x4x64x64xf32>
  return %r : tensor<2x4x64x64xf32>
}
"""


def test_a_padding_masked_softmax_reads_its_lengths_in_the_row_kernel(monkeypatch):
    """The sequence lengths are indexed by the batch and the key position, not by the rows
    (batch, head, query) first: the row kernel reads them all the same, since it does not
    write them (of its two kernels, the mask read from a parameter keeping the reductions
    apart, the first was the loop emitter's); the results match numpy."""
    program = compile_text(PADDING_MASKED_SOFTMAX)
    assert [kernel.emitters for kernel in program.kernels] == [("row",), ("row",)]
    rng = np.random.default_rng(9)
    scores, lengths = (rng.standard_normal((2, 4, 64, 64)) * 3).astype(np.float32), np.array([40, 64], np.int32)
    (result,), _ = run_on_host(PADDING_MASKED_SOFTMAX, [scores, lengths], monkeypatch)
    masked = np.where(np.arange(64)[None, None, None, :] < lengths[:, None, None, None], scores, -1e9)
    np.testing.assert_allclose(result, softmax(masked), rtol=2e-6, atol=1e-7)


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


def test_a_reduction_that_subtracts_each_element_is_a_row_reduction(monkeypatch):
    """A softmax cross-entropy gradient's label sum reduces the negated labels, which
    elementwise fusion folds into the reduction as `acc - y`: rewritten as `acc + (-y)` (the
    same value) its combiner is an add, and the kernel is one row launch; the results on this
    CPU match numpy."""
    program = compile_text(CROSS_ENTROPY_GRADIENT)
    (kernel,) = program.kernels
    assert kernel.emitters == ("row",)
    rng = np.random.default_rng(3)
    b, x, y = rng.standard_normal(10), rng.standard_normal((16, 10)), rng.standard_normal((16, 10))
    b, x, y = (v.astype(np.float32) for v in (b, x, y))
    (result,), _ = run_on_host(CROSS_ENTROPY_GRADIENT, [b, x, y], monkeypatch)
    logits = x.astype(np.float64) + b
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected = y + (-y.sum(axis=1, keepdims=True) / e.sum(axis=1, keepdims=True)) * e
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)


def fft_text(kind: str, batch: list[int], lengths: list[int], element: str) -> str:
    """One stablehlo.fft of `kind` over `lengths` (after `batch`), of f32 or f64 values."""
    complex_type = f"complex<{element}>"
    half = lengths[:-1] + [lengths[-1] // 2 + 1]
    in_shape, in_element, out_shape, out_element = {
        "FFT": (lengths, complex_type, lengths, complex_type), "IFFT": (lengths, complex_type, lengths, complex_type),
        "RFFT": (lengths, element, half, complex_type), "IRFFT": (half, complex_type, lengths, element)}[kind]
    operand = f"tensor<{'x'.join(map(str, batch + in_shape))}x{in_element}>"
    result = f"tensor<{'x'.join(map(str, batch + out_shape))}x{out_element}>"
    return f"""func.func @main(%x: {operand}) -> {result} {{
  %y = stablehlo.fft %x, type = {kind}, length = {lengths} : ({operand}) -> {result}
  return %y : {result}
}}
"""


@pytest.mark.parametrize("kind, lengths, element", [
    ("FFT", [30], "f32"), ("IFFT", [6, 10], "f64"), ("RFFT", [4, 6, 8], "f32"), ("IRFFT", [12, 10], "f64"),
])
def test_an_fft_is_one_launch_of_its_definition_and_matches_numpy(kind, lengths, element, monkeypatch):
    """The cuda backend runs no host calls, so an FFT (pocketfft on the CPU) is a kernel of
    its definition, a thread per output element, over a batch of 3; its results match
    numpy's, IRFFT's Hermitian extension of a half spectrum included."""
    text = fft_text(kind, [3], lengths, element)
    program = compile_text(text)
    (kernel,) = program.kernels
    assert len(kernel.launches) == 1
    assert any("FFT as a kernel" in decision for decision in program.decisions)
    rng = np.random.default_rng(10)
    real = {"f32": np.float32, "f64": np.float64}[element]
    axes = tuple(range(1, 1 + len(lengths)))
    if kind == "RFFT":
        x = rng.standard_normal([3] + lengths).astype(real)
        expected = np.fft.rfftn(x, axes=axes)
    elif kind == "IRFFT":
        x = np.fft.rfftn(rng.standard_normal([3] + lengths), axes=axes).astype(np.complex64 if element == "f32" else np.complex128)
        expected = np.fft.irfftn(x, s=lengths, axes=axes)
    else:
        x = (rng.standard_normal([3] + lengths) + 1j * rng.standard_normal([3] + lengths))
        x = x.astype(np.complex64 if element == "f32" else np.complex128)
        expected = (np.fft.fftn if kind == "FFT" else np.fft.ifftn)(x, axes=axes)
    (result,), _ = run_on_host(text, [x], monkeypatch)
    tolerance = 2e-4 if element == "f32" else 1e-10
    np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance * np.abs(expected).max())
