"""The CPU backend's pieces on their own: the f32 exp/tanh approximations against numpy, the
LLVM 24 -> 22 constant syntax, the loop order rule, the thunk executor's dependency graph,
the executable plan's JSON round trip, the paths the emitter chooses (GEMM, parallel
row blocks, batch slices), kernel scratch, and the compiler-runtime helper and symbol check."""

import ctypes
import os
import re
import subprocess
import sys

import llvmlite.binding as llvm
import ml_dtypes
import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import driver_emitter, native_symbols, llvm_jit, llvm_text, loop_order, materialization, thread_split, vector_math
from mlirxla.errors import MlirxlaError
from mlirxla.context import new_context
from mlirxla.mlir import ir
from mlirxla.runtime import executor, native_pool
from mlirxla.runtime import thunks as thunk_kinds
from mlirxla.runtime.client import Client, CompileOptions
from mlirxla.runtime.executable import ExecutablePlan
from mlirxla.runtime.executor import ThreadPool, dependency_graph, is_chain, overlaps, run_graph, spans_the_pool
from mlirxla.runtime.thunks import BufferSlice
from mlirxla.transforms import convolution_strategy
from mlirxla.transforms.cost_analysis import kernel_cost

from .conftest import random_arguments, reference_outputs

UNARY = """func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = stablehlo.{op} %x : tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}"""


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    def ordered(x):
        bits = x.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    return np.abs(ordered(actual) - ordered(expected))


def run_unary(op: str, x: np.ndarray) -> np.ndarray:
    """`op` over `x` with gradual underflow, as libm and numpy compute: the approximations are
    held to them over every binade, denormals included, which kernels flushing as XLA:CPU runs
    would read as zero (`denormal_flushing.py`)."""
    executable = Client().compile(UNARY.format(op=op, n=x.size), CompileOptions(flush_denormals=False))
    return executable.execute_numpy([x])[0]


def test_exp_approximation_within_two_ulp_and_special_values():
    x = np.concatenate([np.linspace(-87.0, 88.0, 20001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-30, -1e-30, -87.5, -100.0, -np.inf, np.inf, np.nan, 88.72, 88.73], np.float32)])
    got = run_unary("exponential", x)
    with np.errstate(over="ignore"):
        expected = np.exp(x.astype(np.float64)).astype(np.float32)
    normal = np.isfinite(expected) & (expected >= np.finfo(np.float32).tiny)
    assert ulp_distance(got[normal], expected[normal]).max() <= 2
    tail = dict(zip(x[-11:].tolist(), got[-11:].tolist()))
    assert tail[-100.0] == np.float32(np.exp(-100.0))  # a denormal, exact
    assert tail[-np.inf] == 0.0 and tail[np.inf] == np.inf
    assert np.isfinite(got[-2]) and got[-1] == np.inf  # the last finite power and the first overflow
    assert np.isnan(got[-3])


def test_exp_within_one_ulp_through_overflow_and_gradual_underflow():
    """exp is clamped past the ends of the f32 range ([-110, 100]) and 2^n scaled in once
    (denormal results too, with gradual underflow): within 1 ulp of numpy's rounded
    result everywhere, denormals included, and 0 and inf beyond."""
    x = np.concatenate([np.linspace(-115.0, -87.0, 40001, dtype=np.float32), np.linspace(-2.0, 2.0, 20001, dtype=np.float32),
                        np.linspace(88.0, 105.0, 20001, dtype=np.float32), np.array([-3e38, 3e38, -1e10, 1e10], np.float32)])
    got = run_unary("exponential", x)
    with np.errstate(over="ignore", under="ignore"):
        expected = np.exp(x.astype(np.float64)).astype(np.float32)
    assert ulp_distance(got, expected).max() <= 1
    assert (got[x < -104.0] == 0.0).all() and (got[x > 88.73] == np.inf).all()


def test_exp_scaled_in_one_instruction_equals_the_two_factors(monkeypatch):
    """Where the host has AVX-512, exp scales by 2^n with `llvm.ldexp` (one vscalefps); the
    results are bit for bit those of the two exponent-bit factors, denormals and overflow
    included, since both round once."""
    from mlirxla.backends.cpu import math_approximations

    x = np.concatenate([np.linspace(-104.0, 89.0, 40001, dtype=np.float32),
                        np.array([-103.97, -103.28, -87.34, 88.72, 88.73, -np.inf, np.inf, np.nan], np.float32)])
    results = []
    for one_instruction in (True, False):
        monkeypatch.setattr(math_approximations, "scales_in_one_instruction", lambda: one_instruction)
        results.append(run_unary("exponential", x))
    assert results[0].tobytes() == results[1].tobytes()


def test_exp_results_below_the_normal_range_are_flushed_to_zero_as_on_xla():
    """Kernels flush denormals (the default, as XLA:CPU runs them): exp's results under 2^-126
    are 0, as jax's cpu backend gives them (`jnp.exp(-95.0)`), and the others numpy's within
    1 ulp; a causal mask's exp(-inf) and exp(-1e30) are 0."""
    x = np.concatenate([np.linspace(-110.0, -86.0, 60, dtype=np.float32), np.array([-np.inf, -1e30, -3e38, -1.0, -95.0], np.float32)])
    got = Client().compile(UNARY.format(op="exponential", n=x.size)).execute_numpy([x])[0]
    with np.errstate(under="ignore"):
        expected = np.exp(x.astype(np.float64)).astype(np.float32)
    flushed = np.where(np.abs(expected) < np.finfo(np.float32).tiny, np.float32(0.0), expected)
    assert ulp_distance(got, flushed).max() <= 1
    assert (got[np.abs(expected) < np.finfo(np.float32).tiny] == 0.0).all() and got[-1] == 0.0


REDUCE = """func.func @main(%x: tensor<{rows}x2x{n}xf32>, %init: tensor<f32>) -> tensor<{rows}x2xf32> {{
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.{op} across dimensions = [2] : (tensor<{rows}x2x{n}xf32>, tensor<f32>) -> tensor<{rows}x2xf32>
  return %0 : tensor<{rows}x2xf32>
}}"""


def bits_as_f32(*patterns: int) -> list:
    return list(np.array(patterns, np.uint32).view(np.float32))


def exact_order_reduction(rows: np.ndarray, initial: float, maximum: bool) -> np.ndarray:
    """XLA's maximum (minimum) over each row and the initial value: NaN if any is NaN, else the
    largest (least) with -0 below +0."""
    results = []
    for row in rows:
        values = np.concatenate([row, np.array([initial], np.float32)])
        if np.isnan(values).any():
            results.append(np.float32(np.nan))
            continue
        key = [(float(v), not np.signbit(v)) for v in values]
        results.append(values[key.index(max(key) if maximum else min(key))])
    return np.array(results, np.float32)


ORDER_ROWS = [
    [1.0, -2.0, 3.5, 0.25], [1.0, float("nan"), 3.5, 0.25], bits_as_f32(0xFFC00000, 0x3F800000, 0x40000000, 0x0),
    bits_as_f32(0x7F800001, 0xBF800000, 0x0, 0x80000000), [-0.0, -0.0, -0.0, -0.0], [-0.0, 0.0, -0.0, -0.0],
    [0.0, -0.0, 0.0, 0.0], [-1.0, -0.0, -3.0, -1e-45], [-1.0, -2.0, -3.0, -1e-45], [-np.inf, -np.inf, -np.inf, -np.inf],
    [np.inf, -np.inf, 1e38, -1e38], [1e-45, -1e-45, 0.0, -0.0], [2.0, 1.0, float("nan"), np.inf],
    bits_as_f32(0xFFFFFFFF, 0xFF800000, 0xBF800000, 0x80000000), [np.inf, np.inf, np.inf, np.inf],
]


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("initial", [-np.inf, np.inf, -0.0, 0.0, float("nan")])
def test_max_and_min_reductions_propagate_nan_and_order_signed_zeros(op, initial):
    """f32 max and min reductions (three integer reductions of the bits and their decode,
    `integer_order_reductions.py`) are XLA's exactly: NaN (of either sign, quiet or
    signaling) anywhere in a row or the initial value gives NaN, -0 is below +0, and the
    result is the largest (least) element bit for bit otherwise; rows of 37 floats also
    reach the vectorized loop's remainder."""
    rows = np.array([row * 9 + row[:1] for row in ORDER_ROWS], np.float32)
    x = np.stack([rows, np.random.default_rng(5).standard_normal(rows.shape).astype(np.float32)], axis=1)
    text = REDUCE.format(rows=x.shape[0], n=x.shape[2], op=op)
    got = Client().compile(text).execute_numpy([x, np.array(initial, np.float32)])[0]
    for column in range(2):
        expected = exact_order_reduction(x[:, column], np.float32(initial), op == "maximum")
        assert np.array_equal(np.isnan(got[:, column]), np.isnan(expected))
        finite = ~np.isnan(expected)
        assert got[finite, column].tobytes() == expected[finite].tobytes()


def test_tanh_approximation_close_and_saturating():
    x = np.concatenate([np.linspace(-10.0, 10.0, 20001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-5, -1e-5, np.inf, -np.inf, np.nan], np.float32)])
    got = run_unary("tanh", x)
    expected = np.tanh(x.astype(np.float64)).astype(np.float32)
    finite = ~np.isnan(x)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=2e-6, atol=1e-7)
    assert got[-5] == np.float32(1e-5) and got[-3] == 1.0 and got[-2] == -1.0 and np.isnan(got[-1])


def positive_floats_over_every_binade(count: int) -> np.ndarray:
    """f32 values with random bit patterns from the smallest denormal to the largest finite."""
    bits = np.random.default_rng(7).integers(1, 0x7F7FFFFF, count, dtype=np.int64).astype(np.int32)
    return bits.view(np.float32)


def test_log_approximation_within_two_ulp_and_special_values():
    """log is arithmetic the vectorizer widens (no libm call), within 2 ulp of the correctly
    rounded result over every binade, denormals included; 0 and -0 give -inf, inf stays inf,
    negatives (-inf too) and NaN give NaN."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -1e-40, 1.0, 2.0, 0.5, 1e-45, 3.4028235e38], np.float32)
    x = np.concatenate([positive_floats_over_every_binade(40000), np.linspace(0.5, 2.0, 20001, dtype=np.float32), special])
    got = run_unary("log", x)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.log(x.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(expected)
    assert ulp_distance(got[finite], expected[finite]).max() <= 2
    tail = got[-special.size:]
    assert tail[0] == -np.inf and tail[1] == -np.inf and tail[2] == np.inf
    assert np.isnan(tail[3:7]).all()
    assert tail[7] == 0.0


POWER = """func.func @main(%x: tensor<{n}xf32>, %y: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = stablehlo.power %x, %y : tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}"""


def test_pow_approximation_within_one_ulp_and_cs_special_cases():
    """pow is arithmetic (e^(y log|x|) in f64, rounded once): within 1 ulp of the correctly
    rounded result over bases from denormals to the largest f32 and exponents that reach
    overflow and denormal results; C99's special cases exactly (with gradual underflow, as
    `run_unary`)."""
    rng = np.random.default_rng(11)
    x = positive_floats_over_every_binade(30000)
    y = (rng.standard_normal(x.size) * 3).astype(np.float32)
    # exponents that land near the ends of the range: x^y = 2^(+-120..+-149)
    target = rng.uniform(-149, 127, 10000)
    x2 = np.exp2(rng.uniform(-20, 20, 10000)).astype(np.float32)
    y2 = (target / np.log2(x2.astype(np.float64))).astype(np.float32)
    inf, nan = np.inf, np.nan
    special = [(0.0, 0.0, 1.0), (nan, 0.0, 1.0), (1.0, nan, 1.0), (-1.0, inf, 1.0), (-1.0, -inf, 1.0), (2.0, nan, nan),
               (nan, 2.0, nan), (-2.0, 0.5, nan), (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0), (-0.0, 3.0, -0.0), (-0.0, -3.0, -inf),
               (-0.0, -2.0, inf), (0.0, -1.0, inf), (0.0, 2.5, 0.0), (-0.0, 0.5, 0.0), (0.5, inf, 0.0), (0.5, -inf, inf),
               (2.0, inf, inf), (2.0, -inf, 0.0), (inf, -1.0, 0.0), (inf, 0.5, inf), (-inf, 3.0, -inf), (-inf, 2.0, inf),
               (-inf, -3.0, -0.0), (-inf, 0.5, inf), (10.0, 39.0, inf), (10.0, -46.0, 0.0), (2.0, -149.0, 2.0**-149)]
    sx, sy, expected_special = (np.array(column, np.float32) for column in zip(*special))
    xs, ys = np.concatenate([x, x2, sx]), np.concatenate([y, y2, sy])
    executable = Client().compile(POWER.format(n=xs.size), CompileOptions(flush_denormals=False))
    got = executable.execute_numpy([xs, ys])[0]
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        expected = np.power(xs.astype(np.float64), ys.astype(np.float64)).astype(np.float32)
    checked = np.isfinite(expected[:-len(special)]) & (expected[:-len(special)] != 0)
    assert ulp_distance(got[:-len(special)][checked], expected[:-len(special)][checked]).max() <= 1
    tail = got[-len(special):]
    assert np.array_equal(tail, expected_special, equal_nan=True)
    assert np.array_equal(np.signbit(tail), np.signbit(expected_special))


@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_exp_tanh_log_pow_call_no_libm(tmp_path, element):
    """The optimized LLVM IR of a kernel computing exp, tanh, log and pow, in f32 or in bf16,
    calls no math function: the loops hold arithmetic only, which the vectorizer widened."""
    text = UNARY.format(op="exponential", n=1024).replace("return %0", "%1 = stablehlo.tanh %0 : tensor<1024xf32>\n"
                                                           "  %2 = stablehlo.log %1 : tensor<1024xf32>\n"
                                                           "  %3 = stablehlo.power %2, %x : tensor<1024xf32>\n  return %3")
    Client().compile(text.replace("f32", element), CompileOptions(dump_to=str(tmp_path)))
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert "define" in optimized and "x float>" in optimized
    for name in ("exp", "tanh", "log", "pow"):
        assert f"@llvm.{name}." not in optimized and f"@{name}f(" not in optimized


def test_exp_and_tanh_clamp_with_plain_compares_and_may_fuse_multiply_adds(tmp_path):
    """The approximations' clamps are compare-and-selects (no `llvm.maximum`/`minimum`, each
    several x86 instructions) and their polynomials' multiplies and adds are `contract`, which
    LLVM fuses into FMAs where the host has them."""
    text = UNARY.format(op="exponential", n=1024).replace("return %0", "%1 = stablehlo.tanh %0 : tensor<1024xf32>\n  return %1")
    Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert "x float>" in optimized and "@llvm.maximum" not in optimized and "@llvm.minimum" not in optimized
    assert "fmul contract <" in optimized and "fadd contract <" in optimized


@pytest.mark.parametrize("op, reference", [("exponential", np.exp), ("tanh", np.tanh), ("log", np.log)])
def test_bf16_transcendentals_are_approximated_in_f32(op, reference):
    """bf16 math runs in f32 and takes the same approximations (so it vectorizes), rounded
    once to bf16: within one bf16 ulp of the rounded f64 result."""
    x = np.linspace(0.01, 8.0, 4001).astype(ml_dtypes.bfloat16)
    text = UNARY.format(op=op, n=x.size).replace("f32", "bf16")
    got = Client().compile(text).execute_numpy([x])[0].astype(np.float64)
    expected = reference(x.astype(np.float64))
    np.testing.assert_allclose(got, expected, rtol=2**-7, atol=1e-6)


@pytest.mark.parametrize("text, hex_text", [
    ("float 1.000000e-01", "float 0x3FB99999A0000000"),
    ("float -inf", "float 0xFFF0000000000000"),
    ("double +qnan", "double 0x7FF8000000000000"),
    ("float +snan(0x1)", "float 0x7FF0000020000000"),
    ("bfloat +qnan(0x3F)", "bfloat 0xR7FFF"),
    ("half +inf", "half 0xH7C00"),
    ("bfloat 1.000000e-01", "bfloat 0xR3DCD"),  # rounded to nearest, not chopped
    ("fadd float %a, f0x3727C5AC", "fadd float %a, 0x3EE4F8B580000000"),
    ("fmul double %x.1.5, 2.500000e+00", "fmul double %x.1.5, 0x4004000000000000"),
])
def test_float_constants_in_the_syntax_llvmlite_reads(text, hex_text):
    assert llvm_text.downgrade(text) == hex_text


def test_downgraded_module_parses_in_llvmlite():
    module = llvm_text.downgrade(
        "define float @f(float %a) {\n  %b = fadd float %a, f0x3727C5AC\n  %c = fmul float %b, 1.000000e-01\n"
        "  %d = select i1 true, float %c, float -inf\n  ret float %d\n}\n")
    llvm.parse_assembly(module).verify()


MATMUL = """
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#row = affine_map<(i, j) -> (i, j)>
#sum = affine_map<(i, j) -> (i)>
func.func @f(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %r: memref<4xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %z, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#row, #sum], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<4x8xf32>) outs(%r : memref<4xf32>) {
  ^bb0(%x: f32, %z: f32):
    %s = arith.addf %z, %x : f32
    linalg.yield %s : f32
  }
  return
}
"""


def test_reductions_may_reassociate():
    """The matmul and the row sum reduce: their adds and the matmul's multiply may reorder
    (`fastmath<reassoc>`), which lets the vectorizer widen a float sum."""
    with new_context():
        module = ir.Module.parse(MATMUL)
        assert "fastmath" not in str(module)
        loop_order.reorder_loops(module)
        assert str(module).count("fastmath<reassoc>") == 3


def test_loop_order_moves_the_contiguous_output_dimension_innermost():
    with new_context():
        module = ir.Module.parse(MATMUL)
        loop_order.reorder_loops(module)
        matmul, row_sum = [op for op in module.body.operations[0].regions[0].blocks[0].operations if op.operation.name == "linalg.generic"]
        assert [str(a) for a in ir.ArrayAttr(matmul.attributes["iterator_types"])] == [
            "#linalg.iterator_type<parallel>", "#linalg.iterator_type<reduction>", "#linalg.iterator_type<parallel>"]
        maps = [str(m) for m in ir.ArrayAttr(matmul.attributes["indexing_maps"])]
        assert maps == ["affine_map<(d0, d1, d2) -> (d0, d1)>", "affine_map<(d0, d1, d2) -> (d1, d2)>", "affine_map<(d0, d1, d2) -> (d0, d2)>"]
        # the row sum reads its input along rows: moving its output dimension inward would stride
        assert "(d0, d1) -> (d0)" in str(row_sum.attributes["indexing_maps"])
        assert str(ir.ArrayAttr(row_sum.attributes["iterator_types"])[1]) == "#linalg.iterator_type<reduction>"


class Recorder:
    """A thunk that records when it ran; reads and writes are declared slices."""

    def __init__(self, name, reads, writes, log):
        self.name, self.reads, self.writes, self.log = name, tuple(reads), tuple(writes), log

    def run(self, bases, pool):
        self.log.append(self.name)


def test_dependency_graph_orders_conflicts_and_runs_every_thunk_once():
    a, b, c, d = (BufferSlice(0, 16 * i, 16) for i in range(4))
    log: list = []
    thunks = [Recorder("write a", [], [a], log), Recorder("write b", [], [b], log),
              Recorder("a to c", [a], [c], log), Recorder("b to d", [b], [d], log),
              Recorder("overwrite a", [], [a], log), Recorder("c+d", [c, d], [b], log)]
    graph = dependency_graph(thunks)
    assert not is_chain(graph)
    assert [sorted(n.successors) for n in graph] == [[2, 4], [3, 5], [4, 5], [5], [], []]
    for _ in range(20):
        log.clear()
        run_graph(graph, [0], ThreadPool(2))
        assert sorted(log) == sorted(t.name for t in thunks)
        position = {name: index for index, name in enumerate(log)}
        assert position["write a"] < position["a to c"] < position["overwrite a"]
        assert position["b to d"] < position["c+d"] and position["a to c"] < position["c+d"]


def independent_dots(size: int) -> str:
    """Eight independent dots of x with eight weights, summed in a chain."""
    shape = f"tensor<{size}x{size}xf32>"
    lines = [f"  %d{i} = stablehlo.dot %x, %w{i} : ({shape}, {shape}) -> {shape}" for i in range(8)]
    lines += [f"  %s{i} = stablehlo.add %{'d0' if i == 1 else f's{i - 1}'}, %d{i} : {shape}" for i in range(1, 8)]
    weights = ", ".join(f"%w{i}: {shape}" for i in range(8))
    return (f"func.func @main(%x: {shape}, {weights}) -> {shape} {{\n" + "\n".join(lines)
            + f"\n  return %s7 : {shape}\n}}")


def test_a_sequence_with_a_thunk_that_spans_the_pool_runs_in_order(monkeypatch, context):
    """Independent GEMMs big enough to run in parts over the native pool leave no graph (each
    already takes every core; kernels beside them took cores from their parts), while the
    same program with GEMMs too small for parts keeps its graph (whatever bytes it moves:
    that rule, `executor.SEQUENTIAL_BYTES_BELOW`, is `test_native_drivers`'); both compute
    the reference's result."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    monkeypatch.setattr(executor, "SEQUENTIAL_BYTES_BELOW", 0)
    for size, graph in ((64, False), (16, True)):
        text = independent_dots(size)
        executable = Client().compile(text)
        thunks = executable.executable.plan.thunks
        assert any(spans_the_pool(t) for t in thunks) != graph
        assert (executable.executable.graph is not None) == graph
        module = frontdoor.import_text(text, "test", context).module
        arguments = random_arguments(module, 3)
        np.testing.assert_allclose(executable.execute_numpy(arguments)[0], reference_outputs(module, arguments)[0],
                                   rtol=1e-4, atol=1e-4)


def test_dependency_graph_has_an_edge_exactly_where_two_thunks_conflict():
    """Random thunks over a few allocations, slices of every size (empty ones too), thunks
    reading or writing nothing: an edge i -> j (i before j) exactly when j reads what i
    writes or writes what i reads or writes, each node's successors in order, its pending
    count its predecessors."""
    rng = np.random.default_rng(5)

    def slices():
        return [BufferSlice(int(rng.integers(0, 3)), int(rng.integers(0, 64)), int(rng.integers(0, 24)))
                for _ in range(rng.integers(0, 4))]

    def conflict(earlier, later):
        return (any(overlaps(w, r) for w in earlier.writes for r in later.reads)
                or any(overlaps(w, x) for w in later.writes for x in earlier.reads + earlier.writes))

    thunks = [Recorder(f"t{index}", slices(), slices(), []) for index in range(60)]
    graph = dependency_graph(thunks)
    for j, later in enumerate(thunks):
        assert graph[j].successors == [k for k in range(j + 1, len(thunks)) if conflict(later, thunks[k])]
        assert graph[j].pending == sum(conflict(thunks[i], later) for i in range(j))


@pytest.fixture
def streamed(monkeypatch):
    """The split's mechanics at sizes a test runs quickly: kernels modelled as streaming from
    memory (a host with no last-level cache to tell of), where bytes split over the threads;
    from the shared cache only a kernel's arithmetic does (`thread_split.estimate_moving`)."""
    monkeypatch.setattr(thread_split, "last_level_cache_bytes", lambda: 0)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_sliced_kernels_give_the_same_results_on_any_thread_count(threads, monkeypatch, streamed):
    """A masked exponential and a row softmax split over MLIRXLA_CPU_THREADS (one: whole; two
    and three: row blocks on the caller and the native pool's helpers) give numpy's results."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
    x = np.random.default_rng(4).standard_normal((48, 64, 256)).astype(np.float32)
    executable = Client().compile(MASKED_SOFTMAX_NUMERATOR)
    assert ("sliced kernel" in executable.thunk_sequence()) == (threads != "1")
    got = executable.execute_numpy([x])[0]
    masked = np.where(np.arange(256)[None, None, :] <= np.arange(64)[None, :, None], x * 0.125, -1e9)
    expected = np.exp(masked - masked.max(axis=2, keepdims=True))
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-30)


MASKED_SOFTMAX_NUMERATOR = """func.func @main(%x: tensor<48x64x256xf32>) -> tensor<48x64x256xf32> {
  %scale = stablehlo.constant dense<0.125> : tensor<48x64x256xf32>
  %low = stablehlo.constant dense<-1.0e+09> : tensor<48x64x256xf32>
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %keys = stablehlo.iota dim = 1 : tensor<64x256xi32>
  %queries = stablehlo.iota dim = 0 : tensor<64x256xi32>
  %causal = stablehlo.compare LE, %keys, %queries, SIGNED : (tensor<64x256xi32>, tensor<64x256xi32>) -> tensor<64x256xi1>
  %visible = stablehlo.broadcast_in_dim %causal, dims = [1, 2] : (tensor<64x256xi1>) -> tensor<48x64x256xi1>
  %scaled = stablehlo.multiply %x, %scale : tensor<48x64x256xf32>
  %masked = stablehlo.select %visible, %scaled, %low : tensor<48x64x256xi1>, tensor<48x64x256xf32>
  %max = stablehlo.reduce(%masked init: %init) applies stablehlo.maximum across dimensions = [2] : (tensor<48x64x256xf32>, tensor<f32>) -> tensor<48x64xf32>
  %m = stablehlo.broadcast_in_dim %max, dims = [0, 1] : (tensor<48x64xf32>) -> tensor<48x64x256xf32>
  %d = stablehlo.subtract %masked, %m : tensor<48x64x256xf32>
  %e = stablehlo.exponential %d : tensor<48x64x256xf32>
  return %e : tensor<48x64x256xf32>
}"""


LAYER_AND_ELEMENTWISE = """func.func @main(%x: tensor<4096x256xf32>, %w: tensor<256x512xf32>, %b: tensor<512xf32>) -> (tensor<4096x512xf32>, tensor<4096x256xf32>) {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4096x256xf32>, tensor<256x512xf32>) -> tensor<4096x512xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<512xf32>) -> tensor<4096x512xf32>
  %2 = stablehlo.add %0, %1 : tensor<4096x512xf32>
  %3 = stablehlo.tanh %2 : tensor<4096x512xf32>
  %4 = stablehlo.exponential %x : tensor<4096x256xf32>
  %5 = stablehlo.multiply %4, %x : tensor<4096x256xf32>
  return %3, %5 : tensor<4096x512xf32>, tensor<4096x256xf32>
}"""


def test_emitter_paths_and_plan_round_trip(monkeypatch):
    """A dense layer's dot runs as a BLAS GEMM followed by its epilogue kernel; a 4 MiB
    exponential kernel runs in one row block per thread; the plan survives JSON, and both
    paths compute what numpy does."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    executable = Client().compile(LAYER_AND_ELEMENTWISE)
    text = executable.thunk_sequence()
    assert "gemm dot_tanh_fusion f32 4096x512x256 NN" in text
    assert "sliced kernel x2" in text
    rng = np.random.default_rng(1)
    x = (0.05 * rng.standard_normal((4096, 256))).astype(np.float32)
    w = (0.05 * rng.standard_normal((256, 512))).astype(np.float32)
    b = rng.standard_normal(512).astype(np.float32)
    layer, elementwise = executable.execute_numpy([x, w, b])
    np.testing.assert_allclose(layer, np.tanh(x @ w + b), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(elementwise, np.exp(x) * x, rtol=1e-5, atol=1e-6)
    plan = executable.executable.plan
    again = ExecutablePlan.from_json(plan.to_json())
    assert again.describe() == plan.describe()
    assert [type(t) for t in again.thunks] == [type(t) for t in plan.thunks]
    assert thunk_kinds.from_json(plan.thunks[0].to_json()).describe() == plan.thunks[0].describe()


# dots whose dimension numbers leave a list out (empty): jnp.einsum's 'a,a->a' batches only,
# 'a,b' contracts nothing; a kernel that may be sliced over the threads read them all
DOTS_WITHOUT_SOME_DIMENSIONS = {
    "batch_only": """func.func @main(%a: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [] x [] : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}""",
    "outer": """func.func @main(%a: tensor<6xf32>, %b: tensor<5xf32>) -> tensor<6x5xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [] x [] : (tensor<6xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  return %0 : tensor<6x5xf32>
}""",
}


@pytest.mark.parametrize("name", sorted(DOTS_WITHOUT_SOME_DIMENSIONS))
def test_dots_without_some_dimension_lists(monkeypatch, name, context):
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    text = DOTS_WITHOUT_SOME_DIMENSIONS[name]
    module = frontdoor.import_text(text, "test", context).module
    arguments = random_arguments(module, 3)
    got = Client().compile(text).execute_numpy(arguments)
    np.testing.assert_allclose(got[0], reference_outputs(module, arguments)[0], rtol=1e-6)


# dots whose dimension numbers no GEMM takes: in GEMM form between transposes
# (xhlo-dot-canonicalizer), then BLAS GEMMs
DOTS_OUT_OF_GEMM_FORM = {
    "attention over (batch, sequence, heads, depth)": ("""func.func @main(%q: tensor<2x16x3x8xf32>, %k: tensor<2x16x3x8xf32>) -> tensor<2x3x16x16xf32> {
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3] : (tensor<2x16x3x8xf32>, tensor<2x16x3x8xf32>) -> tensor<2x3x16x16xf32>
  return %0 : tensor<2x3x16x16xf32>
}""", "f32 6x16x16x8 "),
    "batch dimensions in another order on each side": ("""func.func @main(%a: tensor<4x5x3x6xf32>, %b: tensor<3x6x4x7xf32>) -> tensor<4x3x5x7xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0, 2] x [2, 0], contracting_dims = [3] x [1] : (tensor<4x5x3x6xf32>, tensor<3x6x4x7xf32>) -> tensor<4x3x5x7xf32>
  return %0 : tensor<4x3x5x7xf32>
}""", "f32 12x5x7x6 "),
    "two contracting dimensions, one in the middle": ("""func.func @main(%a: tensor<5x4x6x3xf64>, %b: tensor<6x7x5xf64>) -> tensor<4x3x7xf64> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [0, 2] x [2, 0] : (tensor<5x4x6x3xf64>, tensor<6x7x5xf64>) -> tensor<4x3x7xf64>
  return %0 : tensor<4x3x7xf64>
}""", "f64 12x7x30 "),
}


@pytest.mark.parametrize("name", sorted(DOTS_OUT_OF_GEMM_FORM))
def test_dots_out_of_gemm_form_become_gemms(name, context):
    """Each operand transposed into [batch, free, contracting] or [batch, contracting, free]
    (contracting dimensions reshaped into one): a BLAS GEMM, not a generated loop nest (jax's
    dot_product_attention's second dot ran at 0.9 GFLOP/s)."""
    text, gemm = DOTS_OUT_OF_GEMM_FORM[name]
    executable = Client().compile(text)
    assert f"gemm dot {gemm}" in executable.thunk_sequence()
    module = frontdoor.import_text(text, "test", context).module
    arguments = random_arguments(module, 4)
    got = executable.execute_numpy(arguments)
    np.testing.assert_allclose(got[0], reference_outputs(module, arguments)[0], rtol=1e-5, atol=1e-6)


ROW_SUMS = """func.func @main(%x: tensor<4096x1024xf32>) -> tensor<4096xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4096x1024xf32>, tensor<f32>) -> tensor<4096xf32>
  return %0 : tensor<4096xf32>
}"""
SMALL_ELEMENTWISE = """func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}"""


def sliced_kernels(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("sliced kernel")]


@pytest.mark.parametrize("threads", ["1", "2", "4"])
def test_thread_count_decides_the_split(monkeypatch, threads, streamed):
    """MLIRXLA_CPU_THREADS sets the pool's workers and the slices the compiler splits for:
    with 1 thread nothing is split. The cost estimate, not the size written, decides: row sums
    of 16 MiB write 16 KiB and split; a 16 KiB elementwise kernel does not."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
    assert ThreadPool().workers == int(threads)
    layer = Client().compile(LAYER_AND_ELEMENTWISE).thunk_sequence()
    sums = Client().compile(ROW_SUMS)
    small = Client().compile(SMALL_ELEMENTWISE).thunk_sequence()
    expected = [] if threads == "1" else [f"sliced kernel x{threads}"]
    assert [line.split(" [")[0].rsplit(" ", 1)[0] for line in sliced_kernels(layer)] == expected * 2  # the GEMM's tanh epilogue too
    assert [line.split(" [")[0].rsplit(" ", 1)[0] for line in sliced_kernels(sums.thunk_sequence())] == expected
    assert sliced_kernels(small) == []
    x = np.random.default_rng(0).standard_normal((4096, 1024)).astype(np.float32)
    np.testing.assert_allclose(sums.execute_numpy([x])[0], x.sum(axis=1), rtol=1e-4, atol=1e-3)


LAYER_NORM_HALF_MIB = """func.func @main(%x: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<0.00390625> : tensor<256x256xf32>
  %inverse_n = stablehlo.constant dense<0.00390625> : tensor<256xf32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<256xf32>) -> tensor<256x256xf32>
  %mean = stablehlo.multiply %sb, %n : tensor<256x256xf32>
  %c = stablehlo.subtract %x, %mean : tensor<256x256xf32>
  %c2 = stablehlo.multiply %c, %c : tensor<256x256xf32>
  %v = stablehlo.reduce(%c2 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  %var = stablehlo.multiply %v, %inverse_n : tensor<256xf32>
  %r = stablehlo.rsqrt %var : tensor<256xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<256xf32>) -> tensor<256x256xf32>
  %y = stablehlo.multiply %c, %rb : tensor<256x256xf32>
  return %y : tensor<256x256xf32>
}"""


@pytest.mark.parametrize("cache_bytes", [32 << 20, 0])
def test_what_the_cache_holds_runs_whole(monkeypatch, cache_bytes):
    """One core reads bytes the last-level cache holds at about 25 GB/s and streams the rest
    from memory at about 8: on two threads a layer norm moving 0.5 MiB runs whole when half the
    cache holds it (21 us whole against 30 split), and split when the host has no cache to
    tell of (66 against 53); 2 and 32 MiB always split. sysfs gives the cache's size in its
    own units."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    monkeypatch.setattr(thread_split, "last_level_cache_bytes", lambda: cache_bytes)
    assert thread_split.estimate_moving(1 << 19, 0, 2).pays == (cache_bytes == 0)
    assert thread_split.estimate_moving(2 << 20, 0, 2).pays and thread_split.estimate_moving(32 << 20, 0, 2).pays
    executable = Client().compile(LAYER_NORM_HALF_MIB)
    assert bool(sliced_kernels(executable.thunk_sequence())) == (cache_bytes == 0)
    x = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)
    centered = x - x.mean(axis=1, keepdims=True)
    expected = centered / np.sqrt((centered * centered).mean(axis=1, keepdims=True))
    np.testing.assert_allclose(executable.execute_numpy([x])[0], expected, rtol=1e-4, atol=1e-4)
    assert [thread_split.parse_cache_size(text) for text in ("32768K", "1M", "512")] == [32 << 20, 1 << 20, 512]


@pytest.mark.parametrize("batch, split", [(2, False), (64, True)])
def test_an_exponential_kernel_splits_on_its_work_at_the_hosts_vector_rate(monkeypatch, batch, split):
    """The split model counts a core's vector arithmetic at `FLOPS_PER_S_PER_LANE` per f32 lane
    of the host's vectors: a 0.25 MiB masked exponential (2x128x128, 33K exps) runs whole on
    two threads, one 32 times larger splits (transformer_grad's 1 MiB one, 8x128x128, ran 1.6x
    faster split on 2026-12-05, and splits too); both are numpy's."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    lanes = 16 if "+avx512f" in llvm.get_host_cpu_features().flatten().split(",") else None
    if lanes:
        assert thread_split.core_flops_per_s() == thread_split.FLOPS_PER_S_PER_LANE * lanes
    text = CAUSAL_SOFTMAX.replace("8x256x256", f"{batch}x128x128").replace("256x256", "128x128").replace("8x256", f"{batch}x128")
    executable = Client().compile(text)
    assert bool(sliced_kernels(executable.thunk_sequence())) == split, executable.thunk_sequence()
    s = np.random.default_rng(3).standard_normal((batch, 128, 128)).astype(np.float32)
    masked = np.where(np.tril(np.ones((128, 128), bool)), s, np.float32(-1e30))
    expected = np.exp(masked - masked.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(executable.execute_numpy([s])[0], expected, rtol=2e-6, atol=1e-30)


def test_a_bad_thread_count_is_one_line(monkeypatch):
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "zero")
    with pytest.raises(MlirxlaError, match="MLIRXLA_CPU_THREADS='zero': expected a positive number of threads"):
        ThreadPool()


BF16_DOTS = """func.func @main(%x: tensor<4x64x32xbf16>, %w: tensor<4x32x16xbf16>, %b: tensor<16xbf16>) -> (tensor<4x64x16xbf16>, tensor<4x64x16xf32>) {
  %0 = stablehlo.dot_general %x, %w, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x64x32xbf16>, tensor<4x32x16xbf16>) -> tensor<4x64x16xbf16>
  %1 = stablehlo.broadcast_in_dim %b, dims = [2] : (tensor<16xbf16>) -> tensor<4x64x16xbf16>
  %2 = stablehlo.add %0, %1 : tensor<4x64x16xbf16>
  %3 = stablehlo.dot_general %x, %w, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x64x32xbf16>, tensor<4x32x16xbf16>) -> tensor<4x64x16xf32>
  return %2, %3 : tensor<4x64x16xbf16>, tensor<4x64x16xf32>
}"""


@pytest.mark.parametrize("excess_precision", ["1", "0"])
def test_bf16_dots_run_as_the_f32_gemm(monkeypatch, excess_precision):
    """bf16 dots are the f32 GEMM on operands widened by convert kernels (each operand once,
    though two dots read it), batched, with an epilogue adding the bias, and with an f32
    result, accumulating in f32 and rounding once, as XLA:CPU computes them: the f32 result
    within f32 sums; the bf16 one, with excess precision (the default, as XLA), the f32
    product plus the bias rounded once, and without it, the product rounded to bf16 before
    the bias is added (`MLIRXLA_ALLOW_EXCESS_PRECISION=0`)."""
    monkeypatch.setenv("MLIRXLA_ALLOW_EXCESS_PRECISION", excess_precision)
    executable = Client().compile(BF16_DOTS)
    text = executable.thunk_sequence()
    assert text.count("gemm dot f32 4x64x16x32 NN") == 2 and text.count("kernel convert [") == 2, text
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for shape in ((4, 64, 32), (4, 32, 16), (16,)))
    with_bias, wide = executable.execute_numpy([x, w, b])
    exact = np.einsum("bmk,bkn->bmn", x.astype(np.float64), w.astype(np.float64))
    np.testing.assert_allclose(wide, exact, rtol=1e-5, atol=1e-5)
    product = exact if excess_precision == "1" else exact.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(with_bias.astype(np.float64), product + b.astype(np.float64), rtol=2**-8, atol=2**-8)


BF16_LAYERS = """func.func @main(%x: tensor<8x32xbf16>, %w: tensor<32x16xbf16>, %b: tensor<16xbf16>, %v: tensor<16x8xbf16>) -> tensor<8x8xbf16> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<8x16xbf16>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<16xbf16>) -> tensor<8x16xbf16>
  %2 = stablehlo.add %0, %1 : tensor<8x16xbf16>
  %zero = stablehlo.constant dense<0.0> : tensor<8x16xbf16>
  %3 = stablehlo.maximum %2, %zero : tensor<8x16xbf16>
  %4 = stablehlo.dot_general %3, %v, contracting_dims = [1] x [0] : (tensor<8x16xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
  return %4 : tensor<8x8xbf16>
}"""


def test_a_bf16_layers_epilogue_runs_in_place_over_its_gemm(context):
    """The first layer's rounding, bias, relu and widening for the next GEMM (rounded to bf16:
    `narrow_dot_upcast.py`) read the GEMM's f32 output only where they write it (converts are
    elementwise): an output fusion, the epilogue over the GEMM's output in place, computing
    exactly what the separate kernel computes; within bf16 roundings of the layers computed
    in float64."""
    fused = Client().compile(BF16_LAYERS)
    apart = Client().compile(BF16_LAYERS, CompileOptions(disable_passes=("xhlo-output-fusion",)))
    assert "gemm dot_reduce_precision_fusion f32 8x16x32 NN" in fused.thunk_sequence(), fused.thunk_sequence()
    assert "dot_reduce_precision_fusion" not in apart.thunk_sequence()
    module = frontdoor.import_text(BF16_LAYERS, "bf16_layers", context).module
    arguments = random_arguments(module, 5)
    [got], [separately] = fused.execute_numpy(arguments), apart.execute_numpy(arguments)
    np.testing.assert_array_equal(got, separately)
    x, w, b, v = (argument.astype(np.float64) for argument in arguments)
    wanted = np.maximum(x @ w + b, 0) @ v
    np.testing.assert_allclose(got.astype(np.float64), wanted, rtol=2**-7, atol=2**-7 * np.abs(wanted).max())


FREE_DIMENSIONS_TOGETHER = """func.func @main(%x: tensor<2x64x128xf32>, %w: tensor<128x32xf32>, %v: tensor<16x2x64xf32>, %u: tensor<3x5x16xf32>, %y: tensor<8x3x16xf32>) -> (tensor<2x64x32xf32>, tensor<2x64x3x5xf32>, tensor<8x3x3x5xf32>) {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [2] x [0] : (tensor<2x64x128xf32>, tensor<128x32xf32>) -> tensor<2x64x32xf32>
  %1 = stablehlo.dot_general %v, %u, contracting_dims = [0] x [2] : (tensor<16x2x64xf32>, tensor<3x5x16xf32>) -> tensor<2x64x3x5xf32>
  %2 = stablehlo.dot_general %y, %u, contracting_dims = [2] x [2] : (tensor<8x3x16xf32>, tensor<3x5x16xf32>) -> tensor<8x3x3x5xf32>
  return %0, %1, %2 : tensor<2x64x32xf32>, tensor<2x64x3x5xf32>, tensor<8x3x3x5xf32>
}"""


def test_a_dots_free_dimensions_side_by_side_make_one_gemm_dimension():
    """Free dimensions next to each other, on one side of the contracting one, are one GEMM
    dimension of their product, transposed or not; what numpy computes."""
    executable = Client().compile(FREE_DIMENSIONS_TOGETHER)
    text = executable.thunk_sequence()
    assert "gemm dot f32 128x32x128 NN" in text
    assert "gemm dot f32 128x15x16 TT" in text
    assert "gemm dot f32 24x15x16 NT" in text
    rng = np.random.default_rng(4)
    x, w, v, u, y = (rng.standard_normal(shape).astype(np.float32)
                     for shape in ((2, 64, 128), (128, 32), (16, 2, 64), (3, 5, 16), (8, 3, 16)))
    first, second, third = executable.execute_numpy([x, w, v, u, y])
    np.testing.assert_allclose(first, np.einsum("abk,kn->abn", x, w), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second, np.einsum("kab,cdk->abcd", v, u), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(third, np.einsum("abk,cdk->abcd", y, u), rtol=1e-4, atol=1e-4)


CONTRACTING_TOGETHER = """func.func @main(%h: tensor<4x32x24xf32>, %dy: tensor<4x32x16xf32>, %t: tensor<24x4x32xf32>, %u: tensor<16x4x32xf32>) -> (tensor<24x16xf32>, tensor<24x16xf32>) {
  %0 = stablehlo.dot_general %h, %dy, contracting_dims = [0, 1] x [0, 1] : (tensor<4x32x24xf32>, tensor<4x32x16xf32>) -> tensor<24x16xf32>
  %1 = stablehlo.dot_general %t, %u, contracting_dims = [1, 2] x [1, 2] : (tensor<24x4x32xf32>, tensor<16x4x32xf32>) -> tensor<24x16xf32>
  return %0, %1 : tensor<24x16xf32>, tensor<24x16xf32>
}"""


def test_a_dots_contracting_dimensions_side_by_side_make_one_gemm_dimension():
    """A weight gradient's batch and sequence, contracted together and in one order on both
    sides, are one GEMM depth: no transpose of the activations before the GEMM (a GPT step
    copied each MLP activation, 2 MiB at 6 GB/s, for it), transposed or not; numpy's result."""
    executable = Client().compile(CONTRACTING_TOGETHER)
    text = executable.thunk_sequence()
    assert "gemm dot f32 24x16x128 TN" in text and "gemm dot f32 24x16x128 NT" in text, text
    assert "transpose" not in text, text
    rng = np.random.default_rng(5)
    h, dy, t, u = (rng.standard_normal(shape).astype(np.float32) for shape in ((4, 32, 24), (4, 32, 16), (24, 4, 32), (16, 4, 32)))
    first, second = executable.execute_numpy([h, dy, t, u])
    np.testing.assert_allclose(first, np.einsum("bsf,bsg->fg", h, dy), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second, np.einsum("fbs,gbs->fg", t, u), rtol=1e-4, atol=1e-4)


SWAPPING_LOOP = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %zero, %x = %a, %y = %b) : tensor<i32>, tensor<4xf32>, tensor<4xf32>
  cond {
    %three = stablehlo.constant dense<3> : tensor<i32>
    %c = stablehlo.compare LT, %i, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %y, %x : tensor<i32>, tensor<4xf32>, tensor<4xf32>
  }
  return %r#1, %r#2 : tensor<4xf32>, tensor<4xf32>
}"""


def test_loop_that_swaps_its_carried_values():
    """Each iteration returns (y, x): the carried buffers swap through one parallel copy, so
    after three iterations the outputs are (b, a)."""
    executable = Client().compile(SWAPPING_LOOP)
    assert "parallel copy" in executable.thunk_sequence()
    a, b = np.arange(4, dtype=np.float32), np.arange(4, 8, dtype=np.float32)
    x, y = executable.execute_numpy([a, b])
    np.testing.assert_array_equal(x, b)
    np.testing.assert_array_equal(y, a)


CONVOLUTION_LAYER = """func.func @main(%x: tensor<4x32x32x16xf32>, %k: tensor<3x3x16x32xf32>, %b: tensor<32xf32>) -> tensor<4x16x16x32xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[1, 0], [0, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x32x32x16xf32>, tensor<3x3x16x32xf32>) -> tensor<4x16x16x32xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [3] : (tensor<32xf32>) -> tensor<4x16x16x32xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x16x16x32xf32>
  return %2 : tensor<4x16x16x32xf32>
}"""


def numpy_convolution(x, k, strides, padding):
    (top, bottom), (left, right) = padding
    padded = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    kh, kw = k.shape[:2]
    oh = (padded.shape[1] - kh) // strides[0] + 1
    ow = (padded.shape[2] - kw) // strides[1] + 1
    return sum(np.einsum("nhwc,cf->nhwf", padded[:, i:i + (oh - 1) * strides[0] + 1:strides[0], j:j + (ow - 1) * strides[1] + 1:strides[1]], k[i, j])
               for i in range(kh) for j in range(kw))


def test_convolution_runs_as_im2col_and_gemm():
    """A strided, asymmetrically padded convolution with a bias epilogue taking im2col (the
    cost model would pick the register-tiled loops): two blocks of two images, each im2col +
    a BLAS GEMM into the output, then the epilogue in place; numpy's convolution agrees."""
    with convolution_strategy.forcing(convolution_strategy.IM2COL_GEMM):
        executable = Client().compile(CONVOLUTION_LAYER)
    text = executable.thunk_sequence()
    assert "sliced kernel x2 convolution_add_fusion [convolution_add_fusion_blocks]" in text, text
    assert "kernel convolution_add_fusion [convolution_add_fusion_epilogue]" in text
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 32, 32, 16)).astype(np.float32)
    k = (0.1 * rng.standard_normal((3, 3, 16, 32))).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    expected = numpy_convolution(x, k, (2, 2), ((1, 0), (0, 1))) + b
    np.testing.assert_allclose(executable.execute_numpy([x, k, b])[0], expected, rtol=1e-4, atol=1e-4)


def test_tiny_convolution_stays_generated():
    """A 1x8x8x4 -> 8 layer: the cost model finds the BLAS call dearer than the loops, so the
    convolution stays a generated kernel."""
    tiny = (CONVOLUTION_LAYER.replace("4x32x32x16", "1x8x8x4").replace("3x3x16x32", "3x3x4x8")
            .replace("4x16x16x32", "1x4x4x8").replace("tensor<32xf32>", "tensor<8xf32>"))
    executable = Client().compile(tiny)
    assert "gemm" not in executable.thunk_sequence()
    rng = np.random.default_rng(3)
    x, k, b = rng.standard_normal((1, 8, 8, 4)).astype(np.float32), rng.standard_normal((3, 3, 4, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    expected = numpy_convolution(x, k, (2, 2), ((1, 0), (0, 1))) + b
    np.testing.assert_allclose(executable.execute_numpy([x, k, b])[0], expected, rtol=1e-4, atol=1e-4)


def correctly_rounded_bf16(values: np.ndarray) -> np.ndarray:
    """f64 -> bf16 rounded once: to f32 rounding to odd (exact enough for the second rounding),
    then to bf16 to nearest even."""
    nearest = values.astype(np.float32)
    too_far = np.abs(nearest.astype(np.float64)) > np.abs(values)
    toward_zero = np.where(too_far, np.nextafter(nearest, np.float32(0)), nearest)
    inexact = toward_zero.astype(np.float64) != values
    odd = (toward_zero.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)
    return odd.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("helper, target, expected", [
    ("__truncdfhf2", "half", lambda values: values.astype(np.float16)),
    ("__truncdfbf2", "bfloat", correctly_rounded_bf16),
])
def test_double_narrowing_helpers_round_once(helper, target, expected):
    """f64 -> f16 / bf16, which a convert from f64 calls: one rounding to nearest even through
    ties, subnormals, overflow to infinity, both zeros; NaNs stay NaN with their sign."""
    machine = llvm_jit.target_machine()
    module = native_symbols.helpers_module(machine)
    caller = llvm.parse_assembly(f"declare {target} @{helper}(double)\n"
                                 f"define i16 @bits(double %x) {{\n  %b = call {target} @{helper}(double %x)\n"
                                 f"  %i = bitcast {target} %b to i16\n  ret i16 %i\n}}\n")
    caller.triple = machine.triple
    module.link_in(caller)
    engine = llvm_jit.JitEngine(machine.emit_object(module))
    narrow = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_double)(engine.address("bits"))
    rng = np.random.default_rng(4)
    exponents = rng.integers(-160, 140, 20000)
    values = np.ldexp(rng.uniform(1, 2, 20000), exponents) * rng.choice([-1, 1], 20000)
    halfway = np.float64(np.float16(1.5)) + 2.0 ** -11  # a tie between two f16 values
    values = np.concatenate([values, [0.0, -0.0, np.inf, -np.inf, 65504.0, 65520.0, 65519.99, 3.4e38, 3.5e38, 1e-8, 5.96e-8,
                                      2.98e-8, 2.99e-8, 1e-40, 9.2e-41, halfway, -halfway, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8]])
    actual = np.array([narrow(float(v)) for v in values], np.uint16)
    with np.errstate(over="ignore"):  # past the target's largest value is infinity
        wanted = expected(values)
    np.testing.assert_array_equal(actual, wanted.view(np.uint16))
    nan_bits = np.array([narrow(float(v)) for v in (np.nan, -np.nan)], np.uint16)
    assert np.isnan(nan_bits.view(np.float16 if target == "half" else ml_dtypes.bfloat16).astype(np.float32)).all()
    assert nan_bits[0] >> 15 == 0 and nan_bits[1] >> 15 == 1


def test_bf16_narrowing_helper_rounds_like_ml_dtypes():
    """`__truncsfbf2`, which code generation calls for bf16 values it moves through f32:
    every rounding tie, both zeros, infinities, subnormals and NaNs match ml_dtypes."""
    machine = llvm_jit.target_machine()
    module = native_symbols.helpers_module(machine)
    # the helper returns its bfloat in a vector register, where ctypes does not look: a caller
    # hands back the bits as an integer
    caller = llvm.parse_assembly("declare bfloat @__truncsfbf2(float)\n"
                                 "define i16 @bits(float %x) {\n  %b = call bfloat @__truncsfbf2(float %x)\n"
                                 "  %i = bitcast bfloat %b to i16\n  ret i16 %i\n}\n")
    caller.triple = machine.triple
    module.link_in(caller)
    engine = llvm_jit.JitEngine(machine.emit_object(module))
    narrow = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_float)(engine.address("bits"))
    rng = np.random.default_rng(3)
    bits = np.concatenate([rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32),
                           np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFF812345, 0x7F800001,
                                     0x00000001, 0x007FFFFF, 0x3F808000, 0x3F818000, 0x7F7FFFFF], np.uint32)])
    values = bits.view(np.float32)
    actual = np.array([narrow(float(v)) for v in values], np.uint16)
    nan = np.isnan(values)
    expected = np.where(nan, 0, values).astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(actual[~nan], expected[~nan])
    assert np.isnan(actual[nan].view(ml_dtypes.bfloat16).astype(np.float32)).all()


@pytest.mark.parametrize("element, helpers", [("f32", False), ("bf16", True)])
def test_helpers_are_in_the_objects_of_narrow_float_programs_only(element, helpers):
    """The compiler-runtime helpers go into an object whose kernels hold bf16 or f16 values,
    and only there (their code generation is a fixed cost of a compile); with or without
    them the program computes what the reference does."""
    x = np.linspace(-4.0, 4.0, 257).astype(np.float32 if element == "f32" else ml_dtypes.bfloat16)
    executable = Client(cache_dir=None).compile(UNARY.format(op="tanh", n=x.size).replace("f32", element))
    assert (b"__truncsfbf2" in executable.executable.object_code) == helpers
    got = executable.execute_numpy([x])[0].astype(np.float64)
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64)), rtol=2**-7 if helpers else 1e-6, atol=1e-6)


def test_object_needing_a_missing_symbol_is_refused():
    """MCJIT would bind an unknown symbol to address 0; the loader refuses it instead."""
    machine = llvm_jit.target_machine()
    module = llvm.parse_assembly("declare void @mlirxla_not_a_symbol()\n"
                                 "define void @k() {\n  call void @mlirxla_not_a_symbol()\n  ret void\n}\n")
    module.triple = machine.triple
    code = machine.emit_object(module)
    assert "mlirxla_not_a_symbol" in native_symbols.undefined_symbols(code)
    with pytest.raises(MlirxlaError, match="calls 'mlirxla_not_a_symbol', which this process does not provide"):
        llvm_jit.JitEngine(code)


SOFTMAX = """func.func @main(%x: tensor<{rows}x512xf32>) -> tensor<{rows}x512xf32> {{
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %max = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<{rows}x512xf32>, tensor<f32>) -> tensor<{rows}xf32>
  %m = stablehlo.broadcast_in_dim %max, dims = [0] : (tensor<{rows}xf32>) -> tensor<{rows}x512xf32>
  %d = stablehlo.subtract %x, %m : tensor<{rows}x512xf32>
  %e = stablehlo.exponential %d : tensor<{rows}x512xf32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{rows}x512xf32>, tensor<f32>) -> tensor<{rows}xf32>
  %s = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<{rows}xf32>) -> tensor<{rows}x512xf32>
  %r = stablehlo.divide %e, %s : tensor<{rows}x512xf32>
  return %r : tensor<{rows}x512xf32>
}}"""


@pytest.fixture
def generated_row_kernels(monkeypatch):
    """Row fusions (softmax, ...) compiled as generated kernels: the runtime library's softmax
    (`softmax_rows.py`) and row engine (`row_programs.py`), which take them on the CPU, set aside."""
    from mlirxla.backends.cpu import row_programs, softmax_rows

    monkeypatch.setattr(softmax_rows, "is_softmax", lambda op: False)
    monkeypatch.setattr(row_programs, "row_program", lambda op: None)


@pytest.mark.parametrize("rows, sliced", [(8, False), (2048, True)])
def test_kernels_take_their_working_memory_from_the_caller(rows, sliced, generated_row_kernels):
    """A softmax kernel's row maxima and sums are working memory: scratch arguments the
    thunk passes (no malloc in the kernel), one range per concurrent call when its row blocks
    run on the pool; the results match numpy."""
    executable = Client().compile(SOFTMAX.format(rows=rows))
    text = executable.thunk_sequence()
    assert "scratch #" in text and ("sliced kernel" in text) == sliced
    assert all(thunk.scratch_offsets for thunk in executable.executable.plan.thunks)
    x = np.random.default_rng(4).standard_normal((rows, 512)).astype(np.float32)
    expected = np.exp(x - x.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(executable.execute_numpy([x])[0], expected, rtol=1e-5, atol=1e-7)


def test_kernel_named_like_a_libm_function_keeps_its_own_symbol():
    """An f64 tanh kernel calls libm's `tanh`; the kernel itself must not be named `tanh`."""
    executable = Client().compile(UNARY.replace("f32", "f64").format(op="tanh", n=16))
    assert "[tanh_1]" in executable.thunk_sequence()
    x = np.linspace(-3, 3, 16)
    np.testing.assert_allclose(executable.execute_numpy([x])[0], np.tanh(x), rtol=1e-15)


TRANSPOSE_ADD = """func.func @main(%x: tensor<{n}x{m}xf32>, %y: tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<{n}x{m}xf32>) -> tensor<{m}x{n}xf32>
  %r = stablehlo.add %t, %y : tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}"""


@pytest.mark.parametrize("n, m, tiled", [(200, 96, True), (48, 512, True), (12, 512, False)])
def test_transposed_read_is_tiled_into_cache_blocks(n, m, tiled, tmp_path):
    """A kernel reading its operand across the innermost loop is blocked when both loops span
    two vector blocks (200 does not divide by 32: the last tiles are partial); too narrow a
    loop keeps the plain nest. numpy agrees either way."""
    executable = Client().compile(TRANSPOSE_ADD.format(n=n, m=m), CompileOptions(dump_to=str(tmp_path)))
    decisions = next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    assert ("tiled into cache blocks for an operand read across the innermost loop" in decisions) == tiled
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((n, m)).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32)
    np.testing.assert_array_equal(executable.execute_numpy([x, y])[0], x.T + y)


# a convolution kernel's gradient: reversed in its window, input and output features swapped
REVERSED_TRANSPOSE = """func.func @main(%w: tensor<3x3x64x64xf32>) -> tensor<3x3x64x64xf32> {
  %r = stablehlo.reverse %w, dims = [0, 1] : tensor<3x3x64x64xf32>
  %t = stablehlo.transpose %r, dims = [0, 1, 3, 2] : (tensor<3x3x64x64xf32>) -> tensor<3x3x64x64xf32>
  return %t : tensor<3x3x64x64xf32>
}"""
# jnp.rot90: the transposed operand read backwards along its contiguous rows
ROTATION = """func.func @main(%x: tensor<96x200xf32>) -> tensor<200x96xf32> {
  %r = stablehlo.reverse %x, dims = [1] : tensor<96x200xf32>
  %t = stablehlo.transpose %r, dims = [1, 0] : (tensor<96x200xf32>) -> tensor<200x96xf32>
  return %t : tensor<200x96xf32>
}"""


@pytest.mark.parametrize("text, shape, expected", [
    (REVERSED_TRANSPOSE, (3, 3, 64, 64), lambda w: w[::-1, ::-1].transpose(0, 1, 3, 2)),
    (ROTATION, (96, 200), lambda x: np.rot90(x, 1))])
def test_a_reversed_transpose_is_reversed_apart_then_tiled(text, shape, expected, tmp_path):
    """Upstream's tiling gives a dimension read backwards a one-element slice (the tiled
    generic did not verify), and untiled the transpose ran element by element: the operand
    is reversed by a loop nest of its own first (`tiling.reversed_reads_apart`), then read
    forwards through the cache blocks; numpy's values, bit for bit."""
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    decisions = next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    assert "reference interpreter" not in decisions and "tiled into cache blocks" in decisions
    w = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(executable.execute_numpy([w])[0], expected(w))


TRANSPOSE = """func.func @main(%x: tensor<{source}x{dtype}>) -> tensor<{target}x{dtype}> {{
  %r = stablehlo.transpose %x, dims = [{dims}] : (tensor<{source}x{dtype}>) -> tensor<{target}x{dtype}>
  return %r : tensor<{target}x{dtype}>
}}"""
TRANSPOSE_DTYPES = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "i32": np.int32, "i8": np.int8,
                    "i1": np.bool_}


def compile_transpose(shape, dims, dtype, dump_to=None):
    target = [shape[d] for d in dims]
    text = TRANSPOSE.format(source="x".join(map(str, shape)), target="x".join(map(str, target)), dtype=dtype,
                            dims=", ".join(map(str, dims)))
    return Client().compile(text, CompileOptions(dump_to=dump_to) if dump_to else CompileOptions())


@pytest.mark.parametrize("shape, dims", [((16, 16), (1, 0)), ((17, 23), (1, 0)), ((100, 70), (1, 0)), ((64, 200), (1, 0)),
                                         ((256, 96), (1, 0)), ((8, 32, 128), (2, 0, 1)), ((5, 33, 47), (0, 2, 1)),
                                         ((20, 30, 40), (2, 1, 0)), ((3, 40, 50, 9), (0, 2, 1, 3)),
                                         ((2, 44, 3, 36), (0, 2, 3, 1))])
@pytest.mark.parametrize("dtype", sorted(TRANSPOSE_DTYPES))
def test_transposes_match_numpy_bit_for_bit(shape, dims, dtype):
    """Transposes whose extents are multiples of the 8x8 vector block or not (the remaining
    strips keep plain loops), 2-D to 4-D, on every element width the vector blocks take
    (8 to 64 bits) and one they leave to the plain loops (booleans): numpy's bits."""
    x = np.random.default_rng(8).standard_normal(shape) * 50
    x = (x > 0) if dtype == "i1" else x.astype(TRANSPOSE_DTYPES[dtype])
    got = compile_transpose(shape, dims, dtype).execute_numpy([x])[0]
    np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(x.transpose(dims)).view(np.uint8))


@pytest.mark.parametrize("dtype, shuffled", [("f32", True), ("f64", True), ("bf16", True), ("i8", True), ("i1", False)])
def test_transpose_tiles_are_transposed_by_vector_shuffles(dtype, shuffled, tmp_path):
    """The optimized kernel of a 1024x768 transpose moves 8x8 blocks through registers
    (shufflevector, no scatter or gather, which LLVM's loop vectorizer chose for the scalar
    tile: 2 GB/s on a 1024x1024 f32 transpose); booleans (bits in vectors, bytes in memory)
    keep the scalar tile."""
    compile_transpose((1024, 768), (1, 0), dtype, dump_to=str(tmp_path))
    optimized = next(tmp_path.glob("*transpose*.ir-with-opt.ll")).read_text()
    assert ("shufflevector <8 x" in optimized) == shuffled
    if shuffled:
        assert "masked.scatter" not in optimized and "masked.gather" not in optimized


EYE_ADDED_TRANSPOSED = """func.func @main(%x: tensor<{b}x{n}x{n}xf32>) -> tensor<{b}x{n}x{n}xf32> {{
  %rows = stablehlo.iota dim = 0 : tensor<{n}x{n}xi32>
  %columns = stablehlo.iota dim = 1 : tensor<{n}x{n}xi32>
  %diagonal = stablehlo.compare EQ, %rows, %columns, SIGNED : (tensor<{n}x{n}xi32>, tensor<{n}x{n}xi32>) -> tensor<{n}x{n}xi1>
  %eye = stablehlo.convert %diagonal : (tensor<{n}x{n}xi1>) -> tensor<{n}x{n}xf32>
  %k = stablehlo.constant dense<64.0> : tensor<{n}x{n}xf32>
  %scaled = stablehlo.multiply %eye, %k : tensor<{n}x{n}xf32>
  %wide = stablehlo.broadcast_in_dim %scaled, dims = [1, 2] : (tensor<{n}x{n}xf32>) -> tensor<{b}x{n}x{n}xf32>
  %sum = stablehlo.add %x, %wide : tensor<{b}x{n}x{n}xf32>
  %t = stablehlo.transpose %sum, dims = [0, 2, 1] : (tensor<{b}x{n}x{n}xf32>) -> tensor<{b}x{n}x{n}xf32>
  return %t : tensor<{b}x{n}x{n}xf32>
}}"""


@pytest.mark.parametrize("batch, n", [(4, 64), (3, 20)])
def test_transposed_tiles_reading_their_indices_are_shuffled(batch, n, tmp_path):
    """`a + 64 * eye` transposed for a column-major LAPACK call (`jnp.linalg.inv`): the eye is
    the element's indices compared (`linalg.index` in the body), which the vector blocks
    compute as vectors of indices, so the tile is transposed by shuffles too (128 x 64 x 64:
    0.134 -> 0.085 ms, a plain transpose's time); numpy's values, the strips past the blocks
    included."""
    x = np.random.default_rng(9).standard_normal((batch, n, n)).astype(np.float32)
    executable = Client().compile(EYE_ADDED_TRANSPOSED.format(b=batch, n=n), CompileOptions(dump_to=str(tmp_path)))
    got = executable.execute_numpy([x])[0]
    np.testing.assert_array_equal(got, np.swapaxes(x + 64 * np.eye(n, dtype=np.float32), 1, 2))
    [kernel] = [path for path in tmp_path.glob("*.ir-with-opt.ll") if "driver" not in path.name]
    assert "shufflevector <8 x float>" in kernel.read_text()


@pytest.mark.parametrize("dtype, element", [("f16", "half"), ("f32", "float")])
def test_tiles_between_unit_tile_dimensions_are_shuffled_in_a_loop(dtype, element, tmp_path):
    """jax's attention transposes heads and rows ([0, 2, 3, 1] of 2x128x4x32): the 8x8 vector
    blocks lie between unit block dimensions (1x8x1x8 of the operand). Their reads are
    transposed by shuffles, not unrolled into scalar gathers, and the nest of short tile loops
    stays loops: unrolled whole (512 blocks) its 5 MB of f16 IR took LLVM's SLP vectorizer two
    minutes."""
    compile_transpose((2, 128, 4, 32), (0, 2, 3, 1), dtype, dump_to=str(tmp_path))
    unoptimized = next(tmp_path.glob("*transpose*.ir-no-opt.ll")).read_text()
    optimized = next(tmp_path.glob("*transpose*.ir-with-opt.ll")).read_text()
    assert f"shufflevector <8 x {element}>" in optimized
    assert unoptimized.count(f"load {element},") == 0
    assert unoptimized.count(f"load <8 x {element}>") <= 64


TRANSPOSED_SUMS = """func.func @main(%x: tensor<8x32x{m}xf32>, %y: tensor<{m}x256xf32>, %z: tensor<256x{m}xf32>) -> (tensor<{m}x256xf32>, tensor<{m}x8x32xf32>) {{
  %t = stablehlo.transpose %x, dims = [2, 0, 1] : (tensor<8x32x{m}xf32>) -> tensor<{m}x8x32xf32>
  %r = stablehlo.reshape %t : (tensor<{m}x8x32xf32>) -> tensor<{m}x256xf32>
  %u = stablehlo.transpose %z, dims = [1, 0] : (tensor<256x{m}xf32>) -> tensor<{m}x256xf32>
  %s = stablehlo.add %r, %y : tensor<{m}x256xf32>
  %v = stablehlo.multiply %s, %u : tensor<{m}x256xf32>
  return %v, %t : tensor<{m}x256xf32>, tensor<{m}x8x32xf32>
}}"""


@pytest.mark.parametrize("threads, m", [("2", 1024), ("2", 1000), ("1", 1024)])
def test_transposing_kernels_split_over_the_threads(monkeypatch, threads, m, tmp_path, streamed):
    """Kernels whose operands are read transposed run in row blocks of their results over the
    threads: each block reads a strided view of the transposed operand (a block of its
    dimension 2, resp. 1), the others slice by slice (1000 rows: 2 blocks of 500, whose
    tiles split off a 4-row strip); one thread keeps one call. numpy agrees."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
    executable = Client().compile(TRANSPOSED_SUMS.format(m=m), CompileOptions(dump_to=str(tmp_path)))
    decisions = next(tmp_path.glob("*thunk-sequence.txt")).read_text()
    split = threads == "2"
    assert decisions.count("(1 in blocks of another dimension, transposed)") == (2 if split else 0)
    assert ("sliced kernel" in decisions) == split
    rng = np.random.default_rng(9)
    x = rng.standard_normal((8, 32, m)).astype(np.float32)
    y = rng.standard_normal((m, 256)).astype(np.float32)
    z = rng.standard_normal((256, m)).astype(np.float32)
    total, transposed = executable.execute_numpy([x, y, z])
    np.testing.assert_array_equal(transposed, x.transpose(2, 0, 1))
    np.testing.assert_allclose(total, (x.transpose(2, 0, 1).reshape(m, 256) + y) * z.T, rtol=1e-6)


def test_operand_read_both_transposed_and_not_keeps_one_call():
    """x + x^T reads x in row blocks and in column blocks: no one strided view serves both,
    so the kernel is not split; numpy agrees."""
    executable = Client().compile(TRANSPOSE_ADD.replace("%y: tensor<{m}x{n}xf32>", "%y: tensor<{n}x{m}xf32>")
                                  .replace("%r = stablehlo.add %t, %y", "%r = stablehlo.add %t, %x").format(n=1024, m=1024))
    assert "sliced kernel" not in executable.thunk_sequence()
    x = np.random.default_rng(10).standard_normal((1024, 1024)).astype(np.float32)
    np.testing.assert_array_equal(executable.execute_numpy([x, x])[0], x.T + x)


DOT_GELU = """func.func @main(%x: tensor<{rows}x64xf32>, %w: tensor<64x512xf32>, %b: tensor<512xf32>) -> tensor<{rows}x512xf32> {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<{rows}x64xf32>, tensor<64x512xf32>) -> tensor<{rows}x512xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<512xf32>) -> tensor<{rows}x512xf32>
  %s = stablehlo.add %d, %bb : tensor<{rows}x512xf32>
  %t = stablehlo.tanh %s : tensor<{rows}x512xf32>
  %r = stablehlo.multiply %s, %t : tensor<{rows}x512xf32>
  return %r : tensor<{rows}x512xf32>
}}"""


@pytest.mark.parametrize("threads, rows, activation, split", [("2", 1024, "tanh", True), ("1", 1024, "tanh", False),
                                                              ("2", 256, "tanh", False), ("2", 1024, "abs", False)])
def test_gemm_epilogue_splits_over_the_threads(monkeypatch, threads, rows, activation, split):
    """The epilogue of a GEMM's output fusion (bias, tanh) updates the GEMM's output in row
    blocks over the threads when its tanh work pays for the hand-off (512K tanh: yes; 128K:
    no, 65 us whole against 78-89 split); one without transcendentals stays one call, its
    bytes hot in the caches; numpy agrees."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
    executable = Client().compile(DOT_GELU.format(rows=rows).replace("stablehlo.tanh", f"stablehlo.{activation}"))
    text = executable.thunk_sequence()
    assert "gemm" in text
    assert ("sliced kernel x2" in text and "_epilogue]" in text) == split
    rng = np.random.default_rng(11)
    x, w, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((rows, 64), (64, 512), (512,)))
    s = x.astype(np.float64) @ w + b
    np.testing.assert_allclose(executable.execute_numpy([x, w, b])[0], s * getattr(np, activation)(s), rtol=2e-5, atol=2e-5)


def test_gemm_epilogue_reads_the_output_through_its_result_argument(monkeypatch, tmp_path):
    """The epilogue reads the GEMM's output where it writes its result, through one argument:
    through two, LLVM's runtime overlap check saw the same buffer and always ran the scalar
    loop. The optimized kernel never touches the library-result argument (readnone) and
    has no scalar fallback for an overlap between them."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "1")
    Client().compile(DOT_GELU.format(rows=512), CompileOptions(dump_to=str(tmp_path)))
    source = next(tmp_path.glob("*_epilogue.stablehlo.mlir")).read_text()
    assert "bufferization.to_tensor %arg4 restrict writable" in source
    optimized = next(tmp_path.glob("*_epilogue.ir-with-opt.ll")).read_text()
    signature = next(line for line in optimized.splitlines() if line.startswith("define"))
    assert signature.count("readnone") == 3  # the dot's two operands and its result, read through %4
    assert "<16 x float>" in optimized or "<8 x float>" in optimized


CHOLESKY = """func.func @main(%a: tensor<2x4x4xf64>) -> (tensor<2x4x4xf64>, tensor<2x4x4xf64>) {
  %lower = stablehlo.cholesky %a, lower = true : tensor<2x4x4xf64>
  %upper = stablehlo.cholesky %a, lower = false : tensor<2x4x4xf64>
  return %lower, %upper : tensor<2x4x4xf64>, tensor<2x4x4xf64>
}"""


def test_cholesky_is_a_host_call_and_the_reference_refuses_it():
    """Cholesky runs on numpy (a matrix that is not positive definite gives NaNs, as XLA's);
    the reference interpreter would abort the process on it, so its path refuses it."""
    executable = Client().compile(CHOLESKY)
    assert "host cholesky" in executable.thunk_sequence()
    rng = np.random.default_rng(7)
    m = rng.standard_normal((4, 4))
    positive = m @ m.T + 4 * np.eye(4)
    a = np.stack([positive, -np.eye(4)])
    lower, upper = executable.execute_numpy([a])
    np.testing.assert_allclose(lower[0], np.linalg.cholesky(positive), rtol=1e-12)
    np.testing.assert_allclose(upper[0], np.linalg.cholesky(positive).T, rtol=1e-12)
    assert np.isnan(lower[1]).all() and np.isnan(upper[1]).all()
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", "-", "--backend", "reference"], input=CHOLESKY,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "the reference interpreter cannot evaluate 'stablehlo.cholesky'" in done.stderr


TRIANGULAR_SOLVES = """func.func @main(%a: tensor<SHAPE3xf32>, %b: tensor<SHAPE2xf32>, %c: tensor<SHAPE1xf32>) -> (tensor<SHAPE2xf32>, tensor<SHAPE2xf32>, tensor<SHAPE1xf32>) {
  %left = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<SHAPE3xf32>, tensor<SHAPE2xf32>) -> tensor<SHAPE2xf32>
  %transposed = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose TRANSPOSE>} : (tensor<SHAPE3xf32>, tensor<SHAPE2xf32>) -> tensor<SHAPE2xf32>
  %right = "stablehlo.triangular_solve"(%a, %c) {left_side = false, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<SHAPE3xf32>, tensor<SHAPE1xf32>) -> tensor<SHAPE1xf32>
  return %left, %transposed, %right : tensor<SHAPE2xf32>, tensor<SHAPE2xf32>, tensor<SHAPE1xf32>
}"""


def triangular_solves(batch: str) -> str:
    return TRIANGULAR_SOLVES.replace("SHAPE3", f"{batch}3x3").replace("SHAPE2", f"{batch}3x2").replace("SHAPE1", f"{batch}2x3")


def test_a_singular_triangular_solve_gives_infinities_not_an_error(context):
    """A zero on the diagonal: substitution divides by it, as XLA's trsm does (LAPACK's solve
    refused the matrix and the execution failed: jax's testTriangularSolveSingularBatched).
    The batch against the interpreter one matrix at a time: it aborts the process on a
    batched triangular solve, which its path refuses."""
    a = np.array([[[1, 0, 0], [2, 0, 0], [3, 4, 5]], [[2, 0, 0], [1, 3, 0], [1, 1, 1]]], np.float32)
    b, c = np.ones((2, 3, 2), np.float32), np.ones((2, 2, 3), np.float32)
    got = Client().compile(triangular_solves("2x")).execute_numpy([a, b, c])
    single = frontdoor.import_text(triangular_solves(""), "test", context).module
    for index in range(2):
        for value, expected in zip(got, reference_outputs(single, [a[index], b[index], c[index]])):
            np.testing.assert_allclose(value[index], expected, rtol=1e-6)
    assert not np.isfinite(got[0][0]).all() and np.isfinite(got[0][1]).all()
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", "-", "--backend", "reference"], input=triangular_solves("2x"),
                          capture_output=True, text=True)
    assert done.returncode == 2 and "the reference interpreter cannot evaluate 'stablehlo.triangular_solve'" in done.stderr


# --- fewer materializations (backends/cpu/materialization.py) --------------------------------

SLICED_SUM = """func.func @main(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> tensor<32xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.add %x, %y : tensor<64x64xf32>
  %1 = stablehlo.exponential %0 : tensor<64x64xf32>
  %2 = stablehlo.slice %1 [16:48, 0:64] : (tensor<64x64xf32>) -> tensor<32x64xf32>
  %3 = stablehlo.slice %1 [0:32, 0:64] : (tensor<64x64xf32>) -> tensor<32x64xf32>
  %4 = stablehlo.multiply %2, %3 : tensor<32x64xf32>
  %5 = stablehlo.reduce(%4 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<32x64xf32>, tensor<f32>) -> tensor<32xf32>
  return %5 : tensor<32xf32>
}"""

RESHAPED = """func.func @main(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> tensor<4096xf32> {
  %0 = stablehlo.add %x, %y : tensor<64x64xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %2 = stablehlo.reshape %1 : (tensor<64x64xf32>) -> tensor<4096xf32>
  return %2 : tensor<4096xf32>
}"""

PADDED_INPUT = """func.func @main(%x: tensor<8x64x32xf32>) -> tensor<8x1x66x32xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.pad %x, %z, low = [0, 2, 0], high = [0, 0, 0], interior = [0, 0, 0] : (tensor<8x64x32xf32>, tensor<f32>) -> tensor<8x66x32xf32>
  %1 = stablehlo.reshape %0 : (tensor<8x66x32xf32>) -> tensor<8x1x66x32xf32>
  return %1 : tensor<8x1x66x32xf32>
}"""

SOFTMAX_ROWS = """func.func @main(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %max = stablehlo.reduce(%x init: %init) applies stablehlo.maximum across dimensions = [1] : (tensor<64x256xf32>, tensor<f32>) -> tensor<64xf32>
  %m = stablehlo.broadcast_in_dim %max, dims = [0] : (tensor<64xf32>) -> tensor<64x256xf32>
  %d = stablehlo.subtract %x, %m : tensor<64x256xf32>
  %e = stablehlo.exponential %d : tensor<64x256xf32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<64x256xf32>, tensor<f32>) -> tensor<64xf32>
  %s = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<64xf32>) -> tensor<64x256xf32>
  %r = stablehlo.divide %e, %s : tensor<64x256xf32>
  return %r : tensor<64x256xf32>
}"""


@pytest.mark.parametrize("text, rewrite, most", [(SLICED_SUM, "sink_slices", 0), (RESHAPED, "unreshaped_result", 0),
                                                 (SOFTMAX_ROWS, "write_over_dying_operands", 5 * 64 * 4),
                                                 (PADDED_INPUT, "write_padded_in_place", 0)])
def test_fused_values_stay_out_of_scratch(text, rewrite, most, monkeypatch, tmp_path, generated_row_kernels):
    """Each rewrite keeps a fused value out of the kernel's scratch (an exponential two slices
    of which a row sum reads, a
    transposed sum before its reshape, a softmax's exponentials: only the two row reductions
    stay, the maximum as three integer reductions and their decode, `integer_order_reductions.py`,
    named by their op in the dump; an input padded into a reshaped result), the kernel
    computes what the interpreter does, and without the rewrite that value would take
    scratch."""
    from mlirxla.backends.cpu import kernel_cache
    from mlirxla.backends.cpu.compiler import compile_module
    from mlirxla.pipelines.runner import RunOptions
    from mlirxla.runtime.executable import Executable

    def scratch(program) -> int:
        return sum(t.scratch.size * t.scratch_parts for t in thunk_kinds.every_thunk(program.plan.thunks)
                   if isinstance(t, thunk_kinds.KernelThunk) and t.scratch is not None)

    module = frontdoor.import_text(text, "kernel.mlir", new_context()).module
    arguments = random_arguments(module, 1)
    expected = reference_outputs(module, arguments)
    program = compile_module(module, RunOptions(dump_to=str(tmp_path)))
    assert scratch(program) <= most
    if most:
        assert "materializing fused reduce" in next(tmp_path.glob("*buffer-assignment.txt")).read_text()
    for got, want in zip(Executable.of(program).execute(arguments), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    identity = {"sink_slices": lambda function: None, "unreshaped_result": lambda value, destination, memref_of, results: (value, destination),
                "write_over_dying_operands": lambda module: None, "write_padded_in_place": lambda module: 0}[rewrite]
    monkeypatch.setattr(materialization, rewrite, identity)
    kernel_cache.KERNELS.clear()
    without = compile_module(frontdoor.import_text(text, "kernel.mlir", new_context()).module)
    assert scratch(without) > most


def read_twice_then_sliced(depth: int) -> str:
    """x squared plus itself, `depth` times over, then a slice of it: every value is read by
    two ops of the next level (and the multiply reads it twice)."""
    lines = ["func.func @main(%x: tensor<64x64xf32>) -> tensor<32x64xf32> {"]
    for level in range(depth):
        value = "%x" if level == 0 else f"%a{level - 1}"
        lines.append(f"  %m{level} = stablehlo.multiply {value}, {value} : tensor<64x64xf32>")
        lines.append(f"  %a{level} = stablehlo.add %m{level}, {value} : tensor<64x64xf32>")
    lines.append(f"  %s = stablehlo.slice %a{depth - 1} [16:48, 0:64] : (tensor<64x64xf32>) -> tensor<32x64xf32>")
    lines.append("  return %s : tensor<32x64xf32>\n}")
    return "\n".join(lines)


def test_a_slice_sinks_once_per_value_whatever_reads_it(tmp_path):
    """Sinking a slice through values each read by several ops of the kernel copies each op
    once per distinct slice, not once per path to it: a chain of six levels, each value read
    three times by the next, became 3^6 copies of its first ops (jax's Gumbel noise in mode
    "highest", hundreds of ops deep, never finished compiling)."""
    text = read_twice_then_sliced(6)
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    kernels = [path.read_text() for path in tmp_path.glob("*.stablehlo.mlir")]
    # fusion itself copied some producers into both their consumers: at most two a level
    assert len(kernels) == 1 and kernels[0].count("stablehlo.multiply") <= 2 * 6, kernels
    module = frontdoor.import_text(text, "kernel.mlir", new_context()).module
    x = np.random.default_rng(9).uniform(-0.1, 0.1, (64, 64)).astype(np.float32)
    np.testing.assert_allclose(executable.execute_numpy([x])[0], reference_outputs(module, [x])[0], rtol=1e-5)  # contracted into FMAs


def pairwise_sum_tree(levels: int) -> str:
    """The sum of 2^`levels` numbers as a tree: each level adds the previous one's even and odd
    elements (strided slices), so a value at depth d is read through 2^d distinct slices of it
    once the slices above it have sunk (jax's associative_scan slices its levels alike)."""
    size = 2 ** levels
    lines = [f"func.func @main(%v0: tensor<{size}xf32>) -> tensor<1xf32> {{"]
    for level in range(levels):
        half = size >> (level + 1)
        whole, part = f"tensor<{2 * half}xf32>", f"tensor<{half}xf32>"
        lines.append(f"  %e{level} = stablehlo.slice %v{level} [0:{2 * half}:2] : ({whole}) -> {part}")
        lines.append(f"  %o{level} = stablehlo.slice %v{level} [1:{2 * half}:2] : ({whole}) -> {part}")
        lines.append(f"  %v{level + 1} = stablehlo.add %e{level}, %o{level} : {part}")
    lines.append(f"  return %v{levels} : tensor<1xf32>\n}}")
    return "\n".join(lines)


def test_sinking_slices_stops_at_the_kernels_own_size(tmp_path):
    """A lattice of strided slices is sunk only until the ops sinking added reach the kernel's
    own count (at least 256): sunk to its inputs, a tree of eight levels becomes one add per
    element and level, some 2,000 ops (jax's associative_scan over 2048 elements never
    finished compiling); what is left unsunk goes through scratch, and the sum is the
    interpreter's."""
    text = pairwise_sum_tree(8)
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    kernels = [path.read_text() for path in tmp_path.glob("*.stablehlo.mlir")]
    assert len(kernels) == 1 and kernels[0].count("stablehlo.add") <= 8 + materialization.SINK_BUDGET_FLOOR // 3, kernels
    module = frontdoor.import_text(text, "kernel.mlir", new_context()).module
    x = np.random.default_rng(5).uniform(-1, 1, 256).astype(np.float32)
    np.testing.assert_allclose(executable.execute_numpy([x])[0], reference_outputs(module, [x])[0], rtol=1e-5)


# what fusion leaves in a kernel whose consumers each took a copy of a cheap producer: two
# equal slices of an argument, two equal products of them, each read by a slice (as jax's
# associative scan reads each level), and two equal differences read by elementwise ops only
DUPLICATED = """func.func @k(%x: tensor<64x8xf32>, %y: tensor<32x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<32x8xf32>) {
  %s1 = stablehlo.slice %x [0:64:2, 0:8] : (tensor<64x8xf32>) -> tensor<32x8xf32>
  %s2 = stablehlo.slice %x [0:64:2, 0:8] : (tensor<64x8xf32>) -> tensor<32x8xf32>
  %m1 = stablehlo.multiply %s1, %s1 : tensor<32x8xf32>
  %m2 = stablehlo.multiply %s2, %s2 : tensor<32x8xf32>
  %e = stablehlo.slice %m1 [0:32:2, 0:8] : (tensor<32x8xf32>) -> tensor<16x8xf32>
  %o = stablehlo.slice %m2 [1:32:2, 0:8] : (tensor<32x8xf32>) -> tensor<16x8xf32>
  %d1 = stablehlo.subtract %y, %y : tensor<32x8xf32>
  %d2 = stablehlo.subtract %y, %y : tensor<32x8xf32>
  %p = stablehlo.multiply %d1, %d2 : tensor<32x8xf32>
  return %e, %o, %p : tensor<16x8xf32>, tensor<16x8xf32>, tensor<32x8xf32>
}"""


def test_equal_ops_are_shared_where_memory_holds_them_anyway():
    """The two slices of the argument are one view, the two products read by slices (in
    memory either way) one value; the two differences read by a multiply stay two, each fused
    into its reader (shared, one would be materialized)."""
    with new_context():
        module = ir.Module.parse(DUPLICATED)
        assert materialization.merge_materialized_duplicates(module) == 2
        text = str(module)
    assert text.count("stablehlo.slice %arg0") == 1 and text.count("stablehlo.multiply") == 2, text
    assert text.count("stablehlo.subtract") == 2, text


HEADS_MERGED_IN_BF16 = """func.func @main(%x: tensor<8x16x4xf32>) -> tensor<16x32xf32> {
  %0 = stablehlo.add %x, %x : tensor<8x16x4xf32>
  %1 = stablehlo.convert %0 : (tensor<8x16x4xf32>) -> tensor<8x16x4xbf16>
  %2 = stablehlo.transpose %1, dims = [1, 0, 2] : (tensor<8x16x4xbf16>) -> tensor<16x8x4xbf16>
  %3 = stablehlo.reshape %2 : (tensor<16x8x4xbf16>) -> tensor<16x32xbf16>
  %4 = stablehlo.convert %3 : (tensor<16x32xbf16>) -> tensor<16x32xf32>
  return %4 : tensor<16x32xf32>
}"""


def test_a_conversion_of_a_reshaped_result_is_written_before_the_reshape(monkeypatch):
    """A bf16 attention's heads merged (a transpose and a reshape) and converted back to f32:
    the conversion is computed in the transpose's shape and written through a reshaped view of
    the destination, so the transposed value takes no scratch (it was written there and
    copied out whole); the result is the interpreter's (values exact in bf16)."""

    def scratch(executable) -> int:
        return sum(t.scratch.size for t in thunk_kinds.every_thunk(executable.executable.plan.thunks)
                   if isinstance(t, thunk_kinds.KernelThunk) and t.scratch is not None)

    module = frontdoor.import_text(HEADS_MERGED_IN_BF16, "kernel.mlir", new_context()).module
    x = np.random.default_rng(2).standard_normal((8, 16, 4)).astype(ml_dtypes.bfloat16).astype(np.float32)
    executable = Client().compile(HEADS_MERGED_IN_BF16)
    assert scratch(executable) == 0
    np.testing.assert_array_equal(executable.execute_numpy([x])[0], reference_outputs(module, [x])[0])
    def reshape_only(value, others):
        op = materialization.defining_op(value)
        return op if op is not None and op.name == "xhlo.reshape" else None

    monkeypatch.setattr(materialization, "reshape_under", reshape_only)
    assert scratch(Client().compile(HEADS_MERGED_IN_BF16)) > 0


# jax.random's split on an RBG key (jax's random_lax_test.py test_split_size_shape0): the
# generator's kernel returns the new state reshaped, and rewriting one result's reshape erased
# a value another result still was: the process crashed
RBG_SPLIT = """module @jit_rng_bit_generator attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%key: tensor<4xui32>) -> (tensor<4xui32> {jax.result_info = "result[0]"}, tensor<60x4xui32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.reshape %key : (tensor<4xui32>) -> tensor<2x2xui32>
    %1 = stablehlo.bitcast_convert %0 : (tensor<2x2xui32>) -> tensor<2xui64>
    %state, %bits = stablehlo.rng_bit_generator %1, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<60x4xui32>)
    %2 = stablehlo.bitcast_convert %state : (tensor<2xui64>) -> tensor<2x2xui32>
    %3 = stablehlo.reshape %2 : (tensor<2x2xui32>) -> tensor<4xui32>
    return %3, %bits : tensor<4xui32>, tensor<60x4xui32>
  }
}"""


def test_a_kernel_result_is_never_erased_by_another_results_rewrite(tmp_path):
    path = tmp_path / "rbg_split.mlir"
    path.write_text(RBG_SPLIT)
    # erased ops really erased, as users run (the erasure checker keeps them alive)
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", str(path), "-o", str(tmp_path / "out.npz")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "MLIRXLA_CHECK_ERASURE": "0"})
    assert done.returncode == 0, done.stderr[-2000:]
    outputs = np.load(tmp_path / "out.npz")
    state, bits = (outputs[name] for name in sorted(outputs.files))
    assert state.shape == (4,) and bits.shape == (60, 4) and len(np.unique(bits)) > 200


MASKED_EXPONENTIAL_KERNEL = """func.func @masked_exponential(%arg0: memref<4x32x32xf32>, %arg2: memref<32xi32>, %arg1: memref<4x32x32xf32>) {
  %x = bufferization.to_tensor %arg0 restrict : memref<4x32x32xf32> to tensor<4x32x32xf32>
  %ROWS
  %columns = stablehlo.iota dim = 1 : tensor<32x32xi32>
  %visible = stablehlo.compare GE, %rows, %columns, SIGNED : (tensor<32x32xi32>, tensor<32x32xi32>) -> tensor<32x32xi1>
  %mask = stablehlo.broadcast_in_dim %visible, dims = [1, 2] : (tensor<32x32xi1>) -> tensor<4x32x32xi1>
  %hidden = stablehlo.constant dense<-1.000000e+30> : tensor<4x32x32xf32>
  %scores = stablehlo.select %mask, %x, %hidden : tensor<4x32x32xi1>, tensor<4x32x32xf32>
  %lowest = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %max = stablehlo.reduce(%scores init: %lowest) applies stablehlo.maximum across dimensions = [2] : (tensor<4x32x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %1 = stablehlo.broadcast_in_dim %max, dims = [0, 1] : (tensor<4x32xf32>) -> tensor<4x32x32xf32>
  %again = stablehlo.select %mask, %x, %hidden : tensor<4x32x32xi1>, tensor<4x32x32xf32>
  %2 = stablehlo.subtract %again, %1 : tensor<4x32x32xf32>
  %3 = stablehlo.exponential %2 : tensor<4x32x32xf32>
  bufferization.materialize_in_destination %3 in restrict writable %arg1 : (tensor<4x32x32xf32>, memref<4x32x32xf32>) -> ()
  return
}
"""


CAUSAL = "rows = stablehlo.iota dim = 0 : tensor<32x32xi32>"
# a row's keys past a length are masked: the lengths, an operand, broadcast along the columns
PADDED = ("lengths = bufferization.to_tensor %arg2 restrict : memref<32xi32> to tensor<32xi32>\n"
          "  %rows = stablehlo.broadcast_in_dim %lengths, dims = [0] : (tensor<32xi32>) -> tensor<32x32xi32>")


@pytest.mark.parametrize("rows", [CAUSAL, PADDED], ids=["causal", "padded"])
def test_broadcast_mask_is_computed_where_it_is_read(rows, monkeypatch):
    """A causal mask (iotas compared) or a padding mask (an iota compared with lengths),
    broadcast over the batch and read by two selects (a softmax kernel after priority fusion
    duplicated them), is recomputed in the loop nests that read it (`generated_broadcasts.py`):
    the kernel's only scratch holds its row maxima (three integer reductions of their bits and
    the decoded maxima, `integer_order_reductions.py`), and it computes what the interpreter
    does; without the rewrite the mask takes scratch too."""
    from mlirxla.backends.cpu import generated_broadcasts, lowering

    kernel = MASKED_EXPONENTIAL_KERNEL.replace("ROWS", rows)

    def scratch_held() -> list[str]:
        module = ir.Module.parse(kernel, new_context())
        return [argument.holds for argument in lowering.lower_to_llvm_dialect(module, "masked_exponential").scratch["masked_exponential"]]

    held = scratch_held()
    assert len(held) == 4 and all("memref<4x32x" in holds for holds in held)
    program = kernel.replace("@masked_exponential(%arg0: memref<4x32x32xf32>, %arg2: memref<32xi32>, %arg1: memref<4x32x32xf32>) {",
                             "@main(%x: tensor<4x32x32xf32>, %lengths: tensor<32xi32>) -> tensor<4x32x32xf32> {")
    program = re.sub(r"  %(x|lengths) = bufferization.*\n", "", program)
    program = re.sub(r"  bufferization.materialize_in_destination %3 .*\n  return\n", "  return %3 : tensor<4x32x32xf32>\n", program)
    module = frontdoor.import_text(program, "kernel.mlir", new_context()).module
    arguments = random_arguments(module, 1)
    executable = Client().compile(program)
    for got, want in zip(executable.execute_numpy(arguments), reference_outputs(module, arguments)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(generated_broadcasts, "recompute_generated_broadcasts", lambda module: 0)
    assert len(scratch_held()) > 4


def masked_attention_program(batch: int, heads: int, sequence: int, depth: int) -> str:
    """jax's masked attention (`examples/benchmark_workloads.masked_attention`) as StableHLO:
    two dots batched over [batch, heads] and a softmax over keys masked past each length."""
    qkv = f"tensor<{batch}x{heads}x{sequence}x{depth}xf32>"
    scores = f"tensor<{batch}x{heads}x{sequence}x{sequence}xf32>"
    rows = f"tensor<{batch}x{heads}x{sequence}xf32>"
    mask = f"tensor<{batch}x{sequence}xi1>"
    return f"""func.func @main(%q: {qkv}, %k: {qkv}, %v: {qkv}, %lengths: tensor<{batch}xi32>) -> {qkv} {{
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : ({qkv}, {qkv}) -> {scores}
  %positions = stablehlo.iota dim = 0 : tensor<{sequence}xi32>
  %1 = stablehlo.broadcast_in_dim %positions, dims = [1] : (tensor<{sequence}xi32>) -> tensor<{batch}x{sequence}xi32>
  %2 = stablehlo.broadcast_in_dim %lengths, dims = [0] : (tensor<{batch}xi32>) -> tensor<{batch}x{sequence}xi32>
  %3 = stablehlo.compare LT, %1, %2, SIGNED : (tensor<{batch}x{sequence}xi32>, tensor<{batch}x{sequence}xi32>) -> {mask}
  %4 = stablehlo.broadcast_in_dim %3, dims = [0, 3] : ({mask}) -> tensor<{batch}x{heads}x{sequence}x{sequence}xi1>
  %low = stablehlo.constant dense<-1.0e9> : tensor<f32>
  %5 = stablehlo.broadcast_in_dim %low, dims = [] : (tensor<f32>) -> {scores}
  %6 = stablehlo.select %4, %0, %5 : tensor<{batch}x{heads}x{sequence}x{sequence}xi1>, {scores}
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %7 = stablehlo.reduce(%6 init: %ninf) applies stablehlo.maximum across dimensions = [3] : ({scores}, tensor<f32>) -> {rows}
  %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1, 2] : ({rows}) -> {scores}
  %9 = stablehlo.subtract %6, %8 : {scores}
  %10 = stablehlo.exponential %9 : {scores}
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %11 = stablehlo.reduce(%10 init: %zero) applies stablehlo.add across dimensions = [3] : ({scores}, tensor<f32>) -> {rows}
  %12 = stablehlo.broadcast_in_dim %11, dims = [0, 1, 2] : ({rows}) -> {scores}
  %13 = stablehlo.divide %10, %12 : {scores}
  %14 = stablehlo.dot_general %13, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : ({scores}, {qkv}) -> {qkv}
  return %14 : {qkv}
}}"""


COUNTER_HASH = """func.func @main(%key: tensor<1x1xui32>) -> tensor<1024x1024xf32> {
  %row = stablehlo.iota dim = 0 : tensor<1024x1024xui32>
  %column = stablehlo.iota dim = 1 : tensor<1024x1024xui32>
  %width = stablehlo.constant dense<1024> : tensor<1024x1024xui32>
  %k = stablehlo.broadcast_in_dim %key, dims = [0, 1] : (tensor<1x1xui32>) -> tensor<1024x1024xui32>
  %odd = stablehlo.constant dense<2654435761> : tensor<1024x1024xui32>
  %s13 = stablehlo.constant dense<13> : tensor<1024x1024xui32>
  %s9 = stablehlo.constant dense<9> : tensor<1024x1024xui32>
  %one = stablehlo.constant dense<1065353216> : tensor<1024x1024xui32>
  %onef = stablehlo.constant dense<1.0> : tensor<1024x1024xf32>
  %0 = stablehlo.multiply %row, %width : tensor<1024x1024xui32>
  %1 = stablehlo.add %0, %column : tensor<1024x1024xui32>
  %2 = stablehlo.xor %1, %k : tensor<1024x1024xui32>
  %3 = stablehlo.multiply %2, %odd : tensor<1024x1024xui32>
  %4 = stablehlo.shift_right_logical %3, %s13 : tensor<1024x1024xui32>
  %5 = stablehlo.xor %3, %4 : tensor<1024x1024xui32>
  %6 = stablehlo.multiply %5, %odd : tensor<1024x1024xui32>
  %7 = stablehlo.shift_right_logical %6, %s13 : tensor<1024x1024xui32>
  %8 = stablehlo.xor %6, %7 : tensor<1024x1024xui32>
  %9 = stablehlo.multiply %8, %odd : tensor<1024x1024xui32>
  %10 = stablehlo.shift_right_logical %9, %s9 : tensor<1024x1024xui32>
  %11 = stablehlo.or %10, %one : tensor<1024x1024xui32>
  %12 = stablehlo.bitcast_convert %11 : (tensor<1024x1024xui32>) -> tensor<1024x1024xf32>
  %13 = stablehlo.subtract %12, %onef : tensor<1024x1024xf32>
  return %13 : tensor<1024x1024xf32>
}"""


def test_a_kernel_counting_rows_runs_in_row_blocks_each_told_its_first_row(monkeypatch):
    """Random bits as jax's threefry makes them: a hash of each element's position (an iota
    along dimension 0 and one along dimension 1), keyed by a 1x1 value broadcast over both,
    made floats by a bitcast_convert. Each row block's iota along dimension 0 counts from the
    block's first row, read from a table of the executable's own; the results are numpy's."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    executable = Client().compile(COUNTER_HASH)
    text = executable.thunk_sequence()
    assert [line.split(" [")[0].rsplit(" ", 1)[0] for line in sliced_kernels(text)] == ["sliced kernel x2"], text
    assert "constant 16 bytes" in text, text
    key = np.array([[0x9E3779B9]], np.uint32)
    with np.errstate(over="ignore"):
        h = (np.arange(1024 * 1024, dtype=np.uint32).reshape(1024, 1024) ^ key[0, 0]) * np.uint32(2654435761)
        h = (h ^ (h >> np.uint32(13))) * np.uint32(2654435761)
        h = (h ^ (h >> np.uint32(13))) * np.uint32(2654435761)
    expected = ((h >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
    np.testing.assert_array_equal(executable.execute_numpy([key])[0], expected)


def test_masked_attention_splits_its_mask_kernel_and_its_batched_dots_are_gemms(streamed):
    """The mask's iota over key positions is computed again in every slice, so the masked
    softmax row kernel (its 1M exps' work, whatever the cache holds) runs in row blocks over
    the threads, and both dots, batched over
    [batch, heads], are BLAS GEMMs batched over their product; the results are numpy's."""
    executable = Client().compile(masked_attention_program(4, 4, 256, 32))
    text = executable.thunk_sequence()
    assert "gemm dot f32 16x256x256x32 NT" in text and "gemm dot f32 16x256x32x256 NN" in text, text
    if ThreadPool.shared().workers > 1:
        assert "iota_exponential_fusion.2" in [line.split()[3] for line in sliced_kernels(text)], text
    rng = np.random.default_rng(5)
    q, k, v = (0.1 * rng.standard_normal((4, 4, 256, 32), dtype=np.float32) for _ in range(3))
    lengths = np.array([1, 50, 256, 177], np.int32)
    scores = np.einsum("bhqd,bhkd->bhqk", q, k)
    scores = np.where((np.arange(256)[None, :] < lengths[:, None])[:, None, None, :], scores, -1e9)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected = np.einsum("bhqk,bhkd->bhqd", weights / weights.sum(axis=-1, keepdims=True), v)
    np.testing.assert_allclose(executable.execute_numpy([q, k, v, lengths])[0], expected, rtol=1e-4, atol=1e-5)


ROWS_OVER_THEIR_RESHAPED_SUMS = """func.func @main(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<1024x1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %1 = stablehlo.reshape %0 : (tensor<1024xf32>) -> tensor<1024x1xf32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1024x1xf32>) -> tensor<1024x1024xf32>
  %3 = stablehlo.divide %x, %2 : tensor<1024x1024xf32>
  return %3 : tensor<1024x1024xf32>
}"""


def test_a_reshape_keeping_the_rows_splits_with_them(streamed):
    """A reshape that keeps dimension 0 (jax's keepdims, a cross-entropy gradient's [n] to
    [n, 1]) keeps each row's elements in its own slice: the kernel runs in row blocks."""
    executable = Client().compile(ROWS_OVER_THEIR_RESHAPED_SUMS)
    if ThreadPool.shared().workers > 1:
        assert len(sliced_kernels(executable.thunk_sequence())) == 1, executable.thunk_sequence()
    x = np.random.default_rng(6).uniform(1, 2, (1024, 1024)).astype(np.float32)
    np.testing.assert_allclose(executable.execute_numpy([x])[0], x / x.sum(axis=1, keepdims=True), rtol=1e-5)


SOFTMAX_THEN_BATCHED_GEMM = """func.func @main(%s: tensor<8x256x256xf32>, %v: tensor<8x256x64xf32>) -> tensor<8x256x64xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.exponential %s : tensor<8x256x256xf32>
  %1 = stablehlo.reduce(%0 init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<8x256x256xf32>, tensor<f32>) -> tensor<8x256xf32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<8x256xf32>) -> tensor<8x256x256xf32>
  %3 = stablehlo.divide %0, %2 : tensor<8x256x256xf32>
  %4 = stablehlo.dot_general %3, %v, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<8x256x256xf32>, tensor<8x256x64xf32>) -> tensor<8x256x64xf32>
  return %4 : tensor<8x256x64xf32>
}"""


def test_a_batched_dot_blas_can_run_stays_a_gemm_after_its_softmax():
    """Batch-slice fusion leaves dots batched over dimension 0 alone (only a generated dot's
    own row blocks run them slice by slice): a transformer's attention-weights dot stays the
    BLAS GEMM instead of becoming a loop nest in the softmax's slices."""
    executable = Client().compile(SOFTMAX_THEN_BATCHED_GEMM)
    assert "gemm dot f32 8x256x64x256 NN" in executable.thunk_sequence(), executable.thunk_sequence()
    rng = np.random.default_rng(7)
    s, v = rng.standard_normal((8, 256, 256)).astype(np.float32), rng.standard_normal((8, 256, 64)).astype(np.float32)
    weights = np.exp(s) / np.exp(s).sum(axis=2, keepdims=True)
    np.testing.assert_allclose(executable.execute_numpy([s, v])[0], weights @ v, rtol=1e-4, atol=1e-4)


BATCHED_DOT = """func.func @main(%a: tensor<{batch}x{lhs}x{element}>, %b: tensor<{batch}x{k}x{n}x{element}>) -> tensor<{batch}x{m}x{n}x{element}> {{
  %scaled = stablehlo.multiply %a, %a : tensor<{batch}x{lhs}x{element}>
  %d = stablehlo.dot_general %scaled, %b, batching_dims = [0] x [0], contracting_dims = [{contracting}] x [1] : (tensor<{batch}x{lhs}x{element}>, tensor<{batch}x{k}x{n}x{element}>) -> tensor<{batch}x{m}x{n}x{element}>
  %t = stablehlo.tanh %d : tensor<{batch}x{m}x{n}x{element}>
  %s = stablehlo.add %t, %d : tensor<{batch}x{m}x{n}x{element}>
  return %s : tensor<{batch}x{m}x{n}x{element}>
}}"""


@pytest.mark.parametrize("batch, size, by_matrix", [(3, (96, 80, 72), False), (4, (96, 80, 72), True), (9, (96, 80, 72), True),
                                                    (8, (8, 8, 8), False)], ids=["3-split", "4", "9", "8-small"])
@pytest.mark.parametrize("element, transposed", [("f32", False), ("f32", True), ("f64", False)])
def test_a_batch_of_gemms_in_parts_is_one_call_by_matrix_or_matrix_by_matrix(monkeypatch, batch, size, by_matrix, element, transposed):
    """A batched GEMM in parts is one call of `mlirxla_gemm_batch_<element>`, from Python and
    from a native driver: 4 and 9 matrices of 96x72x80 on 2 threads run whole matrices over
    the pool, 3 run one by one, each split, and 8 small ones one by one on the caller (too
    little work for the pool); every way gives numpy's product."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    m, k, n = size
    assert native_pool.batch_by_matrix(m, n, k, batch, 2) == by_matrix
    lhs = f"{k}x{m}" if transposed else f"{m}x{k}"
    text = BATCHED_DOT.format(batch=batch, lhs=lhs, m=m, k=k, n=n, element=element, contracting=1 if transposed else 2)
    dtype = np.float32 if element == "f32" else np.float64
    rng = np.random.default_rng(batch)
    a = rng.standard_normal((batch, *map(int, lhs.split("x")))).astype(dtype)
    b = rng.standard_normal((batch, k, n)).astype(dtype)
    product = np.einsum("bkm,bkn->bmn" if transposed else "bmk,bkn->bmn", a * a, b)
    for driven in (False, True):
        monkeypatch.setattr(driver_emitter, "MANY_THUNKS", 2 if driven else 100)
        executable = Client().compile(text)
        (gemm,) = [t for t in executable.executable.plan.thunks if t.kind == "gemm"]
        assert gemm.in_parts and gemm.batch == batch and gemm.transpose_lhs == transposed
        driver = executable.executable.plan.driver
        assert gemm.batched is not None and (driver is not None) == driven
        assert not driven or f"mlirxla_gemm_batch_{element}" in driver.imports
        got = executable.execute_numpy([a, b])[0]
        np.testing.assert_allclose(got, np.tanh(product) + product, rtol=1e-4 if element == "f32" else 1e-10, atol=1e-4)


ROW_LOOPS = """func.func @k(%x: memref<8x16xf32>, %y: memref<8x16xf32>, %m: memref<8xf32> {{llvm.noalias}}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c8 step %c1 {{
    scf.for %j = %c0 to %c16 step %c1 {{
      %v = memref.load %x[%i, %j] : memref<8x16xf32>
      %a = memref.load %m[%i] : memref<8xf32>
      %b = arith.maximumf %a, %v : f32
      memref.store %b, %m[%i] : memref<8xf32>
    }}
  }}
  %view = memref.expand_shape %y [[0, 1], [2]] output_shape [8, 1, 16] : memref<8x16xf32> into memref<8x1x16xf32>
  scf.for %i = %c0 to %c8 step %c1 {{
    scf.for %j = %c0 to %c16 step %c1 {{
      %v = memref.load %x[{second_read}] : memref<8x16xf32>
      %a = memref.load %m[%i] : memref<8xf32>
      %d = arith.subf %v, %a : f32
      memref.store %d, %view[%i, %c0, %j] : memref<8x1x16xf32>
    }}
  }}
  return
}}"""


def fused_rows(text: str) -> tuple[int, str]:
    from mlirxla.backends.cpu import row_fusion
    with new_context():
        module = ir.Module.parse(text)
        fused = row_fusion.fuse_rows(module)
        module.operation.verify()
        return fused, str(module)


def test_row_loops_fuse_into_one_nest():
    """A row reduction and the elementwise pass reading its result (through a reshaped view
    of the output) run row by row in one nest: one loop over the rows, the two inner loops in
    program order inside it, the view moved above it."""
    fused, text = fused_rows(ROW_LOOPS.format(second_read="%i, %j"))
    assert fused == 1
    body = text[text.index("scf.for"):]
    assert body.count("scf.for") == 3 and text.index("memref.expand_shape") < text.index("scf.for")
    assert body.index("arith.maximumf") < body.index("arith.subf")


@pytest.mark.parametrize("second_read", ["%j, %i", "%c0, %j"])
def test_row_loops_reading_other_rows_of_a_written_buffer_stay_apart(second_read):
    """The second nest writes a view of `y`, which may be the same buffer as `x` (arguments of
    one size, not noalias), and reads `x` across the rows (transposed) or row 0 of it in every
    row: fused, a row's write could come before an earlier row's read, so the nests stay apart."""
    fused, _ = fused_rows(ROW_LOOPS.format(second_read=second_read))
    assert fused == 0


@pytest.mark.parametrize("rows", [1, 64, 2048])
def test_softmax_of_f32_rows_is_a_call_into_the_runtime_library(rows, monkeypatch, tmp_path):
    """A softmax fusion of f32 rows compiles no kernel (a call into the runtime library's
    softmax; its rows in blocks on the threads when they are many) and matches numpy, a row
    of -inf and a NaN included; the generated kernel it stands for gives the same results."""
    from mlirxla.backends.cpu import llvm_jit, row_programs, softmax_rows

    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    compiled_kernels = []
    compile_native = llvm_jit.compile_native
    monkeypatch.setattr(llvm_jit, "compile_native", lambda name, *rest: compiled_kernels.append(name) or compile_native(name, *rest))
    x = np.random.default_rng(6).standard_normal((rows, 512)).astype(np.float32)
    x[0, 3] = np.inf if rows > 1 else x[0, 3]
    x[-1, 5] = np.nan
    executable = Client(cache_dir=str(tmp_path)).compile(SOFTMAX.format(rows=rows))
    assert not compiled_kernels, compiled_kernels
    if rows in (1, 2048):
        assert ("sliced kernel x2" in executable.thunk_sequence()) == (rows == 2048)
    got = executable.execute_numpy([x])[0]
    with np.errstate(invalid="ignore", over="ignore"):
        expected = np.exp(x - x.max(axis=1, keepdims=True))
        expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    monkeypatch.setattr(softmax_rows, "is_softmax", lambda op: False)
    monkeypatch.setattr(row_programs, "row_program", lambda op: None)
    generated = Client(cache_dir=str(tmp_path / "generated")).compile(SOFTMAX.format(rows=rows)).execute_numpy([x])[0]
    np.testing.assert_allclose(got, generated, rtol=1e-6, atol=1e-8)
    assert compiled_kernels


def test_row_fused_softmax_lowers_to_one_row_loop(tmp_path, generated_row_kernels):
    """The whole softmax kernel (max, exp, sum, divide) is one loop over its rows in the
    optimized LLVM IR, with vector code in it, and still matches numpy."""
    executable = Client().compile(SOFTMAX.format(rows=64), CompileOptions(dump_to=str(tmp_path)))
    optimized = next(tmp_path.glob("*.ir-with-opt.ll")).read_text()
    exits = [line for line in optimized.splitlines() if "icmp eq i64" in line and ", 64" in line]
    assert len(exits) == 1 and ("<16 x float>" in optimized or "<8 x float>" in optimized)
    x = np.random.default_rng(5).standard_normal((64, 512)).astype(np.float32)
    expected = np.exp(x - x.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(executable.execute_numpy([x])[0], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("rows", [CAUSAL, PADDED], ids=["causal", "padded"])
def test_a_mask_compares_positions_in_i32_lanes(rows, tmp_path):
    """The mask's positions (the innermost loop's index cast to i32) are an i32 counter the
    loop carries (`narrow_induction.py`), so the vectorized loops compare vectors of i32, not
    of i64 positions LLVM would otherwise widen them to; the results are the interpreter's."""
    program = MASKED_EXPONENTIAL_KERNEL.replace("ROWS", rows).replace(
        "@masked_exponential(%arg0: memref<4x32x32xf32>, %arg2: memref<32xi32>, %arg1: memref<4x32x32xf32>) {",
        "@main(%x: tensor<4x32x32xf32>, %lengths: tensor<32xi32>) -> tensor<4x32x32xf32> {")
    program = re.sub(r"  %(x|lengths) = bufferization.*\n", "", program)
    program = re.sub(r"  bufferization.materialize_in_destination %3 .*\n  return\n", "  return %3 : tensor<4x32x32xf32>\n", program)
    executable = Client().compile(program, CompileOptions(dump_to=str(tmp_path)))
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert re.search(r"icmp \w+ <\d+ x i32>", optimized) and not re.search(r"icmp \w+ <\d+ x i64>", optimized)
    module = frontdoor.import_text(program, "kernel.mlir", new_context()).module
    arguments = random_arguments(module, 2)
    for got, want in zip(executable.execute_numpy(arguments), reference_outputs(module, arguments)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


NARROW_ROW_MAX = """func.func @main(%x: tensor<64x256x{t}>) -> (tensor<64x{t}>, tensor<64x{t}>) {{
  %low = stablehlo.constant dense<0xFF80> : tensor<{t}>
  %high = stablehlo.constant dense<0x7F80> : tensor<{t}>
  %max = stablehlo.reduce(%x init: %low) applies stablehlo.maximum across dimensions = [1] : (tensor<64x256x{t}>, tensor<{t}>) -> tensor<64x{t}>
  %min = stablehlo.reduce(%x init: %high) applies stablehlo.minimum across dimensions = [1] : (tensor<64x256x{t}>, tensor<{t}>) -> tensor<64x{t}>
  return %max, %min : tensor<64x{t}>, tensor<64x{t}>
}}"""


@pytest.mark.parametrize("element, dtype, infinity", [("bf16", ml_dtypes.bfloat16, "0x7F80"), ("f16", np.float16, "0x7C00")])
def test_narrow_max_and_min_reductions_accumulate_in_f32(element, dtype, infinity, tmp_path):
    """bf16/f16 row maxima and minima carry an f32 accumulator (vectorized reductions of its
    bits in the optimized IR, `integer_order_reductions.py`, not a scalar chain of roundings)
    and equal numpy's exactly, a NaN in a row included."""
    text = NARROW_ROW_MAX.format(t=element).replace("0xFF80", "0x" + format(0x8000 | int(infinity, 16), "X")).replace("0x7F80", infinity)
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert all(re.search(rf"llvm\.vector\.reduce\.{kind}\.v\d+i32", optimized) for kind in ("smax", "umax", "umin"))
    x = np.random.default_rng(8).standard_normal((64, 256)).astype(dtype)
    x[3, 17] = np.nan
    largest, smallest = executable.execute_numpy([x])
    np.testing.assert_array_equal(largest.astype(np.float32), x.astype(np.float32).max(axis=1))
    np.testing.assert_array_equal(smallest.astype(np.float32), x.astype(np.float32).min(axis=1))


SCALED_NARROW_ROW_MAX = """func.func @main(%x: tensor<64x256xf32>) -> tensor<64xbf16> {
  %narrow = stablehlo.convert %x : (tensor<64x256xf32>) -> tensor<64x256xbf16>
  %scale = stablehlo.constant dense<1.250000e-01> : tensor<64x256xbf16>
  %scaled = stablehlo.multiply %narrow, %scale : tensor<64x256xbf16>
  %low = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %max = stablehlo.reduce(%scaled init: %low) applies stablehlo.maximum across dimensions = [1] : (tensor<64x256xbf16>, tensor<bf16>) -> tensor<64xbf16>
  return %max : tensor<64xbf16>
}"""


def test_a_narrow_max_of_fused_values_accumulates_in_f32(tmp_path):
    """A bf16 row maximum of values the kernel computes (converted and scaled scores fused into
    the reduction, as in a bf16 attention) carries an f32 accumulator too, and is exact."""
    executable = Client().compile(SCALED_NARROW_ROW_MAX, CompileOptions(dump_to=str(tmp_path)))
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert all(re.search(rf"llvm\.vector\.reduce\.{kind}\.v\d+i32", optimized) for kind in ("smax", "umax", "umin"))
    x = np.random.default_rng(9).standard_normal((64, 256)).astype(np.float32)
    expected = (x.astype(ml_dtypes.bfloat16) * ml_dtypes.bfloat16(0.125)).astype(np.float32).max(axis=1)
    np.testing.assert_array_equal(executable.execute_numpy([x])[0].astype(np.float32), expected)


MASKED_NARROW_ROW_ORDER = """func.func @main(%x: tensor<48x64xf32>) -> (tensor<48xbf16>, tensor<48xbf16>) {
  %narrow = stablehlo.convert %x : (tensor<48x64xf32>) -> tensor<48x64xbf16>
  %scale = stablehlo.constant dense<1.250000e-01> : tensor<48x64xbf16>
  %scaled = stablehlo.multiply %narrow, %scale : tensor<48x64xbf16>
  %rows = stablehlo.iota dim = 0 : tensor<48x64xi32>
  %columns = stablehlo.iota dim = 1 : tensor<48x64xi32>
  %kept = stablehlo.compare LE, %columns, %rows, SIGNED : (tensor<48x64xi32>, tensor<48x64xi32>) -> tensor<48x64xi1>
  %low = stablehlo.constant dense<-1.0e30> : tensor<48x64xbf16>
  %high = stablehlo.constant dense<1.0e30> : tensor<48x64xbf16>
  %below = stablehlo.select %kept, %scaled, %low : tensor<48x64xi1>, tensor<48x64xbf16>
  %above = stablehlo.select %kept, %scaled, %high : tensor<48x64xi1>, tensor<48x64xbf16>
  %negative_infinity = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %infinity = stablehlo.constant dense<0x7F80> : tensor<bf16>
  %max = stablehlo.reduce(%below init: %negative_infinity) applies stablehlo.maximum across dimensions = [1] : (tensor<48x64xbf16>, tensor<bf16>) -> tensor<48xbf16>
  %min = stablehlo.reduce(%above init: %infinity) applies stablehlo.minimum across dimensions = [1] : (tensor<48x64xbf16>, tensor<bf16>) -> tensor<48xbf16>
  return %max, %min : tensor<48xbf16>, tensor<48xbf16>
}"""

# f32 bit patterns a bf16 rounding treats specially: ties to even (1 + 2^-8, 1 + 3 * 2^-8 and
# their negations, a denormal tie), what rounds to +-0 and to the least normal, the largest f32
# (bf16 infinity), infinities, quiet and signaling NaN of both signs, signed zeros
ROUNDING_EDGES = [0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000, 0x3F800001, 0x3F80FFFF, 0x00008000, 0x00018000,
                  0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000,
                  0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x00000000, 0x80000000]


@pytest.mark.parametrize("excess_precision", [False, True])
def test_a_narrow_max_rounds_once_after_comparing_f32_values(excess_precision, tmp_path):
    """A bf16 max (min) of masked, scaled scores compares their f32 values and rounds only the
    result (`narrow_reductions.unrounded`: rounding to nearest even keeps their order), so
    its loop rounds nothing when excess precision drops the convert's rounding; bit for bit
    the maximum (minimum) of each element rounded to bf16 by ml_dtypes, over rows of ties,
    denormals, overflow to infinity, infinities, NaN and signed zeros. Without excess precision
    the program's convert still rounds every element first, as the reference does."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((48, 64)) * 4).astype(np.float32)
    edges = np.array(ROUNDING_EDGES, np.uint32).view(np.float32)
    for row in range(48):
        picks = rng.choice(len(edges), size=rng.integers(0, 6), replace=False)
        columns = rng.choice(row + 1, size=min(len(picks), row + 1), replace=False)
        x[row, columns] = edges[picks[:len(columns)]]
    x[40, :41] = edges[rng.integers(0, 15, 41)]  # ties, denormals and overflow only: no normal value to hide them
    x[41, :42] = -np.abs(edges[rng.integers(0, 13, 42)])
    executable = Client().compile(MASKED_NARROW_ROW_ORDER, CompileOptions(allow_excess_precision=excess_precision,
                                                                          dump_to=str(tmp_path)))
    largest, smallest = executable.execute_numpy([x])
    bf16 = ml_dtypes.bfloat16
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = (x * np.float32(0.125)) if excess_precision else (x.astype(bf16).astype(np.float32) * np.float32(0.125))
    rounded = scaled.astype(bf16).astype(np.float32)
    kept = np.tril(np.ones((48, 64), bool))
    for got, constant, maximum, initial in ((largest, -1e30, True, -np.inf), (smallest, 1e30, False, np.inf)):
        elements = np.where(kept, rounded, np.float32(bf16(constant)))
        expected = exact_order_reduction(elements, np.float32(initial), maximum).astype(bf16)
        assert np.array_equal(np.isnan(got.astype(np.float32)), np.isnan(expected.astype(np.float32)))
        finite = ~np.isnan(expected.astype(np.float32))
        assert got[finite].view(np.uint16).tolist() == expected[finite].view(np.uint16).tolist()
    if excess_precision:
        optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
        assert not re.search(r"add <\d+ x i32> .*splat \(i32 32767\)", optimized)


CAUSAL_SOFTMAX = """func.func @main(%s: tensor<8x256x256xf32>) -> tensor<8x256x256xf32> {
  %rows = stablehlo.iota dim = 0 : tensor<256x256xi32>
  %columns = stablehlo.iota dim = 1 : tensor<256x256xi32>
  %causal = stablehlo.compare GE, %rows, %columns, SIGNED : (tensor<256x256xi32>, tensor<256x256xi32>) -> tensor<256x256xi1>
  %mask = stablehlo.broadcast_in_dim %causal, dims = [1, 2] : (tensor<256x256xi1>) -> tensor<8x256x256xi1>
  %low = stablehlo.constant dense<-1.0e30> : tensor<8x256x256xf32>
  %masked = stablehlo.select %mask, %s, %low : tensor<8x256x256xi1>, tensor<8x256x256xf32>
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %max = stablehlo.reduce(%masked init: %init) applies stablehlo.maximum across dimensions = [2] : (tensor<8x256x256xf32>, tensor<f32>) -> tensor<8x256xf32>
  %spread = stablehlo.broadcast_in_dim %max, dims = [0, 1] : (tensor<8x256xf32>) -> tensor<8x256x256xf32>
  %shifted = stablehlo.subtract %masked, %spread : tensor<8x256x256xf32>
  %e = stablehlo.exponential %shifted : tensor<8x256x256xf32>
  return %e : tensor<8x256x256xf32>
}"""


def test_a_causal_mask_larger_than_the_batch_slices_bound_splits_into_row_blocks(streamed):
    """The causal mask's 256x256 positions (256 KiB of iota, beyond what a batch slice may
    compute again) are computed again by each of the few row blocks, which is index arithmetic
    in their loops: the masked exponential runs over the threads, and matches numpy."""
    executable = Client().compile(CAUSAL_SOFTMAX)
    if ThreadPool.shared().workers > 1:
        assert len(sliced_kernels(executable.thunk_sequence())) == 1, executable.thunk_sequence()
    s = np.random.default_rng(9).standard_normal((8, 256, 256)).astype(np.float32)
    masked = np.where(np.tril(np.ones((256, 256), bool)), s, np.float32(-1e30))
    expected = np.exp(masked - masked.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(executable.execute_numpy([s])[0], expected, rtol=2e-6, atol=1e-30)


KEEPDIMS_GRADIENT = """func.func @main(%x: tensor<64x128xf32>, %w: tensor<64xf32>, %y: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %negated = stablehlo.negate %x : tensor<64x128xf32>
  %sums = stablehlo.reduce(%negated init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<64x128xf32>, tensor<f32>) -> tensor<64xf32>
  %kept = stablehlo.reshape %sums : (tensor<64xf32>) -> tensor<64x1xf32>
  %weights = stablehlo.broadcast_in_dim %w, dims = [0] : (tensor<64xf32>) -> tensor<64x1xf32>
  %scaled = stablehlo.divide %kept, %weights : tensor<64x1xf32>
  %flat = stablehlo.reshape %scaled : (tensor<64x1xf32>) -> tensor<64xf32>
  %spread = stablehlo.broadcast_in_dim %flat, dims = [0] : (tensor<64xf32>) -> tensor<64x128xf32>
  %product = stablehlo.multiply %spread, %y : tensor<64x128xf32>
  %result = stablehlo.add %x, %product : tensor<64x128xf32>
  return %result : tensor<64x128xf32>
}"""


def test_a_result_computed_with_a_unit_dimension_is_written_into_its_destination(tmp_path, generated_row_kernels):
    """The gradient's loop nest runs over [64, 1, 128] (the keepdims sum's unit dimension,
    reshaped back) and its result is reshaped into the [64, 128] output: with the unit
    dimension folded away it is written straight into the output, so the kernel's scratch
    holds the row sums only, not a copy of the result. The sum of negated elements (a
    subtraction from the accumulator) reassociates, so it is a vector reduction. numpy agrees."""
    executable = Client().compile(KEEPDIMS_GRADIENT, CompileOptions(dump_to=str(tmp_path)))
    assert re.search(r"fsub reassoc[a-z ]* <", next(tmp_path.glob("*.ir-with-opt.ll")).read_text())
    scratch = [int(end) - int(start) for start, end in re.findall(r"scratch #\d+\[(\d+):(\d+)\]", executable.thunk_sequence())]
    assert scratch and max(scratch) < 64 * 128 * 4, executable.thunk_sequence()
    rng = np.random.default_rng(10)
    x, y = rng.standard_normal((64, 128), dtype=np.float32), rng.standard_normal((64, 128), dtype=np.float32)
    w = rng.uniform(1, 2, 64).astype(np.float32)
    expected = x + (-x.sum(axis=1, keepdims=True) / w[:, None]) * y
    np.testing.assert_allclose(executable.execute_numpy([x, w, y])[0], expected, rtol=1e-5, atol=1e-5)


DONATED_EXP_ADD = """func.func @main(%x: tensor<1024xf32> {tf.aliasing_output = 0 : i32}) -> tensor<1024xf32> {
  %0 = stablehlo.exponential %x : tensor<1024xf32>
  %1 = stablehlo.add %0, %x : tensor<1024xf32>
  return %1 : tensor<1024xf32>
}"""


def test_a_kernel_writing_over_its_operand_reads_it_through_one_pointer(tmp_path):
    """x's buffer holds the result (donated): the kernel reads x through the result's
    argument, so the vector loop has no run-time overlap check (through two pointers to the
    same memory that check fails and the scalar loop runs); numpy agrees."""
    executable = Client().compile(DONATED_EXP_ADD, CompileOptions(dump_to=str(tmp_path)))
    assert "-> #0[0:4096]" in executable.thunk_sequence() and "(#0[0:4096])" in executable.thunk_sequence()
    optimized = next(tmp_path.glob("*.ir-with-opt.ll")).read_text()
    assert "x float>" in optimized and not any(check in optimized for check in ("diff.check", "found.conflict", "scalar.ph"))
    x = np.linspace(-5, 5, 1024, dtype=np.float32)
    np.testing.assert_allclose(executable.execute_numpy([x.copy()])[0], np.exp(x) + x, rtol=2e-7, atol=1e-7)


CONCATENATED_TRANSPOSES = """func.func @main(%a: tensor<8x{m}x32xf32>, %b: tensor<8x{m}x32xf32>, %c: tensor<{m}x{k}xf32>) -> (tensor<{k}xf32>, tensor<{m}x{width}xf32>) {{
  %ta = stablehlo.transpose %a, dims = [1, 0, 2] : (tensor<8x{m}x32xf32>) -> tensor<{m}x8x32xf32>
  %ra = stablehlo.reshape %ta : (tensor<{m}x8x32xf32>) -> tensor<{m}x256xf32>
  %tb = stablehlo.transpose %b, dims = [1, 0, 2] : (tensor<8x{m}x32xf32>) -> tensor<{m}x8x32xf32>
  %rb = stablehlo.reshape %tb : (tensor<{m}x8x32xf32>) -> tensor<{m}x256xf32>
  %ec = stablehlo.negate %c : tensor<{m}x{k}xf32>
  %cat = stablehlo.concatenate %rb, %ec, %ra, dim = 1 : (tensor<{m}x256xf32>, tensor<{m}x{k}xf32>, tensor<{m}x256xf32>) -> tensor<{m}x{width}xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%cat init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<{m}x{width}xf32>, tensor<f32>) -> tensor<{width}xf32>
  %head = stablehlo.slice %sum [0:{k}] : (tensor<{width}xf32>) -> tensor<{k}xf32>
  return %head, %cat : tensor<{k}xf32>, tensor<{m}x{width}xf32>
}}"""


@pytest.mark.parametrize("m, k", [(128, 256), (37, 13)])
def test_a_concatenated_result_is_written_slice_by_slice(m, k, tmp_path):
    """A concatenate the kernel writes out (transformer_grad's transposed heads concatenated
    and summed down their columns) becomes its operands written into slices of the output,
    not one loop choosing an operand per element through selects (scalar code: 59% of the
    triad for transformer_grad's kernel), also where the slices are not vector-aligned (13
    columns); the negations are written into their slice directly. numpy agrees bit for
    bit on the concatenate."""
    width = 512 + k
    Client().compile(CONCATENATED_TRANSPOSES.format(m=m, k=k, width=width), CompileOptions(dump_to=str(tmp_path)))
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert "select" not in optimized
    executable = Client().compile(CONCATENATED_TRANSPOSES.format(m=m, k=k, width=width))
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((8, m, 32), dtype=np.float32), rng.standard_normal((8, m, 32), dtype=np.float32)
    c = rng.standard_normal((m, k), dtype=np.float32)
    head, concatenated = executable.execute_numpy([a, b, c])
    heads = lambda x: x.transpose(1, 0, 2).reshape(m, 256)
    np.testing.assert_array_equal(concatenated[:, :256], heads(b))
    np.testing.assert_array_equal(concatenated[:, 256 + k:], heads(a))
    np.testing.assert_array_equal(concatenated[:, 256:256 + k], -c)
    np.testing.assert_allclose(head, concatenated.sum(axis=0)[:k], rtol=1e-5, atol=1e-4)


# jnp.block([[x, y], [-x, x]]): rows of columns, a row read twice when it repeats
BLOCK = """func.func @main(%x: tensor<48x40xf32>, %y: tensor<48x24xf32>) -> (tensor<96x64xf32>, tensor<96x80xf32>) {
  %n = stablehlo.negate %x : tensor<48x40xf32>
  %top = stablehlo.concatenate %x, %y, dim = 1 : (tensor<48x40xf32>, tensor<48x24xf32>) -> tensor<48x64xf32>
  %bottom = stablehlo.concatenate %n, %y, dim = 1 : (tensor<48x40xf32>, tensor<48x24xf32>) -> tensor<48x64xf32>
  %block = stablehlo.concatenate %top, %bottom, dim = 0 : (tensor<48x64xf32>, tensor<48x64xf32>) -> tensor<96x64xf32>
  %pair = stablehlo.concatenate %x, %x, dim = 1 : (tensor<48x40xf32>, tensor<48x40xf32>) -> tensor<48x80xf32>
  %tiles = stablehlo.concatenate %pair, %pair, dim = 0 : (tensor<48x80xf32>, tensor<48x80xf32>) -> tensor<96x80xf32>
  return %block, %tiles : tensor<96x64xf32>, tensor<96x80xf32>
}"""


def test_a_concatenate_of_concatenates_writes_every_part_into_its_slice():
    """jnp.block's rows of columns: the inner concatenates, read only by the outer one (one
    of them twice), are seen through, each part written into its own slice of the result;
    each was computed into scratch and copied over (a 1024 x 1024 block 0.99 -> 0.43 ms).
    No kernel takes scratch; numpy's bits."""
    executable = Client().compile(BLOCK)
    assert "scratch" not in executable.thunk_sequence(), executable.thunk_sequence()
    rng = np.random.default_rng(12)
    x, y = rng.standard_normal((48, 40), dtype=np.float32), rng.standard_normal((48, 24), dtype=np.float32)
    block, tiles = executable.execute_numpy([x, y])
    np.testing.assert_array_equal(block, np.block([[x, y], [-x, y]]))
    np.testing.assert_array_equal(tiles, np.block([[x, x], [x, x]]))


# jnp.meshgrid stacked: columns of two inputs broadcast into the halves of the result, each
# computed with the column's unit dimension (a loop nest over [1, n, 1, m]) and reshaped
MESHGRID = """func.func @main(%x: tensor<200x8xf32>, %y: tensor<150x8xf32>) -> tensor<2x200x150xf32> {
  %a = stablehlo.slice %x [0:200, 0:1] : (tensor<200x8xf32>) -> tensor<200x1xf32>
  %ar = stablehlo.reshape %a : (tensor<200x1xf32>) -> tensor<200xf32>
  %b = stablehlo.slice %y [0:150, 0:1] : (tensor<150x8xf32>) -> tensor<150x1xf32>
  %br = stablehlo.reshape %b : (tensor<150x1xf32>) -> tensor<150xf32>
  %0 = stablehlo.broadcast_in_dim %ar, dims = [1] : (tensor<200xf32>) -> tensor<1x200x150xf32>
  %1 = stablehlo.broadcast_in_dim %br, dims = [2] : (tensor<150xf32>) -> tensor<1x200x150xf32>
  %2 = stablehlo.concatenate %0, %1, dim = 0 : (tensor<1x200x150xf32>, tensor<1x200x150xf32>) -> tensor<2x200x150xf32>
  return %2 : tensor<2x200x150xf32>
}"""


def test_a_part_computed_with_unit_dimensions_is_written_into_its_slice():
    """Each half's loop nest ran over [1, 200, 1, 150] into scratch, reshaped, then copied
    into its slice of the result (the reshape hid the slice from empty-tensor elimination):
    the unit dimensions are folded out of the loop nests first, and each writes its slice
    directly (a 2 x 2000 x 1500 meshgrid 7.8 -> 4.6 ms). No scratch; numpy's bits."""
    executable = Client().compile(MESHGRID)
    assert "scratch" not in executable.thunk_sequence(), executable.thunk_sequence()
    rng = np.random.default_rng(14)
    x, y = rng.standard_normal((200, 8), dtype=np.float32), rng.standard_normal((150, 8), dtype=np.float32)
    np.testing.assert_array_equal(executable.execute_numpy([x, y])[0], np.stack(np.meshgrid(x[:, 0], y[:, 0], indexing="ij")))


PLAIN_TRANSPOSES = """func.func @main(%a: tensor<4x64x32xf32>, %b: tensor<4x64x32xf32>) -> tensor<4x32x128xf32> {
  %ta = stablehlo.transpose %a, dims = [0, 2, 1] : (tensor<4x64x32xf32>) -> tensor<4x32x64xf32>
  %tb = stablehlo.transpose %b, dims = [0, 2, 1] : (tensor<4x64x32xf32>) -> tensor<4x32x64xf32>
  %nb = stablehlo.negate %tb : tensor<4x32x64xf32>
  %cat = stablehlo.concatenate %ta, %nb, dim = 2 : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x128xf32>
  return %cat : tensor<4x32x128xf32>
}"""


PLAIN_TRANSPOSES_RESHAPED = PLAIN_TRANSPOSES.replace("-> tensor<4x32x128xf32> {", "-> (tensor<4x1x32x128xf32>, tensor<4x32x128xf32>) {").replace(
    "  return %cat : tensor<4x32x128xf32>",
    "  %r = stablehlo.reshape %cat : (tensor<4x32x128xf32>) -> tensor<4x1x32x128xf32>\n"
    "  %e = stablehlo.exponential %cat : tensor<4x32x128xf32>\n"
    "  return %r, %e : tensor<4x1x32x128xf32>, tensor<4x32x128xf32>")


@pytest.mark.parametrize("text", [PLAIN_TRANSPOSES, PLAIN_TRANSPOSES_RESHAPED], ids=["result", "reshaped-result"])
def test_a_concatenate_only_written_out_is_inserted_into_the_result_itself(text):
    """Slices inserted into the kernel argument (or the reshaped view of it the result is
    written through, the concatenate read by another kernel too), not into an empty tensor:
    empty-tensor elimination anchored the first operand on the empty tensor, and bufferization
    allocated the whole result as scratch for it and copied the slice over (through a
    reshape: a gated activation's gradient). The kernel writing the (first) result takes no
    scratch; numpy's bits."""
    executable = Client().compile(text)
    sequence = executable.thunk_sequence()
    first_result = re.search(r"outputs: \S+ at (#\d+)\[", sequence).group(1)
    [writing] = [line for line in sequence.splitlines() if f"-> {first_result}[" in line]
    assert "scratch" not in writing, sequence
    rng = np.random.default_rng(13)
    a, b = (rng.standard_normal((4, 64, 32), dtype=np.float32) for _ in range(2))
    want = np.concatenate([a.transpose(0, 2, 1), -b.transpose(0, 2, 1)], axis=2)
    np.testing.assert_array_equal(executable.execute_numpy([a, b])[0].reshape(want.shape), want)


GATED_GRADIENT_TRANSPOSED = """func.func @main(%a: tensor<4x64x32xf32>, %b: tensor<4x64x32xf32>) -> (tensor<1x64x4x64xf32>, tensor<4x64x64xf32>) {
  %p = stablehlo.multiply %a, %b : tensor<4x64x32xf32>
  %s = stablehlo.add %a, %b : tensor<4x64x32xf32>
  %cat = stablehlo.concatenate %p, %s, dim = 2 : (tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x64xf32>
  %r = stablehlo.reshape %cat : (tensor<4x64x64xf32>) -> tensor<4x1x64x64xf32>
  %t = stablehlo.transpose %r, dims = [1, 2, 0, 3] : (tensor<4x1x64x64xf32>) -> tensor<1x64x4x64xf32>
  %n = stablehlo.negate %cat : tensor<4x64x64xf32>
  return %t, %n : tensor<1x64x4x64xf32>, tensor<4x64x64xf32>
}"""


def test_a_transposed_concatenate_is_its_parts_transposed(tmp_path):
    """A concatenate reshaped and transposed into a result (the halves of a gated activation's
    gradient, for the weight gradient) and read by another op too: fusion copies it into each
    kernel, and in the transposing one the reshape and transpose move to its parts
    (`materialization.concatenates_moved_below`), each written into its slice of the result,
    where the concatenate went through scratch. That kernel takes no scratch; numpy's bits."""
    executable = Client().compile(GATED_GRADIENT_TRANSPOSED, CompileOptions(dump_to=str(tmp_path)))
    sequence = executable.thunk_sequence()
    transposed_at = re.search(r"f32\[1,64,4,64\] at (#\d+)", sequence).group(1)
    [transposing] = [line for line in sequence.splitlines() if f"-> {transposed_at}[" in line]
    assert "scratch" not in transposing, sequence
    symbol = transposing.split()[1].replace(".", "_")
    [kernel] = [path.read_text() for path in tmp_path.glob(f"*.{symbol}.stablehlo.mlir")]
    assert kernel.count("stablehlo.transpose") == 2, kernel
    rng = np.random.default_rng(17)
    a, b = (rng.standard_normal((4, 64, 32), dtype=np.float32) for _ in range(2))
    cat = np.concatenate([a * b, a + b], axis=2)
    transposed, negated = executable.execute_numpy([a, b])
    np.testing.assert_array_equal(transposed, cat[:, None].transpose(1, 2, 0, 3))
    np.testing.assert_array_equal(negated, -cat)


MERGED_HEADS = """func.func @main(%q: tensor<2x{hq}x16x{d}xf32>, %k: tensor<2x{hk}x16x{d}xf32>, %v: tensor<2x{hk}x16x{dv}xf32>) -> tensor<2x16x{width}xf32> {{
  %tq = stablehlo.transpose %q, dims = [0, 2, 1, 3] : (tensor<2x{hq}x16x{d}xf32>) -> tensor<2x16x{hq}x{d}xf32>
  %rq = stablehlo.reshape %tq : (tensor<2x16x{hq}x{d}xf32>) -> tensor<2x16x{wq}xf32>
  %tk = stablehlo.transpose %k, dims = [0, 2, 1, 3] : (tensor<2x{hk}x16x{d}xf32>) -> tensor<2x16x{hk}x{d}xf32>
  %rk = stablehlo.reshape %tk : (tensor<2x16x{hk}x{d}xf32>) -> tensor<2x16x{wk}xf32>
  %tv = stablehlo.transpose %v, dims = [0, 2, 1, 3] : (tensor<2x{hk}x16x{dv}xf32>) -> tensor<2x16x{hk}x{dv}xf32>
  %rv = stablehlo.reshape %tv : (tensor<2x16x{hk}x{dv}xf32>) -> tensor<2x16x{wv}xf32>
  %cat = stablehlo.concatenate %rq, %rk, %rv, dim = 2 : (tensor<2x16x{wq}xf32>, tensor<2x16x{wk}xf32>, tensor<2x16x{wv}xf32>) -> tensor<2x16x{width}xf32>
  return %cat : tensor<2x16x{width}xf32>
}}"""


@pytest.mark.parametrize("hq, hk, d, dv, direct", [(8, 8, 32, 32, True), (8, 2, 16, 16, True), (4, 4, 8, 12, False)],
                         ids=["heads", "grouped-heads", "unequal-depths"])
def test_merged_heads_concatenated_into_the_result_need_no_scratch(hq, hk, d, dv, direct):
    """A concatenate only written out goes straight into the kernel argument: head transposes
    reshaped to [b, s, heads * depth] with one depth for all are concatenated before the
    reshapes into the argument seen as [b, s, heads, depth], each written there directly, no
    kernel scratch (through the reshapes, each was materialized and copied). Of unequal
    depths they are inserted as they are (the transposes through scratch). numpy's bits."""
    wq, wk, wv = hq * d, hk * d, hk * dv
    text = MERGED_HEADS.format(hq=hq, hk=hk, d=d, dv=dv, wq=wq, wk=wk, wv=wv, width=wq + wk + wv)
    executable = Client().compile(text)
    assert ("scratch" not in executable.thunk_sequence()) == direct, executable.thunk_sequence()
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32) for shape in ((2, hq, 16, d), (2, hk, 16, d), (2, hk, 16, dv)))
    merged = lambda x: x.transpose(0, 2, 1, 3).reshape(2, 16, -1)
    np.testing.assert_array_equal(executable.execute_numpy([q, k, v])[0], np.concatenate([merged(q), merged(k), merged(v)], axis=2))


@pytest.mark.parametrize("shape, dtype", [((2048, 512), "f32"), ((512, 1024), "f64"), ((1024, 256), "i8"), ((256, 512), "bf16"),
                                          ((1000, 1030), "f32"), ((136, 72), "f32"), ((97, 250), "i8")])
def test_transposes_tiled_a_cache_line_wide_match_numpy(shape, dtype):
    """The vector tile spans 64 elements along the transposed operand's rows and one cache
    line of the result (16 f32, 8 f64, 32 bf16, 64 i8 elements) at power-of-two shapes,
    smaller tiles where those do not divide what the vector blocks cover (136 = 8 x 17 rows,
    72 columns), and remaining strips (1030, 97, 250): numpy's bits."""
    x = np.random.default_rng(12).standard_normal(shape) * 50
    x = x.astype(TRANSPOSE_DTYPES[dtype])
    got = compile_transpose(shape, (1, 0), dtype).execute_numpy([x])[0]
    np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(x.T).view(np.uint8))


TRANSPOSING_GENERIC = """#in = affine_map<(d0, d1) -> (d1, d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
func.func @k(%x: memref<{columns}x{rows}x{dtype}>, %y: memref<{rows}x{columns}x{dtype}>) {{
  linalg.generic {{indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel"]}} ins(%x : memref<{columns}x{rows}x{dtype}>) outs(%y : memref<{rows}x{columns}x{dtype}>) {{
  ^bb0(%a: {dtype}, %b: {dtype}):
    linalg.yield %a : {dtype}
  }}
  return
}}"""


@pytest.mark.parametrize("rows, columns, dtype, sizes", [(2048, 2048, "f32", [64, 16]), (512, 512, "f64", [64, 8]),
                                                         (256, 256, "i8", [64, 64]), (136, 72, "f32", [8, 8]),
                                                         (1000, 1030, "f32", [8, 16])])
def test_transpose_vector_tiles_span_a_result_cache_line(rows, columns, dtype, sizes):
    """The vector tile of a transpose: 64 rows of the transposed operand by one 64-byte line
    of the result, or the largest smaller tile dividing the vector blocks' extent (1000 =
    8 x 125; 1030 keeps 1024 for the blocks)."""
    from mlirxla.backends.cpu import tiling
    with new_context():
        module = ir.Module.parse(TRANSPOSING_GENERIC.format(rows=rows, columns=columns, dtype=dtype))
        generic = next(op for op in module.body.operations[0].regions[0].blocks[0].operations if op.name == "linalg.generic")
        blocking = tiling.blocking(generic)
    assert blocking.vectorized and blocking.sizes == sizes


MAX_POOL = """func.func @main(%x: tensor<2x8x8x16xf32>) -> tensor<2x4x4x16xf32> {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%x, %init) <{window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x8x8x16xf32>, tensor<f32>) -> tensor<2x4x4x16xf32>
  return %0 : tensor<2x4x4x16xf32>
}"""
DONATED_EXP = """func.func @main(%x: tensor<64x64xf32> {tf.aliasing_output = 0 : i32}) -> tensor<64x64xf32> {
  %0 = stablehlo.exponential %x : tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}"""


def kernel_signatures(monkeypatch, text: str, options: CompileOptions = CompileOptions()):
    """The executable compiled from `text` and each kernel's LLVM `define` line."""
    signatures = {}
    compile_native = llvm_jit.compile_native

    def recording(name, ir_text, *arguments):
        signatures[name] = next(line for line in ir_text.splitlines() if line.startswith("define"))
        return compile_native(name, ir_text, *arguments)

    monkeypatch.setattr(llvm_jit, "compile_native", recording)
    return Client().compile(text, options), signatures


def test_a_result_no_argument_overlaps_is_noalias(monkeypatch):
    """A max pool's result, an output of its own, is a noalias argument of its kernel (no
    run-time overlap check, no scalar copy of the loops); numpy's pooling agrees."""
    executable, signatures = kernel_signatures(monkeypatch, MAX_POOL)
    [signature] = [line for name, line in signatures.items() if not name.startswith("driver")]
    assert "(ptr %0, ptr %1, ptr noalias %2" in signature, signature
    x = np.random.default_rng(2).standard_normal((2, 8, 8, 16)).astype(np.float32)
    [got] = executable.execute_numpy([x])
    np.testing.assert_array_equal(got, x.reshape(2, 4, 2, 4, 2, 16).max(axis=(2, 4)))


def test_a_result_in_a_parameters_memory_is_not_noalias(monkeypatch):
    """A result written into a donated parameter's memory may be what the caller passed as
    another argument too: its kernel argument keeps no noalias."""
    executable, signatures = kernel_signatures(monkeypatch, DONATED_EXP)
    [signature] = [line for name, line in signatures.items() if not name.startswith("driver")]
    assert "noalias" not in signature, signature
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    [got] = executable.execute_numpy([x])
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-6)


def test_an_epilogue_over_its_gemms_output_writes_a_noalias_result(monkeypatch):
    """An epilogue reads the GEMM's output through its result's argument (its own argument for
    that output goes unused), so nothing else overlaps the result: noalias."""
    _, signatures = kernel_signatures(monkeypatch, BF16_LAYERS)
    epilogue = next(line for name, line in signatures.items() if name.endswith("_epilogue"))
    assert epilogue.count("noalias") == 1 and epilogue.split(", ")[-1].startswith("ptr noalias"), epilogue


BF16_BF16_F32 = """algorithm = <lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32,
                      lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1,
                      allow_imprecise_accumulation = false>"""
BF16_ALGORITHM_DOT = """func.func @main(%a: tensor<1x8x2x1x16xf32>, %b: tensor<1x8x2x16xf32>) -> tensor<1x2x8x1x8xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], """ + BF16_BF16_F32 + """
       : (tensor<1x8x2x1x16xf32>, tensor<1x8x2x16xf32>) -> tensor<1x2x8x1x8xf32>
  return %0 : tensor<1x2x8x1x8xf32>
}"""


def test_a_dot_with_a_bf16_algorithm_is_a_native_kernel_on_rounded_operands():
    """A dot_general of f32 values with the BF16_BF16_F32 algorithm, in the layout jax's bf16
    attention gives it (batch dimensions inside, so no GEMM), is a kernel, not the reference
    interpreter's dot (`dot_algorithms.py`): it computes the f32 dot of the operands rounded
    to bf16, or, with excess precision allowed (the default), of the operands as they are."""
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((1, 8, 2, 1, 16)).astype(np.float32), rng.standard_normal((1, 8, 2, 16)).astype(np.float32)
    for excess_precision, operands in ((False, [x.astype(ml_dtypes.bfloat16).astype(np.float32) for x in (a, b)]), (True, [a, b])):
        executable = Client().compile(BF16_ALGORITHM_DOT, CompileOptions(allow_excess_precision=excess_precision))
        assert "kernel dot" in executable.thunk_sequence() and "interpreter" not in executable.thunk_sequence()
        expected = np.einsum("zihkd,zjhd->zhikj", *operands)
        np.testing.assert_allclose(executable.execute_numpy([a, b])[0], expected, rtol=1e-5, atol=1e-5)


BF16_ALGORITHM_GEMM = """func.func @main(%a: tensor<8x16xf32>, %b: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], """ + BF16_BF16_F32 + """
       : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}"""


def test_a_gemm_shaped_dot_with_a_bf16_algorithm_rounds_its_operands_without_excess_precision():
    """A BLAS GEMM would multiply the f32 operands as they are (0.04 off the rounded
    operands' dot): without excess precision the dot is the kernel that rounds them; with
    it, the GEMM."""
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
    rounded = [x.astype(ml_dtypes.bfloat16).astype(np.float32) for x in (a, b)]
    for excess_precision, operands, path in ((False, rounded, "kernel dot"), (True, [a, b], "gemm dot")):
        executable = Client().compile(BF16_ALGORITHM_GEMM, CompileOptions(allow_excess_precision=excess_precision))
        assert path in executable.thunk_sequence()
        np.testing.assert_allclose(executable.execute_numpy([a, b])[0], operands[0] @ operands[1], rtol=1e-5, atol=1e-5)


SPLATS = """func.func @main(%x: tensor<64x1024xf32>) -> (tensor<256x1024xi8>, tensor<128x1024xf32>) {
  %one = stablehlo.constant dense<1> : tensor<i8>
  %ones = stablehlo.broadcast_in_dim %one, dims = [] : (tensor<i8>) -> tensor<256x1024xi8>
  %half = stablehlo.constant dense<2.5> : tensor<64x1024xf32>
  %joined = stablehlo.concatenate %x, %half, dim = 0 : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<128x1024xf32>
  return %ones, %joined : tensor<256x1024xi8>, tensor<128x1024xf32>
}"""


def test_splat_constants_are_filled_not_spelled_out(tmp_path):
    """A splat constant written to an output or into part of one (`jnp.ones`, a constant
    concatenated) is its value stored by a loop: no kernel holds a global of its elements (a
    2.2 GB `jnp.ones` made gigabytes of LLVM IR and exhausted memory before it compiled)."""
    executable = Client().compile(SPLATS, CompileOptions(dump_to=str(tmp_path)))
    unoptimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-no-opt.ll"))
    assert "define" in unoptimized and " constant [" not in unoptimized and len(unoptimized) < 100_000
    x = np.random.default_rng(5).standard_normal((64, 1024)).astype(np.float32)
    ones, joined = executable.execute_numpy([x])
    np.testing.assert_array_equal(ones, np.ones((256, 1024), np.int8))
    np.testing.assert_array_equal(joined, np.concatenate([x, np.full((64, 1024), 2.5, np.float32)]))


# threefry over a key's two words, one key per element (jax's vmapped keys): the words of
# (n, 2) arrays, mixed with a value per element broadcast from (n, 1), rotated in rounds
def key_pairs(words: int, rounds: int = 20) -> str:
    shape = f"tensor<4096x{words}xui32>"
    lines = [f"%b = stablehlo.broadcast_in_dim %k, dims = [0, 1] : (tensor<4096x1xui32>) -> {shape}",
             f"%v0 = stablehlo.add %x, %b : {shape}"]
    for n in range(rounds):
        left, right = 13 + n % 7, 19 - n % 7
        lines += [f"%cl{n} = stablehlo.constant dense<{left}> : {shape}",
                  f"%cr{n} = stablehlo.constant dense<{right}> : {shape}",
                  f"%l{n} = stablehlo.shift_left %v{n}, %cl{n} : {shape}",
                  f"%r{n} = stablehlo.shift_right_logical %v{n}, %cr{n} : {shape}",
                  f"%o{n} = stablehlo.or %l{n}, %r{n} : {shape}",
                  f"%a{n} = stablehlo.add %o{n}, %b : {shape}",
                  f"%v{n + 1} = stablehlo.xor %a{n}, %v{n} : {shape}"]
    body = "\n  ".join(lines)
    return (f"func.func @main(%x: {shape}, %k: tensor<4096x1xui32>) -> {shape} {{\n  {body}\n"
            f"  return %v{rounds} : {shape}\n}}\n")


@pytest.mark.parametrize("words", [2, 4])
def test_a_loop_around_a_short_innermost_one_is_vectorized(tmp_path, words):
    """The loop over a key's words is unrolled, and the vectorizer widens the loop over the
    keys (interleaved loads and stores): LLVM left a 2-iteration loop of 20 rounds as it was,
    and the kernel ran scalar (jax.random.gamma's threefry, 4x to 7x slower). The results are
    the interpreter's."""
    text = key_pairs(words)
    arguments = random_arguments(frontdoor.import_text(text, "test", new_context()).module, np.random.default_rng(2))
    [got] = Client().compile(text, CompileOptions(dump_to=str(tmp_path))).execute_numpy(arguments)
    [expected] = reference_outputs(frontdoor.import_text(text, "test", new_context()).module, arguments)
    np.testing.assert_array_equal(got, expected)
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert re.search(r"<(8|16) x i32>", optimized)


MULTIPLY_ADD = """func.func @main(%a: tensor<1024x{t}>, %b: tensor<1024x{t}>, %c: tensor<1024x{t}>) -> tensor<1024x{t}> {{
  %product = stablehlo.multiply %a, %b : tensor<1024x{t}>
  %sum = stablehlo.add %product, %c : tensor<1024x{t}>
  return %sum : tensor<1024x{t}>
}}"""


@pytest.mark.skipif("+fma" not in llvm.get_host_cpu_features().flatten().split(","), reason="the host has no fused multiply-add")
@pytest.mark.parametrize("element, dtype, step, rounded_once", [
    ("f32", np.float32, 2.0 ** -13, 2.0 ** -26),
    ("f64", np.float64, 2.0 ** -30, 2.0 ** -60),
    ("bf16", ml_dtypes.bfloat16, 2.0 ** -5, 0.0),
])
def test_a_product_meeting_a_sum_is_rounded_once(element, dtype, step, rounded_once):
    """(1 + e)(1 + e) - (1 + 2e) is e^2 rounded once (a fused multiply-add, as XLA:CPU
    computes it: LLVM's AllowFPOpFusion there) and 0 when the product is rounded first, as a
    bf16 multiply without excess precision must be (its rounding stays between the two)."""
    a = np.full(1024, 1.0 + step, dtype)
    c = np.full(1024, -(1.0 + 2.0 * step), dtype)
    options = CompileOptions(allow_excess_precision=False)
    [got] = Client().compile(MULTIPLY_ADD.format(t=element), options).execute_numpy([a, a, c])
    np.testing.assert_array_equal(got.astype(np.float64), np.full(1024, rounded_once))


@pytest.mark.skipif(not native_symbols.load_vector_math() or not vector_math.host_isas(), reason="no glibc vector math library for this host")
@pytest.mark.parametrize("op, reference", [("sine", np.sin), ("cosine", np.cos), ("tan", np.tan)])
def test_math_without_an_approximation_calls_the_vector_library(tmp_path, op, reference):
    """sin, cos and tan of f32 are glibc's vector functions in the vectorized loop (a scalar
    libm call per lane before), within 4 ulp of the f64 result rounded, huge arguments
    (reduced exactly, as the scalar functions do), infinities and NaN included."""
    x = np.concatenate([np.linspace(-100.0, 100.0, 4001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-30, 1e6, -3e7, 1e30, 3.4e38, np.inf, -np.inf, np.nan], np.float32)])
    executable = Client().compile(UNARY.format(op=op, n=x.size), CompileOptions(dump_to=str(tmp_path)))
    got = executable.execute_numpy([x])[0]
    assert re.search(r"call <\d+ x float> @_ZGV[bde]N\d+v_", next(tmp_path.glob("*.ir-with-opt.ll")).read_text())
    with np.errstate(invalid="ignore"):
        expected = reference(x.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(x)
    assert ulp_distance(got[finite], expected[finite]).max() <= 4
    assert np.isnan(got[~finite]).all()


F64_UNARY = UNARY.replace("xf32", "xf64")


@pytest.mark.parametrize("op, reference, ulps", [("exponential", np.exp, 2), ("tanh", np.tanh, 3)])
def test_f64_exp_and_tanh_are_vectorized_arithmetic(tmp_path, op, reference, ulps):
    """f64 exp (XLA:CPU's Cephes exp) and tanh (Cephes') are arithmetic in the vectorized loop,
    not LLVM's intrinsics, which code generation turns into a scalar libm call per element (5x
    and 16x slower than XLA:CPU): within 2 and 3 ulp of
    numpy where the result is a normal f64; exp is 0 below -708.3964 and inf above 709.7827,
    tanh keeps -0, and both keep NaN and take infinities to their limits."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-750.0, 750.0, 4000), rng.uniform(-5.0, 5.0, 4000), rng.uniform(-1e-8, 1e-8, 100),
                        np.linspace(-0.7, 0.7, 1401), [0.0, -0.0, 0.625, -0.625, 709.78, -708.39, 1e-300]])
    specials = np.array([np.inf, -np.inf, np.nan, -0.0, 709.79, -708.4])
    executable = Client().compile(F64_UNARY.format(op=op, n=x.size + specials.size), CompileOptions(dump_to=str(tmp_path)))
    got = executable.execute_numpy([np.concatenate([x, specials])])[0]
    optimized = next(tmp_path.glob("*.ir-with-opt.ll")).read_text()
    assert re.search(r"<\d+ x double>", optimized) and not re.search(r"@(llvm\.)?(exp|tanh)\b", optimized)
    with np.errstate(over="ignore"):
        expected = reference(x)
    normal = np.isfinite(expected) & (np.abs(expected) >= np.finfo(np.float64).tiny)
    assert (np.abs(got[:x.size][normal] - expected[normal]) / np.spacing(np.abs(expected[normal]))).max() <= ulps
    limits = {"exponential": [np.inf, 0.0, np.nan, 1.0, np.inf, 0.0], "tanh": [1.0, -1.0, np.nan, -0.0, 1.0, -1.0]}[op]
    np.testing.assert_array_equal(got[x.size:], limits)
    assert np.signbit(got[x.size + 3]) == (op == "tanh")


def test_f64_arithmetic_counts_twice_in_the_thread_split():
    """A vector holds half as many f64 lanes as f32 ones: the same ops on f64 are twice the
    work (an f64 tanh of 2^19 elements took 1.48 ms on one thread, 10x its estimate, and was
    left whole)."""
    text = """func.func @main(%x: tensor<1024xf64>, %y: tensor<1024xf32>) -> (tensor<1024xf64>, tensor<1024xf32>) {
  %0 = stablehlo.tanh %x : tensor<1024xf64>
  %1 = stablehlo.tanh %y : tensor<1024xf32>
  return %0, %1 : tensor<1024xf64>, tensor<1024xf32>
}"""
    module = frontdoor.import_text(text, "lanes.mlir", new_context()).module
    wide, narrow = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations][:2]
    assert thread_split.lane_work(wide, kernel_cost(wide)) == 2 * thread_split.lane_work(narrow, kernel_cost(narrow)) > 0


def test_float_divides_and_remainders_count_their_time_in_the_thread_split():
    """A vector divide issues every 5 cycles or so where a multiply issues twice a cycle: a
    float divide counts `DIVIDE_S` an element (a softmax's 2M divides by column sums took 1.0
    ms on one core, estimated as 2M flops at 0.03 ms), a float remainder `REMAINDER_S` (a
    libm call per lane: jnp.floor_divide of 100000 floats 1.45 ms whole, 0.73 split), an
    integer divide or remainder a flop."""
    text = """func.func @main(%x: tensor<1024xf32>, %i: tensor<1024xi32>) -> (tensor<1024xf32>, tensor<1024xf32>, tensor<1024xi32>, tensor<1024xf32>, tensor<1024xi32>) {
  %0 = stablehlo.divide %x, %x : tensor<1024xf32>
  %1 = stablehlo.multiply %x, %x : tensor<1024xf32>
  %2 = stablehlo.divide %i, %i : tensor<1024xi32>
  %3 = stablehlo.remainder %x, %x : tensor<1024xf32>
  %4 = stablehlo.remainder %i, %i : tensor<1024xi32>
  return %0, %1, %2, %3, %4 : tensor<1024xf32>, tensor<1024xf32>, tensor<1024xi32>, tensor<1024xf32>, tensor<1024xi32>
}"""
    module = frontdoor.import_text(text, "divides.mlir", new_context()).module
    divide, multiply, integer, remainder, integer_remainder = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations][:5]
    flops_per_s = thread_split.core_flops_per_s()
    assert thread_split.lane_work(divide, kernel_cost(divide)) == pytest.approx(1024 * (1 + thread_split.DIVIDE_S * flops_per_s))
    assert thread_split.lane_work(remainder, kernel_cost(remainder)) == pytest.approx(
        kernel_cost(remainder).flops + 1024 * thread_split.REMAINDER_S * flops_per_s)
    assert thread_split.lane_work(multiply, kernel_cost(multiply)) == thread_split.lane_work(integer, kernel_cost(integer)) == 1024
    assert thread_split.lane_work(integer_remainder, kernel_cost(integer_remainder)) == kernel_cost(integer_remainder).flops


def test_boolean_operands_and_results_are_vector_accesses(tmp_path):
    """A kernel reading and writing `pred` buffers loads and stores them as bytes, which the
    vectorizer widens (an i1 access was one scalar load or store per lane, and the mask built
    lane by lane). The results are the interpreter's."""
    text = """func.func @main(%a: tensor<4096xi1>, %b: tensor<4096xi1>, %x: tensor<4096xf32>) -> (tensor<4096xi1>, tensor<4096xf32>) {
  %both = stablehlo.and %a, %b : tensor<4096xi1>
  %zero = stablehlo.constant dense<0.0> : tensor<4096xf32>
  %positive = stablehlo.compare GT, %x, %zero : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xi1>
  %either = stablehlo.or %both, %positive : tensor<4096xi1>
  %kept = stablehlo.select %a, %x, %zero : tensor<4096xi1>, tensor<4096xf32>
  return %either, %kept : tensor<4096xi1>, tensor<4096xf32>
}"""
    arguments = random_arguments(frontdoor.import_text(text, "test", new_context()).module, np.random.default_rng(3))
    got = Client().compile(text, CompileOptions(dump_to=str(tmp_path))).execute_numpy(arguments)
    for actual, expected in zip(got, reference_outputs(frontdoor.import_text(text, "test", new_context()).module, arguments)):
        np.testing.assert_array_equal(actual, expected)
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert not re.search(r"load i1,|store i1 ", optimized)
    assert re.search(r"load <\d+ x i8>", optimized) and re.search(r"store <\d+ x i8>", optimized)


@pytest.mark.parametrize("lhs, rhs, k, gemm", [("i8", "i8", 512, "f32"), ("i8", "i8", 2048, "f64"), ("ui8", "i8", 256, "f32"),
                                               ("i16", "i8", 2, "f32"), ("i16", "i8", 64, "f64"), ("i16", "i16", 4, None)])
def test_a_narrow_integer_dot_is_an_exact_float_gemm(lhs, rhs, k, gemm):
    """An integer dot whose sums a float holds exactly runs as that float's GEMM, one whose
    sums may pass 2^31 (and wrap) stays an integer dot: the results equal numpy's integer
    dot, the extremes included (the first batch all the most negative value: the largest
    sums the bound allows)."""
    dtypes = {"i8": np.int8, "ui8": np.uint8, "i16": np.int16}
    text = f"""func.func @main(%a: tensor<3x16x{k}x{lhs}>, %b: tensor<3x{k}x8x{rhs}>) -> tensor<3x16x8xi32> {{
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<3x16x{k}x{lhs}>, tensor<3x{k}x8x{rhs}>) -> tensor<3x16x8xi32>
  return %0 : tensor<3x16x8xi32>
}}"""
    rng = np.random.default_rng(4)

    def operand(name, shape):
        info = np.iinfo(dtypes[name])
        values = rng.integers(info.min, info.max + 1, shape).astype(dtypes[name])
        values[0] = info.min if info.min < 0 else info.max
        return values

    a, b = operand(lhs, (3, 16, k)), operand(rhs, (3, k, 8))
    executable = Client().compile(text)
    [got] = executable.execute_numpy([a, b])
    np.testing.assert_array_equal(got, np.einsum("bik,bkj->bij", a.astype(np.int64), b.astype(np.int64)).astype(np.int32))
    assert (f"gemm dot {gemm} " if gemm else "kernel dot") in executable.thunk_sequence()


def test_a_boolean_byte_other_than_one_is_true_and_converts_to_itself():
    """A `pred` byte of 96 or 255 (a bool array viewed from other bytes, as jax's tests make
    them) is true in logic, as numpy and XLA take it, and its conversion to an 8-bit
    integer (jax's `view` of bools) is the byte itself."""
    text = """func.func @main(%p: tensor<64xi1>) -> (tensor<64xi1>, tensor<64xui8>, tensor<64xi32>) {
  %not = stablehlo.not %p : tensor<64xi1>
  %bytes = stablehlo.convert %p : (tensor<64xi1>) -> tensor<64xui8>
  %wide = stablehlo.convert %p : (tensor<64xi1>) -> tensor<64xi32>
  return %not, %bytes, %wide : tensor<64xi1>, tensor<64xui8>, tensor<64xi32>
}"""
    raw = np.tile(np.array([96, 0, 1, 255], np.uint8), 16)
    negated, bytes_, wide = Client().compile(text).execute_numpy([raw.view(np.bool_)])
    np.testing.assert_array_equal(negated, raw == 0)
    np.testing.assert_array_equal(bytes_, raw)
    np.testing.assert_array_equal(wide, (raw != 0).astype(np.int32))


ARGMAX_ROWS = """func.func @main(%x: tensor<{rows}x{k}xf32>) -> (tensor<{rows}xf32>, tensor<{rows}xi32>) {{
  %position = stablehlo.iota dim = 1 : tensor<{rows}x{k}xi32>
  %lowest = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%x init: %lowest), (%position init: %zero) across dimensions = [1] : (tensor<{rows}x{k}xf32>, tensor<{rows}x{k}xi32>, tensor<f32>, tensor<i32>) -> (tensor<{rows}xf32>, tensor<{rows}xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%i: tensor<i32>, %j: tensor<i32>) {{
    %greater = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %nan = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %keep = stablehlo.or %greater, %nan : tensor<i1>
    %equal = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %earlier = stablehlo.compare LT, %i, %j, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %equal, %earlier : tensor<i1>
    %keep_position = stablehlo.or %keep, %tie : tensor<i1>
    %value = stablehlo.select %keep, %a, %b : tensor<i1>, tensor<f32>
    %index = stablehlo.select %keep_position, %i, %j : tensor<i1>, tensor<i32>
    stablehlo.return %value, %index : tensor<f32>, tensor<i32>
  }}
  return %0#0, %0#1 : tensor<{rows}xf32>, tensor<{rows}xi32>
}}"""


@pytest.mark.parametrize("k, in_lanes", [(4096, True), (4000, True), (50257, True), (4001, False), (96, False)])
def test_an_argmax_row_is_reduced_in_lanes_then_across_them(tmp_path, k, in_lanes):
    """jax's argmax (a reduce of values and positions, the larger value kept, on a tie the
    earlier position, a NaN above all) along rows at least 128 long with a divisor between 16
    and 64 (32 for 4096 and 4000, 29 for GPT-2's vocabulary of 50257; 4001 is prime): in
    lanes first, which the vectorizer widens, then across the lanes. Many ties, NaNs and rows
    of -inf: the first position of the maximum, numpy's answer, whatever the lanes."""
    rows = 16
    executable = Client().compile(ARGMAX_ROWS.format(rows=rows, k=k), CompileOptions(dump_to=str(tmp_path)))
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert bool(re.search(r"select <\d+ x i1> .*, <\d+ x i32>", optimized)) == in_lanes
    x = np.random.default_rng(7).integers(-3, 4, (rows, k)).astype(np.float32)
    x[1, k // 3] = x[1, k - 1] = np.nan
    x[2] = -np.inf
    x[3, -1] = 9.0
    x[4, 0] = 9.0
    value, position = executable.execute_numpy([x])
    np.testing.assert_array_equal(position, np.argmax(x, axis=1).astype(np.int32))
    np.testing.assert_array_equal(value, np.max(x, axis=1))


def test_an_argmax_over_large_rows_runs_in_row_blocks(monkeypatch):
    """A reduce of several inputs keeping dimension 0 (an argmax of 8 MiB of rows) runs in
    row blocks over the threads, as a reduce of one input does."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    executable = Client().compile(ARGMAX_ROWS.format(rows=256, k=8192))
    assert [line.split(" [")[0].rsplit(" ", 1)[0] for line in sliced_kernels(executable.thunk_sequence())] == ["sliced kernel x2"]
    x = np.random.default_rng(8).standard_normal((256, 8192)).astype(np.float32)
    value, position = executable.execute_numpy([x])
    np.testing.assert_array_equal(position, np.argmax(x, axis=1).astype(np.int32))
    np.testing.assert_array_equal(value, np.max(x, axis=1))


# jax's `image[y, x]` at points given as the columns of one array (`map_coordinates`' shape):
# the columns sliced out, floored, joined into index vectors and gathered from a 4 MiB image
GATHERED_POINTS = """func.func @main(%image: tensor<1024x1024xf32>, %points: tensor<65536x2xf32>) -> tensor<65536xf32> {
  %y = stablehlo.slice %points [0:65536, 0:1] : (tensor<65536x2xf32>) -> tensor<65536x1xf32>
  %x = stablehlo.slice %points [0:65536, 1:2] : (tensor<65536x2xf32>) -> tensor<65536x1xf32>
  %yf = stablehlo.floor %y : tensor<65536x1xf32>
  %xf = stablehlo.floor %x : tensor<65536x1xf32>
  %yi = stablehlo.convert %yf : (tensor<65536x1xf32>) -> tensor<65536x1xi32>
  %xi = stablehlo.convert %xf : (tensor<65536x1xf32>) -> tensor<65536x1xi32>
  %at = stablehlo.concatenate %yi, %xi, dim = 1 : (tensor<65536x1xi32>, tensor<65536x1xi32>) -> tensor<65536x2xi32>
  %0 = "stablehlo.gather"(%image, %at) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, slice_sizes = array<i64: 1, 1>}> : (tensor<1024x1024xf32>, tensor<65536x2xi32>) -> tensor<65536xf32>
  return %0 : tensor<65536xf32>
}"""


def test_gathered_points_split_over_the_threads(monkeypatch):
    """Each point's row holds its own slices, concatenate and gather (the image read whole), and
    its random reads from a large image count as work (`thread_split.GATHERED_ROW_S`): the
    kernel runs in row blocks over two threads, numpy's values."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    executable = Client().compile(GATHERED_POINTS)
    assert "sliced kernel x2" in executable.thunk_sequence(), executable.thunk_sequence()
    rng = np.random.default_rng(12)
    image = rng.standard_normal((1024, 1024)).astype(np.float32)
    points = rng.uniform(0, 1023.99, (65536, 2)).astype(np.float32)
    (values,) = executable.execute_numpy([image, points])
    np.testing.assert_array_equal(values, image[np.floor(points[:, 0]).astype(int), np.floor(points[:, 1]).astype(int)])


# `jnp.take_along_axis(x, i, axis=1)`'s gather: row b of the result from row b of x
TAKEN_ALONG_ROWS = """func.func @main(%x: tensor<1024x512xf32>, %i: tensor<1024x64x1xi32>) -> tensor<1024x64xf32> {
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0],
       start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, slice_sizes = array<i64: 1, 1>}> : (tensor<1024x512xf32>, tensor<1024x64x1xi32>) -> tensor<1024x64xf32>
  return %0 : tensor<1024x64xf32>
}"""


def test_a_gather_batched_along_rows_splits_them_over_the_threads(monkeypatch):
    """Dimension 0 of the operand and of the indices a batching pair: each row block of the
    result reads its own block of both, so the kernel runs in row blocks over two threads
    (0.42 -> 0.27 ms for take_along_axis of 4096 x 512), numpy's values."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    executable = Client().compile(TAKEN_ALONG_ROWS)
    assert "sliced kernel x2" in executable.thunk_sequence(), executable.thunk_sequence()
    rng = np.random.default_rng(13)
    x = rng.standard_normal((1024, 512)).astype(np.float32)
    at = rng.integers(0, 512, (1024, 64, 1)).astype(np.int32)
    (values,) = executable.execute_numpy([x, at])
    np.testing.assert_array_equal(values, np.take_along_axis(x, at[:, :, 0], axis=1))


# jnp.take_along_axis as jax lowers it: negative positions wrapped, the in-bounds mask computed
# over [n, m, 1] index vectors and reduced over the unit dimension for the select over [n, m]
MASKED_ALONG_ROWS = """func.func @main(%x: tensor<64x32xf32>, %i: tensor<64x8xi32>) -> tensor<64x8xf32> {
  %zero = stablehlo.constant dense<0> : tensor<64x8xi32>
  %width = stablehlo.constant dense<32> : tensor<64x8xi32>
  %negative = stablehlo.compare LT, %i, %zero, SIGNED : (tensor<64x8xi32>, tensor<64x8xi32>) -> tensor<64x8xi1>
  %wrapped = stablehlo.add %i, %width : tensor<64x8xi32>
  %position = stablehlo.select %negative, %wrapped, %i : tensor<64x8xi1>, tensor<64x8xi32>
  %at = stablehlo.reshape %position : (tensor<64x8xi32>) -> tensor<64x8x1xi32>
  %zero3 = stablehlo.constant dense<0> : tensor<64x8x1xi32>
  %last3 = stablehlo.constant dense<31> : tensor<64x8x1xi32>
  %low = stablehlo.compare GE, %at, %zero3, SIGNED : (tensor<64x8x1xi32>, tensor<64x8x1xi32>) -> tensor<64x8x1xi1>
  %high = stablehlo.compare LE, %at, %last3, SIGNED : (tensor<64x8x1xi32>, tensor<64x8x1xi32>) -> tensor<64x8x1xi1>
  %inside3 = stablehlo.and %low, %high : tensor<64x8x1xi1>
  %true = stablehlo.constant dense<true> : tensor<i1>
  %inside = stablehlo.reduce(%inside3 init: %true) applies stablehlo.and across dimensions = [2] : (tensor<64x8x1xi1>, tensor<i1>) -> tensor<64x8xi1>
  %g = "stablehlo.gather"(%x, %at) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0],
       start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, slice_sizes = array<i64: 1, 1>}> : (tensor<64x32xf32>, tensor<64x8x1xi32>) -> tensor<64x8xf32>
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<64x8xf32>
  %r = stablehlo.select %inside, %g, %nan : tensor<64x8xi1>, tensor<64x8xf32>
  return %r : tensor<64x8xf32>
}"""


def test_a_mask_reshaped_between_unit_dimensions_fuses_into_its_select():
    """The mask's loop nest over [64, 8, 1] and the select's over [64, 8] meet once the unit
    dimension is dropped (`lowering.fold_unit_dimensions_around_reshapes`): one kernel with no
    scratch, where the mask had a buffer of its own; positions out of range give NaN."""
    executable = Client().compile(MASKED_ALONG_ROWS)
    assert "scratch" not in executable.thunk_sequence(), executable.thunk_sequence()
    rng = np.random.default_rng(14)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    at = rng.integers(-40, 40, (64, 8)).astype(np.int32)
    (values,) = executable.execute_numpy([x, at])
    position = np.where(at < 0, at + 32, at)
    inside = (position >= 0) & (position <= 31)
    np.testing.assert_array_equal(values, np.where(inside, np.take_along_axis(x, np.clip(position, 0, 31), axis=1), np.nan))


# a kernel whose IR parses but fails verification (a value used where it is not defined)
UNVERIFIABLE = """define void @kernel(ptr %0) {
entry:
  br i1 true, label %a, label %b
a:
  %p = getelementptr i8, ptr %0, i64 4
  br label %c
b:
  store i32 -4, ptr %p
  br label %c
c:
  ret void
}
"""


def test_a_module_llvm_rejects_is_disposed_before_its_context(monkeypatch):
    """The error's frames hold the module and its context; left to the collector, the
    context could go first and the module's disposal then crash the process (a driver with
    such a bug did, after its error was reported)."""
    made = []
    parse = llvm_jit.llvm.parse_assembly
    monkeypatch.setattr(llvm_jit.llvm, "parse_assembly", lambda text, context=None: made.append(parse(text, context)) or made[-1])
    with pytest.raises(MlirxlaError, match="kernel kernel: LLVM rejected its IR: Instruction does not dominate all uses"):
        llvm_jit.compile_native("kernel", UNVERIFIABLE)
    assert made and all(module.closed for module in made)
