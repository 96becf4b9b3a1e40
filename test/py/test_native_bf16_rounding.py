"""f32 -> bf16 roundings through AVX512-BF16's conversion, a loop run again exactly when it
rounded a denormal (`backends/cpu/native_bf16_rounding.py`): bit for bit the integer
rounding's results (ml_dtypes' for a convert), denormals, ties, NaN payloads and infinities
included, and the loops that may not run twice left alone."""

import re

import ml_dtypes
import numpy as np
import pytest

from mlirxla.backends.cpu import native_bf16_rounding
from mlirxla.context import new_context
from mlirxla.mlir import ir
from mlirxla.runtime.client import Client, CompileOptions

BF16 = ml_dtypes.bfloat16
ROWS, COLUMNS = 16, 256

needs_the_conversion = pytest.mark.skipif(not native_bf16_rounding.host_converts_bf16(),
                                          reason="the host has no avx512bf16: kernels keep the integer rounding")

# a bf16 softmax numerator: each row's scores less a row value, exponentiated
EXPONENTIAL = f"""func.func @main(%s: tensor<{ROWS}x{COLUMNS}xf32>, %m: tensor<{ROWS}xf32>) -> tensor<{ROWS}x{COLUMNS}xbf16> {{
  %b = stablehlo.convert %s : (tensor<{ROWS}x{COLUMNS}xf32>) -> tensor<{ROWS}x{COLUMNS}xbf16>
  %mb = stablehlo.convert %m : (tensor<{ROWS}xf32>) -> tensor<{ROWS}xbf16>
  %spread = stablehlo.broadcast_in_dim %mb, dims = [0] : (tensor<{ROWS}xbf16>) -> tensor<{ROWS}x{COLUMNS}xbf16>
  %d = stablehlo.subtract %b, %spread : tensor<{ROWS}x{COLUMNS}xbf16>
  %e = stablehlo.exponential %d : tensor<{ROWS}x{COLUMNS}xbf16>
  return %e : tensor<{ROWS}x{COLUMNS}xbf16>
}}"""

CONVERT = f"""func.func @main(%x: tensor<{ROWS}x{COLUMNS}xf32>) -> tensor<{ROWS}x{COLUMNS}xbf16> {{
  %0 = stablehlo.convert %x : (tensor<{ROWS}x{COLUMNS}xf32>) -> tensor<{ROWS}x{COLUMNS}xbf16>
  return %0 : tensor<{ROWS}x{COLUMNS}xbf16>
}}"""

# ties to even, the denormal range (a tie there too, what rounds up to the least normal), the
# largest f32 (bf16 infinity), infinities, NaNs with payloads and signs, both zeros
EDGES = np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x00008000, 0x00018000, 0x00000001, 0x80000001,
                  0x007FFFFF, 0x807FFFFF, 0x007F8000, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000,
                  0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000, 0xFF812345, 0x00000000,
                  0x80000000], np.uint32)


def compiled(text: str, monkeypatch, native: bool, dump_to=None):
    monkeypatch.setattr(native_bf16_rounding, "host_converts_bf16", lambda: native)
    return Client().compile(text, CompileOptions(dump_to=dump_to))


def exponential_arguments() -> list[np.ndarray]:
    """Rows whose exponentials are normal only, rows with denormal results (scores 87-104
    below the row value), with a NaN of a payload, with infinities; the first rows clean."""
    rng = np.random.default_rng(7)
    scores = (rng.standard_normal((ROWS, COLUMNS)) * 4).astype(np.float32)
    scores[4, 10:20] = -rng.uniform(87.5, 103.5, 10)
    scores[5, ::7] = -rng.uniform(87.5, 103.5, len(range(0, COLUMNS, 7)))
    scores[6, 3] = np.uint32(0x7FA00000).view(np.float32)
    scores[7, 100] = np.inf
    scores[7, 101] = -np.inf
    scores[8, :] = np.linspace(-104, -86, COLUMNS, dtype=np.float32)
    return [scores, np.zeros(ROWS, np.float32)]


@needs_the_conversion
def test_exponentials_round_as_the_integer_rounding_does(monkeypatch, tmp_path):
    """The native loop's results where no denormal was rounded, the exact loop's where one
    was: bit for bit the kernel that rounds in integer ops, over every row. The conversion is
    vectorized in whole AVX-512 vectors (LLVM's own choice was 4 lanes), the integer rounding
    kept for the rerun."""
    arguments = exponential_arguments()
    native = compiled(EXPONENTIAL, monkeypatch, True, str(tmp_path)).execute_numpy(arguments)[0]
    exact = compiled(EXPONENTIAL, monkeypatch, False).execute_numpy(arguments)[0]
    assert native.view(np.uint16).tolist() == exact.view(np.uint16).tolist()
    assert (exact[8].view(np.uint16) > 0).any() and (exact[8].view(np.uint16) < 0x80).any()  # denormal results
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert re.search(r"fptrunc <16 x float> .* to <16 x bfloat>", optimized), "the conversion is not in 16 lanes"
    assert re.search(r"add <\d+ x i32> .*splat \(i32 32767\)", optimized), "the exact loop is gone"


@needs_the_conversion
@pytest.mark.parametrize("denormal_rows", [[], [3], list(range(ROWS))])
def test_a_convert_rounds_as_ml_dtypes(monkeypatch, denormal_rows):
    """Random bit patterns and the edges, denormals in no row, one row or every row: ml_dtypes'
    rounding, a NaN the quiet NaN of its sign (0x7FC0 or 0xFFC0)."""
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 2**32, (ROWS, COLUMNS), dtype=np.uint64).astype(np.uint32)
    bits[(bits & 0x7F800000) == 0] |= 0x00800000  # no denormal unless placed
    for row in denormal_rows:
        bits[row, :len(EDGES)] = EDGES
    if not denormal_rows:
        bits[0, :len(EDGES)] = [edge if edge & 0x7F800000 else edge | 0x00800000 for edge in EDGES]
    x = bits.view(np.float32)
    got = compiled(CONVERT, monkeypatch, True).execute_numpy([x])[0].view(np.uint16)
    with np.errstate(invalid="ignore"):
        expected = x.astype(BF16).view(np.uint16)
    assert got.tolist() == expected.tolist()
    assert {0x7FC0, 0xFFC0} <= set(got[np.isnan(x)].tolist())


LOOPS = """func.func @k(%a: memref<64xf32>, %out: memref<64xbf16> {llvm.noalias}, %shared: memref<64xbf16>,
                 %inout: memref<64xf32> {llvm.noalias}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %a[%i] : memref<64xf32>
    %r = arith.truncf %x : f32 to bf16
    memref.store %r, %out[%i] : memref<64xbf16>
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %a[%i] : memref<64xf32>
    %r = arith.truncf %x : f32 to bf16
    memref.store %r, %shared[%i] : memref<64xbf16>
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %inout[%i] : memref<64xf32>
    %r = arith.truncf %x : f32 to bf16
    %w = arith.extf %r : bf16 to f32
    memref.store %w, %inout[%i] : memref<64xf32>
  }
  return
}"""


def test_only_loops_that_may_run_twice_change(monkeypatch):
    """A loop storing to a `llvm.noalias` argument it does not read runs natively first; one
    storing to an argument another may share, or updating what it reads, keeps its one
    exact run."""
    monkeypatch.setattr(native_bf16_rounding, "host_converts_bf16", lambda: True)
    with new_context():
        module = ir.Module.parse(LOOPS)
        assert native_bf16_rounding.round_bf16_natively(module) == 1
        text = str(module)
    assert text.count("llvm.fptrunc") == 1 and text.count("arith.truncf") == 3, text
    assert re.search(r"llvm.fptrunc .*\n(.*\n){0,16}.*memref.store .*%arg1", text), text
    assert re.search(r"arith.cmpi ult, .*\n.*\n.*arith.cmpi ugt, .*\n.*arith.ori .*\n\s*scf.if .*\n\s*scf.for .*\n.*\n.*arith.truncf",
                     text), text


@needs_the_conversion
def test_a_loop_calling_libm_is_not_forced_to_vectorize(capfd):
    """bf16 cbrt is a call of libm's cbrtf, which no vector width can widen: asked for 16
    lanes, LLVM printed "loop not vectorized" on the user's terminal. The loop is left to
    LLVM's own choice, and its results are ml_dtypes' roundings of cbrt."""
    text = CONVERT.replace("%0 = stablehlo.convert %x : (tensor<16x256xf32>) -> tensor<16x256xbf16>",
                           "%b = stablehlo.convert %x : (tensor<16x256xf32>) -> tensor<16x256xbf16>\n"
                           "  %0 = stablehlo.cbrt %b : tensor<16x256xbf16>")
    x = np.random.default_rng(3).uniform(-8, 8, (ROWS, COLUMNS)).astype(np.float32)
    got = Client().compile(text).execute_numpy([x])[0]
    expected = np.cbrt(x.astype(BF16).astype(np.float32)).astype(BF16)
    assert np.abs(got.astype(np.float32) - expected.astype(np.float32)).max() <= np.abs(expected.astype(np.float32)).max() / 128
    assert "not vectorized" not in capfd.readouterr().err
