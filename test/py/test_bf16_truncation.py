"""NaNs narrowed to bf16 (and f64 to f16) keep their sign and lose their payload, as XLA's
conversions, ml_dtypes' and jax's cpu backend do (`backends/cpu/bf16_truncation.py`, the
native conversion's NaN select, the compiler-runtime helpers of `native_symbols.py`); XLA's
f32 logarithm of a negative number or a NaN is the NaN of all ones bits."""

import ml_dtypes
import numpy as np
import pytest

from mlirxla.backends.cpu import bf16_truncation, llvm_jit, native_bf16_rounding
from mlirxla.context import new_context
from mlirxla.mlir import ir
from mlirxla.runtime.client import Client

NAN_BITS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FA00000, 0xFFA12345, 0x7FFFFFFF,
                     0xFFFFFFFF, 0x3F808000, 0xBF818000, 0x00018000, 0x80000000], np.uint32)
WIDE_NAN_BITS = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFF4000000000001,
                          0x3FF0100000000000, 0xBFF0300000000000], np.uint64)


def host_has(feature: str) -> bool:
    import llvmlite.binding as llvm

    llvm_jit.target_machine()
    return f"+{feature}" in llvm.get_host_cpu_features().flatten().split(",")


def run(text: str, *arguments: np.ndarray) -> np.ndarray:
    return Client().compile(text).execute_numpy(list(arguments))[0]


def unary(shape: str, source: str, target: str, body: str) -> str:
    return f"""func.func @main(%x: tensor<{shape}x{source}>) -> tensor<{shape}x{target}> {{
  {body}
}}"""


def convert(shape: str, source: str, target: str) -> str:
    return unary(shape, source, target, f"""%0 = stablehlo.convert %x : (tensor<{shape}x{source}>) -> tensor<{shape}x{target}>
  return %0 : tensor<{shape}x{target}>""")


def ml_dtypes_bits(values: np.ndarray, dtype) -> list[int]:
    with np.errstate(invalid="ignore"):
        return values.astype(dtype).view(np.uint16).tolist()


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("count", [12, 12 * 64])
def test_f32_to_bf16_keeps_the_sign_of_a_nan(monkeypatch, native, count):
    """One vector's worth and a whole loop of them, through the native conversion (where the
    host has it) and through the integer rounding."""
    if native and not native_bf16_rounding.host_converts_bf16():
        pytest.skip("the host has no avx512bf16: kernels keep the integer rounding")
    monkeypatch.setattr(native_bf16_rounding, "host_converts_bf16", lambda: native)
    x = np.tile(NAN_BITS, count // len(NAN_BITS)).view(np.float32)
    got = run(convert(str(count), "f32", "bf16"), x).view(np.uint16)
    assert got.tolist() == ml_dtypes_bits(x, ml_dtypes.bfloat16)
    assert got[:2].tolist() == [0x7FC0, 0xFFC0]


@pytest.mark.parametrize("target, dtype, quiet", [("bf16", ml_dtypes.bfloat16, 0x7FC0), ("f16", np.float16, 0x7E00)])
def test_f64_narrowings_make_a_nan_the_quiet_nan_of_its_sign(target, dtype, quiet):
    """f64 -> bf16 and f64 -> f16 are the compiler-runtime helpers' (`__truncdfbf2`,
    `__truncdfhf2`): payloads dropped, signs kept (numpy's f16 keeps payloads, jax's cpu backend
    does not); numbers rounded once. A host with AVX512-FP16 converts f64 to f16 in one
    instruction, which keeps a NaN's top payload bits, quieted, as jax's cpu backend does there."""
    x = np.tile(WIDE_NAN_BITS, 8).view(np.float64)
    got = run(convert("48", "f64", target), x).view(np.uint16)
    numbers = ~np.isnan(x)
    assert got[numbers].tolist() == ml_dtypes_bits(x[numbers], dtype)
    nan_bits = x[~numbers].view(np.uint64)
    signs = (nan_bits >> 63).astype(np.uint16) << 15
    payloads = ((nan_bits >> 42) & 0x3FF).astype(np.uint16) if target == "f16" and host_has("avx512fp16") else 0
    assert got[~numbers].tolist() == (signs | quiet | payloads).tolist()


def test_the_nan_of_an_invalid_bf16_operation_is_negative():
    """x86 makes the NaN of sqrt(-1) negative; computed in f32 and narrowed, it stays so."""
    x = np.full(64, -1.5, ml_dtypes.bfloat16)
    text = unary("64", "bf16", "bf16", """%0 = stablehlo.sqrt %x : tensor<64xbf16>
  return %0 : tensor<64xbf16>""")
    assert set(run(text, x).view(np.uint16).tolist()) == {0xFFC0}


def test_f32_log_of_a_negative_number_or_a_nan_is_all_ones():
    x = np.concatenate([np.full(32, -1.5, np.float32), np.tile(NAN_BITS[:8], 4).view(np.float32),
                        np.array([0.0, np.inf, 1.0, 2.0] * 8, np.float32)])
    text = unary("96", "f32", "f32", """%0 = stablehlo.log %x : tensor<96xf32>
  return %0 : tensor<96xf32>""")
    got = run(text, x)
    assert (got[:64].view(np.uint32) == 0xFFFFFFFF).all()
    assert got[64:68].tolist() == [-np.inf, np.inf, 0.0, np.float32(np.log(np.float32(2.0)))]


def test_vectors_are_expanded_lane_by_lane():
    """A vector rounding (the transposes' register blocks hold vectors) becomes the same
    integer ops on vectors, no `truncf` left for `arith-expand`."""
    with new_context():
        module = ir.Module.parse("""func.func @k(%v: vector<16xf32>, %s: f32) -> (vector<16xbf16>, bf16, f16) {
  %0 = arith.truncf %v : vector<16xf32> to vector<16xbf16>
  %1 = arith.truncf %s : f32 to bf16
  %2 = arith.truncf %s : f32 to f16
  return %0, %1, %2 : vector<16xbf16>, bf16, f16
}""")
        with ir.Location.unknown():
            assert bf16_truncation.expand_bf16_truncations(module) == 2
        module.operation.verify()
        text = str(module)
    assert text.count("arith.truncf") == 1 and "arith.truncf %arg1 : f32 to f16" in text
    assert "arith.trunci %{} : vector<16xi32> to vector<16xi16>".split("%")[0] in text
    assert "vector<16xi1>" in text and "dense<32704> : vector<16xi32>" in text
