"""The byte GEMM on VNNI (`backends/cpu/byte_gemm.py`): int8 and uint8 rows by int8 columns into
int32 on the cpu backend, against numpy's int64 products wrapped to int32 (XLA's int32 sums
wrap), over shapes that leave rows, columns and the contracting dimension short of the
register blocks and the 4-byte groups, a transposed rhs, column slices over the threads, and sums
past 2^31; which dots `xhlo-integer-dot-as-float` keeps for it."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import byte_gemm
from mlirxla.backends.cpu.emitters.library_calls import PARALLEL_BYTE_PRODUCTS
from mlirxla.context import new_context
from mlirxla.mlir import ir
from mlirxla.runtime.client import Client
from mlirxla.runtime.threads import cpu_threads
from mlirxla.transforms.integer_dot_as_float import IntegerDotAsFloatPass

needs_vnni = pytest.mark.skipif(not byte_gemm.available(), reason="this host's CPU has no avx512_vnni (the byte GEMM's vpdpbusd)")


def dot_text(m: int, n: int, k: int, lhs: str, transposed_rhs: bool = False, batch: int = 0) -> str:
    leading = [batch] if batch else []
    lhs_type = f"tensor<{'x'.join(map(str, leading + [m, k]))}x{lhs}>"
    rhs_type = f"tensor<{'x'.join(map(str, leading + ([n, k] if transposed_rhs else [k, n])))}xi8>"
    result = f"tensor<{'x'.join(map(str, leading + [m, n]))}xi32>"
    offset = 1 if batch else 0
    batching = "batching_dims = [0] x [0], " if batch else ""
    return f"""func.func @main(%a: {lhs_type}, %b: {rhs_type}) -> {result} {{
  %r = stablehlo.dot_general %a, %b, {batching}contracting_dims = [{1 + offset}] x [{(1 if transposed_rhs else 0) + offset}] : ({lhs_type}, {rhs_type}) -> {result}
  return %r : {result}
}}
"""


def wrapped_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)


@needs_vnni
@pytest.mark.parametrize("m, n, k, lhs, transposed", [
    (1, 1, 1, "i8", False),
    (8, 32, 4, "i8", False),
    (9, 17, 5, "i8", False),
    (13, 33, 7, "ui8", False),
    (100, 48, 130, "i8", True),
    (3, 100, 64, "ui8", True),
    (256, 96, 512, "i8", False),  # columns in slices over the threads
    (40, 64, 2048, "ui8", True),
])
def test_the_byte_gemm_computes_the_wrapped_integer_dot(m, n, k, lhs, transposed):
    rng = np.random.default_rng(m * 1000 + n + k)
    a = (rng.integers(-128, 128, (m, k)) if lhs == "i8" else rng.integers(0, 256, (m, k))).astype(np.int8 if lhs == "i8" else np.uint8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    executable = Client(backend="cpu").compile(dot_text(m, n, k, lhs, transposed))
    sequence = executable.thunk_sequence()
    assert "gemm" not in sequence and "kernel" in sequence
    assert ("sliced kernel x2 " in sequence) == (m * n * k >= PARALLEL_BYTE_PRODUCTS and cpu_threads() == 2)
    (result,) = executable.execute_numpy([a, np.ascontiguousarray(b.T) if transposed else b])
    np.testing.assert_array_equal(result, wrapped_product(a, b))


@needs_vnni
def test_sums_past_two_to_the_31_wrap_as_xla_s_do():
    k = 140000  # 140000 * 128 * 128 > 2^31
    a = np.full((2, k), -128, np.int8)
    b = np.full((k, 3), -128, np.int8)
    b[:, 1] = 127
    (result,) = Client(backend="cpu").compile(dot_text(2, 3, k, "i8")).execute_numpy([a, b])
    expected = wrapped_product(a, b)
    assert expected[0, 0] < 0  # the true sum, 2.3e9, wrapped
    np.testing.assert_array_equal(result, expected)


def kept_and_rewritten(text: str) -> tuple[list[str], bool]:
    module = frontdoor.import_text(text, "test_byte_gemm.mlir", new_context()).module
    with module.context, ir.Location.unknown():
        result = IntegerDotAsFloatPass(byte_gemms=True).run(module)
    return result.report.dump_files().get("integer-dot-as-float.txt", "").splitlines(), "xhlo.convert" in str(module)


TRANSPOSED_LHS = """func.func @main(%a: tensor<16x4xi8>, %b: tensor<16x8xi8>) -> tensor<4x8xi32> {
  %r = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : (tensor<16x4xi8>, tensor<16x8xi8>) -> tensor<4x8xi32>
  return %r : tensor<4x8xi32>
}
"""
UNSIGNED_RHS = dot_text(4, 8, 16, "i8").replace("%b: tensor<16x8xi8>", "%b: tensor<16x8xui8>").replace(", tensor<16x8xi8>)", ", tensor<16x8xui8>)")


@pytest.mark.parametrize("refused", [dot_text(4, 8, 16, "i8", batch=2), TRANSPOSED_LHS, UNSIGNED_RHS])
def test_the_pass_makes_the_dots_the_byte_gemm_refuses_float(refused):
    lines, converted = kept_and_rewritten(refused)
    assert converted and lines and all("kept" not in line for line in lines)


def test_the_pass_keeps_the_dots_the_byte_gemm_takes():
    lines, converted = kept_and_rewritten(dot_text(4, 8, 16, "ui8", transposed_rhs=True))
    assert len(lines) == 1 and lines[0].endswith("kept, the byte GEMM on VNNI") and not converted
