"""xhlo-sharding-propagation: the mesh-axes model of a sharding, the op rules, the report and
`--explain-sharding`, and agreement with the shardings XLA chooses for jax's programs."""

import json
import os
import subprocess
import sys

import pytest

from mlirxla.dialects.xhlo.mesh_sharding import DeviceMesh, MeshSharding, from_hlo, to_hlo
from mlirxla.dialects.xhlo.sharding import HloSharding

from .conftest import JAX_PROGRAMS, REPOSITORY, printed_by_jax_on

SHARDED = os.path.join(JAX_PROGRAMS, "03_sharded_namedsharding.stablehlo.mlir")


@pytest.mark.parametrize(
    "text, axes",
    [
        ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", '[{"data"}, {}]'),
        ("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", '[{}, {"model"}]'),
        ("{devices=[2,4]<=[8]}", '[{"data"}, {"model"}]'),
        ("{devices=[4,2]<=[2,4]T(1,0)}", '[{"model"}, {"data"}]'),
        ("{devices=[8,1]<=[8]}", '[{"data", "model"}, {}]'),
        ("{devices=[1,2,2,2]<=[8] last_tile_dims={manual, replicated}}", '[{}, {"data"}], manual={"model":(1)2}'),
        ("{replicated}", "[{}, {}]"),
    ],
)
def test_mesh_form_round_trips(text, axes):
    mesh = DeviceMesh.of([("data", 2), ("model", 4)])
    sharding = from_hlo(HloSharding.parse(text), mesh, 2)
    assert sharding.text(mesh) == axes
    assert str(to_hlo(sharding, mesh)) == text


def test_explicit_device_lists_convert_over_the_mesh_devices():
    mesh = DeviceMesh.of([("x", 2), ("y", 2)], devices=[3, 2, 1, 0])
    sharding = MeshSharding(((1,), (0,)))
    hlo = to_hlo(sharding, mesh)
    assert str(hlo) == "{devices=[2,2]3,1,2,0}"
    assert from_hlo(hlo, mesh, 2) == sharding
    # no order of the mesh axes lays the devices out so: it has no mesh form
    assert from_hlo(HloSharding.parse("{devices=[4,1]0,3,1,2}"), mesh, 2) is None


def test_rules_print_in_shardy_notation(context):
    from mlirxla import frontdoor
    from mlirxla.ir_queries import ops_named
    from mlirxla.transforms.sharding_rules import rule_for

    text = """
    func.func @main(%a: tensor<4x8x32xf32>, %b: tensor<4x32x16xf32>, %c: tensor<6xf32>) -> (tensor<4x8x16xf32>, tensor<2x3xf32>) {
      %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x8x32xf32>, tensor<4x32x16xf32>) -> tensor<4x8x16xf32>
      %1 = stablehlo.reshape %c : (tensor<6xf32>) -> tensor<2x3xf32>
      return %0, %1 : tensor<4x8x16xf32>, tensor<2x3xf32>
    }"""
    module = frontdoor.import_bytes(text.encode(), "-", context).module
    with context:
        assert rule_for(ops_named(module, "xhlo.dot")[0]).text() == "([i, j, l], [i, l, k])->([i, j, k]) {i=4, j=8, k=16, l=32} reduction={l}"
        assert rule_for(ops_named(module, "xhlo.reshape")[0]).text() == "([ij])->([i, j]) {i=2, j=3}"


def opt(*arguments) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlirxla.tools.opt", *arguments], capture_output=True, text=True)


def test_dump_file_and_explain_say_where_a_sharding_came_from(tmp_path):
    done = opt(SHARDED, "-p", "xhlo-sharding-propagation", f"--dump-to={tmp_path}", "--explain-sharding=%6", "-o", os.devnull)
    assert done.returncode == 0, done.stderr
    # the reduce's kept dim: from the with_sharding_constraint, forward through the reduce
    assert '%6 = xhlo.reduce at' in done.stderr
    assert '[{"data"}] = {devices=[2,2]<=[4] last_tile_dim_replicate}' in done.stderr
    assert 'dim 0 {"data"}: %4 = xhlo.custom_call at' in done.stderr and "-> %6 = xhlo.reduce (forward)" in done.stderr
    assert 'partial sum over {"model"}' in done.stderr
    report = (tmp_path / "module_0000.jit_sharded_dense_relu_sum.sharding-propagation.txt").read_text()
    assert 'sharding propagation over mesh ["data"=2, "model"=2]' in report
    assert 'argument #1 %arg1 of @main (user): [{}, {"model"}] = {devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}' in report
    assert 'dim 1 {} -> {"model"} (forward, from operand #1 %arg1' in report
    # the dot's result: rows from the first argument, columns from the second
    assert "  %0 = xhlo.dot at" in report and '[{"data"}, {"model"}] = {devices=[2,2]<=[4]}' in report


def test_explain_by_op_kind_and_unknown_names():
    done = opt(SHARDED, "-p", "xhlo-sharding-propagation", "--explain-sharding=dot", "-o", os.devnull)
    assert done.returncode == 0 and "dim 0 {\"data\"}: argument #0 %arg0 of @main (user) -> %0 = xhlo.dot (forward)" in done.stderr
    done = opt(SHARDED, "-p", "xhlo-sharding-propagation", "--explain-sharding=%99", "-o", os.devnull)
    assert done.returncode == 0 and "no value matches '%99'" in done.stderr


def test_one_partition_is_left_alone(context):
    from mlirxla import frontdoor
    from mlirxla.pipelines.pipeline import Pipeline
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.transforms.sharding_propagation import ShardingPropagationPass

    text = """module attributes {mhlo.num_partitions = 1 : i32} {
      func.func @main(%a: tensor<8xf32> {mhlo.sharding = "{replicated}"}) -> tensor<8xf32> {
        %0 = stablehlo.negate %a : tensor<8xf32>
        return %0 : tensor<8xf32>
      }
    }"""
    module = frontdoor.import_bytes(text.encode(), "-", context).module
    runner = PipelineRunner(module)
    assert not runner.run(Pipeline("p").add(ShardingPropagationPass()))
    assert "xhlo-sharding-propagation" not in runner.reports


@pytest.mark.jax
@pytest.mark.slow
def test_agrees_with_xla_on_jax_programs():
    """Matmul sharded three ways, the MLP and the Megatron transformer block on a 2x4 mesh, the
    conv net on height, GSPMD input, a scan: every op's sharding as XLA's propagation chose."""
    pytest.importorskip("jax")
    done = subprocess.run([sys.executable, os.path.join(REPOSITORY, "benchmarks", "sharding_vs_xla.py"), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    programs = json.loads(done.stdout.splitlines()[-1])["programs"]
    assert {"matmul_rows", "matmul_contracting", "matmul_2x4", "mlp_2x4", "transformer_megatron", "convnet_height"} <= set(programs)
    for name, result in programs.items():
        assert result["compared"] > 0, name
        assert result["differ"] == [], name
    assert programs["transformer_megatron"]["compared"] >= 100


def test_an_axis_two_factors_offer_one_tensor_goes_to_the_first(context):
    """`a @ a.T` with `a` sharded ("x", "y") over a 4x2 mesh: both free dims offer the
    result "x". Shardy (and so jax on XLA) gives it to the lhs's rows; propagation once cut
    it from both and left the result replicated (pjit_test's multi-input-multi-output)."""
    from mlirxla import frontdoor
    from mlirxla.dialects.xhlo.sharding import parse_attribute
    from mlirxla.ir_queries import ops_named
    from mlirxla.pipelines.pipeline import Pipeline
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.transforms.sharding_propagation import ShardingPropagationPass

    text = """module attributes {mhlo.num_partitions = 8 : i32} {
      func.func @main(%a: tensor<8x2xf32> {mhlo.sharding = "{devices=[4,2]<=[8]}"},
                      %b: tensor<2x8xf32> {mhlo.sharding = "{devices=[2,4]<=[4,2]T(1,0)}"}) -> tensor<8x8xf32> {
        %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<8x2xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
        return %0 : tensor<8x8xf32>
      }
    }"""
    module = frontdoor.import_bytes(text.encode(), "-", context).module
    PipelineRunner(module).run(Pipeline("p").add(ShardingPropagationPass()))
    [dot] = ops_named(module, "xhlo.dot")
    assert str(parse_attribute(dot.attributes["xhlo.sharding"])) == "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"


SHARD_ALIKE = """
module @shard_alike attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x2xi32>, tensor<8x2xi32>) {
    %0 = stablehlo.iota dim = 0 : tensor<8x2xi32>
    sdy.sharding_group %arg0 group_id=0 : tensor<8x2xi32>
    sdy.sharding_group %0 group_id=0 : tensor<8x2xi32>
    %1 = stablehlo.add %0, %0 : tensor<8x2xi32>
    return %1, %arg0 : tensor<8x2xi32>, tensor<8x2xi32>
  }
}
"""


@pytest.mark.jax
def test_a_sharding_group_gives_its_members_one_sharding():
    """jax's shard_alike: the iota, which nothing else shards, takes the argument's sharding
    (sdy.sharding_group was refused as an unsupported op)."""
    import numpy as np

    from mlirxla.runtime.client import Client

    executable = Client(device_count=4).compile(SHARD_ALIKE)
    assert [str(s.hlo) for s in executable.output_shardings] == ["{devices=[2,2]<=[4]}"] * 2
    x = np.arange(16, dtype=np.int32).reshape(8, 2)
    doubled, same = executable.execute_numpy([x])
    np.testing.assert_array_equal(doubled, 2 * np.repeat(np.arange(8, dtype=np.int32), 2).reshape(8, 2))
    np.testing.assert_array_equal(same, x)


SHARD_ALIKE_ARGUMENTS = """
module @shard_alike_arguments attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<8x2xi32>) -> (tensor<8x2xi32>, tensor<8x2xi32>) {
    sdy.sharding_group %arg0 group_id=0 : tensor<8x2xi32>
    sdy.sharding_group %arg1 group_id=0 : tensor<8x2xi32>
    %0 = stablehlo.multiply %arg1, %arg1 : tensor<8x2xi32>
    return %arg0, %0 : tensor<8x2xi32>, tensor<8x2xi32>
  }
}
"""


@pytest.mark.jax
@pytest.mark.parametrize("opened, expected", [((1,), "{devices=[2,2]<=[4]}"), ((), "{replicated}")])
def test_an_open_parameter_takes_the_sharding_propagation_chooses(opened, expected):
    """jax leaves an argument it has not placed to the compiler
    (allow_spmd_sharding_propagation_to_parameters): `shard_alike(x, numpy_array)` shards the
    numpy array like x, and the executable says so; a closed one stays replicated."""
    import numpy as np

    from mlirxla.runtime.client import Client, CompileOptions

    executable = Client(device_count=4).compile(SHARD_ALIKE_ARGUMENTS, CompileOptions(open_parameters=opened))
    assert [str(s.hlo) for s in executable.parameter_shardings] == ["{devices=[2,2]<=[4]}", expected]
    assert str(executable.output_shardings[1].hlo) == expected
    x, y = np.arange(16, dtype=np.int32).reshape(8, 2), np.arange(16, 32, dtype=np.int32).reshape(8, 2)
    same, squared = executable.execute_numpy([x, y])
    np.testing.assert_array_equal(same, x)
    np.testing.assert_array_equal(squared, y * y)


UNPLACED_ARGUMENTS_IN_JAX = """
import jax, numpy as np
from jax.experimental.shard_alike import shard_alike
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
s = NamedSharding(mesh, P("x"))
x = np.arange(8.0)
placed, unplaced = jax.jit(shard_alike)(jax.device_put(x, s), 2 * x)
constrained = jax.jit(lambda y: shard_alike(y, jax.lax.with_sharding_constraint(y, s) * 2))(x)
print(*(str(a.sharding.spec) for a in (placed, unplaced, *constrained)), float(unplaced.sum() + constrained[1].sum()))
"""


@pytest.mark.jax
@pytest.mark.parametrize("platform", ["cpu", "mlirxla"])
def test_jax_arguments_a_jit_leaves_unspecified_are_sharded_as_on_cpu(platform):
    pytest.importorskip("jax")
    assert printed_by_jax_on(platform, 8, UNPLACED_ARGUMENTS_IN_JAX)[-1] == "P('x',) P('x',) P('x',) P('x',) 112.0"
