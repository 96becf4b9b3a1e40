"""A GEMM widening its bf16 operand panel by panel (`transforms/widening_gemm_fusion.py`, the
cpu backend's `runtime_library.widening_gemm_call`): when the convert joins the dot, what the
panels are, and that every layout of the widened operand computes what numpy does."""

import ml_dtypes
import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.context import new_context
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.runner import PipelineRunner
from mlirxla.runtime.client import Client, CompileOptions


def widened_dot(side: int, transposed: bool, m: int, n: int, k: int, epilogue: bool = False) -> str:
    """f32[m, n] = x @ w, the bf16 operand (`side` 0: the lhs, 1: the rhs) converted to f32,
    `transposed`: stored [k, m] (lhs) or [n, k] (rhs); with a bias-and-relu epilogue."""
    if side == 0:
        wide_shape, other_shape = ([k, m] if transposed else [m, k]), [k, n]
        contracting = f"[{0 if transposed else 1}] x [0]"
    else:
        wide_shape, other_shape = ([n, k] if transposed else [k, n]), [m, k]
        contracting = f"[1] x [{1 if transposed else 0}]"
    wide = "x".join(map(str, wide_shape))
    other = "x".join(map(str, other_shape))
    operands = "%wf, %x" if side == 0 else "%x, %wf"
    operand_types = f"tensor<{wide}xf32>, tensor<{other}xf32>" if side == 0 else f"tensor<{other}xf32>, tensor<{wide}xf32>"
    lines = [f"func.func @main(%w: tensor<{wide}xbf16>, %x: tensor<{other}xf32>, %b: tensor<{n}xf32>) -> tensor<{m}x{n}xf32> {{",
             f"  %wf = stablehlo.convert %w : (tensor<{wide}xbf16>) -> tensor<{wide}xf32>",
             f"  %y = stablehlo.dot_general {operands}, contracting_dims = {contracting} : ({operand_types}) -> tensor<{m}x{n}xf32>"]
    result = "%y"
    if epilogue:
        lines += [f"  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<{n}xf32>) -> tensor<{m}x{n}xf32>",
                  f"  %s = stablehlo.add %y, %bb : tensor<{m}x{n}xf32>",
                  f"  %zero = stablehlo.constant dense<0.0> : tensor<{m}x{n}xf32>",
                  f"  %r = stablehlo.maximum %s, %zero : tensor<{m}x{n}xf32>"]
        result = "%r"
    lines += [f"  return {result} : tensor<{m}x{n}xf32>", "}"]
    return "\n".join(lines)


def arguments(side: int, transposed: bool, m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    if side == 0:
        wide_shape, other_shape = ((k, m) if transposed else (m, k)), (k, n)
    else:
        wide_shape, other_shape = ((n, k) if transposed else (k, n)), (m, k)
    w = rng.standard_normal(wide_shape).astype(ml_dtypes.bfloat16)
    return w, rng.standard_normal(other_shape).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def expected(side: int, transposed: bool, w, x, b, epilogue: bool) -> np.ndarray:
    wide = w.astype(np.float64)
    wide = wide.T if transposed else wide
    y = wide @ x if side == 0 else x.astype(np.float64) @ wide
    return np.maximum(y + b, 0) if epilogue else y


@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("side, transposed", [(0, False), (0, True), (1, False), (1, True)])
def test_widened_panels_match_numpy(monkeypatch, side, transposed, epilogue):
    """Each of the four layouts of the widened operand (rows of an [m, k] lhs or columns of a
    [k, m] one; columns of a [k, n] rhs or rows of an [n, k] one), with and without an
    epilogue, runs as a sliced kernel of panels over two threads, each panel widened and
    multiplied by BLAS, the convert no kernel of its own; within f32 sums of numpy's float64
    product."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    m, n, k = (96, 48, 40) if side == 0 else (48, 96, 40)
    executable = Client().compile(widened_dot(side, transposed, m, n, k, epilogue))
    text = executable.thunk_sequence()
    assert "_panels]" in text and "kernel convert [" not in text and "gemm" not in text, text
    assert "x2 concurrent calls" in text and ("_epilogue]" in text) == epilogue, text
    w, x, b = arguments(side, transposed, m, n, k)
    [got] = executable.execute_numpy([w, x, b])
    np.testing.assert_allclose(got, expected(side, transposed, w, x, b, epilogue), rtol=1e-5, atol=1e-4)


def test_panels_are_as_wide_as_fit_with_a_panel_for_every_thread(monkeypatch):
    """A 512x1536 bf16 weight times 256 rows: panels of f32 columns that fit 1 MiB (at most
    512 of 512 rows), as few as give each thread the same number: 4 of 384 on two threads,
    3 of 512 on three; a 2048-row weight, 4 of 128 columns; the decision names them."""
    for threads, k, n, panels in (("2", 512, 1536, "4 panels of 384"), ("3", 512, 1536, "3 panels of 512"),
                                  ("2", 2048, 512, "4 panels of 128")):
        monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
        program = compile_module(frontdoor.import_text(widened_dot(1, False, 256, n, k), "widening", new_context()).module)
        assert any(f"dot as {panels} bf16 columns of the rhs" in line for line in program.decisions), program.decisions


@pytest.mark.parametrize("program, reason", [
    (widened_dot(1, False, 64, 16, 32), "no panel of 16 or more of its 16 columns fits 1024 KiB with one panel for each of 2 thread(s)"),
    (widened_dot(1, False, 4096, 64, 64), "2 panels would read the other operand again (1048576 bytes), more than the 32768 bytes of the f32 copy spared"),
])
def test_a_convert_stays_a_kernel_where_panels_do_not_pay(monkeypatch, context, program, reason):
    """A weight too narrow for a panel per thread, or one whose panels would each read a
    much larger other operand again, keeps its convert kernel and the GEMM in parts; the
    refusal says why."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    text = Client().compile(program).thunk_sequence()
    assert "kernel convert [" in text and "gemm dot f32" in text, text
    runner = PipelineRunner(frontdoor.import_text(program, "widening", context).module)
    runner.run(named_pipeline("cpu"))
    decisions = runner.reports["xhlo-widening-gemm-fusion"].dump_files()["widening-gemm-fusion-decisions.txt"]
    assert reason in decisions, decisions


def test_a_bf16_layer_widens_its_weight_and_not_its_activations(monkeypatch):
    """A bf16 dot is an f32 dot of two converts (`narrow_dot_upcast.py`): the weight's, the
    larger, joins the GEMM; the activations' stays a kernel, as does the rounding of the
    result. The output is the one of the pass disabled, bit for bit."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    program = """func.func @main(%x: tensor<32x128xbf16>, %w: tensor<128x256xbf16>) -> tensor<32x256xbf16> {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<32x128xbf16>, tensor<128x256xbf16>) -> tensor<32x256xbf16>
  return %y : tensor<32x256xbf16>
}"""
    fused = Client().compile(program)
    apart = Client().compile(program, CompileOptions(disable_passes=("xhlo-widening-gemm-fusion",)))
    text = fused.thunk_sequence()
    assert text.count("kernel convert [") == 2 and "kernel convert [convert](#0" in text and "_panels]" in text, text
    assert apart.thunk_sequence().count("kernel convert [") == 3
    rng = np.random.default_rng(4)
    x, w = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for shape in ((32, 128), (128, 256)))
    np.testing.assert_array_equal(fused.execute_numpy([x, w])[0], apart.execute_numpy([x, w])[0])
