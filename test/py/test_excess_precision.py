"""bf16 values read inside a kernel stay in f32 (`backends/cpu/excess_precision.py`, XLA's
`xla_allow_excess_precision`): a single bf16 op is still exact, a fused chain is the f32
chain rounded once, and with `MLIRXLA_ALLOW_EXCESS_PRECISION=0` every op rounds, as the
reference interpreter computes it."""

import re

import ml_dtypes
import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import excess_precision
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir
from mlirxla.runtime.client import Client, CompileOptions

from .conftest import reference_outputs

BF16 = ml_dtypes.bfloat16
N = 4096

BINARY = """func.func @main(%x: tensor<{n}xbf16>, %y: tensor<{n}xbf16>) -> tensor<{n}xbf16> {{
  %0 = stablehlo.{op} %x, %y : tensor<{n}xbf16>
  return %0 : tensor<{n}xbf16>
}}"""

# x * y + z, / y, - x, + round(w): four bf16 ops and a convert from f32, fused into one kernel
CHAIN = """func.func @main(%x: tensor<{n}xbf16>, %y: tensor<{n}xbf16>, %z: tensor<{n}xbf16>, %w: tensor<{n}xf32>) -> tensor<{n}xbf16> {{
  %0 = stablehlo.multiply %x, %y : tensor<{n}xbf16>
  %1 = stablehlo.add %0, %z : tensor<{n}xbf16>
  %2 = stablehlo.divide %1, %y : tensor<{n}xbf16>
  %3 = stablehlo.subtract %2, %x : tensor<{n}xbf16>
  %4 = stablehlo.convert %w : (tensor<{n}xf32>) -> tensor<{n}xbf16>
  %5 = stablehlo.add %3, %4 : tensor<{n}xbf16>
  return %5 : tensor<{n}xbf16>
}}"""


def chain_arguments() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    x, y, z = (rng.standard_normal(N).astype(BF16) for _ in range(3))
    y = np.where(np.abs(y.astype(np.float32)) < 0.25, BF16(0.5), y)  # no quotient blows up
    return [x, y, z, rng.standard_normal(N).astype(np.float32)]


def chain_in_f32(x, y, z, w) -> np.ndarray:
    """The chain computed in f32 from the widened arguments, rounded once."""
    x, y, z = (a.astype(np.float32) for a in (x, y, z))
    return ((x * y + z) / y - x + w).astype(BF16)


def chain_rounding_every_op(x, y, z, w) -> np.ndarray:
    def rounded(a):
        return a.astype(BF16).astype(np.float32)

    x, y, z = (a.astype(np.float32) for a in (x, y, z))
    return rounded(rounded(rounded(rounded(rounded(x * y) + z) / y) - x) + rounded(w)).astype(BF16)


def decisions_of(text: str) -> list[str]:
    """The thunk sequence's decisions for the program `text`."""
    return compile_module(frontdoor.import_text(text, "program", new_context()).module).decisions


def bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.uint16)


@pytest.mark.parametrize("allowed", ["1", "0"])
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "maximum", "minimum"])
def test_single_bf16_ops_stay_exact(monkeypatch, op, allowed):
    """One bf16 op is one rounding either way: bit for bit the reference interpreter's."""
    monkeypatch.setenv(excess_precision.VARIABLE, allowed)
    text = BINARY.format(op=op, n=N)
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal(N).astype(BF16) for _ in range(2))
    module = frontdoor.import_text(text, "single_op", new_context()).module
    expected = reference_outputs(module, [x, y])[0]
    got = Client().compile(text).execute_numpy([x, y])[0]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(bits(got), bits(expected))


def test_a_fused_chain_with_excess_precision_is_the_f32_chain_rounded_once(monkeypatch):
    """With excess precision (the default) the kernel rounds only the bf16 value it stores, as
    XLA:CPU computes it; the convert of the f32 argument is no rounding either."""
    monkeypatch.delenv(excess_precision.VARIABLE, raising=False)
    arguments = chain_arguments()
    executable = Client().compile(CHAIN.format(n=N))
    got = executable.execute_numpy(arguments)[0]
    np.testing.assert_array_equal(bits(got), bits(chain_in_f32(*arguments)))
    assert not np.array_equal(bits(got), bits(chain_rounding_every_op(*arguments)))
    assert any("5 bf16 rounding(s) of values read in the kernel left out, computed in f32 (excess precision)" in line
               for line in decisions_of(CHAIN.format(n=N))), decisions_of(CHAIN.format(n=N))


def test_a_fused_chain_without_excess_precision_rounds_every_op(monkeypatch):
    """`MLIRXLA_ALLOW_EXCESS_PRECISION=0`: every op's result rounded, bit for bit the reference
    interpreter's, and the thunk sequence names no rounding left out."""
    monkeypatch.setenv(excess_precision.VARIABLE, "0")
    text = CHAIN.format(n=N)
    arguments = chain_arguments()
    executable = Client().compile(text)
    got = executable.execute_numpy(arguments)[0]
    np.testing.assert_array_equal(bits(got), bits(chain_rounding_every_op(*arguments)))
    module = frontdoor.import_text(text, "chain", new_context()).module
    np.testing.assert_array_equal(bits(got), bits(reference_outputs(module, arguments)[0]))
    assert not any("excess precision" in line for line in decisions_of(text))


# (x * y masked by position) - z: the select keeps the product in bf16 unless it reads the f32 one
MASKED_CHAIN = """func.func @main(%x: tensor<64x64xbf16>, %y: tensor<64x64xbf16>, %z: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  %0 = stablehlo.multiply %x, %y : tensor<64x64xbf16>
  %rows = stablehlo.iota dim = 0 : tensor<64x64xi32>
  %columns = stablehlo.iota dim = 1 : tensor<64x64xi32>
  %kept = stablehlo.compare LE, %columns, %rows, SIGNED : (tensor<64x64xi32>, tensor<64x64xi32>) -> tensor<64x64xi1>
  %low = stablehlo.constant dense<-3.0e+00> : tensor<64x64xbf16>
  %1 = stablehlo.select %kept, %0, %low : tensor<64x64xi1>, tensor<64x64xbf16>
  %2 = stablehlo.subtract %1, %z : tensor<64x64xbf16>
  return %2 : tensor<64x64xbf16>
}"""


@pytest.mark.parametrize("allowed", [True, False])
def test_a_select_of_a_rounding_is_read_in_f32(allowed):
    """A bf16 select of a product and a constant, read by the next op in the kernel, is the
    select of the f32 product with excess precision (the chain rounded once, at the store), and
    bit for bit the reference interpreter's per-op rounding without it."""
    rng = np.random.default_rng(7)
    x, y, z = (rng.standard_normal((64, 64)).astype(BF16) for _ in range(3))
    got = Client().compile(MASKED_CHAIN, CompileOptions(allow_excess_precision=allowed)).execute_numpy([x, y, z])[0]
    kept = np.tril(np.ones((64, 64), bool))
    product = x.astype(np.float32) * y.astype(np.float32)
    if allowed:
        expected = (np.where(kept, product, np.float32(-3.0)) - z.astype(np.float32)).astype(BF16)
        assert any("1 bf16 rounding(s) of values read in the kernel left out" in line for line in decisions_of(MASKED_CHAIN))
    else:
        module = frontdoor.import_text(MASKED_CHAIN, "masked_chain", new_context()).module
        expected = reference_outputs(module, [x, y, z])[0]
        rounded = np.where(kept, product.astype(BF16).astype(np.float32), np.float32(-3.0))
        np.testing.assert_array_equal(bits(expected), bits((rounded - z.astype(np.float32)).astype(BF16)))
    np.testing.assert_array_equal(bits(got), bits(expected))


@pytest.mark.parametrize("option, variable", [(False, None), (True, "0")])
def test_the_compile_option_overrides_the_environment(monkeypatch, option, variable):
    """`CompileOptions(allow_excess_precision=...)` decides over `MLIRXLA_ALLOW_EXCESS_PRECISION`,
    and is part of the options' cache key."""
    if variable is None:
        monkeypatch.delenv(excess_precision.VARIABLE, raising=False)
    else:
        monkeypatch.setenv(excess_precision.VARIABLE, variable)
    arguments = chain_arguments()
    options = CompileOptions(allow_excess_precision=option)
    got = Client().compile(CHAIN.format(n=N), options).execute_numpy(arguments)[0]
    expected = chain_in_f32(*arguments) if option else chain_rounding_every_op(*arguments)
    np.testing.assert_array_equal(bits(got), bits(expected))
    assert options.key() != CompileOptions().key()


def test_the_rounding_at_the_store_is_vectorized(monkeypatch, tmp_path):
    """The one rounding left, f32 -> bf16 to nearest even in integer ops, is widened with the
    rest of the loop: the kernel stores bf16 vectors (as bfloat where the host converts to
    bf16 natively, else the rounded bits as 16-bit integers)."""
    monkeypatch.delenv(excess_precision.VARIABLE, raising=False)
    Client().compile(CHAIN.format(n=N), CompileOptions(dump_to=str(tmp_path)))
    optimized = "".join(path.read_text() for path in tmp_path.glob("*.ir-with-opt.ll"))
    assert "define" in optimized
    assert re.search(r"store <(8|16|32) x (bfloat|i16)>", optimized), optimized
    assert "@__truncsfbf2" not in optimized


PAIR = """func.func @k(%a: memref<8xf32>, %out: memref<8xbf16>, %i: index) {
  %x = memref.load %a[%i] : memref<8xf32>
  %r = arith.truncf %x : f32 to bf16
  %e = arith.extf %r : bf16 to f32
  %s = arith.addf %e, %e : f32
  %t = arith.truncf %s : f32 to bf16
  memref.store %t, %out[%i] : memref<8xbf16>
  return
}"""

# a rounding that is stored, a widening of a loaded value, an f16 pair, an f16 value
# converted to bf16 (jnp's astype of an f16 array, then a bf16 op)
NO_PAIR = """func.func @k(%a: memref<8xf32>, %b: memref<8xbf16>, %h: memref<8xf16>, %out: memref<8xbf16>, %wide: memref<8xf32>, %i: index) {
  %x = memref.load %a[%i] : memref<8xf32>
  %r = arith.truncf %x : f32 to bf16
  memref.store %r, %out[%i] : memref<8xbf16>
  %l = memref.load %b[%i] : memref<8xbf16>
  %le = arith.extf %l : bf16 to f32
  %q = arith.truncf %le : f32 to f16
  %qe = arith.extf %q : f16 to f32
  memref.store %qe, %wide[%i] : memref<8xf32>
  %f = memref.load %h[%i] : memref<8xf16>
  %fe = arith.extf %f : f16 to f32
  %fb = arith.truncf %fe : f32 to bf16
  %fbe = arith.extf %fb : bf16 to f32
  %twice = arith.addf %fbe, %fbe : f32
  memref.store %twice, %wide[%i] : memref<8xf32>
  return
}"""


def kept_in_f32(text: str) -> tuple[int, str, str]:
    """How many widenings `keep_fused_bf16_in_f32` drops from `text`, and the module before and after."""
    with new_context():
        module = ir.Module.parse(text)
        before = str(module)
        dropped = excess_precision.keep_fused_bf16_in_f32(module)
        return dropped, before, str(module)


def test_an_f32_to_bf16_to_f32_pair_goes():
    """The add reads %x itself, the rounding nothing reads goes; the stored rounding stays."""
    dropped, _, after = kept_in_f32(PAIR)
    assert dropped == 1
    assert "arith.addf %0, %0 : f32" in after and "arith.extf" not in after, after
    assert after.count("arith.truncf") == 1 and "arith.truncf %1 : f32 to bf16" in after, after


def test_stored_roundings_loaded_widenings_f16_pairs_and_f16_to_bf16_conversions_stay():
    dropped, before, after = kept_in_f32(NO_PAIR)
    assert dropped == 0 and after == before


def test_the_setting_is_part_of_the_compile_cache_key(monkeypatch):
    from mlirxla.backends import cpu

    monkeypatch.setenv(excess_precision.VARIABLE, "1")
    on = cpu.environment()
    monkeypatch.setenv(excess_precision.VARIABLE, "0")
    assert cpu.environment() != on and "excess_precision=0" in cpu.environment()


def test_a_bad_setting_is_one_line(monkeypatch):
    monkeypatch.setenv(excess_precision.VARIABLE, "yes")
    with pytest.raises(MlirxlaError, match=r"^MLIRXLA_ALLOW_EXCESS_PRECISION='yes': expected 1 \(allow excess precision\) or 0$"):
        excess_precision.allowed()


@pytest.mark.parametrize("allowed", ["1", "0"])
def test_a_failed_check_of_bf16_says_how_to_round_as_the_interpreter(monkeypatch, capsys, tmp_path, allowed):
    """`mlirxla-run --check` of a bf16 chain: with excess precision the outputs differ from the
    interpreter's and the tool says which setting computes as it does; without, they match."""
    from mlirxla.tools.run import main

    monkeypatch.setenv(excess_precision.VARIABLE, allowed)
    path = tmp_path / "chain.mlir"
    path.write_text(CHAIN.format(n=N))
    status = main([str(path), "--check"])
    printed = capsys.readouterr().out
    if allowed == "1":
        assert status != 0 and "MLIRXLA_ALLOW_EXCESS_PRECISION=0 computes as it does" in printed, printed
    else:
        assert status == 0 and "1 output(s) match" in printed and "EXCESS" not in printed, printed


F16_TO_BF16 = """func.func @main(%x: tensor<4096xf16>) -> tensor<4096xf32> {
  %0 = stablehlo.convert %x : (tensor<4096xf16>) -> tensor<4096xbf16>
  %1 = stablehlo.convert %0 : (tensor<4096xbf16>) -> tensor<4096xf32>
  return %1 : tensor<4096xf32>
}"""


def test_an_f16_value_converted_to_bf16_is_rounded_with_excess_precision_allowed(monkeypatch):
    """jnp's `x.astype(bf16)` of an f16 `x`, widened after: the bf16 rounding is the
    program's, kept (its bypass kept f16's 3 extra bits: a bf16 dot of converted f16 operands
    was off by 2e-3 where XLA:CPU's is exact); ml_dtypes' values."""
    monkeypatch.setenv(excess_precision.VARIABLE, "1")
    x = np.random.default_rng(3).standard_normal(4096).astype(np.float16)
    result = Client().compile(F16_TO_BF16).execute_numpy([x])[0]
    np.testing.assert_array_equal(result, x.astype(BF16).astype(np.float32))
