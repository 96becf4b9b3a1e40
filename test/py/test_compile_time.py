"""What makes compiles fast must not change what they make (issue 18: compile time linear in
the program).

Priority fusion decides on a graph of the block that keeps kernel times per node and per
producer-consumer pair, reads a merge's costs off its parts and recomputes only the merged
kernel's neighbours; multi-output fusion decides on a graph of the block too, keeping each
kernel's hero and size and one walk of reachable ops per source, and builds its fusions once;
the cpu backend compiles kernels with the same StableHLO once. Checked here: every live queue
entry's priority is, whenever a producer is popped, the priority computed afresh from the
plain cost model; the fusion decisions and the optimized module are those of the same
pipeline with every cache replaced by a fresh computation; multi-output fusion's module, block
order and use lists are those its merges made one at a time in MLIR make; kernels that are the same but for their name are compiled once, run the first
one's code and give the reference interpreter's results, through the compile cache too.
"""

import os
import sys

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.runner import PipelineRunner
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.runtime.client import Client
from mlirxla.runtime.thunks import KernelThunk, every_thunk
from mlirxla.transforms import fusion_graph, multi_output_fusion, multi_output_graph, priority_fusion
from mlirxla.transforms.cost_model import CostModel
from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import identity
from mlirxla.transforms.fusion_legality import Body, fused_ops

from .conftest import JAX_PROGRAMS, REPOSITORY, random_arguments, reference_outputs

PROGRAMS = [
    "programs/transformer.stablehlo.mlir",
    "programs/mlp.stablehlo.mlir",
    "programs/softmax.stablehlo.mlir",
    "programs/convnet.stablehlo.mlir",
    "programs/scan.stablehlo.mlir",
    "01_mlp_softmax.stablehlo.mlir",
    "02_scan_while_cond_gelu.stablehlo.mlir",
]


def simplified(name: str, context):
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), context).module
    PipelineRunner(module).run(named_pipeline("simplification"))
    return module


class FreshGraph(fusion_graph.FusionGraph):
    """Priority fusion's graph with nothing remembered: every kernel time, flops and traffic
    worked out afresh, a merge's from its ops and operands instead of its two parts."""

    def flops(self, node):
        return self.read_flops(node)

    def traffic_of(self, node):
        return self.read_traffic(node)

    def op_time(self, node):
        return self.alone_time(node)

    def fused_time(self, producer, consumer):
        return self.pair_time(producer, consumer)


class CheckedFuseBlock(priority_fusion.FuseBlock):
    """Priority fusion that, before each merge, holds every live queue entry's priority to the
    one computed afresh (`FreshGraph`) for the node it stands for."""

    checked = 0

    def fuse_producer(self, producer):
        for negative_priority, sequence, key in self.heap:
            node, version = key
            if self.current.get(key) != sequence or not node.alive or node.version != version:
                continue
            self.graph.__class__ = FreshGraph
            try:
                fresh = self.priority(node)
            finally:
                self.graph.__class__ = fusion_graph.FusionGraph
            assert -negative_priority == fresh, f"stale priority for {self.graph.description(node)}"
            CheckedFuseBlock.checked += 1
        return super().fuse_producer(producer)


@pytest.mark.parametrize("name", PROGRAMS)
def test_queued_priorities_are_the_fresh_ones(name, context, monkeypatch):
    module = simplified(name, context)
    monkeypatch.setattr(priority_fusion, "FuseBlock", CheckedFuseBlock)
    CheckedFuseBlock.checked = 0
    result = priority_fusion.PriorityFusionPass().run(module)
    assert result.changed
    assert CheckedFuseBlock.checked > 0


class RecordingFuseBlock(priority_fusion.FuseBlock):
    """Priority fusion that keeps each block's queue, to read its graph after the pass."""

    made: list = []

    def run(self):
        RecordingFuseBlock.made.append(self)
        return super().run()


@pytest.mark.parametrize("name", PROGRAMS)
def test_merged_bodies_flops_and_traffic_are_those_read_off_the_fusion(name, context, monkeypatch):
    """A merge's body, flops and traffic, made of its producer's and consumer's, are what
    walking the fusion built for it gives."""
    module = simplified(name, context)
    monkeypatch.setattr(priority_fusion, "FuseBlock", RecordingFuseBlock)
    RecordingFuseBlock.made = []
    assert priority_fusion.PriorityFusionPass().run(module).changed
    model = priority_fusion.model_for("cpu")
    checked = 0
    for block in RecordingFuseBlock.made:
        for node in block.graph.at:
            if node is None or node.built is None:
                continue
            fusion = node.built
            assert block.graph.body(node) == Body.of(fusion)
            assert str(fusion.attributes["name"]).strip('"') == node.name
            if node._flops is not None:
                assert node._flops == model.body_flops(fusion)
            if node.traffic is not None:
                fresh = model.traffic(fusion)
                assert node.traffic.written == fresh.written
                assert sorted(size for *_, size in node.traffic.reads) == sorted(size for *_, size in fresh.reads)
            checked += 1
    assert checked > 0


class FreshDescriptions:
    def __call__(self, op):
        return priority_fusion.describe(op)

    def place(self, location):
        return priority_fusion.text_of_location(location)


def refuse_each_pair_again(merge_block, candidates, reason):
    for index, first in enumerate(candidates):
        for second in candidates[index + 1:]:
            merge_block.refuse("sibling", first, second, reason)


class FreshMergeBlock(multi_output_fusion.MergeBlock):
    """Multi-output fusion asking each kernel's description, problem and hero afresh."""

    def description(self, kernel):
        kernel.facts.pop("description", None)
        return super().description(kernel)

    def problem(self, kernel):
        kernel.facts.pop("problem", None)
        return super().problem(kernel)

    def hero(self, kernel):
        kernel.facts.pop("hero", None)
        return super().hero(kernel)


REACHES = multi_output_graph.MultiOutputGraph.reaches


def fresh_reaches(graph, source, target):
    graph.found_users.clear()
    graph.descendants.clear()
    return REACHES(graph, source, target)


def cpu_pipeline_outcome(name: str, context, module=None) -> tuple[str, dict]:
    module = module or simplified(name, context)
    runner = PipelineRunner(module)
    runner.run(named_pipeline("cpu"))
    decisions = {}
    for report in runner.reports.values():
        for file, text in report.dump_files().items():
            if "fusion-decisions" in file:
                decisions[file] = text
    return str(module), decisions


def without_caches(monkeypatch) -> None:
    """Every cache of the fusion passes replaced by a fresh computation."""
    monkeypatch.setattr(priority_fusion, "FusionGraph", FreshGraph)
    monkeypatch.setattr(priority_fusion, "Descriptions", FreshDescriptions)
    monkeypatch.setattr(multi_output_fusion, "Descriptions", FreshDescriptions)
    monkeypatch.setattr(CostModel, "remembering", lambda model: model)
    monkeypatch.setattr(multi_output_fusion, "MergeBlock", FreshMergeBlock)
    monkeypatch.setattr(FreshMergeBlock, "refuse_every_pair", refuse_each_pair_again)
    monkeypatch.setattr(multi_output_graph.MultiOutputGraph, "reaches", fresh_reaches)


@pytest.mark.parametrize("name", PROGRAMS)
def test_cached_fusion_decides_as_fresh_computation(name, context, monkeypatch):
    module_text, decisions = cpu_pipeline_outcome(name, context)
    without_caches(monkeypatch)
    fresh_module_text, fresh_decisions = cpu_pipeline_outcome(name, context)
    assert "fusion-decisions.txt" in decisions and "multi-output-fusion-decisions.txt" in decisions
    assert decisions == fresh_decisions
    assert module_text == fresh_module_text


@pytest.mark.jax
def test_cached_fusion_decides_as_fresh_computation_on_an_optimizer_update(context, monkeypatch):
    """Adam over many parameters: siblings sharing a scalar (the step) are refused again on
    every scan, and most kernels' costs are asked many times."""
    jax = pytest.importorskip("jax")
    text = workload_text(jax, "adam")

    def outcome():
        module = frontdoor.import_bytes(text.encode(), "adam", context).module
        PipelineRunner(module).run(named_pipeline("simplification"))
        return cpu_pipeline_outcome("adam", context, module)

    module_text, decisions = outcome()
    without_caches(monkeypatch)
    fresh_module_text, fresh_decisions = outcome()
    assert "the shared operand is a" in decisions["multi-output-fusion-decisions.txt"]
    assert decisions == fresh_decisions
    assert module_text == fresh_module_text


class CheckedMergeBlock(multi_output_fusion.MergeBlock):
    """Multi-output fusion that, right after building a block's fusions, holds each merge's
    body, name, hero and size (made of its members') to what the fusion built for it gives."""

    built = heroes = 0

    def run(self):
        changed = super().run()
        for kernel in self.graph.order:
            fusion = kernel.built
            if fusion is None:
                continue
            assert Body.of(fusion) == kernel.body
            assert str(fusion.attributes["name"]).strip('"') == kernel.name
            assert self.op_count(kernel) == len(fused_ops(fusion))
            returned = list(fusion.regions[0].blocks[0].operations)[-1].operands
            roots = [(defining_op(value), value.type) for value in returned]
            if "hero" in kernel.facts:  # asked while deciding (its ops are gone now)
                assert kernel.facts["hero"] == multi_output_fusion.hero_of(roots, fused_ops(fusion))
                CheckedMergeBlock.heroes += 1
            CheckedMergeBlock.built += 1
        return changed


class ReplayedGraph(multi_output_graph.MultiOutputGraph):
    """The graph's merges made one at a time in MLIR (`priority_fusion.build_fusion`, as the
    pass made them before it decided on a graph) instead of built once at the end."""

    def __init__(self, block):
        super().__init__(block)
        self.merges = []
        self.namer = priority_fusion.Namer(_module_of(block))

    def merge(self, members, exposed, namer):
        fusion = super().merge(members, exposed, namer)
        self.merges.append((list(members), list(exposed), fusion))
        return fusion

    def build(self):
        ops, values = {}, {}
        for members, exposed, kernel in self.merges:
            built = priority_fusion.build_fusion([ops.get(member) or member.op for member in members],
                                                 [values.get(value) or value.value for value in exposed], self.namer)
            ops[kernel] = built
            values.update(zip(exposed, built.results))


def _module_of(block):
    op = block.owner
    while op.parent is not None:
        op = op.parent
    return op


def use_lists(module) -> list:
    """Every value's users in use-list order, by where they stand in the printed module; the
    values inside fusions aside (a body built once is cloned where one built a merge at a time
    was moved, and nothing reads the order of their uses)."""
    where = {}
    found = []

    def number(op):
        where[identity(op.operation)] = len(where)
        return ir.WalkResult.ADVANCE

    def visit(op):
        for result in op.results:
            found.append([(where[identity(use.owner.operation)], use.operand_number) for use in result.uses])
        if op.name == "xhlo.fusion":
            return ir.WalkResult.SKIP
        for region in op.regions:
            for block in region.blocks:
                for argument in block.arguments:
                    found.append([(where[identity(use.owner.operation)], use.operand_number) for use in argument.uses])
        return ir.WalkResult.ADVANCE

    module.operation.walk(number, ir.WalkOrder.PRE_ORDER)
    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def workload_text(jax, name: str) -> str:
    """A workload of `benchmarks/cpu_vs_xla.py` at its small size, lowered by jax."""
    sys.path.insert(0, os.path.join(REPOSITORY, "examples"))
    from benchmark_workloads import workload

    chosen = workload(name)
    return jax.jit(chosen.function).lower(*chosen.abstract(small=True)).as_text()


def after_multi_output_fusion(module, monkeypatch, block_class=None, graph_class=None) -> tuple[str, list]:
    """The module after the cpu pipeline's passes up to multi-output fusion, and its use lists."""
    if block_class is not None:
        monkeypatch.setattr(multi_output_fusion, "MergeBlock", block_class)
    if graph_class is not None:
        monkeypatch.setattr(multi_output_fusion, "MultiOutputGraph", graph_class)
    pipeline = named_pipeline("cpu")
    steps = []
    for step in pipeline.steps:
        steps.append(step)
        if getattr(step, "name", None) == "xhlo-multi-output-fusion":
            break
    pipeline.steps = steps
    PipelineRunner(module).run(pipeline)
    monkeypatch.undo()
    return str(module), use_lists(module)


@pytest.mark.jax
@pytest.mark.parametrize("name", ["adam", "lstm_scan", "transformer_grad", "cross_entropy", "programs/transformer.stablehlo.mlir"])
def test_multi_output_fusion_builds_what_one_merge_at_a_time_made(name, context, monkeypatch):
    """Built once at the end, the fusions are those merging one at a time in MLIR made, in the
    same block order and with every value's uses in the same order (later passes read users in
    that order); each merge's body, name, hero and size, made of its members', are what the
    fusion built for it gives."""
    def simplified_module():
        if not name.startswith("programs/"):
            module = frontdoor.import_bytes(workload_text(pytest.importorskip("jax"), name).encode(), name, context).module
            PipelineRunner(module).run(named_pipeline("simplification"))
            return module
        return simplified(name, context)

    CheckedMergeBlock.built = CheckedMergeBlock.heroes = 0
    text, uses = after_multi_output_fusion(simplified_module(), monkeypatch, block_class=CheckedMergeBlock)
    replayed_text, replayed_uses = after_multi_output_fusion(simplified_module(), monkeypatch, graph_class=ReplayedGraph)
    assert CheckedMergeBlock.built > 0
    assert text == replayed_text
    assert uses == replayed_uses


# three layers of the same shape (x = tanh(x @ w) * 0.5 + x): the same epilogue kernel after
# each dot, three times
THREE_LAYERS = """func.func @main(%x: tensor<8x16xf32>, %a: tensor<16x16xf32>, %b: tensor<16x16xf32>, %c: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %h = stablehlo.constant dense<5.000000e-01> : tensor<8x16xf32>
  %0 = stablehlo.dot_general %x, %a, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.tanh %0 : tensor<8x16xf32>
  %2 = stablehlo.multiply %1, %h : tensor<8x16xf32>
  %3 = stablehlo.add %2, %x : tensor<8x16xf32>
  %4 = stablehlo.dot_general %3, %b, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %5 = stablehlo.tanh %4 : tensor<8x16xf32>
  %6 = stablehlo.multiply %5, %h : tensor<8x16xf32>
  %7 = stablehlo.add %6, %3 : tensor<8x16xf32>
  %8 = stablehlo.dot_general %7, %c, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %9 = stablehlo.tanh %8 : tensor<8x16xf32>
  %10 = stablehlo.multiply %9, %h : tensor<8x16xf32>
  %11 = stablehlo.add %10, %7 : tensor<8x16xf32>
  return %11 : tensor<8x16xf32>
}
"""


def test_same_kernels_compile_once_and_compute_the_reference(tmp_path, context):
    module = frontdoor.import_text(THREE_LAYERS, "three_layers", context).module
    arguments = random_arguments(module, 3)
    expected = reference_outputs(module, arguments)
    program = compile_module(module)
    kernels = [thunk.symbol for thunk in every_thunk(program.plan.thunks) if isinstance(thunk, KernelThunk)]
    assert len(kernels) == 3
    same = [decision for decision in program.decisions if "the same StableHLO as" in decision]
    assert same == [f"{symbol}: the same StableHLO as {kernels[0]}, whose code it runs (compiled once)" for symbol in kernels[1:]]
    for client in (Client(cache_dir=str(tmp_path)), Client(cache_dir=str(tmp_path))):  # compiled, then from the cache
        outputs = client.compile(THREE_LAYERS).execute_numpy(arguments)
        np.testing.assert_allclose(outputs[0], expected[0], rtol=1e-5, atol=1e-6)


def test_small_programs_share_a_context_renewed_after_its_compiles(tmp_path, monkeypatch):
    """Programs up to `SHARED_CONTEXT_MAX_INPUT_BYTES` import into one shared context (a new
    one costs ~10 ms of a small compile), renewed after `SHARED_CONTEXT_COMPILES` compiles
    (a context keeps what it uniqued); a larger one into its own; each computes its results
    whichever context it compiled in."""
    from mlirxla import context as contexts

    monkeypatch.setattr(contexts, "_SHARED", contexts._SharedContext())
    monkeypatch.setattr(contexts, "SHARED_CONTEXT_COMPILES", 2)
    seen = []
    compile_context = contexts.compile_context
    monkeypatch.setattr(contexts, "compile_context", lambda size: seen.append(compile_context(size)) or seen[-1])
    text = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.add %x, %x : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    x = np.arange(4, dtype=np.float32)
    for index in range(3):
        executable = Client(cache_dir=str(tmp_path / str(index))).compile(text)
        np.testing.assert_array_equal(executable.execute_numpy([x])[0], 2 * x)
    assert seen[0] is seen[1] and seen[2] is not seen[1]
    monkeypatch.setattr(contexts, "SHARED_CONTEXT_MAX_INPUT_BYTES", len(text) - 1)
    Client(cache_dir=str(tmp_path / "large")).compile(text)
    assert seen[3] is not seen[2] and contexts._SHARED.context is seen[2]


def test_kernels_of_one_structure_build_their_stablehlo_once(context, monkeypatch):
    """The second and third layers' epilogues are known to be the first's by their structure:
    only the first one's StableHLO module is built."""
    from mlirxla.backends.cpu import compiler

    built = []
    kernel_stablehlo = compiler.kernel_stablehlo
    monkeypatch.setattr(compiler, "kernel_stablehlo", lambda spec, lanes=True: built.append(spec.symbol) or kernel_stablehlo(spec, lanes))
    module = frontdoor.import_text(THREE_LAYERS, "three_layers", context).module
    program = compile_module(module)
    kernels = [thunk.symbol for thunk in every_thunk(program.plan.thunks) if isinstance(thunk, KernelThunk)]
    assert built == kernels[:1]
    assert sum("the same StableHLO as" in decision for decision in program.decisions) == 2


def test_tensor_specs_are_read_once_per_type(context):
    """The entry's parameter and output specs are made once per type and are those each value's
    own type gives: values of one element type and other shapes, or one shape and other element
    types, get their own."""
    from mlirxla.backends.cpu.thunk_emitter import TensorSpecs
    from mlirxla.runtime.executable import TensorSpec

    with context:
        types = [ir.Type.parse(text) for text in ("tensor<2x3xf32>", "tensor<3x2xf32>", "tensor<2x3xf16>", "tensor<2x3xi32>",
                                                  "tensor<2x3xf32>", "tensor<f32>")]
        specs = TensorSpecs()
        made = [specs.of(value_type) for value_type in types]
    assert made == [TensorSpec.of(value_type) for value_type in types]
    assert made[0] is made[4] and len(specs.by_type) == 5


def test_collection_is_paused_during_a_pass_and_restored(context):
    """The collector is off while a fusion pass decides (its graph dies young) and back as it
    was after: on when it was on, even when the pass fails; off when the caller had it off."""
    import gc

    from mlirxla.young_garbage import collection_paused

    assert gc.isenabled()
    seen = []
    with collection_paused():
        seen.append(gc.isenabled())
    with pytest.raises(ZeroDivisionError):
        with collection_paused():
            seen.append(gc.isenabled())
            1 / 0
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    module = simplified("programs/mlp.stablehlo.mlir", context)
    PipelineRunner(module).run(named_pipeline("cpu"))
    assert gc.isenabled()
