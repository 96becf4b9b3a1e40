"""GEMMs of the cuda backend as cuBLASLt matmuls, without a GPU: which output fusions'
epilogues a matmul takes in (bias add, relu: XLA's gemm_rewriter), the descriptors the plan
gives the runtime (m, n, k, transposes, dtypes, compute type, epilogue, bias pointer), the
precision rule (TF32 for jax's DEFAULT precision, full f32 for HIGHEST or when asked), and
the row-major to column-major mapping the runtime hands cuBLASLt, run in numpy as cuBLASLt
defines its matmul: the benchmark MLP (three GEMMs with their epilogues, no kernel left)
computes what the cpu backend does."""

import os

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cuda import compiler, ptxas
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.pipelines.runner import RunOptions
from mlirxla.runtime.client import Client
from mlirxla.runtime.cuda import Executable

from .conftest import JAX_PROGRAMS
from .fake_cuda_device import ComputingDevice

MLP = os.path.join(JAX_PROGRAMS, "programs", "mlp.stablehlo.mlir")


def compile_text(text: str) -> compiler.CudaProgram:
    imported = frontdoor.import_bytes(text.encode(), "test.mlir", new_context())
    return compiler.compile_program(imported.module, RunOptions(backend="cuda"))


def gemms(program: compiler.CudaProgram) -> list[dict]:
    return [t for t in program.executable.plan["thunks"] if t["kind"] == "gemm"]


def dense_layer(activation: str, precision: str = "DEFAULT", bias_dimension: int = 1, element: str = "f32") -> str:
    """x[8,16] @ w[16,32] + b broadcast along `bias_dimension`, then `activation`."""
    bias_shape = 32 if bias_dimension == 1 else 8
    body = {"relu": "%r = stablehlo.maximum %a, %zero : tensor<8x32xELEM>",
            "none": "%r = stablehlo.add %a, %zero : tensor<8x32xELEM>",
            "tanh": "%r = stablehlo.tanh %a : tensor<8x32xELEM>"}[activation]
    text = f"""func.func @main(%x: tensor<8x16xELEM>, %w: tensor<16x32xELEM>, %b: tensor<{bias_shape}xELEM>) -> tensor<8x32xELEM> {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0], precision = [{precision}, {precision}] : (tensor<8x16xELEM>, tensor<16x32xELEM>) -> tensor<8x32xELEM>
  %bb = stablehlo.broadcast_in_dim %b, dims = [{bias_dimension}] : (tensor<{bias_shape}xELEM>) -> tensor<8x32xELEM>
  %a = stablehlo.add %d, %bb : tensor<8x32xELEM>
  %z = stablehlo.constant dense<0.0> : tensor<ELEM>
  %zero = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<ELEM>) -> tensor<8x32xELEM>
  {body}
  return %r : tensor<8x32xELEM>
}}
"""
    return text.replace("ELEM", element)


def test_a_dense_layer_with_relu_is_one_matmul_with_the_bias_relu_epilogue():
    program = compile_text(dense_layer("relu"))
    plan = program.executable.plan
    (gemm,) = gemms(program)
    bias = next(p for p in plan["parameters"] if p["shape"] == [32])
    x = next(p for p in plan["parameters"] if p["shape"] == [8, 16])
    assert (gemm["m"], gemm["n"], gemm["k"], gemm["transpose_lhs"], gemm["transpose_rhs"]) == (8, 32, 16, False, False)
    assert (gemm["epilogue"], gemm["bias"], gemm["lhs"]) == ("bias_relu", bias["offset"], x["offset"])
    assert (gemm["operand_dtype"], gemm["out_dtype"], gemm["compute"]) == ("float32", "float32", "32F_FAST_TF32")
    assert gemm["out"] == plan["outputs"][0]["offset"] and plan["kernels"] == []


@pytest.mark.skipif(ptxas.unavailable() is not None, reason=ptxas.unavailable() or "")  # tanh calls libdevice
def test_an_epilogue_cublaslt_cannot_compute_keeps_its_kernel():
    """A tanh after the bias, and a bias along the rows (dimension 0: cuBLASLt's bias runs
    along the columns of the row-major result), stay kernels after a plain GEMM."""
    for text in (dense_layer("tanh"), dense_layer("relu", bias_dimension=0)):
        program = compile_text(text)
        (gemm,) = gemms(program)
        assert gemm["epilogue"] == "default" and gemm["bias"] is None
        assert [t["kind"] for t in program.executable.plan["thunks"]][:2] == ["gemm", "launch"]
        assert any("epilogue kernel kept (the fusion computes more than a bias add and a relu or GELU)" in d for d in program.decisions)


GELU_LAYER = """func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<32xf32>) -> tensor<8x32xf32>
  %a = stablehlo.add %bb, %d : tensor<8x32xf32>
  %sq = stablehlo.multiply %a, %a : tensor<8x32xf32>
  %cube = stablehlo.multiply %sq, %a : tensor<8x32xf32>
  %c1 = stablehlo.constant dense<4.471500e-02> : tensor<8x32xf32>
  %t1 = stablehlo.multiply %c1, %cube : tensor<8x32xf32>
  %t2 = stablehlo.add %a, %t1 : tensor<8x32xf32>
  %c2 = stablehlo.constant dense<0.797884583> : tensor<8x32xf32>
  %t3 = stablehlo.multiply %c2, %t2 : tensor<8x32xf32>
  %t4 = stablehlo.tanh %t3 : tensor<8x32xf32>
  %one = stablehlo.constant dense<1.0> : tensor<8x32xf32>
  %t5 = stablehlo.add %one, %t4 : tensor<8x32xf32>
  %half = stablehlo.constant dense<0.5> : tensor<8x32xf32>
  %t6 = stablehlo.multiply %half, %t5 : tensor<8x32xf32>
  %r = stablehlo.multiply %a, %t6 : tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}
"""


def test_a_dense_layer_with_the_tanh_gelu_is_one_matmul_with_the_bias_gelu_epilogue():
    """jax.nn.gelu's default (the tanh approximation, as the benchmark transformer writes it,
    bias added on the left) is cuBLASLt's GELU; the stand-in computing cuBLASLt's GELU_BIAS
    gives what the cpu backend computes from the original arithmetic."""
    program = compile_text(GELU_LAYER)
    (gemm,) = gemms(program)
    assert gemm["epilogue"] == "bias_gelu" and program.executable.plan["kernels"] == []
    generator = np.random.default_rng(2)
    inputs = [generator.standard_normal(p["shape"]).astype(np.float32) for p in program.executable.plan["parameters"]]
    (ours,) = Executable(program.executable, ComputingDevice()).run(inputs)
    (expected,) = Client(backend="cpu").compile(GELU_LAYER).execute_numpy(inputs)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_highest_precision_computes_in_full_f32(monkeypatch):
    assert gemms(compile_text(dense_layer("relu", precision="HIGHEST")))[0]["compute"] == "32F"
    monkeypatch.setenv("MLIRXLA_CUDA_GEMM_PRECISION", "highest")
    assert gemms(compile_text(dense_layer("relu")))[0]["compute"] == "32F"
    monkeypatch.setenv("MLIRXLA_CUDA_GEMM_PRECISION", "tf64")
    with pytest.raises(MlirxlaError, match="MLIRXLA_CUDA_GEMM_PRECISION=tf64: expected one of jax, highest"):
        compile_text(dense_layer("relu"))


def test_bf16_gemms_accumulate_in_f32():
    (gemm,) = gemms(compile_text(dense_layer("relu", element="bf16")))
    assert (gemm["operand_dtype"], gemm["out_dtype"], gemm["compute"], gemm["epilogue"]) == ("bfloat16", "bfloat16", "32F", "bias_relu")
    widened = compile_text("""func.func @main(%x: tensor<8x16xbf16>, %w: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xf32>
  return %d : tensor<8x32xf32>
}
""")
    (gemm,) = gemms(widened)
    assert (gemm["operand_dtype"], gemm["out_dtype"], gemm["compute"], gemm["epilogue"]) == ("bfloat16", "float32", "32F", "default")


def integer_dot(lhs: str, rhs: str, k: int) -> str:
    return f"""func.func @main(%x: tensor<8x{k}x{lhs}>, %w: tensor<{k}x32x{rhs}>) -> tensor<8x32xi32> {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x{k}x{lhs}>, tensor<{k}x32x{rhs}>) -> tensor<8x32xi32>
  return %d : tensor<8x32xi32>
}}
"""


def test_integer_dots_are_float_gemms_that_tf32_computes_exactly(monkeypatch):
    """An int8 dot into int32 is a TF32 matmul of its widened operands (every int8 and every
    sum below 2^24 exact); an int16 operand, past the 2^11 TF32 holds, makes it an f64 one.
    On this CPU the same program computes numpy's int32 products."""
    (gemm,) = gemms(compile_text(integer_dot("i8", "i8", 1024)))
    assert (gemm["operand_dtype"], gemm["out_dtype"], gemm["compute"]) == ("float32", "float32", "32F_FAST_TF32")
    (gemm,) = gemms(compile_text(integer_dot("i16", "i8", 4)))
    assert (gemm["operand_dtype"], gemm["compute"]) == ("float64", "64F")
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (8, 1024)).astype(np.int8)
    w = rng.integers(-128, 128, (1024, 32)).astype(np.int8)
    (result,) = Client(backend="cuda-host").compile(integer_dot("i8", "i8", 1024)).execute_numpy([x, w])
    np.testing.assert_array_equal(result, x.astype(np.int64) @ w.astype(np.int64))


# --- the column-major mapping, computed as cuBLASLt defines it --------------------------------

def test_the_benchmark_mlp_as_three_matmuls_computes_what_the_cpu_backend_does():
    with open(MLP, "rb") as handle:
        text = handle.read()
    program = compiler.compile_program(frontdoor.import_bytes(text, MLP, new_context()).module, RunOptions(backend="cuda"))
    plan = program.executable.plan
    assert [t["epilogue"] for t in gemms(program)] == ["bias_relu", "bias_relu", "bias"] and plan["kernels"] == []
    generator = np.random.default_rng(0)
    device = ComputingDevice()
    executable = Executable(program.executable, device)
    client = Client(backend="cpu").compile(text)
    for _ in range(2):  # captured, then replayed as a graph on new arguments
        inputs = [(generator.standard_normal(p["shape"]) / 8).astype(p["dtype"]) for p in plan["parameters"]]
        (ours,) = executable.run(inputs)
        (expected,) = client.execute_numpy(inputs)
        np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)
    assert [c[0] for c in device.calls].count("launch_graph") == 2 and executable.execution()["graph"]


@pytest.mark.parametrize("transpose_lhs, transpose_rhs", [(False, True), (True, False), (True, True)])
def test_transposed_operands_map_to_cublaslt_operations(transpose_lhs, transpose_rhs):
    lhs_dims, rhs_dims = ("[0]" if transpose_lhs else "[1]"), ("[1]" if transpose_rhs else "[0]")
    lhs_type = "tensor<16x8xf32>" if transpose_lhs else "tensor<8x16xf32>"
    rhs_type = "tensor<32x16xf32>" if transpose_rhs else "tensor<16x32xf32>"
    text = f"""func.func @main(%x: {lhs_type}, %w: {rhs_type}) -> tensor<8x32xf32> {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = {lhs_dims} x {rhs_dims} : ({lhs_type}, {rhs_type}) -> tensor<8x32xf32>
  return %d : tensor<8x32xf32>
}}
"""
    program = compile_text(text)
    (gemm,) = gemms(program)
    assert (gemm["transpose_lhs"], gemm["transpose_rhs"]) == (transpose_lhs, transpose_rhs)
    generator = np.random.default_rng(1)
    x, w = (generator.standard_normal(p["shape"]).astype(np.float32) for p in program.executable.plan["parameters"])
    (ours,) = Executable(program.executable, ComputingDevice(), graphs=False).run([x, w])
    np.testing.assert_allclose(ours, (x.T if transpose_lhs else x) @ (w.T if transpose_rhs else w), rtol=1e-5, atol=1e-5)


def test_the_heuristic_is_told_how_far_the_pointers_are_aligned():
    from mlirxla.runtime.cuda.executor import matmul_of

    thunk = {"kind": "gemm", "operand_dtype": "float32", "out_dtype": "float32", "compute": "32F", "m": 4, "n": 4, "k": 4,
             "batch": 1, "transpose_lhs": False, "transpose_rhs": False, "lhs": 0, "rhs": 1024, "out": 2048, "epilogue": "bias",
             "bias": 2048 + 64}
    assert matmul_of(thunk).alignment == 64
    assert matmul_of({**thunk, "bias": 4096}).alignment == 256
    assert matmul_of({**thunk, "rhs": 1028}).alignment == 4
