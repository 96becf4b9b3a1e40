"""The native CPU backend (`mlirxla.backends.cpu`) and its runtime (`mlirxla.runtime.client`).

Results agree with the StableHLO reference interpreter on the JAX samples, on a conv chain
compiled into one batch-sliced kernel, and on random small programs (hypothesis); bad
arguments and ops the backend cannot compile are one-line `MlirxlaError`s; the compile
cache hits, detects corrupted entries and rewrites them, and concurrent writers leave one
valid entry.

Programs that once crashed or hung the backend run in their own process first
(`PROCESS_KILLERS`): while one still does, the tests running natively in this process error
out instead of taking pytest down.
"""

import multiprocessing
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlirxla import frontdoor
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.runtime.executable import Executable
from mlirxla.runtime.thunks import ControlFlow, KernelThunk, every_thunk
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.pipelines.cpu import cpu_pipeline
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.runtime import compile_cache
from mlirxla.runtime.client import Client, CompileOptions
from mlirxla.transforms.batch_slice_fusion import BatchSliceFusionPass

from .conftest import JAX_PROGRAMS, random_arguments, reference_outputs
from .test_fusion import CONV_CHAIN

EXPONENTIAL = """func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.exponential %x : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""
EXPONENTIAL_ARGUMENT = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)

# Programs that once crashed or hung the process running them. Each runs in its own process
# first: while one still does, the tests that compile and run in this process error out
# instead of taking pytest down.
PROCESS_KILLERS = {
    # An MCJIT engine owns the target machine it is given: one machine shared by every
    # executable was freed with the first one dropped, under every later compile.
    "compile after an executable is dropped": """
        import gc
        from mlirxla.runtime.client import Client, CompileOptions
        for _ in range(3):
            Client().compile(EXPONENTIAL)
            gc.collect()
    """,
    # A kernel copying a strided memref (a slice alone, a pad, a padded convolution) called
    # MLIR's runtime function memrefCopy, which nothing provided to the JIT: a segfault.
    "a slice as a kernel of its own": """
        import numpy as np
        from mlirxla.runtime.client import Client, CompileOptions
        SLICE = '''func.func @main(%x: tensor<4x5xf32>) -> tensor<2x3xf32> {
          %0 = stablehlo.slice %x [1:3, 1:4] : (tensor<4x5xf32>) -> tensor<2x3xf32>
          return %0 : tensor<2x3xf32>
        }'''
        x = np.arange(20, dtype=np.float32).reshape(4, 5)
        np.testing.assert_array_equal(Client().compile(SLICE).execute_numpy([x])[0], x[1:3, 1:4])
    """,
    # LLVM's x86 back end asserts on a masked load of bf16 vectors when the target has
    # avx512bf16 (a transpose's strided reads, vectorized by SLP as one wide masked load): such
    # a kernel is optimized again without SLP (`llvm_jit.BF16_MASKED_ACCESS`).
    "a bf16 transpose": """
        import ml_dtypes
        import numpy as np
        from mlirxla.runtime.client import Client
        TRANSPOSE = ('func.func @main(%x: tensor<3x4x10xbf16>) -> tensor<10x3x4xbf16> {'
                     '  %0 = stablehlo.transpose %x, dims = [2, 0, 1] : (tensor<3x4x10xbf16>) -> tensor<10x3x4xbf16>'
                     '  return %0 : tensor<10x3x4xbf16>'
                     '}')
        x = np.arange(120, dtype=np.float32).reshape(3, 4, 10).astype(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(Client().compile(TRANSPOSE).execute_numpy([x])[0], x.transpose(2, 0, 1))
    """,
    # A dynamic slice without start indices (jax's `lax.dynamic_slice(x, [], [])` on a 0-d
    # array) crashed the toolkit's lowering of its kernel: the simplifier folds it away, and
    # where it is kept (the simplifier disabled) the interpreter runs its kernel.
    "a 0-d dynamic slice": """
        import numpy as np
        from mlirxla.runtime.client import Client, CompileOptions
        SCALAR = '''func.func @main(%x: tensor<i32>, %b: tensor<i32>) -> tensor<i32> {
          %0 = "stablehlo.dynamic_slice"(%x) {slice_sizes = array<i64>} : (tensor<i32>) -> tensor<i32>
          %1 = stablehlo.add %0, %b : tensor<i32>
          return %1 : tensor<i32>
        }'''
        for disabled in ((), ("xhlo-algsimp",)):
            executable = Client().compile(SCALAR, CompileOptions(disable_passes=disabled))
            assert executable.execute_numpy([np.int32(5), np.int32(2)])[0] == 7
    """,
    # A while thunk declared only its operands' and results' slices, not those its condition
    # and body use inside: the thunk graph ran a later copy into those bytes concurrently
    # with the loop, which corrupted its counter and never ended.
    "while loops on the thread pool": f"""
        import numpy as np
        from mlirxla.runtime.client import Client, CompileOptions
        executable = Client().compile({os.path.join(JAX_PROGRAMS, "02_scan_while_cond_gelu.stablehlo.mlir")!r})
        x, n = np.linspace(-0.1, 0.1, 128, dtype=np.float32).reshape(8, 16), np.int32(3)
        first = executable.execute_numpy([x, n])
        for _ in range(20):
            for output, expected in zip(executable.execute_numpy([x, n]), first):
                np.testing.assert_array_equal(output, expected)
    """,
}


def run_isolated(script: str, timeout: float = 60) -> str | None:
    """Run `script` (with `EXPONENTIAL` defined) in a fresh interpreter: None when it runs to
    completion, else what went wrong."""
    source = f"EXPONENTIAL = {EXPONENTIAL!r}\n" + textwrap.dedent(script)
    try:
        result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"still running after {timeout} s"
    return f"exit status {result.returncode}\n{result.stderr[-2000:]}" if result.returncode else None


@pytest.fixture(scope="module")
def process_killer_reports() -> dict:
    return {name: run_isolated(script) for name, script in PROCESS_KILLERS.items()}


@pytest.fixture(scope="module")
def native(process_killer_reports):
    """Guard for the tests that compile and run in this process: no known crash or hang remains."""
    remaining = [name for name, problem in process_killer_reports.items() if problem]
    if remaining:
        pytest.fail(f"not run: the backend still crashes or hangs ({'; '.join(remaining)}), see test_process_killer_is_fixed")


def test_only_bf16_masked_accesses_of_odd_lengths_are_optimized_again():
    """The back end cannot legalize a <71 x bfloat> masked load; the loop vectorizer's 16- and
    32-lane masked tails it compiles, and optimizing those kernels again without vectorizers
    made them scalar."""
    from mlirxla.backends.cpu.llvm_jit import illegal_bf16_access

    assert illegal_bf16_access("llvm.masked.load.v71bf16.p0")
    assert illegal_bf16_access("llvm.masked.store.v6bf16.p0")
    assert not illegal_bf16_access("llvm.masked.load.v16bf16.p0")
    assert not illegal_bf16_access("llvm.masked.store.v32bf16.p0")
    assert not illegal_bf16_access("llvm.masked.load.v71f32.p0")


@pytest.mark.parametrize("name", PROCESS_KILLERS)
def test_process_killer_is_fixed(name, process_killer_reports):
    """Each program that once crashed or hung runs to completion in its own process."""
    assert process_killer_reports[name] is None, f"{name}: {process_killer_reports[name]}"


def assert_outputs_match(native_outputs, expected, rtol: float, atol: float) -> None:
    """Same count, dtypes and shapes; floats within tolerance, everything else exactly."""
    assert len(native_outputs) == len(expected)
    for index, (got, want) in enumerate(zip(native_outputs, expected)):
        assert got.dtype == want.dtype and got.shape == want.shape, (index, got.dtype, got.shape, want.dtype, want.shape)
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"output {index}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"output {index}")


# --- native vs reference ---------------------------------------------------------------------


def test_conv_chain_as_one_sliced_kernel_matches_reference(native):
    """With the batch-slice budgets lowered, the cpu pipeline makes the whole small conv net
    one sliced kernel (run image by image), and it computes what the interpreter computes."""
    module = frontdoor.import_text(CONV_CHAIN, "conv_chain.mlir", new_context()).module
    arguments = [a * np.float32(0.1) for a in random_arguments(module, 3)]
    expected = reference_outputs(module, arguments)
    pipeline = cpu_pipeline()
    small_budgets = BatchSliceFusionPass(min_intermediate_bytes=64, max_slice_bytes=4096)
    pipeline.steps = [small_budgets if isinstance(step, BatchSliceFusionPass) else step for step in pipeline.steps]
    PipelineRunner(module).run(pipeline)
    executable = Executable.of(compile_module(module, run_pipeline=False))
    thunks = executable.plan.describe().split("thunks:")[1].split("outputs:")[0].strip().splitlines()
    assert len(thunks) == 1 and thunks[0].startswith("sliced kernel x4 "), thunks
    assert_outputs_match(executable.execute(arguments), expected, rtol=1e-5, atol=1e-6)


CONV_NET = """func.func @main(%x: tensor<4x64x64x8xf32>, %k1: tensor<3x3x8x16xf32>, %b1: tensor<16xf32>, %k2: tensor<3x3x16x16xf32>) -> tensor<4x16xf32> {
  %0 = stablehlo.convolution(%x, %k1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x64x64x8xf32>, tensor<3x3x8x16xf32>) -> tensor<4x64x64x16xf32>
  %1 = stablehlo.broadcast_in_dim %b1, dims = [3] : (tensor<16xf32>) -> tensor<4x64x64x16xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x64x64x16xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<4x64x64x16xf32>
  %3 = stablehlo.maximum %2, %zero : tensor<4x64x64x16xf32>
  %4 = stablehlo.convolution(%3, %k2) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x64x64x16xf32>, tensor<3x3x16x16xf32>) -> tensor<4x64x64x16xf32>
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %5 = stablehlo.reduce(%4 init: %init) applies stablehlo.add across dimensions = [1, 2] : (tensor<4x64x64x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %5 : tensor<4x16xf32>
}
"""


def conv_same(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """NHWC x HWIO convolution, stride 1, 'same' padding, in float64."""
    height, width = kernel.shape[:2]
    padded = np.pad(x.astype(np.float64), ((0, 0), (height // 2, height // 2), (width // 2, width // 2), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (height, width), axis=(1, 2))
    return np.einsum("bxyihw,hwio->bxyo", windows, kernel.astype(np.float64))


def test_conv_net_with_default_budgets_matches_numpy(native):
    """With the default budgets the convolutions of this conv net (1 MiB intermediates, not
    merged into one batch-slice kernel) run as the runtime library's register-tiled
    convolution (the cost model puts it ahead of im2col + GEMM: 16 features, 8 and 16
    channels), and the net computes what numpy computes."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (4, 64, 64, 8)).astype(np.float32)
    k1 = rng.uniform(-0.3, 0.3, (3, 3, 8, 16)).astype(np.float32)
    b1 = rng.uniform(-0.1, 0.1, 16).astype(np.float32)
    k2 = rng.uniform(-0.3, 0.3, (3, 3, 16, 16)).astype(np.float32)
    program = compile_module(frontdoor.import_text(CONV_NET, "conv_net.mlir", new_context()).module)
    executable = Executable.of(program)
    tiled = [line for line in program.decisions if "runtime library's register-tiled convolution" in line]
    assert "gemm convolution" not in executable.plan.describe() and len(tiled) == 2, program.decisions
    expected = conv_same(np.maximum(conv_same(x, k1) + b1, 0), k2).sum(axis=(1, 2))
    np.testing.assert_allclose(executable.execute([x, k1, b1, k2])[0], expected, rtol=1e-4, atol=1e-3)


# --- errors ----------------------------------------------------------------------------------

TWO_PARAMETERS = """func.func @main(%x: tensor<2x3xf32>, %n: tensor<3xi32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %x, %x : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""
X = np.arange(6, dtype=np.float32).reshape(2, 3)
N = np.arange(3, dtype=np.int32)


@pytest.fixture(scope="module")
def two_parameters(native):
    return Client().compile(TWO_PARAMETERS)


@pytest.mark.parametrize("method", ["execute_numpy", "execute"])
@pytest.mark.parametrize("arguments, message", [
    ([X], "the executable takes 2 argument(s), got 1"),
    ([X, N, N], "the executable takes 2 argument(s), got 3"),
    ([X.T, N], "argument 0: expected shape (2, 3) (f32[2,3]), got (3, 2)"),
    ([X, N[:2]], "argument 1: expected shape (3,) (i32[3]), got (2,)"),
    ([X.astype(np.float64), N], "argument 0: expected dtype float32 (f32[2,3]), got float64"),
    ([X, N.astype(np.int64)], "argument 1: expected dtype int32 (i32[3]), got int64"),
], ids=["too-few", "too-many", "shape-0", "shape-1", "dtype-0", "dtype-1"])
def test_bad_arguments_are_one_line_errors(two_parameters, method, arguments, message):
    """A wrong argument count, shape or dtype is refused before anything runs, in one line
    naming the argument and what was expected and given; the executable still works."""
    with pytest.raises(MlirxlaError) as caught:
        getattr(two_parameters, method)(arguments)
    assert str(caught.value) == message
    outputs = two_parameters.execute_numpy([X, N])
    np.testing.assert_array_equal(outputs[0], X + X)


SORT_BY_TWO_KEYS = """func.func @main(%x: tensor<5xf32>, %y: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
  %0:2 = "stablehlo.sort"(%x, %y) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
    %lt = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %tie = stablehlo.compare LT, %c, %d : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %and = stablehlo.and %eq, %tie : tensor<i1>
    %or = stablehlo.or %lt, %and : tensor<i1>
    stablehlo.return %or : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<5xf32>, tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>)
  return %0#0, %0#1 : tensor<5xf32>, tensor<5xf32>
}
"""
CUSTOM_CALL = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @my_kernel(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
RNG_BIT_GENERATOR = """func.func @main(%s: tensor<4xui64>) -> (tensor<4xui64>, tensor<4xui32>) {
  %0:2 = stablehlo.rng_bit_generator %s, algorithm = DEFAULT : (tensor<4xui64>) -> (tensor<4xui64>, tensor<4xui32>)
  return %0#0, %0#1 : tensor<4xui64>, tensor<4xui32>
}
"""


@pytest.mark.parametrize("text, op, where, why", [
    (CUSTOM_CALL, "custom_call", "2:8", "custom call @my_kernel has no implementation in the cpu backend"),
    (RNG_BIT_GENERATOR, "rng_bit_generator", "2:10", r"PHILOX takes a ui64\[2\] or ui64\[3\] state, got tensor<4xui64>"),
], ids=["custom_call", "rng_bit_generator"])
def test_unsupported_op_is_refused_at_its_location(text, op, where, why):
    """An op the backend cannot compile is one line naming the op, why, and its line:col in
    the input."""
    with pytest.raises(MlirxlaError) as caught:
        Client().compile(text)
    message = str(caught.value)
    assert "\n" not in message
    assert re.fullmatch(rf"\S*:{where}: xhlo\.{op}: {why}", message), message


def test_unsupported_op_error_names_the_input(tmp_path):
    """The location names the input: `<text>` for text, the path for a file."""
    path = tmp_path / "custom_call.mlir"
    path.write_text(CUSTOM_CALL)
    for program, name in ((CUSTOM_CALL, "<text>"), (str(path), str(path))):
        with pytest.raises(MlirxlaError) as caught:
            Client().compile(program)
        assert str(caught.value).startswith(f"{name}:2:8: "), str(caught.value)


COMPLEX_BITCAST = """func.func @main(%x: tensor<3xcomplex<f64>>) -> tensor<3x2xcomplex<f32>> {
  %0 = stablehlo.bitcast_convert %x : (tensor<3xcomplex<f64>>) -> tensor<3x2xcomplex<f32>>
  return %0 : tensor<3x2xcomplex<f32>>
}
"""


def test_op_without_native_lowering_runs_on_the_interpreter(context):
    """A complex bitcast_convert has no native lowering (the toolkit's crashes): its kernel runs
    on the reference interpreter, the thunk sequence says so, and the bits are right."""
    executable = Client().compile(COMPLEX_BITCAST)
    assert "host interpret" in executable.thunk_sequence()
    x = (np.arange(3) + 1j * np.arange(3, 6)).astype(np.complex128)
    np.testing.assert_array_equal(executable.execute_numpy([x])[0], x.view(np.complex64).reshape(3, 2))


SORT_DESCENDING_WITH_PAYLOAD = """func.func @main(%k: tensor<3x{n}xi32>, %v: tensor<3x{n}xf32>) -> (tensor<3x{n}xi32>, tensor<3x{n}xf32>) {{
  %0:2 = "stablehlo.sort"(%k, %v) ({{
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<f32>, %d: tensor<f32>):
    %gt = stablehlo.compare GT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }}) {{dimension = 1 : i64, is_stable = true}} : (tensor<3x{n}xi32>, tensor<3x{n}xf32>) -> (tensor<3x{n}xi32>, tensor<3x{n}xf32>)
  return %0#0, %0#1 : tensor<3x{n}xi32>, tensor<3x{n}xf32>
}}
"""


@pytest.mark.parametrize("copies, path", [(1, "kernel sort"), (12, "host sort")])
def test_one_key_sort_is_stable_and_moves_its_payload(copies, path):
    """A one-key comparator sorts stably, the payload following its key: rows of at most 64
    in an insertion-sort kernel (`top_k_kernel.py`), longer ones on the host."""
    rows = np.array([[3, 1, 3, -2, 0, 1], [5, 5, 5, 5, 5, 5], [-1, 2, -3, 4, 2147483647, -2147483648]], np.int32)
    keys = np.tile(rows, (1, copies))
    executable = Client().compile(SORT_DESCENDING_WITH_PAYLOAD.format(n=keys.shape[1]))
    assert path in executable.thunk_sequence()
    values = np.arange(keys.size, dtype=np.float32).reshape(keys.shape)
    sorted_keys, sorted_values = executable.execute_numpy([keys, values])
    order = np.argsort(-keys.astype(np.int64), axis=1, kind="stable")
    np.testing.assert_array_equal(sorted_keys, np.take_along_axis(keys, order, axis=1))
    np.testing.assert_array_equal(sorted_values, np.take_along_axis(values, order, axis=1))


# jnp.linalg's pivoting writes whole rows and columns through scatters without scatter
# dimensions: one index vector (empty, or one column's) for every update element
SCATTER_WITHOUT_SCATTER_DIMENSIONS = """func.func @main(%x: tensor<3xi32>, %u: tensor<3xi32>, %m: tensor<3x3xf32>, %column: tensor<1xi32>, %c: tensor<3xf32>) -> (tensor<3xi32>, tensor<3x3xf32>) {
  %none = stablehlo.constant dense<> : tensor<0xi32>
  %0 = "stablehlo.scatter"(%x, %none, %u) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0]>, unique_indices = true}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    stablehlo.return %b : tensor<i32>
  }) : (tensor<3xi32>, tensor<0xi32>, tensor<3xi32>) -> tensor<3xi32>
  %1 = "stablehlo.scatter"(%m, %column, %c) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1]>, unique_indices = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<3x3xf32>, tensor<1xi32>, tensor<3xf32>) -> tensor<3x3xf32>
  return %0, %1 : tensor<3xi32>, tensor<3x3xf32>
}
"""


def test_scatter_without_scatter_dimensions_writes_its_one_window(context):
    executable = Client().compile(SCATTER_WITHOUT_SCATTER_DIMENSIONS)
    assert "kernel scatter" in executable.thunk_sequence()
    generator = np.random.default_rng(3)
    arguments = [np.arange(3, dtype=np.int32), np.array([7, -1, 4], np.int32), generator.standard_normal((3, 3)).astype(np.float32),
                 np.array([2], np.int32), generator.standard_normal(3).astype(np.float32)]
    module = frontdoor.import_text(SCATTER_WITHOUT_SCATTER_DIMENSIONS, "test", context).module
    for got, expected in zip(executable.execute_numpy(arguments), reference_outputs(module, arguments)):
        np.testing.assert_array_equal(got, expected)


TOP_3_OF_16 = """func.func @main(%k: tensor<5x16x{element}>, %positions: tensor<5x16xi32>) -> (tensor<5x3x{element}>, tensor<5x3xi32>) {{
  %iota = stablehlo.iota dim = 1 : tensor<5x16xi32>
  %0:2 = "stablehlo.sort"(%k, %{positions}) ({{
  ^bb0(%a: tensor<{element}>, %b: tensor<{element}>, %c: tensor<i32>, %d: tensor<i32>):
    %gt = stablehlo.compare {direction}, %a, %b, {compare} : (tensor<{element}>, tensor<{element}>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }}) {{dimension = 1 : i64, is_stable = true}} : (tensor<5x16x{element}>, tensor<5x16xi32>) -> (tensor<5x16x{element}>, tensor<5x16xi32>)
  %1 = stablehlo.slice %0#0 [0:5, 0:3] : (tensor<5x16x{element}>) -> tensor<5x3x{element}>
  %2 = stablehlo.slice %0#1 [0:5, 0:3] : (tensor<5x16xi32>) -> tensor<5x3xi32>
  return %1, %2 : tensor<5x3x{element}>, tensor<5x3xi32>
}}
"""


@pytest.mark.parametrize("element, compare, keys", [
    ("f32", "TOTALORDER", np.array([[1.0, -0.0, 0.0, np.nan, -np.inf, np.inf, 2.0, 2.0, -1.0, 1e-45, 3.0, 3.0, 3.0, 0.5, -np.nan, 7.0]] * 5, np.float32)),
    ("i32", "SIGNED", np.array([[5, 5, 5, 5, -1, 2147483647, -2147483648, 7, 7, 0, 0, 3, 3, 3, 2, 1]] * 5, np.int32)),
    ("ui32", "UNSIGNED", np.array([[4294967295, 0, 1, 2147483648, 2147483647, 5, 5, 5, 9, 9, 9, 9, 4294967295, 3, 2, 1]] * 5, np.uint32)),
])
@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("positions, kernel", [("iota", "custom_call"), ("positions", "sort")])
def test_top_k_selects_then_sorts_what_the_slices_read(element, compare, keys, direction, positions, kernel):
    """A sort whose results only slices read (jax's top_k) is a selection kernel writing the
    leading positions: exactly the stable sort's first positions, ties in index order, NaN,
    -0.0 and the integer extremes in their total order. Sorting an iota's positions along, it
    is one TopK custom call (`xhlo-top-k-rewriter`) whose kernel counts them itself."""
    executable = Client().compile(TOP_3_OF_16.format(element=element, compare=compare, direction=direction, positions=positions))
    assert f"kernel {kernel}" in executable.thunk_sequence() and "host" not in executable.thunk_sequence()
    assert len(executable.executable.plan.thunks) == 1 or kernel == "sort"
    rng = np.random.default_rng(0)
    keys = np.stack([row[rng.permutation(16)] for row in keys])
    values, indices = executable.execute_numpy([keys, np.tile(np.arange(16, dtype=np.int32), (5, 1))])
    ordered = np.lexsort([np.arange(16)[None, :].repeat(5, 0), total_order(keys, descending=direction == "GT")], axis=1)[:, :3]
    np.testing.assert_array_equal(indices, ordered)
    np.testing.assert_array_equal(values.view(np.uint32 if element != "i32" else np.int32),
                                  np.take_along_axis(keys, ordered, axis=1).view(np.uint32 if element != "i32" else np.int32))


def total_order(keys: np.ndarray, descending: bool) -> np.ndarray:
    """Integers ordered as the comparator orders `keys` (floats by IEEE total order)."""
    if keys.dtype.kind == "f":
        bits = keys.view(np.int32).astype(np.int64)
        wide = np.where(bits < 0, -(bits & 0x7FFFFFFF) - 1, bits)
    else:
        wide = keys.astype(np.int64)
    return -wide if descending else wide


SORT_BY_PARITY = """func.func @main(%x: tensor<6xi32>) -> tensor<6xi32> {
  %0 = "stablehlo.sort"(%x) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %one = stablehlo.constant dense<1> : tensor<i32>
    %ra = stablehlo.and %a, %one : tensor<i32>
    %rb = stablehlo.and %b, %one : tensor<i32>
    %lt = stablehlo.compare LT, %ra, %rb, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<6xi32>) -> tensor<6xi32>
  return %0 : tensor<6xi32>
}
"""


@pytest.mark.parametrize("text, path", [(SORT_BY_TWO_KEYS, "host sort"), (SORT_BY_PARITY, "host interpret")],
                         ids=["two_keys_on_the_host", "computed_key_on_the_interpreter"])
def test_sort_comparators_match_the_reference(context, text, path):
    """A lexicographic comparator sorts on the host by its keys; any other comparator runs
    on the reference interpreter: both agree with it, ties and all."""
    executable = Client().compile(text)
    assert path in executable.thunk_sequence()
    module = frontdoor.import_text(text, "-", context).module
    for seed in range(3):
        arguments = [np.round(a) for a in random_arguments(module, seed)] if "f32" in text else random_arguments(module, seed)
        got = executable.execute_numpy(arguments)
        for actual, expected in zip(got, reference_outputs(module, arguments)):
            np.testing.assert_array_equal(actual, expected)


# --- compile cache ---------------------------------------------------------------------------


def cache_entries(root) -> list[str]:
    return sorted(os.listdir(root))


def test_second_compile_is_a_cache_hit(tmp_path, native):
    """A second client on the same cache directory loads the entry instead of compiling, and
    the loaded executable computes the same."""
    first = Client(cache_dir=str(tmp_path))
    expected = first.compile(EXPONENTIAL).execute_numpy([EXPONENTIAL_ARGUMENT])
    assert (first.cache.hits, first.cache.misses) == (0, 1)
    second = Client(cache_dir=str(tmp_path))
    outputs = second.compile(EXPONENTIAL).execute_numpy([EXPONENTIAL_ARGUMENT])
    assert (second.cache.hits, second.cache.misses, second.cache.corrupted) == (1, 0, 0)
    np.testing.assert_array_equal(outputs[0], expected[0])
    np.testing.assert_allclose(outputs[0], np.exp(EXPONENTIAL_ARGUMENT), rtol=1e-6)


# Run in a fresh process on a filled cache: what loading a cached executable imports
CACHED_START = """
import sys
import numpy as np
from mlirxla.runtime.client import Client
client = Client(cache_dir=sys.argv[1])
outputs = client.compile(sys.argv[2]).execute_numpy([np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)])
assert client.cache.hits == 1 and np.allclose(outputs[0], np.exp(np.linspace(-1, 1, 6).reshape(2, 3)), rtol=1e-6)
compiler = ("mlirxla.backends.cpu.compiler", "mlirxla.backends.cpu.lowering", "mlirxla.frontdoor", "mlirxla.dialects.xhlo.ops")
print(sorted(name for name in sys.modules if name in compiler or name.startswith("torch_mlir.dialects.linalg")))
"""


def test_a_cached_executable_loads_without_the_compiler(tmp_path):
    """A process served from the cache (the plugin's warm start) imports neither the compiler,
    the front door, the xhlo dialect nor the MLIR dialects' op definitions: 0.3 s of imports."""
    Client(cache_dir=str(tmp_path)).compile(EXPONENTIAL)
    run = subprocess.run([sys.executable, "-c", CACHED_START, str(tmp_path), EXPONENTIAL], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def truncate_object(entry: str) -> None:
    with open(os.path.join(entry, compile_cache.OBJECTS), "r+b") as stream:
        stream.truncate(16)


def garble_plan(entry: str) -> None:
    with open(os.path.join(entry, "plan.json"), "w") as stream:
        stream.write("{ not json")


def garble_manifest(entry: str) -> None:
    with open(os.path.join(entry, "manifest.json"), "w") as stream:
        stream.write("{ not json")


def manifest_not_an_object(entry: str) -> None:
    with open(os.path.join(entry, "manifest.json"), "w") as stream:
        stream.write("[]")


@pytest.mark.parametrize("corrupt", [truncate_object, garble_plan, garble_manifest, manifest_not_an_object])
def test_corrupted_cache_entry_is_recompiled_and_rewritten(tmp_path, corrupt, native):
    """A damaged entry is detected (a miss, counted as corrupted), compiled again with the
    right results, and written anew: the next compile hits."""
    Client(cache_dir=str(tmp_path)).compile(EXPONENTIAL)
    [key] = cache_entries(tmp_path)
    corrupt(str(tmp_path / key))
    client = Client(cache_dir=str(tmp_path))
    outputs = client.compile(EXPONENTIAL).execute_numpy([EXPONENTIAL_ARGUMENT])
    assert (client.cache.hits, client.cache.misses, client.cache.corrupted) == (0, 1, 1)
    np.testing.assert_allclose(outputs[0], np.exp(EXPONENTIAL_ARGUMENT), rtol=1e-6)
    assert cache_entries(tmp_path) == [key]
    client.compile(EXPONENTIAL)
    assert (client.cache.hits, client.cache.misses, client.cache.corrupted) == (1, 1, 1)


def compile_into_cache(cache_dir: str, barrier, results) -> None:
    """Compile EXPONENTIAL into `cache_dir`, storing only once every writer is ready to store."""
    client = Client(cache_dir=cache_dir)
    store = client.cache.store

    def store_together(*arguments):
        barrier.wait()
        store(*arguments)

    client.cache.store = store_together
    outputs = client.compile(EXPONENTIAL).execute_numpy([EXPONENTIAL_ARGUMENT])
    results.put((client.cache.misses, outputs[0]))


def test_concurrent_writers_leave_one_valid_entry(tmp_path, native):
    """Processes compiling the same program into one fresh cache directory, storing at the
    same moment, all succeed and leave exactly one entry (no staging directory), which the
    next compile loads."""
    writers = 3
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(writers, timeout=120), spawn.Queue()
    processes = [spawn.Process(target=compile_into_cache, args=(str(tmp_path), barrier, results)) for _ in range(writers)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=180) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    for misses, output in outcomes:
        assert misses == 1
        np.testing.assert_allclose(output, np.exp(EXPONENTIAL_ARGUMENT), rtol=1e-6)
    [key] = cache_entries(tmp_path)
    assert not key.startswith(".staging-")
    client = Client(cache_dir=str(tmp_path))
    client.compile(EXPONENTIAL)
    assert (client.cache.hits, client.cache.corrupted) == (1, 0)


def test_concurrent_compiles_in_threads():
    """Threads of one process compile at the same time (keeping their executables)."""
    problem = run_isolated("""
        import threading
        from mlirxla.runtime.client import Client, CompileOptions
        client, executables = Client(), []

        def compile_twice():
            for _ in range(2):
                executables.append(client.compile(EXPONENTIAL))

        threads = [threading.Thread(target=compile_twice) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(executables) == 16
    """)
    assert problem is None, problem


def dumped_slab(text: str) -> tuple[int, set, dict]:
    """(slab size, {(offset, size)} of the values in it, {name: (offset, size, holds)} of its
    scratch) as buffer-assignment.txt says."""
    slab = re.search(r"allocation \d+: size (\d+), preallocated-temp:\n((?: .*\n)*)", text)
    values = {(int(o), int(s)) for s, o in re.findall(r" value: <[^>]*> \(size=(\d+),offset=(\d+)\)", slab.group(2))}
    scratch = {name: (int(o), int(s), holds) for name, s, o, holds in
               re.findall(r" scratch: <(\S+) @[^>]*> \(size=(\d+),offset=(\d+)\): (.*)", slab.group(2))}
    return int(slab.group(1)), values, scratch


@pytest.mark.parametrize("program, has_scratch", [("transformer", True), ("convnet", True), ("scan", False)])
def test_dumped_buffer_assignment_is_the_executed_one(program, has_scratch, tmp_path):
    """The dump's temp slab is the executable's: its size, the offset of every value a thunk
    touches there, and each kernel's scratch (placed after the kernel was lowered, in the same
    slab, one range per concurrent call), which also says what fused op it holds; the scan's
    kernel needs none (its [1, 128] dot and tanh, with the unit dimension folded away, are
    written straight into the [128] destination). (That these programs compute what jax does with this layout:
    test_jax_programs.py.)"""
    path = os.path.join(JAX_PROGRAMS, "programs", f"{program}.stablehlo.mlir")
    module = frontdoor.import_file(path, new_context()).module
    plan = compile_module(module, RunOptions(dump_to=str(tmp_path))).plan
    size, values, scratch = dumped_slab(next(tmp_path.glob("*buffer-assignment.txt")).read_text())
    slab = plan.allocation_kinds.index("temp")
    assert plan.allocation_sizes[slab] == size
    touched = {(s.offset, s.size) for thunk in every_thunk(plan.thunks) if not isinstance(thunk, ControlFlow)
               for s in tuple(thunk.reads) + tuple(getattr(thunk, "results", thunk.writes)) if s.allocation == slab}
    assert touched and touched <= values
    kernels = [t for t in every_thunk(plan.thunks) if isinstance(t, KernelThunk) and t.scratch is not None]
    assert bool(kernels) == has_scratch and {t.name for t in kernels} == set(scratch)
    for thunk in kernels:
        offset, size, holds = scratch[thunk.name]
        assert (thunk.scratch.allocation, thunk.scratch.offset, thunk.scratch.size * thunk.scratch_parts) == (slab, offset, size)
        assert "materializing fused " in holds
    assert "alignment 64" in next(tmp_path.glob("*buffer-assignment.txt")).read_text()


DONATING = """func.func @main(%x: tensor<1024xf32> {tf.aliasing_output = 0 : i32}, %y: tensor<1024xf32> {jax.buffer_donor = true}) -> (tensor<1024xf32>, tensor<1024xf32>) {
  %0 = stablehlo.exponential %x : tensor<1024xf32>
  %1 = stablehlo.add %0, %x : tensor<1024xf32>
  %2 = stablehlo.reverse %y, dims = [0] : tensor<1024xf32>
  return %1, %2 : tensor<1024xf32>, tensor<1024xf32>
}"""


def test_donated_parameter_holds_its_output(tmp_path):
    """x's output is computed in place in x's buffer (its only reader writes it
    elementwise); y's cannot be (a reverse reads y while writing its output), so it gets its
    own buffer, and the dump says why. Arguments not donated, and host memory a buffer
    merely wraps, are never written; a donated output of an earlier run is."""
    client = Client()
    executable = client.compile(DONATING, CompileOptions(dump_to=str(tmp_path)))
    report = next(tmp_path.glob("*buffer-assignment.txt")).read_text()
    assert "Donation: parameter 0 holds output 0" in report
    assert "Donation: parameter 1 not donated to output 1: the op writing the output reads it other than elementwise" in report
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(1024).astype(np.float32), rng.standard_normal(1024).astype(np.float32)
    kept_x, kept_y = x.copy(), y.copy()
    for _ in range(2):
        first, second = executable.execute_numpy([x, y])
        np.testing.assert_array_equal(x, kept_x)
        np.testing.assert_allclose(first, np.exp(x) + x, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(second, y[::-1])
    host = [client.buffer_from_pyval(x), client.buffer_from_pyval(y)]
    outputs = executable.execute(host, donate=(0, 1))  # host memory is never written: copied
    np.testing.assert_array_equal(x, kept_x)
    assert host[0].is_deleted() and host[1].is_deleted()
    with pytest.raises(MlirxlaError, match="the buffer was deleted"):
        executable.execute(host)
    memory = outputs[0].to_numpy()
    again = executable.execute(outputs, donate=(0,))  # an output the runtime owns: written in place
    assert again[0].to_numpy() is memory and outputs[0].is_deleted() and not outputs[1].is_deleted()
    once = np.exp(kept_x) + kept_x
    np.testing.assert_allclose(memory, np.exp(once) + once, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(again[1].to_numpy(), kept_y)


# --- random programs -------------------------------------------------------------------------


def tensor_type(shape, element: str = "f32") -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"


class ProgramBuilder:
    """A StableHLO function built op by op: `values` are the f32 values defined so far
    (name, shape), arguments first."""

    def __init__(self, argument_shapes):
        self.arguments = [(f"%arg{i}", tuple(shape)) for i, shape in enumerate(argument_shapes)]
        self.values = list(self.arguments)
        self.lines = []

    def emit(self, text: str, shape, keep: bool = True) -> str:
        name = f"%v{len(self.lines)}"
        self.lines.append(f"  {name} = {text}")
        if keep:
            self.values.append((name, tuple(shape)))
        return name

    def text(self, results) -> str:
        parameters = ", ".join(f"{name}: {tensor_type(shape)}" for name, shape in self.arguments)
        types = ", ".join(tensor_type(shape) for _, shape in results)
        body = "\n".join(self.lines)
        names = ", ".join(name for name, _ in results)
        return f"func.func @main({parameters}) -> ({types}) {{\n{body}\n  return {names} : {types}\n}}\n"


SHAPES = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)
UNARY = ["negate", "abs", "exponential", "tanh", "sqrt", "log"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]
OPS = ["unary", "binary", "select", "broadcast", "reduce", "transpose", "reshape", "slice", "concatenate", "dot", "convert"]


def draw_value(draw, builder: ProgramBuilder, accept=lambda shape: True):
    """A defined value whose shape `accept`s, or None: the most recent one half the time (so
    that ops chain), else any."""
    candidates = [value for value in builder.values if accept(value[1])]
    if not candidates:
        return None
    back = draw(st.integers(0, len(candidates) - 1)) if draw(st.booleans()) else 0
    return candidates[len(candidates) - 1 - back]


def at_least_one(builder, name, shape):
    """|name| + 1: a safe operand for log and for a divisor."""
    t = tensor_type(shape)
    magnitude = builder.emit(f"stablehlo.abs {name} : {t}", shape, keep=False)
    one = builder.emit(f"stablehlo.constant dense<1.0> : {t}", shape, keep=False)
    return builder.emit(f"stablehlo.add {magnitude}, {one} : {t}", shape, keep=False)


def add_unary(draw, builder, value):
    name, shape = value
    t = tensor_type(shape)
    op = draw(st.sampled_from(UNARY))
    if op == "sqrt":  # of abs
        name = builder.emit(f"stablehlo.abs {name} : {t}", shape, keep=False)
    if op == "log":
        name = at_least_one(builder, name, shape)
    builder.emit(f"stablehlo.{op} {name} : {t}", shape)


def add_binary(draw, builder, value):
    name, shape = value
    t = tensor_type(shape)
    other, _ = draw_value(draw, builder, lambda s: s == shape)
    op = draw(st.sampled_from(BINARY))
    if op == "divide":
        other = at_least_one(builder, other, shape)
    builder.emit(f"stablehlo.{op} {name}, {other} : {t}", shape)


def add_select(draw, builder, value):
    name, shape = value
    t = tensor_type(shape)
    other, _ = draw_value(draw, builder, lambda s: s == shape)
    direction = draw(st.sampled_from(["GT", "GE", "LT", "LE", "EQ", "NE"]))
    mask = tensor_type(shape, "i1")
    predicate = builder.emit(f"stablehlo.compare {direction}, {name}, {other} : ({t}, {t}) -> {mask}", shape, keep=False)
    builder.emit(f"stablehlo.select {predicate}, {name}, {other} : {mask}, {t}", shape)


def add_broadcast(draw, builder, value):
    name, shape = value
    if len(shape) == 3:
        return
    rank = draw(st.integers(len(shape) + 1, 3))
    kept = sorted(draw(st.lists(st.integers(0, rank - 1), min_size=len(shape), max_size=len(shape), unique=True)))
    new = iter(draw(st.lists(st.integers(1, 6), min_size=rank - len(shape), max_size=rank - len(shape))))
    sizes = dict(zip(kept, shape))
    result = tuple(sizes[d] if d in sizes else next(new) for d in range(rank))
    builder.emit(f"stablehlo.broadcast_in_dim {name}, dims = {kept} : ({tensor_type(shape)}) -> {tensor_type(result)}", result)


def add_reduce(draw, builder, value):
    name, shape = value
    if not shape:
        return
    dimensions = sorted(draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True)))
    result = tuple(d for i, d in enumerate(shape) if i not in dimensions)
    op, init = draw(st.sampled_from([("add", "0.0"), ("maximum", "0xFF800000")]))
    start = builder.emit(f"stablehlo.constant dense<{init}> : tensor<f32>", (), keep=False)
    builder.emit(f"stablehlo.reduce({name} init: {start}) applies stablehlo.{op} across dimensions = {dimensions} : "
                 f"({tensor_type(shape)}, tensor<f32>) -> {tensor_type(result)}", result)


def add_transpose(draw, builder, value):
    name, shape = value
    permutation = draw(st.permutations(range(len(shape))))
    result = tuple(shape[d] for d in permutation)
    builder.emit(f"stablehlo.transpose {name}, dims = {list(permutation)} : ({tensor_type(shape)}) -> {tensor_type(result)}", result)


def add_reshape(draw, builder, value):
    name, shape = value
    remaining, result = int(np.prod(shape, dtype=np.int64)), []
    for _ in range(draw(st.integers(0, 2))):
        factor = draw(st.sampled_from([d for d in range(1, remaining + 1) if remaining % d == 0]))
        result.append(factor)
        remaining //= factor
    result = tuple(draw(st.permutations(result + [remaining])))
    builder.emit(f"stablehlo.reshape {name} : ({tensor_type(shape)}) -> {tensor_type(result)}", result)


def add_slice(draw, builder, value):
    name, shape = value
    if not shape:
        return
    ranges, result = [], []
    for size in shape:
        start = draw(st.integers(0, size - 1))
        limit = draw(st.integers(start + 1, size))
        stride = draw(st.integers(1, 2))
        ranges.append(f"{start}:{limit}" + (f":{stride}" if stride > 1 else ""))
        result.append(-(-(limit - start) // stride))
    builder.emit(f"stablehlo.slice {name} [{', '.join(ranges)}] : ({tensor_type(shape)}) -> {tensor_type(result)}", result)


def add_concatenate(draw, builder, value):
    name, shape = value
    if not shape:
        return
    dimension = draw(st.integers(0, len(shape) - 1))
    partner = draw_value(draw, builder, lambda s: len(s) == len(shape) and all(
        a == b or i == dimension for i, (a, b) in enumerate(zip(s, shape))) and s[dimension] + shape[dimension] <= 12)
    if partner is None:
        return
    other, other_shape = partner
    result = tuple(d + other_shape[i] if i == dimension else d for i, d in enumerate(shape))
    builder.emit(f"stablehlo.concatenate {name}, {other}, dim = {dimension} : ({tensor_type(shape)}, {tensor_type(other_shape)}) -> "
                 f"{tensor_type(result)}", result)


def add_dot(draw, builder, value):
    """A matrix product: with a partner whose dimension matches (either orientation), or the
    value with itself (batched over dimension 0 for rank 3)."""
    name, shape = value
    if not shape:
        return
    if len(shape) == 3:
        result = (shape[0], shape[1], shape[1])
        builder.emit(f"stablehlo.dot_general {name}, {name}, batching_dims = [0] x [0], contracting_dims = [2] x [2] : "
                     f"({tensor_type(shape)}, {tensor_type(shape)}) -> {tensor_type(result)}", result)
        return
    contracting = len(shape) - 1
    other, other_shape = draw_value(draw, builder, lambda s: 1 <= len(s) <= 2 and shape[contracting] in s)
    other_contracting = draw(st.sampled_from([i for i, d in enumerate(other_shape) if d == shape[contracting]]))
    result = shape[:contracting] + tuple(d for i, d in enumerate(other_shape) if i != other_contracting)
    builder.emit(f"stablehlo.dot_general {name}, {other}, contracting_dims = [{contracting}] x [{other_contracting}] : "
                 f"({tensor_type(shape)}, {tensor_type(other_shape)}) -> {tensor_type(result)}", result)


def add_convert(draw, builder, value):
    """To f64, one f64 op, back to f32."""
    name, shape = value
    wide = tensor_type(shape, "f64")
    converted = builder.emit(f"stablehlo.convert {name} : ({tensor_type(shape)}) -> {wide}", shape, keep=False)
    op = draw(st.sampled_from(["add", "multiply", "subtract"]))
    computed = builder.emit(f"stablehlo.{op} {converted}, {converted} : {wide}", shape, keep=False)
    builder.emit(f"stablehlo.convert {computed} : ({wide}) -> {tensor_type(shape)}", shape)


BUILDERS = {"unary": add_unary, "binary": add_binary, "select": add_select, "broadcast": add_broadcast, "reduce": add_reduce,
            "transpose": add_transpose, "reshape": add_reshape, "slice": add_slice, "concatenate": add_concatenate,
            "dot": add_dot, "convert": add_convert}


@st.composite
def programs(draw):
    """(StableHLO text, argument shapes): 1-3 f32 arguments, 2-8 random ops, 1 or 2 results."""
    builder = ProgramBuilder(draw(st.lists(SHAPES, min_size=1, max_size=3)))
    for _ in range(draw(st.integers(2, 8))):
        BUILDERS[draw(st.sampled_from(OPS))](draw, builder, draw_value(draw, builder))
    results = [builder.values[-1]]
    if draw(st.booleans()):
        results.append(draw_value(draw, builder))
    return builder.text(results), [shape for _, shape in builder.arguments]


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(program=programs(), seed=st.integers(0, 2**32 - 1))
def test_random_programs_match_reference(native, program, seed):
    """Random small programs (elementwise math, select, broadcast, reduce, transpose, reshape,
    slice, concatenate, dot, f64 round trips) compute natively what the interpreter computes."""
    text, shapes = program
    rng = np.random.default_rng(seed)
    arguments = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in shapes]
    expected = reference_outputs(frontdoor.import_text(text, "random.mlir", new_context()).module, arguments)
    executable = Executable.of(compile_module(frontdoor.import_text(text, "random.mlir", new_context()).module))
    assert_outputs_match(executable.execute(arguments), expected, rtol=1e-4, atol=1e-5)


CALLING_BACK = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {{
  %0 = stablehlo.exponential %x : tensor<3xf32>
  stablehlo.custom_call @mlirxla.python_callback(%0) {{backend_config = "{identifier}", has_side_effect = true}} : (tensor<3xf32>) -> ()
  return %0 : tensor<3xf32>
}}"""


def test_program_calls_a_registered_python_function():
    """A side-effecting custom call to a registered callback survives the pipeline (nothing
    uses it) and runs as a host call on a copy of its operand; an id nobody registered is a
    one-line error when the program reaches it."""
    from mlirxla.runtime import callbacks

    seen = []
    identifier = callbacks.register(seen.append)
    executable = Client().compile(CALLING_BACK.format(identifier=identifier))
    assert "host python_callback" in executable.thunk_sequence()
    x = np.array([0.0, 1.0, 2.0], np.float32)
    executable.execute_numpy([x])
    np.testing.assert_allclose(seen[0], np.exp(x), rtol=1e-6)
    with pytest.raises(MlirxlaError, match="calls Python callback 999999, which this process never registered"):
        Client().compile(CALLING_BACK.format(identifier=999999)).execute_numpy([x])
