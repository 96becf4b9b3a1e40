"""Scatter, select-and-scatter and top-k as generated loop kernels (`backends/cpu/scatter_kernel.py`,
`select_and_scatter_kernel.py`, `top_k_kernel.py`): they take the kernel path, not the host
call or the interpreter, and give the reference interpreter's results (select-and-scatter:
ties, padding, every direction and combiner) (scatter: duplicate indices combined in the updates' order, windows out
of bounds skipped, every combiner, batching dimensions) and jax CPU's (top_k: ties, NaN,
signed zeros, k = 1 and k = n; scatter windows partly out of bounds, which XLA skips whole)."""

import os
import re
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.backends.cpu.emitters import loop_kernels
from mlirxla.context import new_context
from mlirxla.runtime.client import Client, CompileOptions
from mlirxla.runtime.executable import Executable

from .conftest import printed_by_jax_on, reference_outputs


def scatter_text(operand: str, indices: str, updates: str, numbers: str, combiner: str, element: str) -> str:
    body = f"%r = stablehlo.{combiner} %a, %b : tensor<{element}>\n    stablehlo.return %r : tensor<{element}>" \
        if combiner != "set" else f"stablehlo.return %b : tensor<{element}>"
    return f"""func.func @main(%x: tensor<{operand}>, %i: tensor<{indices}>, %u: tensor<{updates}>) -> tensor<{operand}> {{
  %0 = "stablehlo.scatter"(%x, %i, %u) <{{scatter_dimension_numbers = #stablehlo.scatter<{numbers}>}}> ({{
  ^bb0(%a: tensor<{element}>, %b: tensor<{element}>):
    {body}
  }}) : (tensor<{operand}>, tensor<{indices}>, tensor<{updates}>) -> tensor<{operand}>
  return %0 : tensor<{operand}>
}}
"""


ROWS = "update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1"
# rows 2 and 4 hit twice and three times, -1 and 6 out of bounds
ROW_INDICES = np.array([[2], [4], [-1], [2], [6], [4], [0], [4]], np.int32)


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 7, shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        return (rng.integers(-8, 8, shape) / 4 + 1j * rng.integers(-8, 8, shape) / 4).astype(dtype)
    return rng.integers(-8, 8, shape).astype(dtype) / 4


SCATTERS = {
    "add f32 rows": (scatter_text("6x4xf32", "8x1xi32", "8x4xf32", ROWS, "add", "f32"), np.float32, ROW_INDICES),
    "set f32 rows, the last duplicate wins": (scatter_text("6x4xf32", "8x1xi32", "8x4xf32", ROWS, "set", "f32"), np.float32, ROW_INDICES),
    "multiply i32": (scatter_text("6x4xi32", "8x1xi32", "8x4xi32", ROWS, "multiply", "i32"), np.int32, ROW_INDICES),
    "maximum f64": (scatter_text("6x4xf64", "8x1xi32", "8x4xf64", ROWS, "maximum", "f64"), np.float64, ROW_INDICES),
    "minimum ui8, unsigned indices": (scatter_text("6x4xui8", "8x1xui32", "8x4xui8", ROWS, "minimum", "ui8"), np.uint8,
                                      ROW_INDICES.astype(np.uint32)),
    "or of booleans": (scatter_text("6x4xi1", "8x1xi64", "8x4xi1", ROWS, "or", "i1"), np.bool_, ROW_INDICES.astype(np.int64)),
    "and of booleans": (scatter_text("6x4xi1", "8x1xi32", "8x4xi1", ROWS, "and", "i1"), np.bool_, ROW_INDICES),
    "add f16": (scatter_text("6x4xf16", "8x1xi32", "8x4xf16", ROWS, "add", "f16"), np.float16, ROW_INDICES),
    "add complex64": (scatter_text("6x4xcomplex<f32>", "8x1xi32", "8x4xcomplex<f32>", ROWS, "add", "complex<f32>"),
                      np.complex64, ROW_INDICES),
    "multiply complex128": (scatter_text("6x4xcomplex<f64>", "8x1xi32", "8x4xcomplex<f64>", ROWS, "multiply", "complex<f64>"),
                            np.complex128, ROW_INDICES),
    "set complex64, the last duplicate wins": (scatter_text("6x4xcomplex<f32>", "8x1xi32", "8x4xcomplex<f32>", ROWS, "set", "complex<f32>"),
                                               np.complex64, ROW_INDICES),
    "add i32 elements, a two-component index vector first": (
        scatter_text("5x6xi32", "2x4xi32", "4xi32",
                     "inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [1, 0], index_vector_dim = 0", "add", "i32"),
        np.int32, np.array([[1, 5, 1, 6], [3, 0, 3, 2]], np.int32)),
    "add f32 windows of 2x3, batching": (
        scatter_text("2x5x6xf32", "2x3x2xi32", "2x3x2x3xf32",
                     "update_window_dims = [2, 3], input_batching_dims = [0], scatter_indices_batching_dims = [0], "
                     "scatter_dims_to_operand_dims = [1, 2], index_vector_dim = 2", "add", "f32"),
        np.float32, np.array([[[0, 0], [3, 3], [0, 0]], [[1, 2], [9, 0], [3, 3]]], np.int32)),
}


def computation_scatter(element: str, body: str) -> str:
    """A scatter of rows whose update computation is `body` (ending in %r) of %a (old), %b (update)."""
    text = scatter_text(f"6x4x{element}", "8x1xi32", f"8x4x{element}", ROWS, "add", element)
    return text.replace(f"%r = stablehlo.add %a, %b : tensor<{element}>", body)


# update computations no one-op combiner is: inlined into the kernel (they ran on the interpreter)
SCATTERS |= {
    "update computation expm1(old) * update, f32": (computation_scatter("f32", """%e = stablehlo.exponential_minus_one %a : tensor<f32>
    %r = stablehlo.multiply %e, %b : tensor<f32>"""), np.float32, ROW_INDICES),
    "update computation max(old - update, 0), i32": (computation_scatter("i32", """%d = stablehlo.subtract %a, %b : tensor<i32>
    %z = stablehlo.constant dense<0> : tensor<i32>
    %r = stablehlo.maximum %d, %z : tensor<i32>"""), np.int32, ROW_INDICES),
    "update computation exp(old) - 1 (jax's apply), f64": (computation_scatter("f64", """%e = stablehlo.exponential %a : tensor<f64>
    %one = stablehlo.constant dense<1.0> : tensor<f64>
    %r = stablehlo.subtract %e, %one : tensor<f64>"""), np.float64, ROW_INDICES),
}


@pytest.mark.parametrize("name", list(SCATTERS))
def test_scatter_kernel_matches_the_reference(context, name):
    text, dtype, indices = SCATTERS[name]
    executable = Client().compile(text)
    assert "kernel scatter" in executable.thunk_sequence() and "host scatter" not in executable.thunk_sequence()
    module = frontdoor.import_text(text, "test", context).module
    operand_shape = [int(d) for d in re.match(r"((?:\d+x)*)", text.split("tensor<")[1]).group(1).split("x")[:-1]]
    updates_shape = [int(d) for d in re.match(r"((?:\d+x)*)", text.split("%u: tensor<")[1]).group(1).split("x")[:-1]]
    arguments = [values(operand_shape, dtype, 1), indices, values(updates_shape, dtype, 2)]
    got = executable.execute_numpy(arguments)
    if "exp" in name:  # the kernel's exp is XLA:CPU's approximation, the interpreter's libm's: a few ulp apart
        np.testing.assert_allclose(got[0], reference_outputs(module, arguments)[0], rtol=2 * np.finfo(dtype).eps, atol=0)
    else:
        np.testing.assert_array_equal(got[0], reference_outputs(module, arguments)[0])


SCATTER_OF_A_TEMP = """func.func @main(%x: tensor<6x4xf32>, %i: tensor<8x1xi32>, %u: tensor<8x4xf32>) -> tensor<6x4xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<6x4xf32>
  %doubled = stablehlo.add %x, %x : tensor<6x4xf32>
  %0 = "stablehlo.scatter"(%doubled, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<""" + ROWS + """>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) : (tensor<6x4xf32>, tensor<8x1xi32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}
"""


def test_scatter_writes_in_place_over_an_operand_dying_there(context):
    """The scatter's result takes its operand's buffer when the operand dies at the scatter
    (XLA's scatter is in place): the kernel then writes only the targets."""
    executable = Client().compile(SCATTER_OF_A_TEMP)
    line = next(line for line in executable.thunk_sequence().splitlines() if "kernel scatter" in line)
    operand, result = re.fullmatch(r".*\]\((#\d+\[\d+:\d+\]), .* -> (#\d+\[\d+:\d+\])", line.strip()).groups()
    assert operand == result
    module = frontdoor.import_text(SCATTER_OF_A_TEMP, "test", context).module
    arguments = [values((6, 4), np.float32, 1), ROW_INDICES, values((8, 4), np.float32, 2)]
    np.testing.assert_array_equal(executable.execute_numpy(arguments)[0], reference_outputs(module, arguments)[0])


@pytest.mark.parametrize("in_place", [True, False])
def test_a_scatters_result_is_noalias_and_its_window_a_vector(context, in_place, tmp_path):
    """The scatter kernel's result overlaps no other argument (in place, it reads its operand
    through the result's argument only), so it is marked noalias: its stores then do not keep
    the updates' loads in order, and the window of four f32 is combined as one vector (jax's
    `segment_max` of 500000 x 4 rows took 2.4 ms, XLA:CPU 1.0; 0.86 now). The reference's results."""
    text = SCATTER_OF_A_TEMP if in_place else SCATTERS["add f32 rows"][0]
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    optimized = next(tmp_path.glob("*.scatter.ir-with-opt.ll")).read_text()
    signature = next(line for line in optimized.splitlines() if line.startswith("define void @scatter("))
    assert signature.rsplit(", ", 1)[1].startswith("ptr noalias"), signature
    assert re.search(r"fadd (\w+ )*<4 x float>", optimized)
    module = frontdoor.import_text(text, "test", context).module
    arguments = [values((6, 4), np.float32, 1), ROW_INDICES, values((8, 4), np.float32, 2)]
    np.testing.assert_array_equal(executable.execute_numpy(arguments)[0], reference_outputs(module, arguments)[0])


def test_scatter_of_a_parameter_leaves_the_parameter_alone():
    """A parameter's buffer is never written: the kernel copies the operand into its result."""
    text, dtype, indices = SCATTERS["add f32 rows"]
    executable = Client().compile(text)
    operand = values((6, 4), np.float32, 1)
    kept = operand.copy()
    executable.execute_numpy([operand, indices, values((8, 4), np.float32, 2)])
    np.testing.assert_array_equal(operand, kept)


# --- against jax CPU ---------------------------------------------------------------------------


def jax_cpu_and_kernel(function, *arguments, kernel: str):
    """jax CPU's results, and ours from jax's lowering compiled by the cpu backend (asserting
    that `kernel` runs as a kernel, not a host call)."""
    import jax

    lowered = jax.jit(function).lower(*arguments).as_text()
    executable = Client().compile(lowered)
    assert f"kernel {kernel}" in executable.thunk_sequence() and f"host {kernel}" not in executable.thunk_sequence()
    with jax.default_device(jax.devices("cpu")[0]):
        expected = jax.tree.leaves(jax.jit(function)(*arguments))
    return executable.execute_numpy(list(arguments)), [np.asarray(leaf) for leaf in expected]


TOP_K_ROWS = np.array([
    [1.0, -0.0, 0.0, np.nan, -np.inf, np.inf, 2.0, 2.0, -1.0, 1e-45, 3.0, 3.0, 3.0, 0.5, -np.nan, 7.0],
    [5.0] * 16,
    [np.nan] * 8 + [-np.nan] * 8,
    list(range(16)),
    list(range(16, 0, -1)),
], np.float32)


@pytest.mark.jax
@pytest.mark.parametrize("k", [1, 3, 16])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint8"])
def test_top_k_kernel_matches_jax_cpu(k, dtype):
    """lax.top_k: the values and indices jax CPU gives, bit for bit (ties in index order, NaN
    and signed zeros in the comparator's total order), k from 1 to the whole row."""
    import jax.numpy as jnp
    from jax import lax

    rows = TOP_K_ROWS if dtype in ("float32", "bfloat16") else np.nan_to_num(TOP_K_ROWS, posinf=100, neginf=0)
    rows = np.concatenate([rows, np.random.default_rng(k).permutation(rows.T).T])
    x = jnp.asarray(rows).astype(dtype)
    # the whole row (k = 16) is a sort read whole; fewer are a TopK call (`xhlo-top-k-rewriter`)
    got, expected = jax_cpu_and_kernel(lambda a: lax.top_k(a, k), np.asarray(x), kernel="custom_call" if k < 16 else "sort")
    for leaf, want in zip(got, expected):
        assert leaf.tobytes() == want.tobytes(), (leaf, want)


@pytest.mark.jax
@pytest.mark.parametrize("threads", ["1", "2"])
def test_f32_top_k_is_a_call_into_the_runtime_library(threads, monkeypatch, tmp_path):
    """An f32 TopK compiles no kernel of its own (a call into the runtime library's TopK with
    its rows, their length and k; on two threads per block of rows), and gives jax CPU's
    values and indices, compiled and loaded from the compile cache (whose objects carry the
    library function)."""
    import jax
    from jax import lax

    from mlirxla.backends.cpu import llvm_jit

    monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
    compiled_kernels = []
    compile_native = llvm_jit.compile_native
    monkeypatch.setattr(llvm_jit, "compile_native", lambda name, *rest: compiled_kernels.append(name) or compile_native(name, *rest))
    x = np.random.default_rng(11).standard_normal((64, 4099)).astype(np.float32)
    x[5, 7:30] = np.nan
    lowered = jax.jit(lambda a: lax.top_k(a, 20)).lower(x).as_text()
    with jax.default_device(jax.devices("cpu")[0]):
        expected = [np.asarray(leaf) for leaf in jax.jit(lambda a: lax.top_k(a, 20))(x)]
    for client in (Client(cache_dir=str(tmp_path)), Client(cache_dir=str(tmp_path))):
        executable = client.compile(lowered)
        assert "custom_call" in executable.thunk_sequence()
        for leaf, want in zip(executable.execute_numpy([x]), expected):
            assert leaf.tobytes() == want.tobytes()
    assert not [name for name in compiled_kernels if "custom_call" in name], compiled_kernels


@pytest.mark.jax
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_top_k_split_over_the_threads_matches_jax_cpu(dtype, monkeypatch):
    """A TopK of many long rows runs in blocks of rows on the threads, each row scanned 8 keys
    at a time past its first k: jax CPU's values and indices, ties in index order."""
    from jax import lax

    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    rng = np.random.default_rng(5)
    x = rng.integers(-50, 50, (128, 4099)).astype(dtype)
    x[3, 100:120] = x[3].max() + 1
    got, expected = jax_cpu_and_kernel(lambda a: lax.top_k(a, 20), x, kernel="x2 custom_call")
    for leaf, want in zip(got, expected):
        np.testing.assert_array_equal(leaf, want)


def top_k_text(rows: int, n: int, k: int, element: str, direction: str) -> str:
    """Top k of f32 or f64 rows by IEEE total order (no canonicalization): the sort of (x,
    iota) and two slices that become one TopK call."""
    x, positions = f"tensor<{rows}x{n}x{element}>", f"tensor<{rows}x{n}xi32>"
    return f"""func.func @main(%x: {x}) -> (tensor<{rows}x{k}x{element}>, tensor<{rows}x{k}xi32>) {{
  %iota = stablehlo.iota dim = 1 : {positions}
  %0:2 = "stablehlo.sort"(%x, %iota) ({{
  ^bb0(%a: tensor<{element}>, %b: tensor<{element}>, %c: tensor<i32>, %d: tensor<i32>):
    %before = stablehlo.compare {direction}, %a, %b, TOTALORDER : (tensor<{element}>, tensor<{element}>) -> tensor<i1>
    stablehlo.return %before : tensor<i1>
  }}) {{dimension = 1 : i64, is_stable = true}} : ({x}, {positions}) -> ({x}, {positions})
  %1 = stablehlo.slice %0#0 [0:{rows}, 0:{k}] : ({x}) -> tensor<{rows}x{k}x{element}>
  %2 = stablehlo.slice %0#1 [0:{rows}, 0:{k}] : ({positions}) -> tensor<{rows}x{k}xi32>
  return %1, %2 : tensor<{rows}x{k}x{element}>, tensor<{rows}x{k}xi32>
}}
"""


def long_top_k_rows(dtype, n: int) -> np.ndarray:
    """Rows for the chunked scan past the first k: random, ascending (every key enters),
    descending (none does), one value throughout (ties), few distinct values, zeros of one
    sign with a few of the other past the first chunks (IEEE equal, apart in total order),
    random rows with NaN of both signs, infinities and signed zeros placed there, and rows
    against `segment_bound`: the greatest and least keys all in one class of positions mod 16,
    and a class of NaNs alone."""
    rng = np.random.default_rng(7)
    random = rng.standard_normal((3, n))
    rows = [random[0], np.sort(random[1]), -np.sort(-random[1]), np.full(n, 0.5), rng.integers(0, 3, n).astype(float)]
    for zero in (0.0, -0.0):
        row = np.full(n, zero)
        row[rng.choice(np.arange(100, n), 30, replace=False)] = -zero
        rows.append(row)
    for specials in ([np.nan, -np.nan, np.inf, -np.inf], [0.0, -0.0, 0.0, -0.0], [-np.nan, np.nan, np.nan, -np.inf]):
        row = random[2].copy()
        row[rng.choice(np.arange(100, n), 40, replace=False)] = np.resize(specials, 40)
        rows.append(row)
    clustered = random[0].copy()
    clustered[3::16] = 10 + rng.random(len(clustered[3::16]))
    clustered[5::16] = -10 - rng.random(len(clustered[5::16]))
    rows.append(clustered)
    for nan in (np.nan, -np.nan):
        row = random[2].copy()
        row[7::16] = nan
        rows.append(row)
    return np.array(rows, dtype)


def expected_top_k(rows: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The first k positions of the stable sort of each row by total order, and their values."""
    integer = {4: np.int32, 8: np.int64}[rows.dtype.itemsize]
    bits = rows.view(integer).astype(np.int64)
    keys = np.where(bits < 0, -(bits & np.iinfo(integer).max) - 1, bits)
    order = np.argsort(~keys if largest else keys, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(rows, order, axis=1), order


@pytest.mark.parametrize("element, dtype", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("k", [1, 5, 16, 40])
@pytest.mark.parametrize("direction", ["GT", "LT"])
def test_long_float_top_k_rows_match_the_stable_sort(element, dtype, k, direction, monkeypatch):
    """Rows long enough for the chunked scan (`scan_chunks`: keys compared as floats against the
    threshold's float, the lanes that pass inserted into the buffer by vector selects): the
    stable sort's first k by IEEE total order, NaN of either sign, signed zeros and ties
    included, largest and smallest, in the runtime library's TopK (f32, k up to 16 and past it)
    and in the generated kernel (f64), on one thread and in row blocks on two."""
    rows = np.tile(long_top_k_rows(dtype, 1000 + 37), (32, 1))  # enough bytes to split
    want_values, want_positions = expected_top_k(rows, k, direction == "GT")
    for threads, kernel in (("1", "kernel custom_call"), ("2", "kernel x2 custom_call")):
        monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
        executable = Client().compile(top_k_text(*rows.shape, k, element, direction))
        assert kernel in executable.thunk_sequence()
        values, positions = executable.execute_numpy([rows])
        np.testing.assert_array_equal(positions, want_positions)
        assert values.tobytes() == want_values.tobytes()


@pytest.mark.jax
def test_top_k_of_a_middle_dimension_matches_jax_cpu():
    import jax.numpy as jnp
    from jax import lax

    x = np.random.default_rng(0).integers(0, 5, (3, 20, 4)).astype(np.float32)
    got, expected = jax_cpu_and_kernel(lambda a: lax.top_k(jnp.swapaxes(a, 1, 2), 5), x, kernel="custom_call")
    for leaf, want in zip(got, expected):
        np.testing.assert_array_equal(leaf, want)


@pytest.mark.jax
def test_scatter_windows_partly_out_of_bounds_are_skipped_as_jax_cpu_skips_them():
    """XLA skips a window that does not fit whole (the spec leaves it to the implementation):
    windows of 3 rows starting at 4 or 5 of 6, or at -1, change nothing."""
    from jax import lax

    numbers = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))
    operand = values((6, 4), np.float32, 1)
    indices = np.array([[0], [3], [4], [5], [-1], [3]], np.int32)
    updates = values((6, 3, 4), np.float32, 2)
    got, expected = jax_cpu_and_kernel(lambda x, i, u: lax.scatter_add(x, i, u, numbers, mode="drop"),
                                       operand, indices, updates, kernel="scatter")
    np.testing.assert_array_equal(got[0], expected[0])


@pytest.mark.jax
def test_embedding_gradient_scatter_matches_jax_cpu():
    """The embedding gradient benchmark's scatter-add of broadcast updates: repeated ids,
    negative ids (jax wraps them), every row of the bag added."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import benchmark_workloads

    rng = np.random.default_rng(0)
    table, upstream = values((50, 8), np.float32, 1), values((4, 8), np.float32, 2)
    ids = rng.integers(-50, 50, (4, 3)).astype(np.int32)
    ids[1] = ids[0]
    got, expected = jax_cpu_and_kernel(benchmark_workloads.embedding_gradient, table, ids, upstream, kernel="scatter")
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("element, dtype", [("f8E4M3FN", "float8_e4m3fn"), ("f8E5M2", "float8_e5m2")])
def test_an_8_bit_float_argsort_sorts_on_the_host(element, dtype):
    """The selection kernel orders f16, bf16, f32, f64 and integer keys; a sort of other
    floats (jax's argsort of fp8) is a host call."""
    import ml_dtypes

    text = f"""func.func @main(%x: tensor<8x{element}>) -> tensor<8xi32> {{
  %i = stablehlo.iota dim = 0 : tensor<8xi32>
  %0:2 = "stablehlo.sort"(%x, %i) <{{dimension = 0 : i64, is_stable = true}}> ({{
  ^bb0(%a: tensor<{element}>, %b: tensor<{element}>, %c: tensor<i32>, %d: tensor<i32>):
    %lt = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<{element}>, tensor<{element}>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }}) : (tensor<8x{element}>, tensor<8xi32>) -> (tensor<8x{element}>, tensor<8xi32>)
  return %0#1 : tensor<8xi32>
}}
"""
    x = np.array([3.0, -1.0, 0.5, 2.0, -4.0, 1.0, 0.25, -0.5], getattr(ml_dtypes, dtype))
    executable = Client().compile(text)
    assert "host sort" in executable.thunk_sequence()
    np.testing.assert_array_equal(executable.execute_numpy([x])[0], np.argsort(x.astype(np.float32), kind="stable"))


@dataclass(frozen=True)
class SelectAndScatter:
    operand: tuple[int, ...]
    source: tuple[int, ...]
    element: str
    window: tuple[int, ...]
    strides: tuple[int, ...]
    select: str  # the compare's direction
    combiner: str
    padding: tuple[tuple[int, int], ...] = ((0, 0), (0, 0))

    def text(self) -> str:
        element = self.element
        compare_type = "FLOAT" if element.startswith("f") else ("UNSIGNED" if element.startswith("ui") else "SIGNED")
        operand, source = (f"tensor<{'x'.join(map(str, shape))}x{element}>" for shape in (self.operand, self.source))
        padding = ", ".join(f"[{low}, {high}]" for low, high in self.padding)
        return f"""func.func @main(%x: {operand}, %s: {source}, %init: tensor<{element}>) -> {operand} {{
  %0 = "stablehlo.select_and_scatter"(%x, %s, %init) <{{window_dimensions = array<i64: {", ".join(map(str, self.window))}>, window_strides = array<i64: {", ".join(map(str, self.strides))}>, padding = dense<[{padding}]> : tensor<2x2xi64>}}> ({{
  ^bb0(%a: tensor<{element}>, %b: tensor<{element}>):
    %c = stablehlo.compare {self.select}, %a, %b, {compare_type} : (tensor<{element}>, tensor<{element}>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}, {{
  ^bb0(%a: tensor<{element}>, %b: tensor<{element}>):
    %r = stablehlo.{self.combiner} %a, %b : tensor<{element}>
    stablehlo.return %r : tensor<{element}>
  }}) : ({operand}, {source}, tensor<{element}>) -> {operand}
  return %0 : {operand}
}}
"""

    def expected(self, operand, source, init):
        """The spec in numpy: per source element, its window's first valid position, replaced
        by each later one the select rejects the selected one for; the result is init,
        combined with every source element selecting it."""
        select = {"GE": np.greater_equal, "GT": np.greater, "LE": np.less_equal, "LT": np.less}[self.select]
        combine = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum}[self.combiner]
        result = np.full(operand.shape, init, operand.dtype)
        for source_index in np.ndindex(source.shape):
            selected = None
            for offset in np.ndindex(self.window):
                at = tuple(i * s + o - low for i, s, o, (low, _) in zip(source_index, self.strides, offset, self.padding))
                inside = all(0 <= a < n for a, n in zip(at, operand.shape))
                if inside and (selected is None or not select(operand[selected], operand[at])):
                    selected = at
            if selected is not None:
                result[selected] = combine(result[selected], source[source_index])
        return result


SELECT_AND_SCATTERS = {
    # max pooling's gradient over windows overlapping by one, many equal maxima: the first wins
    "max pool, overlapping windows, ties": (SelectAndScatter((7, 9), (3, 4), "f32", (3, 3), (2, 2), "GE", "add"), np.float32),
    # SAME pooling: padded positions are never selected; the last row's windows hold padding
    "max pool, padded": (SelectAndScatter((5, 6), (3, 3), "f32", (3, 2), (2, 2), "GE", "add", ((1, 1), (0, 0))), np.float32),
    "min pool, strict, i32": (SelectAndScatter((6, 6), (3, 3), "i32", (2, 2), (2, 2), "LT", "add"), np.int32),
    "max of ui8, multiply": (SelectAndScatter((4, 6), (2, 3), "ui8", (2, 2), (2, 2), "GT", "multiply"), np.uint8),
    "f64, maximum into the result": (SelectAndScatter((6, 5), (4, 4), "f64", (3, 2), (1, 1), "GE", "maximum"), np.float64),
    # windows tiling the operand: each result element written once, no fill, no scatter
    "max pool, tiled, ties": (SelectAndScatter((8, 6), (4, 3), "f32", (2, 2), (2, 2), "GE", "add"), np.float32),
    "3x3 tiled, f64, strict, maximum": (SelectAndScatter((9, 6), (3, 2), "f64", (3, 3), (3, 3), "GT", "maximum"), np.float64),
}
TILED = ("min pool, strict, i32", "max of ui8, multiply", "max pool, tiled, ties", "3x3 tiled, f64, strict, maximum")


@pytest.mark.parametrize("name", list(SELECT_AND_SCATTERS))
def test_select_and_scatter_kernel_matches_the_spec(name):
    """Against the spec in numpy, not the reference interpreter: the toolkit's interpreter
    combines the init value into a selected position twice (a 2x2 window over [[0, 1], [2, 3]]
    with init 1 and source 4 gives 6 at the 3; XLA:CPU and the spec give 5)."""
    case, dtype = SELECT_AND_SCATTERS[name]
    program = compile_module(frontdoor.import_text(case.text(), "select_and_scatter", new_context()).module)
    assert any(line.endswith("select_and_scatter as a loop kernel, windows tiling the operand") for line in program.decisions) == (name in TILED)
    executable = Executable.of(program)
    assert "kernel select_and_scatter" in executable.plan.describe() and "interpret" not in executable.plan.describe()
    operand, source, init = values(case.operand, dtype, 3) * (values(case.operand, dtype, 4) > 0), values(case.source, dtype, 5), np.array(1, dtype)
    np.testing.assert_array_equal(executable.execute([operand, source, init])[0], case.expected(operand, source, init))


GPU_COMBINES = {"max pool, overlapping windows, ties": "addf", "max pool, padded": "addf", "f64, maximum into the result": "maximumf"}


@pytest.mark.parametrize("name", list(SELECT_AND_SCATTERS))
def test_a_gpu_select_and_scatter_is_a_thread_per_source_element_and_matches_the_spec(name, tmp_path):
    """The cuda backend's kernel, run on this CPU by the cuda-host backend: tiled windows
    write their own elements (`set`), overlapping ones combine into the selected element
    atomically."""
    case, dtype = SELECT_AND_SCATTERS[name]
    executable = Client(backend="cuda-host").compile(case.text(), CompileOptions(dump_to=str(tmp_path)))
    combine = "set" if name in TILED else GPU_COMBINES[name]
    assert f"a thread per source element ({combine})" in next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    operand, source, init = values(case.operand, dtype, 3) * (values(case.operand, dtype, 4) > 0), values(case.source, dtype, 5), np.array(1, dtype)
    np.testing.assert_array_equal(executable.execute_numpy([operand, source, init])[0], case.expected(operand, source, init))


def test_tiled_windows_in_blocks_of_the_leading_dimension_match_the_spec(monkeypatch):
    """Windows that do not span the leading dimension run in blocks of it over the threads
    when that pays (here made to): each block the same kernel at its rows."""
    monkeypatch.setattr(loop_kernels, "select_and_scatter_slices", lambda op, window: 4)
    case = SelectAndScatter((8, 6), (8, 3), "f32", (1, 2), (1, 2), "GE", "add")
    executable = Client().compile(case.text())
    assert "sliced kernel x4 select_and_scatter" in executable.thunk_sequence(), executable.thunk_sequence()
    operand, source, init = values(case.operand, np.float32, 3) * (values(case.operand, np.float32, 4) > 0), values(case.source, np.float32, 5), np.array(1, np.float32)
    np.testing.assert_array_equal(executable.execute_numpy([operand, source, init])[0], case.expected(operand, source, init))


def test_select_and_scatter_with_another_select_stays_on_the_interpreter():
    text = SelectAndScatter((4, 4), (2, 2), "f32", (2, 2), (2, 2), "GE", "add").text().replace(
        "stablehlo.compare GE, %a, %b", "stablehlo.compare GE, %b, %a")
    assert "host interpret select_and_scatter" in Client().compile(text).thunk_sequence()


@pytest.mark.jax
def test_max_pooling_gradient_matches_jax_cpu():
    """Max pooling's gradient over relu'd values: ties of zeros in most windows."""
    code = r'''
import jax, jax.numpy as jnp, numpy as np
x = jnp.maximum(jnp.asarray(np.random.default_rng(0).standard_normal((2, 9, 9, 3)), jnp.float32), 0)
pool = lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
grad = jax.jit(jax.grad(lambda x: jnp.sum(pool(x) * jnp.arange(75.0).reshape(1, 5, 5, 3))))(x)
print(np.asarray(grad).tobytes().hex())
'''
    printed = {platform: printed_by_jax_on(platform, 1, code)[-1] for platform in ("cpu", "mlirxla")}
    assert printed["cpu"] == printed["mlirxla"]


def cumulative_text(shape: tuple[int, ...], axis: int, element: str, combiner: str, reverse: bool, init: str) -> str:
    """A cumulative reduction as jax writes it (init: the combiner's identity, as jax's)."""
    tensor = f"tensor<{'x'.join(map(str, shape))}x{element}>"
    window = ", ".join(str(n if d == axis else 1) for d, n in enumerate(shape))
    low, high = (0, shape[axis] - 1) if reverse else (shape[axis] - 1, 0)
    padding = ", ".join(f"[{low}, {high}]" if d == axis else "[0, 0]" for d in range(len(shape)))
    return f"""func.func @main(%x: {tensor}) -> {tensor} {{
  %init = stablehlo.constant dense<{init}> : tensor<{element}>
  %0 = "stablehlo.reduce_window"(%x, %init) <{{window_dimensions = array<i64: {window}>, padding = dense<[{padding}]> : tensor<{len(shape)}x2xi64>}}> ({{
  ^bb0(%a: tensor<{element}>, %b: tensor<{element}>):
    %r = stablehlo.{combiner} %a, %b : tensor<{element}>
    stablehlo.return %r : tensor<{element}>
  }}) : ({tensor}, tensor<{element}>) -> {tensor}
  return %0 : {tensor}
}}
"""


CUMULATIVE = {
    "cumsum f32 along the last axis": ((4, 37), 1, "f32", "add", False, "0.0", np.float32),
    "reverse cumsum f32 along a middle axis": ((3, 9, 5), 1, "f32", "add", True, "-0.0", np.float32),
    "cumprod i32 along the first axis": ((12, 4), 0, "i32", "multiply", False, "1", np.int32),
    "cummax f32, reverse": ((5, 12), 1, "f32", "maximum", True, "0xFF800000", np.float32),
    "cummin ui8": ((33,), 0, "ui8", "minimum", False, "255", np.uint8),
    "cumsum i32 over three blocks, reverse": ((3, 300, 2), 1, "i32", "add", True, "0", np.int32),
    "cumsum i64 over three blocks": ((300, 3), 0, "i64", "add", False, "0", np.int64),
    "cumsum f32 of a vector over three blocks": ((300,), 0, "f32", "add", False, "0.0", np.float32),
    "cumprod complex64 (23.7 ms as window loops for 10000)": ((3, 40), 1, "complex<f32>", "multiply", False, "(1.0, 0.0)", np.complex64),
    "cumsum complex128 over three blocks, reverse": ((300, 2), 0, "complex<f64>", "add", True, "(0.0, 0.0)", np.complex128),
}


@pytest.mark.parametrize("name", list(CUMULATIVE))
def test_cumulative_reduce_window_is_a_scan_kernel(context, name, tmp_path):
    """One pass along the axis, with the reference interpreter's values (exactly: the window's
    own order is the sequential one; a complex product within an ulp, its real and imaginary
    parts fused into multiply-adds)."""
    shape, axis, element, combiner, reverse, init, dtype = CUMULATIVE[name]
    text = cumulative_text(shape, axis, element, combiner, reverse, init)
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    assert f"reduce_window is a cumulative {combiner}" in next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    module = frontdoor.import_text(text, "test", context).module
    arguments = [values(shape, dtype, 7)]
    got = executable.execute_numpy(arguments)[0]
    if combiner == "multiply" and np.dtype(dtype).kind == "c":
        np.testing.assert_allclose(got, reference_outputs(module, arguments)[0], rtol=2 * np.finfo(dtype).eps)
    else:
        np.testing.assert_array_equal(got, reference_outputs(module, arguments)[0])
    if combiner == "add":
        expected = np.flip(np.cumsum(np.flip(arguments[0], axis), axis), axis) if reverse else np.cumsum(arguments[0], axis)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", list(CUMULATIVE))
def test_a_gpu_scan_runs_each_pass_in_parallel_and_matches_the_cpu_scan_to_the_bit(name, tmp_path):
    """The cuda backend's scan (`parallel_scan_module_text`: blocks, carries, the rest, each a
    parallel loop nest), run on this CPU by the cuda-host backend: the cpu scan's results,
    combined in the same order."""
    shape, axis, element, combiner, reverse, init, dtype = CUMULATIVE[name]
    text = cumulative_text(shape, axis, element, combiner, reverse, init)
    on_host = Client(backend="cuda-host").compile(text, CompileOptions(dump_to=str(tmp_path)))
    assert "each pass a parallel loop nest" in next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    arguments = [values(shape, dtype, 7)]
    np.testing.assert_array_equal(on_host.execute_numpy(arguments)[0], Client().compile(text).execute_numpy(arguments)[0])


def test_a_long_cumsum_rounds_as_two_short_chains():
    """4096 f32 terms: blocks of 128 scanned, then the blocks' totals carried, as XLA's two
    levels; a sequential sum erred 15 times as much against float64."""
    x = (0.1 * np.random.default_rng(10).standard_normal((8, 4096))).astype(np.float32)
    got = Client().compile(cumulative_text((8, 4096), 1, "f32", "add", False, "0.0")).execute_numpy([x])[0]
    exact = np.cumsum(x.astype(np.float64), 1)
    sequential = np.abs(np.cumsum(x, 1).astype(np.float64) - exact).max()
    assert np.abs(got - exact).max() < sequential / 3


def test_a_window_shorter_than_its_axis_keeps_its_loops(tmp_path):
    """A window of 36 over 37 elements, padded by 35: sums of the last 36, not a scan."""
    text = cumulative_text((4, 37), 1, "f32", "add", False, "0.0").replace("array<i64: 1, 37>", "array<i64: 1, 36>").replace("[36, 0]", "[35, 0]")
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    assert "cumulative" not in next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    x = values((4, 37), np.float32, 8)
    expected = np.array([[x[r, max(0, k - 35):k + 1].sum() for k in range(37)] for r in range(4)])
    np.testing.assert_allclose(executable.execute_numpy([x])[0], expected, rtol=1e-5, atol=1e-5)


def test_a_cumulative_window_whose_init_shows_through_its_padding_keeps_its_loops(context, tmp_path):
    """The spec pads with the init value: with 2 as an add's init each window adds it once per
    padded position, which a scan would not."""
    text = cumulative_text((3, 12), 1, "f32", "add", False, "2.0")
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    assert "cumulative" not in next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    x = values((3, 12), np.float32, 9)
    expected = reference_outputs(frontdoor.import_text(text, "test", context).module, [x])[0]
    np.testing.assert_allclose(executable.execute_numpy([x])[0], expected, rtol=1e-6)
    np.testing.assert_allclose(expected[:, 0], 2.0 * 12 + x[:, 0])


SHORT_CUMULATIVE = {
    "cumsum f32 over 3": ((3, 64), 0, "f32", "add", False, "0.0", np.float32),
    "reverse cumprod i32 over 5": ((4, 5), 1, "i32", "multiply", True, "1", np.int32),
    "cummax f32 over 8": ((8, 16), 0, "f32", "maximum", False, "0xFF800000", np.float32),
    "cumsum from 2, its padding showing": ((2, 6), 1, "f32", "add", False, "2.0", np.float32),
    "reverse cumsum from 1, its padding showing": ((2, 6), 1, "f32", "add", True, "1.0", np.float32),
}


@pytest.mark.parametrize("name", list(SHORT_CUMULATIVE))
def test_a_cumulative_window_over_a_short_axis_is_unrolled(context, name, tmp_path):
    """Along at most 8 elements the simplifier writes each position as the body over the
    slices its window covers (`algsimp_patterns/reduce.unrolled_short_reduce_window`), an init
    that is not inert counted once per padded position as the spec pads: no reduce_window is
    left, and the values are the reference interpreter's, bit for bit."""
    shape, axis, element, combiner, reverse, init, dtype = SHORT_CUMULATIVE[name]
    text = cumulative_text(shape, axis, element, combiner, reverse, init)
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    assert "reduce_window" not in next(tmp_path.glob("*cpu_after_optimizations.mlir")).read_text()
    arguments = [values(shape, dtype, 11)]
    expected = reference_outputs(frontdoor.import_text(text, "test", context).module, arguments)[0]
    np.testing.assert_array_equal(executable.execute_numpy(arguments)[0], expected)


def log_add_exp_text(shape: tuple[int, ...], reverse: bool, init: str = "0xFF800000") -> str:
    """jax's cumlogsumexp along the last axis: a cumulative reduce_window whose reducer is
    log-add-exp, NaN where a - b is."""
    reducer = """^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %max = stablehlo.maximum %a, %b : tensor<f32>
    %d = stablehlo.subtract %a, %b : tensor<f32>
    %nan = stablehlo.compare NE, %d, %d, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %sum = stablehlo.add %a, %b : tensor<f32>
    %abs = stablehlo.abs %d : tensor<f32>
    %neg = stablehlo.negate %abs : tensor<f32>
    %e = stablehlo.exponential %neg : tensor<f32>
    %l = stablehlo.log_plus_one %e : tensor<f32>
    %m = stablehlo.add %max, %l : tensor<f32>
    %r = stablehlo.select %nan, %sum, %m : tensor<i1>, tensor<f32>
    stablehlo.return %r : tensor<f32>"""
    text = cumulative_text(shape, len(shape) - 1, "f32", "add", reverse, init)
    return re.sub(r"\^bb0.*?stablehlo.return %r : tensor<f32>", reducer, text, flags=re.S)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_cumulative_log_add_exp_is_a_scan_kernel(reverse, tmp_path):
    """The reducer inlined into the scan: float64's values to f32 rounding over three blocks,
    infinities and NaN as the reducer makes them, and log1p's digits near 0 (log(1 + x) made
    logaddexp(0, -23) zero)."""
    x = values((3, 300), np.float32, 11)
    x[1, 5], x[1, 9], x[2, :2] = -np.inf, np.nan, (0.0, -23.0)
    executable = Client().compile(log_add_exp_text((3, 300), reverse), CompileOptions(dump_to=str(tmp_path)))
    assert "reduce_window is a cumulative computation" in next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    got = executable.execute_numpy([x])[0]
    along = (lambda a: np.flip(np.logaddexp.accumulate(np.flip(a, 1), 1), 1)) if reverse else (lambda a: np.logaddexp.accumulate(a, 1))
    expected = along(x.astype(np.float64))
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=0)
    assert np.isnan(got[1, 9:]).all() if not reverse else np.isnan(got[1, :10]).all()
    if not reverse:
        np.testing.assert_allclose(got[2, 1], np.log1p(np.exp(-23.0)), rtol=1e-6)


def test_a_computation_whose_init_is_no_identity_keeps_its_loops(context, tmp_path):
    """log-add-exp from 0, not -inf: each window combines the init once per padded position."""
    text = log_add_exp_text((2, 7), False, init="0.0")
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    assert "cumulative" not in next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    x = values((2, 7), np.float32, 12)
    expected = reference_outputs(frontdoor.import_text(text, "test", context).module, [x])[0]
    np.testing.assert_allclose(executable.execute_numpy([x])[0], expected, rtol=1e-6)


def test_a_boolean_computation_of_adds_and_maxima_keeps_its_loops(tmp_path):
    """StableHLO's boolean add and maximum are or; arith's i1 add is a xor and its signed
    max a min, so such a reducer is not inlined (the scan gave wrong values)."""
    text = cumulative_text((3, 10), 1, "i1", "add", False, "false").replace(
        "stablehlo.return %r : tensor<i1>",
        "%t = stablehlo.maximum %r, %a : tensor<i1>\n    stablehlo.return %t : tensor<i1>")
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    assert "cumulative" not in next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    x = values((3, 10), np.bool_, 14)
    np.testing.assert_array_equal(executable.execute_numpy([x])[0], np.logical_or.accumulate(x, 1))


def padded_window_text(shape, element: str, combiner: str, init: str, window, strides, padding) -> str:
    tensor = f"tensor<{'x'.join(map(str, shape))}x{element}>"
    out = [(size + low + high - extent) // stride + 1 for size, extent, stride, (low, high) in zip(shape, window, strides, padding)]
    result = f"tensor<{'x'.join(map(str, out))}x{element}>"
    pads = ", ".join(f"[{low}, {high}]" for low, high in padding)
    return f"""func.func @main(%x: {tensor}) -> {result} {{
  %init = stablehlo.constant dense<{init}> : tensor<{element}>
  %0 = "stablehlo.reduce_window"(%x, %init) <{{window_dimensions = array<i64: {", ".join(map(str, window))}>,
      window_strides = array<i64: {", ".join(map(str, strides))}>, padding = dense<[{pads}]> : tensor<{len(shape)}x2xi64>}}> ({{
  ^bb0(%a: tensor<{element}>, %b: tensor<{element}>):
    %r = stablehlo.{combiner} %a, %b : tensor<{element}>
    stablehlo.return %r : tensor<{element}>
  }}) : ({tensor}, tensor<{element}>) -> {result}
  return %0 : {result}
}}"""


PADDED_WINDOWS = {
    # jax's max_pool and avg_pool, "SAME": NHWC, 3 x 3 at stride 2, one row and column of padding
    "max pool SAME": (((2, 9, 11, 4), "f32", "maximum", "0xFF800000", (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (0, 1), (1, 1), (0, 0))), np.float32),
    "sum pool SAME, stride 1": (((2, 7, 6, 3), "f32", "add", "0.0", (1, 3, 3, 1), (1, 1, 1, 1), ((0, 0), (1, 1), (1, 1), (0, 0))), np.float32),
    # the spec pads with the init value: an add's init of 2 counts once per padded position
    "sum with init 2, NCHW": (((2, 3, 8, 7), "f32", "add", "2.0", (1, 1, 2, 3), (1, 1, 2, 1), ((0, 0), (0, 0), (1, 0), (2, 1))), np.float32),
    "min of i32, window over the batch": (((4, 6, 5), "i32", "minimum", "2147483647", (2, 3, 1), (1, 2, 1), ((1, 0), (1, 1), (0, 0))), np.int32),
    "product of f64": (((3, 5, 5), "f64", "multiply", "1.0", (1, 2, 2), (1, 1, 1), ((0, 0), (0, 1), (1, 0))), np.float64),
}


@pytest.mark.parametrize("name", list(PADDED_WINDOWS))
def test_a_padded_reduce_window_is_a_loop_kernel_matching_the_reference(context, name, tmp_path):
    """A padded window reads its padding as the init value inside the kernel: no padded copy
    of the operand in scratch, the reference interpreter's results."""
    arguments, dtype = PADDED_WINDOWS[name]
    text = padded_window_text(*arguments)
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    sequence = next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    assert "padded reduce_window as a loop kernel" in sequence and "scratch" not in sequence, sequence
    x = values(arguments[0], dtype, 10)
    expected = reference_outputs(frontdoor.import_text(text, "test", context).module, [x])[0]
    np.testing.assert_allclose(executable.execute_numpy([x])[0], expected, rtol=1e-6)


def test_padded_windows_in_blocks_of_the_leading_dimension_match_the_reference(context, monkeypatch):
    """Windows that do not span the leading dimension run in blocks of it over the threads when
    that pays (here made to)."""
    monkeypatch.setattr(loop_kernels, "reduce_window_slices", lambda op: 2)
    arguments, dtype = PADDED_WINDOWS["max pool SAME"]
    text = padded_window_text(*arguments)
    executable = Client().compile(text)
    assert "sliced kernel x2 reduce_window" in executable.thunk_sequence(), executable.thunk_sequence()
    x = values(arguments[0], dtype, 11)
    expected = reference_outputs(frontdoor.import_text(text, "test", context).module, [x])[0]
    np.testing.assert_array_equal(executable.execute_numpy([x])[0], expected)
