"""HloSharding text (parse / print / validate), the sharding import (mhlo.sharding, Shardy) and
the module verifier's sharding checks."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mlirxla.dialects.xhlo.sharding import HloSharding, Iota, ShardingSyntaxError, sharding_problem
from mlirxla.errors import MlirxlaError
from mlirxla.frontdoor import shardings as sdy
from mlirxla.mlir import ir

from .conftest import JAX_PROGRAMS

ROUND_TRIPS = [
    "{replicated}",
    "{manual}",
    "{unknown}",
    "{maximal device=3}",
    "{devices=[2,1]0,1}",
    "{devices=[2,2]3,1,2,0}",
    "{devices=[2,2]<=[4]}",
    "{devices=[2,2]<=[2,2]T(1,0)}",
    "{devices=[4,2]<=[2,2,2]T(1,0,2)}",
    "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
    "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
    "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}",
    "{devices=[1,2,2,2]<=[8] last_tile_dims={manual, replicated}}",
    "{devices=[2,2]<=[4] last_tile_dims={manual}}",
    "{{replicated}, {maximal device=0}}",
    "{{devices=[2]0,1}, {manual}, {replicated}}",
    "{}",
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_round_trip(text):
    sharding = HloSharding.parse(text)
    assert str(sharding) == text
    assert HloSharding.parse(str(sharding)) == sharding


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("{devices=[2,2]<=[2,2]T(0,1)}", "{devices=[2,2]<=[4]}"),
        ("{devices=[2,2]<=[1,2,2]T(0,2,1)}", "{devices=[2,2]<=[2,2]T(1,0)}"),
        ("{devices=[4,2]<=[2,2,2]T(2,0,1)}", "{devices=[4,2]<=[4,2]T(1,0)}"),
        ("{devices=[2,2]<=[4] last_tile_dims={replicated}}", "{devices=[2,2]<=[4] last_tile_dim_replicate}"),
        ("{ replicated metadata={op_name=\"a}b\" source_file=\"x.py\" source_line=3} }", "{replicated}"),
        ("{devices=[2,1]0,1 metadata={op_name=\"x\"}}", "{devices=[2,1]0,1}"),
        ("{maximal device=1 shard_as 2}", "{maximal device=1}"),
        ("{{replicated}, /*index=1*/{manual}}", "{{replicated}, {manual}}"),
    ],
)
def test_canonical_printing(text, canonical):
    assert str(HloSharding.parse(text)) == canonical


def test_iota_devices():
    assert list(HloSharding.parse("{devices=[2,2]<=[2,2]T(1,0)}").devices()) == [0, 2, 1, 3]
    assert list(HloSharding.parse("{devices=[4,2]<=[2,2,2]T(1,0,2)}").devices()) == [0, 1, 4, 5, 2, 3, 6, 7]
    assert Iota((2, 3), (1, 0)).canonical() == Iota((2, 3), (1, 0))
    assert Iota((1, 4, 1), None).canonical() == Iota((4,), None)


@pytest.mark.parametrize(
    "text",
    [
        "replicated",
        "{replicated",
        "{bogus}",
        "{maximal}",
        "{devices=[2]0,1 last_tile_dim_replicate last_tile_dims={manual}}",
        "{devices=[2]0,1 last_tile_dims={sideways}}",
        "{devices=[2,2]<=[2,2]T(0,0)}",
        "{devices=[2,2]<=[3]}",
        "{devices=[2]0,1} trailing",
        "{devices=[2]<=[2] metadata={op_name=\"x}",
    ],
)
def test_syntax_refusals(text):
    with pytest.raises(ShardingSyntaxError, match="invalid HloSharding"):
        HloSharding.parse(text)


@pytest.mark.parametrize(
    "text, ranks, devices, problem",
    [
        ("{devices=[2,2]0,1,2}", None, None, "3 devices listed but the tile dimensions [2, 2] need 4"),
        ("{devices=[2,2]0,1,2,1}", None, None, "device 1 appears more than once"),
        ("{devices=[2]0,-1}", None, None, "device -1 is negative"),
        ("{devices=[1,1]0}", None, None, "single device"),
        ("{devices=[2,2]<=[4]}", [3], None, "tiles 2 dimensions but the value has rank 3"),
        ("{devices=[2,1,2]<=[4] last_tile_dim_replicate}", [1], None, "tiles 2 dimensions but the value has rank 1"),
        ("{devices=[2,2]<=[4]}", [2], 2, "device 3 is not below the device count 2"),
        ("{maximal device=4}", [1], 4, "device 4 is not below the device count 4"),
        ("{{replicated}, {maximal device=0}}", [1], None, "2 elements for 1 values"),
        ("{{replicated}, {devices=[2]0,0}}", [1, 1], None, "tuple element 1: device 0 appears more than once"),
        ("{devices=[0,2]0,1}", None, None, "must be positive"),
    ],
)
def test_validation_refusals(text, ranks, devices, problem):
    found = HloSharding.parse(text).problem(ranks, devices)
    assert found is not None and problem in found


@pytest.mark.parametrize("text", ["{replicated}", "{devices=[2,2]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{maximal device=3}"])
def test_validation_accepts(text):
    assert HloSharding.parse(text).problem([2], 4) is None


def test_sharding_problem_attribute(context):
    with context:
        assert sharding_problem(ir.StringAttr.get("{replicated}"), 1) is None
        assert "must be a string" in sharding_problem(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1), 1)
        assert "invalid HloSharding" in sharding_problem(ir.StringAttr.get("{nope}"), 1)
        assert "2 elements for 1 results" in sharding_problem(ir.StringAttr.get("{{replicated}, {manual}}"), 1)
        assert sharding_problem(ir.StringAttr.get("{{replicated}, {manual}}"), 2) is None


# ---------------------------------------------------------------- Shardy -> HloSharding

MESH = sdy.Mesh((("data", 2), ("model", 2)))


@pytest.mark.parametrize(
    "text, rank, manual, expected",
    [
        ('#sdy.sharding<@mesh, [{"data"}, {}]>', 2, (), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
        ('#sdy.sharding<@mesh, [{}, {"model"}]>', 2, (), "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
        ('#sdy.sharding<@mesh, [{"data"}, {"model"}]>', 2, (), "{devices=[2,2]<=[4]}"),
        ('#sdy.sharding<@mesh, [{"model"}, {"data"}]>', 2, (), "{devices=[2,2]<=[2,2]T(1,0)}"),
        ('#sdy.sharding<@mesh, [{"data", "model"}]>', 1, (), "{devices=[4]<=[4]}"),
        ('#sdy.sharding<@mesh, [{"model", "data"}]>', 1, (), "{devices=[4]<=[2,2]T(1,0)}"),
        ('#sdy.sharding<@mesh, [{}, {}]>', 2, (), "{replicated}"),
        ('#sdy.sharding<@mesh, [{}, {}], replicated={"data"}>', 2, (), "{replicated}"),
        ('#sdy.sharding<@mesh, [{"data", ?}p1, {?}]>', 2, (), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
        ('#sdy.sharding<@mesh, []>', 0, ("data", "model"), "{manual}"),
        ('#sdy.sharding<@mesh, [{"data"}, {}]>', 2, ("data", "model"), "{manual}"),
        ('#sdy.sharding<@mesh, [{"model"}]>', 1, ("data",), "{devices=[2,2]<=[2,2]T(1,0) last_tile_dims={manual}}"),
        ('#sdy.sharding<@mesh, [{}]>', 1, ("data",), "{devices=[1,2,2]<=[4] last_tile_dims={manual, replicated}}"),
        # unreduced axes: partial sums along them, a subgroup between manual and replicated
        ('#sdy.sharding<@mesh, [{"data"}, {}], unreduced={"model"}>', 2, (), "{devices=[2,1,2]<=[4] last_tile_dims={unreduced}}"),
        ('#sdy.sharding<@mesh, [{}], unreduced={"data"}>', 1, (), "{devices=[1,2,2]<=[4] last_tile_dims={unreduced, replicated}}"),
        ('#sdy.sharding<@mesh, [], unreduced={"model", "data"}>', 0, (), "{devices=[4]<=[2,2]T(1,0) last_tile_dims={unreduced}}"),
        ('#sdy.sharding<@mesh, [{}], unreduced={"model"}>', 1, ("data",), "{devices=[1,2,2]<=[4] last_tile_dims={manual, unreduced}}"),
        # inside shard_map, a partial sum over a manual axis is each device's own value
        ('#sdy.sharding<@mesh, [{}], unreduced={"data"}>', 1, ("data", "model"), "{manual}"),
    ],
)
def test_sdy_to_hlo(text, rank, manual, expected):
    sharding = sdy.parse_tensor_sharding(text)
    assert str(sdy.to_hlo_sharding(sharding, MESH, rank, manual)) == expected


def test_sdy_sub_axes_and_device_ids():
    mesh = sdy.parse_mesh('#sdy.mesh<["x"=4, "y"=2]>')
    assert mesh == sdy.Mesh((("x", 4), ("y", 2)))
    sub = sdy.parse_tensor_sharding('#sdy.sharding<@m, [{"x":(1)2}, {"y"}]>')
    # x splits into x:(1)2 (major) and x:(2)2 (minor, unused -> replicated)
    assert str(sdy.to_hlo_sharding(sub, mesh, 2)) == "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}"
    explicit = sdy.parse_mesh('#sdy.mesh<["a"=2, "b"=2], device_ids=[3, 2, 1, 0]>')
    assert explicit.device_ids == (3, 2, 1, 0)
    sharding = sdy.parse_tensor_sharding('#sdy.sharding<@m, [{"b"}, {"a"}]>')
    assert str(sdy.to_hlo_sharding(sharding, explicit, 2)) == "{devices=[2,2]3,1,2,0}"
    maximal = sdy.parse_mesh("#sdy.mesh<[], device_ids=[5]>")
    assert str(sdy.to_hlo_sharding(sdy.parse_tensor_sharding("#sdy.sharding<@m, [{}]>"), maximal, 1)) == "{maximal device=5}"
    inline = sdy.parse_tensor_sharding('#sdy.sharding<mesh<["q"=2]>, [{"q"}]>')
    assert str(sdy.to_hlo_sharding(inline, inline.mesh, 1)) == "{devices=[2]<=[2]}"
    with pytest.raises(ValueError, match="unknown mesh axis"):
        sdy.to_hlo_sharding(sdy.parse_tensor_sharding('#sdy.sharding<@m, [{"z"}]>'), MESH, 1)
    with pytest.raises(ValueError, match="rank 1"):
        sdy.to_hlo_sharding(sdy.parse_tensor_sharding('#sdy.sharding<@m, [{}, {}]>'), MESH, 1)


def test_unreduced_axes_read_back_on_the_mesh_and_refused_on_a_sharded_dim():
    from mlirxla.dialects.xhlo.mesh_sharding import DeviceMesh, from_hlo

    sharding = sdy.parse_tensor_sharding('#sdy.sharding<@mesh, [{"data"}, {}], replicated={"x"}, unreduced={"model"}>')
    assert sharding.unreduced == (sdy.AxisRef("model"),) and sharding.replicated == (sdy.AxisRef("x"),)
    hlo = sdy.to_hlo_sharding(sdy.parse_tensor_sharding('#sdy.sharding<@mesh, [{}, {"model"}], unreduced={"data"}>'), MESH, 2)
    mesh = DeviceMesh.of(MESH.axes)
    assert from_hlo(hlo, mesh, 2).text(mesh) == '[{}, {"model"}], unreduced={"data"}'
    with pytest.raises(ValueError, match="both unreduced and sharding"):
        sdy.to_hlo_sharding(sdy.parse_tensor_sharding('#sdy.sharding<@mesh, [{"data"}], unreduced={"data"}>'), MESH, 1)


def test_sdy_per_value_and_manual_axes():
    values = sdy.parse_sharding_per_value('#sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>, <@mesh, []>]>')
    assert [len(v.dims) for v in values] == [2, 0]
    assert sdy.parse_manual_axes('#sdy<manual_axes{"data", "model"}>') == ["data", "model"]


# ---------------------------------------------------------------- samples


def arg_shardings(module):
    main = next(op for op in module.body.operations if op.operation.name == "func.func")
    return [
        ir.StringAttr(ir.DictAttr(entry)["xhlo.sharding"]).value if "xhlo.sharding" in ir.DictAttr(entry) else None
        for entry in ir.ArrayAttr(main.attributes["arg_attrs"])
    ]


def op_shardings(module):
    found = []

    def visit(op):
        if "xhlo.sharding" in op.attributes and op.operation.name != "func.func":
            found.append((op.operation.name, ir.StringAttr(op.attributes["xhlo.sharding"]).value))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def xla_parameter_shardings(path):
    """The parameter shardings in XLA's compiled HLO text (the entry parameters' lines)."""
    shardings = []
    for line in open(path):
        if " parameter(" in line and "sharding=" in line and "ENTRY" not in line:
            start = line.index("sharding=") + len("sharding=")
            depth, end = 0, start
            for end in range(start, len(line)):
                depth += {"{": 1, "}": -1}.get(line[end], 0)
                if depth == 0:
                    break
            shardings.append(line[start : end + 1])
    return shardings


def test_sample_03_namedsharding(context):
    from mlirxla import frontdoor

    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, "03_sharded_namedsharding.stablehlo.mlir"), context).module
    expected = xla_parameter_shardings(os.path.join(JAX_PROGRAMS, "03_sharded_namedsharding.compiled_parameters.txt"))
    assert expected == ["{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"]
    assert arg_shardings(module) == expected
    assert op_shardings(module) == [("xhlo.custom_call", "{devices=[2,2]<=[4]}")]
    text = str(module)
    assert "sdy." not in text
    assert "partition_count = 4" in text


def test_sample_04_gspmd(context):
    from mlirxla import frontdoor

    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, "04_sharded_gspmd_mhlo_sharding.stablehlo.mlir"), context).module
    assert arg_shardings(module) == ["{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"]
    assert op_shardings(module) == [("xhlo.custom_call", "{devices=[2,2]<=[4]}")]


def test_sample_05_shard_map(context):
    """Inline sdy.manual_computation first (`prepare`): MLIR's inliner crashes on unregistered ops with regions."""
    from mlirxla import frontdoor
    from mlirxla.frontdoor.load import load_file

    loaded = load_file(os.path.join(JAX_PROGRAMS, "05_shard_map_psum.stablehlo.mlir"), context)
    with context:
        sdy.prepare(loaded.module)
    module = frontdoor.import_loaded(loaded).module
    assert arg_shardings(module) == ["{devices=[2,1,2]<=[4] last_tile_dim_replicate}"]
    custom_calls = [s for name, s in op_shardings(module) if name == "xhlo.custom_call"]
    assert custom_calls == ["{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{manual}", "{manual}", "{replicated}"]
    text = str(module)
    assert "SPMDFullToShardShape" in text and "SPMDShardToFullShape" in text
    assert "sdy." not in text and "xhlo.all_reduce" in text


def test_sample_05_through_mlirxla_opt():
    """The front door inlines sdy.manual_computation before func.call (the inliner crashes on it)."""
    tool = os.path.join(os.path.dirname(sys.executable), "mlirxla-opt")
    done = subprocess.run([tool, os.path.join(JAX_PROGRAMS, "05_shard_map_psum.stablehlo.mlir")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert 'xhlo.sharding = "{manual}"' in done.stdout


def test_mlirxla_opt_prints_shardings():
    tool = os.path.join(os.path.dirname(sys.executable), "mlirxla-opt")
    done = subprocess.run([tool, os.path.join(JAX_PROGRAMS, "03_sharded_namedsharding.stablehlo.mlir")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert 'xhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"' in done.stdout
    assert 'call_target_name = "Sharding"' in done.stdout


# ---------------------------------------------------------------- generic sdy form

GENERIC_SDY = """
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["x"=2]>, sym_name = "mesh"}> : () -> ()
  "func.func"() <{arg_attrs = [{sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>, foo.bar = #foo.baz<"anything", 3>}],
                 function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4xf32>):
    %0 = "sdy.sharding_constraint"(%arg0) <{sharding = #sdy.sharding<@mesh, [{}]>}> : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "stablehlo.negate"(%0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : (tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%1) : (tensor<4xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 2 : i32} : () -> ()
"""


def test_generic_sdy_parses_as_opaque_attributes(context):
    from mlirxla.frontdoor.load import parse_module

    module = parse_module(GENERIC_SDY, "generic.mlir", context)
    main = module.body.operations[1]
    entries = ir.DictAttr(ir.ArrayAttr(main.attributes["arg_attrs"])[0])
    for name, namespace in (("sdy.sharding", "sdy"), ("foo.bar", "foo")):
        attr = entries[name]
        assert isinstance(attr, ir.OpaqueAttr)
        assert ir.OpaqueAttr(attr).dialect_namespace == namespace
    assert module.body.operations[0].operation.name == "sdy.mesh"


def test_generic_sdy_imports(context):
    from mlirxla import frontdoor
    from mlirxla.frontdoor.load import Loaded, parse_module

    module = parse_module(GENERIC_SDY, "generic.mlir", context)
    imported = frontdoor.import_loaded(Loaded(module, "generic.mlir", "text")).module
    assert arg_shardings(imported) == ["{devices=[2]<=[2]}"]
    assert op_shardings(imported) == [("xhlo.custom_call", "{replicated}"), ("xhlo.negate", "{devices=[2]<=[2]}")]
    assert "sdy." not in str(imported)


def test_bad_mhlo_sharding_is_refused(context):
    from mlirxla import frontdoor

    text = """
func.func @main(%arg0: tensor<4xf32> {mhlo.sharding = "{devices=[2]0}"}) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
}
"""
    with pytest.raises(MlirxlaError, match=r"bad.mlir:2:1: func.func: argument #0 sharding: 1 devices listed"):
        frontdoor.import_text(text, "bad.mlir", context)


def test_unknown_mesh_is_refused(context):
    from mlirxla.frontdoor.load import Loaded, parse_module
    from mlirxla import frontdoor

    module = parse_module(GENERIC_SDY.replace("@mesh, [{}]", "@other, [{}]"), "generic.mlir", context)
    with pytest.raises(MlirxlaError, match=r"sdy.sharding_constraint: unknown mesh @other"):
        frontdoor.import_loaded(Loaded(module, "generic.mlir", "text"))


def test_verifier_refuses_foreign_op_in_fusion(context):
    """The front door refuses foreign ops first; the verifier holds fusions to xhlo on its own."""
    from mlirxla.dialects.xhlo.ops import FUSION_SLOTS, WIDE
    from mlirxla.transforms.verifier import verify_module

    segments = lambda n, total: "array<i32: " + ", ".join(["1"] * n + ["0"] * (total - n)) + ">"
    text = f"""
func.func @main(%arg0: tensor<f32>) -> tensor<f32> {{
  %0 = "xhlo.fusion"(%arg0) ({{
  ^bb0(%x: tensor<f32>):
    %y = "foo.bar"(%x) : (tensor<f32>) -> tensor<f32>
    "xhlo.return"(%y) {{operandSegmentSizes = {segments(1, WIDE)}}} : (tensor<f32>) -> ()
  }}) {{kind = "loop", operandSegmentSizes = {segments(1, FUSION_SLOTS)}, resultSegmentSizes = {segments(1, FUSION_SLOTS)}}} : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}}
"""
    with context:
        module = ir.Module.parse(text)
    with pytest.raises(MlirxlaError, match=r"f.mlir:3:8: xhlo.fusion: fused computation holds a non-xhlo op 'foo.bar'"):
        verify_module(module, "f.mlir")


SHARD_MAP_CALLING_A_FUNCTION = """
module @jit_g attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<4x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
      -> (tensor<4x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>]
        manual_axes={"x"} (%arg1: tensor<2x3xf32>) {
      %1 = func.call @twice_plus_index(%arg1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %2 = stablehlo.composite "my.negate" %1 {decomposition = @negate_impl} : (tensor<2x3xf32>) -> tensor<2x3xf32>
      sdy.return %2 : tensor<2x3xf32>
    } : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @twice_plus_index(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<2x3xf32>
    %1 = stablehlo.partition_id : tensor<ui32>
    %2 = stablehlo.convert %1 : (tensor<ui32>) -> tensor<f32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %4 = stablehlo.add %0, %3 : tensor<2x3xf32>
    return %4 : tensor<2x3xf32>
  }
  func.func private @negate_impl(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
"""


@pytest.mark.jax
def test_a_function_called_in_a_shard_map_body_runs_on_every_device():
    """A func.call (jax.random's functions in a shard_map) and a composite (chlo.erf in a
    portable artifact) inside sdy.manual_computation once failed to parse: in our context the
    unregistered manual computation looked like a symbol table of its own, where the
    functions they name were not found."""
    pytest.importorskip("jax")
    from mlirxla.runtime.client import Client

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    [out] = Client(device_count=2).compile(SHARD_MAP_CALLING_A_FUNCTION).execute_numpy([x])
    np.testing.assert_array_equal(out, -(2 * x + np.repeat([0.0, 1.0], 2)[:, None]))
