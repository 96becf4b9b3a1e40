"""The pipeline runner: dumps in XLA's grammar, the ledger, the pass flags, the invariant
checker, fixed points, and one-line errors for bad pipelines and dump directories."""

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest

from mlirxla import frontdoor
from mlirxla.context import new_context, pass_manager, reused_pass_managers
from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir
from mlirxla.pipelines.pipeline import Pipeline
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.pipelines.text import parse_pipeline
from mlirxla.runtime.llvm_host import has_feature
from mlirxla.transforms.dead_code_elimination import DeadCodeEliminationPass
from mlirxla.transforms.pass_base import ModulePass, count_ops

from .conftest import JAX_PROGRAMS, REPOSITORY

MLP = os.path.join(JAX_PROGRAMS, "01_mlp_softmax.stablehlo.mlir")


@dataclass(frozen=True)
class CountingPass(ModulePass):
    """Bumps a module attribute on every run, so it always reports a change."""

    name: ClassVar[str] = "test-counting"
    summary: ClassVar[str] = "always changes the module"

    def run(self, module):
        attributes = module.operation.attributes
        count = ir.IntegerAttr(attributes["test.count"]).value if "test.count" in attributes else 0
        attributes["test.count"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), count + 1)
        return True


@dataclass(frozen=True)
class StopsAfterPass(ModulePass):
    """Changes the module on its first `runs` runs, then reports no change."""

    name: ClassVar[str] = "test-stops-after"
    summary: ClassVar[str] = "changes the module a few times"
    runs: int = 2

    def run(self, module):
        attributes = module.operation.attributes
        count = ir.IntegerAttr(attributes["test.count"]).value if "test.count" in attributes else 0
        if count >= self.runs:
            return False
        attributes["test.count"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), count + 1)
        return True


@dataclass(frozen=True)
class LyingPass(CountingPass):
    """Changes the module but says it did not."""

    name: ClassVar[str] = "test-lying"

    def run(self, module):
        super().run(module)
        return False


def mlp(context):
    return frontdoor.import_file(MLP, context).module


def two_stage_pipeline() -> Pipeline:
    inner = Pipeline("cleanup").add("cse").add(DeadCodeEliminationPass())
    return Pipeline("outer").add(CountingPass()).add(inner)


def test_dumps_follow_xla_grammar_and_order(context, tmp_path):
    runner = PipelineRunner(mlp(context), RunOptions(dump_to=str(tmp_path), dump_pass_re="."))
    result = runner.compile(two_stage_pipeline())
    names = [os.path.basename(p) for p in result.dump_files]
    number = names[0].split(".")[0]
    assert names == [
        f"{number}.jit_mlp.before_optimizations.mlir",
        f"{number}.jit_mlp.0000.outer.after_pipeline-start.before_test-counting.mlir",
        f"{number}.jit_mlp.0001.outer.after_test-counting.before_cleanup.mlir",
        f"{number}.jit_mlp.0002.cleanup.after_pipeline-start.before_cse.mlir",
        f"{number}.jit_mlp.0003.cleanup.after_cse.before_xhlo-dce.mlir",
        f"{number}.jit_mlp.0004.outer.after_cleanup.before_pipeline-end.mlir",
        f"{number}.jit_mlp.cpu_after_optimizations.mlir",
        f"{number}.jit_mlp.pass-ledger.tsv",
    ]
    assert sorted(os.listdir(tmp_path)) == sorted(names)
    ledger = (tmp_path / names[-1]).read_text().splitlines()
    assert ledger[0] == "pipeline\tpass_name\titeration\tchanged\twall_ms\tops_before\tops_after"
    rows = [line.split("\t") for line in ledger[1:]]
    assert [(r[0], r[1], r[3]) for r in rows] == [("outer", "test-counting", "true"), ("cleanup", "cse", "true"), ("cleanup", "xhlo-dce", "false")]
    assert int(rows[1][5]) > int(rows[1][6])  # cse removed the duplicated constant


def test_dump_regexes_select_passes_and_pipelines(context, tmp_path):
    runner = PipelineRunner(mlp(context), RunOptions(dump_to=str(tmp_path), dump_pass_re="cse", dump_pipeline_re="clean"))
    runner.compile(two_stage_pipeline())
    steps = sorted(name.split(".", 3)[3] for name in os.listdir(tmp_path) if ".00" in name)
    assert steps == ["cleanup.after_cse.before_xhlo-dce.mlir", "cleanup.after_pipeline-start.before_cse.mlir"]


def test_no_per_pass_dumps_without_dump_pass_re(context, tmp_path):
    PipelineRunner(mlp(context), RunOptions(dump_to=str(tmp_path))).compile(two_stage_pipeline())
    assert sorted(name.split(".", 2)[2] for name in os.listdir(tmp_path)) == [
        "before_optimizations.mlir",
        "cpu_after_optimizations.mlir",
        "pass-ledger.tsv",
    ]


def ran(runner) -> list[str]:
    return [row.pass_name for row in runner.ledger.rows]


def test_disable_passes_by_pass_and_by_pipeline_name(context):
    runner = PipelineRunner(mlp(context), RunOptions(disable_passes=frozenset({"cse"})))
    runner.run(two_stage_pipeline())
    assert ran(runner) == ["test-counting", "xhlo-dce"]
    runner = PipelineRunner(mlp(context), RunOptions(disable_passes=frozenset({"cleanup"})))
    runner.run(two_stage_pipeline())
    assert ran(runner) == ["test-counting"]


def test_enable_passes_only_by_pass_and_by_pipeline_name(context):
    runner = PipelineRunner(mlp(context), RunOptions(enable_passes_only=frozenset({"xhlo-dce"})))
    runner.run(two_stage_pipeline())
    assert ran(runner) == ["xhlo-dce"]
    runner = PipelineRunner(mlp(context), RunOptions(enable_passes_only=frozenset({"cleanup"})))
    runner.run(two_stage_pipeline())
    assert ran(runner) == ["cse", "xhlo-dce"]


def test_disable_and_enable_together_is_an_error():
    with pytest.raises(MlirxlaError, match="cannot be used together"):
        RunOptions(disable_passes=frozenset({"cse"}), enable_passes_only=frozenset({"cse"}))


def test_broken_pass_is_caught_with_its_name_and_dumps(context, tmp_path):
    runner = PipelineRunner(mlp(context), RunOptions(dump_to=str(tmp_path), dump_pass_re=".", verify_each=True))
    with pytest.raises(MlirxlaError) as raised:
        runner.compile(Pipeline("p").add("xhlo-dce").add("test-break-invariants"))
    assert "invariant check failed after pass 'test-break-invariants' in pipeline 'p'" in str(raised.value)
    assert "is not a permutation" in str(raised.value)
    files = os.listdir(tmp_path)
    assert any(name.endswith(".p.before_test-break-invariants.mlir") for name in files)
    assert any(name.endswith(".p.after_test-break-invariants.invalid.mlir") for name in files)


def test_without_verify_each_a_broken_pass_is_caught_after_the_pipeline(context):
    runner = PipelineRunner(mlp(context), RunOptions(verify_each=False))
    with pytest.raises(MlirxlaError) as raised:
        runner.compile(Pipeline("p").add("test-break-invariants").add("xhlo-dce"))
    assert "invariant check failed after pipeline 'p' (MLIRXLA_VERIFY_EACH=1 names the pass)" in str(raised.value)
    assert "is not a permutation" in str(raised.value)
    assert [row.pass_name for row in runner.ledger.rows] == ["test-break-invariants", "xhlo-dce"]  # both ran


def test_verify_each_follows_the_environment(monkeypatch):
    monkeypatch.setenv("MLIRXLA_VERIFY_EACH", "0")
    assert not RunOptions().verify_each
    monkeypatch.setenv("MLIRXLA_VERIFY_EACH", "1")
    assert RunOptions().verify_each


NAMING_REPORTS = {"xhlo-layout-assignment": "layout-assignment.txt", "xhlo-copy-insertion": "copy-insertion.txt",
                  "xhlo-scheduling": "schedule.txt"}


def cpu_pipeline_run(context, tmp_path, **options) -> tuple[str, PipelineRunner]:
    from mlirxla.pipelines import named_pipeline

    runner = PipelineRunner(mlp(context), RunOptions(**options))
    runner.compile(named_pipeline("cpu"))
    return str(runner.module), runner


def test_reports_naming_values_are_rendered_only_when_read(context, tmp_path):
    """A compile that neither dumps nor asks for them makes no layout, copy or schedule text
    (each names values, numbering the whole module) and the very same module; dumping renders
    them whatever `render_reports` says."""
    rendered, with_reports = cpu_pipeline_run(context, tmp_path)
    unrendered, without = cpu_pipeline_run(context, tmp_path, render_reports=False)
    dumped, dumping = cpu_pipeline_run(context, tmp_path, render_reports=False, dump_to=str(tmp_path))
    assert rendered == unrendered == dumped
    for name, file in NAMING_REPORTS.items():
        assert file in with_reports.reports[name].dump_files()
        assert name not in without.reports
        assert file in dumping.reports[name].dump_files()
    assert "xhlo-buffer-assignment" in without.reports  # the backend reads its assignment


def test_ledger_counts_ops_only_when_reports_are_read(context, tmp_path):
    """The ledger's op counts (a walk per changing pass) are kept for whoever reads them
    (reports, dumps, `--print-ledger`) and left out of a compile that reads none; the passes,
    their order and their `changed` flags are the same either way."""
    _, counted = cpu_pipeline_run(context, tmp_path)
    _, uncounted = cpu_pipeline_run(context, tmp_path, render_reports=False)
    _, dumped = cpu_pipeline_run(context, tmp_path, render_reports=False, dump_to=str(tmp_path))
    runs = lambda runner: [(row.pass_name, row.iteration, row.changed) for row in runner.ledger.rows]
    assert runs(counted) == runs(uncounted) == runs(dumped)
    assert all(row.ops_before is None and row.ops_after is None for row in uncounted.ledger.rows)
    assert [(row.ops_before, row.ops_after) for row in counted.ledger.rows] == [(row.ops_before, row.ops_after) for row in dumped.ledger.rows]
    assert counted.ledger.rows[-1].ops_after == count_ops(counted.module)
    assert any(row.ops_before != row.ops_after for row in counted.ledger.rows)
    assert "None" not in uncounted.ledger.table() and "None" not in uncounted.ledger.tsv()


def test_fixed_point_stops_when_nothing_changes(context):
    runner = PipelineRunner(mlp(context))
    assert runner.run(Pipeline("p").fixed_point(StopsAfterPass(runs=3), max_iterations=10))
    assert [(row.iteration, row.changed) for row in runner.ledger.rows] == [(1, True), (2, True), (3, True), (4, False)]


def test_fixed_point_cap_is_an_error_naming_the_step(context):
    runner = PipelineRunner(mlp(context))
    with pytest.raises(MlirxlaError, match="'test-counting' in pipeline 'p' did not reach a fixed point in 4 iterations"):
        runner.run(Pipeline("p").fixed_point(CountingPass(), max_iterations=4))


def test_changed_flag_check_catches_a_lying_pass(context):
    runner = PipelineRunner(mlp(context), RunOptions(check_changed_flag=True))
    with pytest.raises(MlirxlaError, match="pass 'test-lying' reported changed=False but the module changed"):
        runner.run(Pipeline("p").add(LyingPass()))


@pytest.mark.parametrize("step", ["cse", "func.func(cse)"])
def test_cse_reports_a_change_exactly_when_it_erased_ops(context, step):
    """CSE's change is read from the op count (no printing); the changed-flag check compares
    the module's text before and after, so a wrong answer either way fails here."""
    runner = PipelineRunner(mlp(context), RunOptions(check_changed_flag=True))
    assert runner.run(Pipeline("p").add(step)) is True  # the MLP sample repeats a constant
    assert runner.run(Pipeline("p").add(step)) is False


def test_pipeline_text_mixes_ours_and_upstream():
    pipeline = parse_pipeline("builtin.module(xhlo-dce, canonicalize, func.func(cse), xhlo-dce)")
    assert [getattr(step, "display_name") for step in pipeline.steps] == ["xhlo-dce", "canonicalize", "func.func(cse)", "xhlo-dce"]


@pytest.mark.parametrize(
    "text,message",
    [
        ("no-such-pass", "unknown pass 'no-such-pass'"),
        ("cse,,xhlo-dce", "empty pass name"),
        ("cse,(", "unbalanced"),
        ("xhlo-dce{nope=1}", "pass 'xhlo-dce' has no option 'nope'"),
        ("", "empty pass pipeline"),
    ],
)
def test_bad_pipeline_text_is_one_error(text, message):
    with pytest.raises(MlirxlaError, match=message.replace("(", r"\(")):
        parse_pipeline(text)


def opt(*arguments):
    tool = os.path.join(os.path.dirname(sys.executable), "mlirxla-opt")
    return subprocess.run([tool, *arguments], capture_output=True, text=True, cwd=REPOSITORY)


@pytest.mark.parametrize(
    "arguments,fragment",
    [
        (["-p", "bogus"], "unknown pass 'bogus'"),
        (["-p", "cse,("], "malformed pipeline"),
        (["--pipeline", "nope"], "unknown pipeline 'nope'"),
        (["--cse", "--dump-to", "/proc/forbidden", "--dump-pass-re", "."], "/proc/forbidden: cannot create dump directory"),
        (["--cse", "--disable-passes", "cse", "--enable-passes-only", "cse"], "cannot be used together"),
        (["--cse", "--dump-pass-re", "("], "invalid regular expression"),
    ],
)
def test_cli_bad_pipelines_are_one_line_errors(arguments, fragment):
    done = opt(MLP, *arguments)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlirxla-opt: error: ") and fragment in lines[0], done.stderr


def test_cli_print_ledger_and_ir_after_change():
    done = opt(MLP, "--cse", "--xhlo-dce", "--print-ledger", "--print-ir-after-change", "-o", os.devnull)
    assert done.returncode == 0, done.stderr
    assert "// -----// IR Dump After UpstreamPass (cse) //----- //" in done.stderr
    assert "IR Dump After DeadCodeEliminationPass" not in done.stderr
    assert "pass-flags  cse" in done.stderr and "total" in done.stderr


def test_cli_list_passes_describes_every_pass():
    done = opt("--list-passes")
    assert done.returncode == 0
    for name in ("xhlo-dce", "xhlo-verify", "cse"):
        assert name in done.stdout


def test_cli_cpu_pipeline_dump_of_the_jax_mlp(tmp_path):
    """The JAX MLP through `--pipeline=cpu`: the files, their order, and the ledger."""
    done = opt(MLP, "--pipeline=cpu", "--dump-to", str(tmp_path), "--dump-pass-re=.", "-o", os.devnull)
    assert done.returncode == 0, done.stderr
    files = sorted(os.listdir(tmp_path))
    assert all(name.startswith("module_") and ".jit_mlp." in name for name in files)
    steps = [name.split(".", 2)[2] for name in files if name.split(".")[2].isdigit()]
    assert [s.split(".")[0] for s in steps] == [f"{i:04d}" for i in range(len(steps))]
    assert [s.split(".", 1)[1] for s in steps] == [
        "cpu.after_pipeline-start.before_xhlo-sharding-remover.mlir",
        "simplification.after_pipeline-start.before_xhlo-call-inliner.mlir",
        "simplification.after_xhlo-algsimp.before_xhlo-constant-folding.mlir",
        "simplification.after_cse.before_xhlo-computation-cse.mlir",
        "simplification.after_pipeline-start.before_xhlo-call-inliner.mlir",
        "cpu.after_simplification.before_xhlo-while-loop-trip-count-annotator.mlir",
        "cpu.after_xhlo-layout-assignment.before_xhlo-copy-removal.mlir",
        "cpu.after_xhlo-priority-fusion.before_xhlo-multi-output-fusion.mlir",
        "cpu.after_xhlo-output-fusion.before_xhlo-widening-gemm-fusion.mlir",
        "cpu.after_xhlo-scheduling.before_xhlo-buffer-assignment_alignment_64_.mlir",  # the cpu backend's alignment
        "cpu.after_xhlo-buffer-assignment_alignment_64_.before_pipeline-end.mlir",
    ]
    others = sorted(name.split(".", 2)[2] for name in files if not name.split(".")[2].isdigit())
    assert others == [
        "batch-slice-fusion-decisions.txt", "before_optimizations.mlir", "buffer-assignment.txt", "copy-insertion.txt", "cpu_after_optimizations.mlir",
        "fusion-decisions.txt", "heap.svg", "layout-assignment.txt", "live-range.txt", "memory-usage-report.txt",
        "multi-output-fusion-decisions.txt", "output-fusion-decisions.txt",
        "pass-ledger.tsv", "schedule.txt", "widening-gemm-fusion-decisions.txt",
    ]
    ledger = [line.split("\t") for line in (tmp_path / [f for f in files if f.endswith("ledger.tsv")][0]).read_text().splitlines()[1:]]
    # the host decides whether int8 dots stay for the byte GEMM (`pipelines/cpu.py`)
    integer_dots = "xhlo-integer-dot-as-float" + ("{byte-gemms=true}" if has_feature("avx512vnni") else "")
    simplification = ["xhlo-call-inliner", "xhlo-algsimp", "xhlo-constant-folding", "xhlo-tuple-simplifier", "xhlo-while-loop-simplifier", "cse", "xhlo-computation-cse", "xhlo-dce"]
    stages = ["xhlo-while-loop-trip-count-annotator", "xhlo-while-loop-constant-sinking", "xhlo-all-reduce-combiner", "xhlo-all-gather-combiner", "xhlo-convolution-1d-to-2d", "xhlo-reshape-sinking", "xhlo-selecting-convolution-as-slices", "xhlo-transposed-convolution-phases", "xhlo-convolution-group-split", "xhlo-convolution-layout", "xhlo-dot-canonicalizer", "xhlo-bf16-accumulation-in-f32", "xhlo-narrow-dot-upcast", integer_dots, "xhlo-top-k-rewriter", "xhlo-custom-call-layouts", "xhlo-transpose-sinking", "xhlo-layout-assignment", "xhlo-copy-removal", "xhlo-priority-fusion", "xhlo-multi-output-fusion", "xhlo-output-fusion",
              "xhlo-widening-gemm-fusion", "xhlo-batch-slice-fusion", "xhlo-reshape-to-bitcast", "xhlo-copy-insertion", "xhlo-scheduling", "xhlo-buffer-assignment{alignment=64}"]
    expanders = ["xhlo-sharding-remover", "xhlo-manual-partitioner", "xhlo-sharding-propagation", "xhlo-inspect-sharding", "xhlo-custom-partitioning", "xhlo-spmd-partitioner",
                 "xhlo-rng-bit-generator-expander"]
    assert [row[1] for row in ledger] == expanders + simplification * 2 + stages
    assert [row[2] for row in ledger] == ["0"] * 7 + ["1"] * 8 + ["2"] * 8 + ["0"] * 28
    assert [row[1] for row in ledger[7:23] if row[3] == "true"] == ["xhlo-algsimp", "cse"]
    assert all(row[3] == "false" for row in ledger[14:21])  # the second round proves the fixed point


def test_cli_dump_module_re_selects_modules(tmp_path):
    done = opt(MLP, "--pipeline=cpu", "--dump-to", str(tmp_path), "--dump-module-re=^other$", "-o", os.devnull)
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path) == []


def test_cli_disable_and_enable_change_what_runs():
    disabled = opt(MLP, "--pipeline=cpu", "--disable-passes=xhlo-algsimp,cse", "--print-ledger", "-o", os.devnull)
    assert "xhlo-algsimp" not in disabled.stderr and " cse " not in disabled.stderr and "xhlo-dce" in disabled.stderr
    only = opt(MLP, "--pipeline=cpu", "--enable-passes-only=xhlo-dce", "--print-ledger", "-o", os.devnull)
    rows = [line.split()[1] for line in only.stderr.splitlines()[2:-1]]
    assert rows == ["xhlo-dce"]


def test_cli_explain_fusion_says_why_not():
    done = opt(MLP, "-p", "xhlo-priority-fusion", "--explain-fusion=exponential", "-o", os.devnull)
    assert done.returncode == 0, done.stderr
    assert "fusion decisions about 'exponential':" in done.stderr
    assert f"not fused exponential(op) at {MLP}:20:11 into reduce(op)" in done.stderr
    assert "the producer is expensive and has other users" in done.stderr


def test_cli_explain_fusion_needs_a_fusion_pass():
    done = opt(MLP, "-p", "cse", "--explain-fusion=exponential")
    assert done.returncode == 2
    assert "--explain-fusion needs a pipeline with a fusion pass" in done.stderr


def test_pass_managers_are_parsed_once_per_compile_and_context():
    compiling, other = new_context(), new_context()
    pipeline = "builtin.module(canonicalize)"
    with reused_pass_managers(compiling):
        with compiling:
            first = pass_manager(pipeline)
            assert pass_manager(pipeline) is first
            assert pass_manager("builtin.module(cse)") is not first
        with other:
            assert pass_manager(pipeline) is not pass_manager(pipeline)
    with compiling:
        assert pass_manager(pipeline) is not first
