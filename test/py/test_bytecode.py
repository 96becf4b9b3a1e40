"""The dialects a bytecode file names are read from its string section
(`frontdoor/bytecode.py`), so bytes of a constant that spell a dialect's name send no
artifact down the jaxlib path, and dialects the file does use are still found."""

import io

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.frontdoor import bytecode, jaxlib_bridge
from mlirxla.mlir import ir, stablehlo
from mlirxla.runtime import literals, reference

SPELLING_DIALECTS = np.frombuffer(b"sdy\0vhlo\0quant\0\0", dtype=np.float32)

QUANTIZED = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %q = "stablehlo.uniform_quantize"(%x) : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.1:-30>>
  %y = "stablehlo.uniform_dequantize"(%q) : (tensor<2x!quant.uniform<i8:f32, 0.1:-30>>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
"""


def adding_constant(values: np.ndarray) -> str:
    return f"""
func.func @main(%x: tensor<{values.size}xf32>) -> tensor<{values.size}xf32> {{
  %c = stablehlo.constant dense<"0x{values.tobytes().hex().upper()}"> : tensor<{values.size}xf32>
  %y = stablehlo.add %x, %c : tensor<{values.size}xf32>
  return %y : tensor<{values.size}xf32>
}}
"""


def written(module: ir.Module) -> bytes:
    data = io.BytesIO()
    module.operation.write_bytecode(data)
    return data.getvalue()


def test_the_strings_are_the_names_a_module_uses(context):
    with context:
        data = written(ir.Module.parse(QUANTIZED))
    assert {b"builtin", b"func", b"stablehlo", b"quant", b"uniform_quantize", b"main"} <= bytecode.strings(data)
    assert bytecode.names_dialect(data, "quant")
    assert not bytecode.names_dialect(data, "sdy")


def test_constant_bytes_spelling_dialects_name_none(context, monkeypatch):
    """A constant holding `sdy`, `vhlo` and `quant` in its bytes: the artifact is read by the
    toolkit's own deserializer (the jaxlib path would fail here) and computes the sum."""
    with context:
        module = ir.Module.parse(adding_constant(SPELLING_DIALECTS))
        data = stablehlo.serialize_portable_artifact(module, stablehlo.get_current_version())
    assert b"sdy" in data and b"quant" in data
    assert not bytecode.names_dialect(data, "sdy")
    assert bytecode.names_dialect(data, "vhlo")

    def refused(*_):
        raise AssertionError("went through jaxlib")

    monkeypatch.setattr(jaxlib_bridge, "artifact_to_generic_text", refused)
    imported = frontdoor.import_bytes(data, "spelling.bc", context)
    assert imported.form == "portable-artifact"
    x = np.arange(SPELLING_DIALECTS.size, dtype=np.float32)
    [out] = reference.execute(imported.module, [x]).outputs
    np.testing.assert_array_equal(literals.to_numpy(out), x + SPELLING_DIALECTS)


def test_unreadable_bytecode_falls_back_to_a_search_of_its_bytes(context):
    with context:
        data = written(ir.Module.parse(QUANTIZED))
    truncated = data[:len(data) // 2]
    assert bytecode.strings(truncated) is None
    assert bytecode.names_dialect(truncated + b"sdy", "sdy")
    assert bytecode.strings(b"not bytecode") is None


def sharded_artifact() -> bytes:
    """jax's portable artifact of `x * 2` on f32[4], its parameter sharded over a mesh."""
    jax = pytest.importorskip("jax")
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    sharded = jax.jit(lambda x: x * 2, in_shardings=NamedSharding(mesh, PartitionSpec("x")))
    return jax.export.export(sharded)(jax.ShapeDtypeStruct((4,), np.float32)).mlir_module_serialized


@pytest.mark.jax
def test_an_artifact_with_shardings_names_sdy():
    data = sharded_artifact()
    assert bytecode.names_dialect(data, "sdy")
    assert jaxlib_bridge.artifact_needs_jaxlib(data)


@pytest.mark.jax
def test_artifacts_with_shardings_are_read_once_in_one_jaxlib_context(context, monkeypatch):
    """jaxlib prints the artifact in generic form, which our context parses as it is (its sdy
    attributes stay in their own syntax): no second jaxlib parse. Making a jaxlib context
    costs about as much as the rest of a small program's import, so imports share one."""
    from jax._src.interpreters import mlir as jax_mlir

    data = sharded_artifact()
    readings, contexts = [], []
    read = jaxlib_bridge.generic_text_in_jaxlib
    make = jax_mlir.make_ir_context
    monkeypatch.setattr(jaxlib_bridge, "generic_text_in_jaxlib", lambda *arguments: readings.append(1) or read(*arguments))
    monkeypatch.setattr(jax_mlir, "make_ir_context", lambda: contexts.append(1) or make())
    monkeypatch.setitem(jaxlib_bridge._CONTEXT, "context", None)
    x = np.arange(4, dtype=np.float32)
    for _ in range(2):
        imported = frontdoor.import_bytes(data, "sharded.bc", context)
        [out] = reference.execute(imported.module, [x]).outputs
        np.testing.assert_array_equal(literals.to_numpy(out), x * 2)
    assert (len(readings), len(contexts)) == (2, 1)
