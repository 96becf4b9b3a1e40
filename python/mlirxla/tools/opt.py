"""mlirxla-opt: import StableHLO (or xhlo) to verified xhlo, run passes on it, print it.

    mlirxla-opt model.mlir                                  # import and verify
    mlirxla-opt model.mlir -p 'xhlo-algsimp,cse,xhlo-dce'   # a pipeline (ours and upstream mixed)
    mlirxla-opt model.mlir --xhlo-algsimp --cse             # passes as flags, in order
    mlirxla-opt model.mlir --pipeline=cpu --dump-to=dump --dump-pass-re=.
    mlirxla-opt model.mlir --pipeline=cpu --report report.html   # the pipeline as one HTML page
    mlirxla-opt model.mlir --pipeline=cuda --dump-to=dump        # and the GPU compile: each kernel's LLVM IR, PTX, kernel-resources.txt
    mlirxla-opt cases.mlir --split-input-file --verify-diagnostics
    mlirxla-opt --list-passes
"""

import argparse
import contextlib
import io
import re
import sys

from mlirxla import frontdoor, printing
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError, first_line
from mlirxla.pipelines import named_pipeline, pipeline_names
from mlirxla.pipelines.pipeline import FixedPoint, Pipeline
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.pipelines.text import parse_pipeline
from mlirxla.report import progress
from mlirxla.split_input import Chunk, split_chunks
from mlirxla.transforms import erasure, registry
from mlirxla.transforms.pass_base import PassReport

from .cli import EXIT_CHECK_FAILED, EXIT_OK, run_tool

EXPECTED_ERROR = re.compile(r"//\s*expected-error\s*(@([+-]\d+|above|below))?\s*\{\{(.*?)\}\}")


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="mlirxla-opt", description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("input", nargs="?", default="-", help="input file (.mlir text, bytecode or portable artifact); - for stdin")
    parser.add_argument("-o", "--output", default="-", help="output file; - for stdout")
    parser.add_argument("-p", "--pass-pipeline", help="textual pipeline, e.g. 'builtin.module(xhlo-algsimp, cse)'")
    parser.add_argument("--pipeline", help=f"a named pipeline from pipelines/ ({', '.join(pipeline_names())})")
    parser.add_argument("--split-input-file", action="store_true", help="process each '// -----' chunk on its own")
    parser.add_argument("--verify-diagnostics", action="store_true", help="check errors against 'expected-error' comments")
    parser.add_argument("--list-passes", action="store_true", help="list the passes with one-line descriptions")
    parser.add_argument("--print-ledger", action="store_true", help="print the pass ledger (to stderr) after the run")
    parser.add_argument("--print-ir-after-all", action="store_true", help="print the module after every pass (to stderr)")
    parser.add_argument("--print-ir-after-change", action="store_true", help="print the module after every pass that changed it")
    parser.add_argument("--print-pipeline", action="store_true", help="print the pipeline that would run, then stop")
    parser.add_argument("--explain-fusion", metavar="OP_OR_LOCATION", help="after the run, say why this op (name, fusion name or location) was or was not fused")
    parser.add_argument("--explain-sharding", metavar="VALUE_OR_OP", help="after the run, say where the sharding of this value (%%3, an op kind, a location) came from")
    parser.add_argument("--report", metavar="FILE.html",
                        help="write the run as one self-contained HTML page: the pass timeline, the changes of each pass, "
                             "the fusion graph with its decisions, buffer assignment")
    parser.add_argument("--mlir-print-generic", action="store_true", help="print every op in generic form")
    parser.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    parser.add_argument("--disable-passes", default="", help="comma-separated pass or pipeline names to skip")
    parser.add_argument("--enable-passes-only", default=None, help="comma-separated pass or pipeline names: run only these")
    parser.add_argument("--dump-to", help="write dumps (XLA's file grammar) to this directory")
    parser.add_argument("--dump-pass-re", help="dump after passes whose name matches (partial match); '.' for all")
    parser.add_argument("--dump-pipeline-re", help="dump only inside pipelines whose name matches")
    parser.add_argument("--dump-module-re", help="dump only modules whose name matches")
    parser.add_argument("--no-verify-each", action="store_true", help="do not run the invariant checker after each changing pass")
    parser.add_argument("--check-changed-flag", action="store_true", help="debug: fail when a pass misreports whether it changed the module")
    parser.add_argument("--check-erasure", action="store_true", help="debug: fail when a pass uses an op it erased (also MLIRXLA_CHECK_ERASURE=1)")
    passes = parser.add_argument_group("passes (run in the order given; --list-passes describes them)")
    for name in [*sorted(registry.PASSES), *sorted(registry.UPSTREAM_PASSES)]:
        passes.add_argument(f"--{name}", dest="pass_flags", action="append_const", const=name, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def split_names(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def run_options(arguments, stream) -> RunOptions:
    return RunOptions(
        disable_passes=split_names(arguments.disable_passes) or frozenset(),
        enable_passes_only=split_names(arguments.enable_passes_only),
        dump_to=arguments.dump_to,
        dump_pass_re=arguments.dump_pass_re,
        dump_pipeline_re=arguments.dump_pipeline_re,
        dump_module_re=arguments.dump_module_re,
        verify_each=not arguments.no_verify_each,
        check_changed_flag=arguments.check_changed_flag,
        check_erasure=arguments.check_erasure or erasure.checking_by_default(),
        print_ir_after_all=arguments.print_ir_after_all,
        print_ir_after_change=arguments.print_ir_after_change,
        print_stream=stream,
        backend="cuda" if arguments.pipeline == "cuda" else "cpu",  # names the after-optimizations dump
    )


def build_pipeline(arguments) -> Pipeline | None:
    """The pipeline the flags ask for: --pipeline, then -p, then the pass flags (in order)."""
    chosen = [bool(arguments.pipeline), bool(arguments.pass_pipeline), bool(arguments.pass_flags)]
    if sum(chosen) > 1:
        raise MlirxlaError("give one of --pipeline, --pass-pipeline or pass flags, not several")
    if arguments.pipeline:
        return named_pipeline(arguments.pipeline)
    if arguments.pass_pipeline:
        return parse_pipeline(arguments.pass_pipeline)
    if arguments.pass_flags:
        pipeline = Pipeline("pass-flags")
        for name in arguments.pass_flags:
            pipeline.add(name)
        return pipeline
    return None


def read_input(path: str) -> tuple[bytes, str]:
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    try:
        with open(path, "rb") as handle:
            return handle.read(), path
    except OSError as error:
        raise MlirxlaError(f"cannot read file: {error.strerror}", path) from None


def write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w") as handle:
            handle.write(text)
    except OSError as error:
        raise MlirxlaError(f"cannot write file: {error.strerror}", path) from None


def process(data: bytes, source: str, arguments, pipeline: Pipeline | None, stream) -> str:
    imported = frontdoor.import_bytes(data, source, new_context())
    if pipeline is not None:
        runner = PipelineRunner(imported.module, run_options(arguments, stream))
        try:
            runner.compile(pipeline) if arguments.dump_to else runner.run(pipeline)
        except MlirxlaError as error:
            raise error.with_source(source) from None
        if arguments.pipeline == "cuda" and arguments.dump_to:
            from mlirxla.backends.cuda.compiler import codegen

            try:
                codegen(runner)
            except MlirxlaError as error:
                raise error.with_source(source) from None
        if arguments.print_ledger:
            stream.write(runner.ledger.table())
        if arguments.explain_fusion:
            stream.write(explain_fusion(pipeline, runner.reports, arguments.explain_fusion).replace(" at -:", f" at {source}:") + "\n")
        if arguments.explain_sharding:
            stream.write(explain_sharding(runner.reports, arguments.explain_sharding) + "\n")
    return printing.module_text(imported.module, arguments.mlir_print_generic, arguments.mlir_print_debuginfo)


def reported(arguments, data: bytes, source: str):
    """The --report recording around the run (a do-nothing context without --report)."""
    if not arguments.report:
        return contextlib.nullcontext()
    from mlirxla.report import page

    return page.Recording(source, None, data)


def fusion_passes(step) -> list:
    """The fusion passes of a pipeline whose decisions `--explain-fusion` reads (priority,
    output, widening-GEMM and batch-slice fusion), in order, nested pipelines included."""
    from mlirxla.transforms.batch_slice_fusion import BatchSliceFusionPass
    from mlirxla.transforms.output_fusion import OutputFusionPass
    from mlirxla.transforms.priority_fusion import PriorityFusionPass
    from mlirxla.transforms.widening_gemm_fusion import WideningGemmFusionPass

    if isinstance(step, (PriorityFusionPass, OutputFusionPass, WideningGemmFusionPass, BatchSliceFusionPass)):
        return [step]
    if isinstance(step, Pipeline):
        return [found for inner in step.steps for found in fusion_passes(inner)]
    if isinstance(step, FixedPoint):
        return fusion_passes(step.step)
    return []


def explain_fusion(pipeline: Pipeline, reports: dict[str, PassReport], query: str) -> str:
    """Answer from the decisions of the fusion passes that ran, in pipeline order."""
    from mlirxla.transforms.priority_fusion import explain

    passes = fusion_passes(pipeline)
    if not passes:
        raise MlirxlaError("--explain-fusion needs a pipeline with a fusion pass (xhlo-priority-fusion, xhlo-output-fusion, xhlo-batch-slice-fusion)")
    ran = [reports[name] for name in dict.fromkeys(step.name for step in passes) if name in reports]
    return explain([decision for report in ran for decision in report.decisions], query)


def explain_sharding(reports: dict[str, PassReport], query: str) -> str:
    """Answer from the report of xhlo-sharding-propagation, when it ran and propagated."""
    from mlirxla.transforms.sharding_propagation import ShardingPropagationPass, explain

    report = reports.get(ShardingPropagationPass.name)
    if report is None:
        raise MlirxlaError(f"--explain-sharding needs a pipeline in which {ShardingPropagationPass.name} propagated (a module for several partitions with sharding annotations)")
    return explain(report, query)


def expected_errors(chunk: Chunk) -> list[tuple[int, str]]:
    """(line in the chunk, message) of each `// expected-error @+N {{message}}` comment."""
    expectations = []
    for index, line in enumerate(chunk.text.splitlines(), start=1):
        for match in EXPECTED_ERROR.finditer(line):
            offset = match.group(2)
            target = index
            if offset in ("above", "below"):
                target += -1 if offset == "above" else 1
            elif offset:
                target += int(offset)
            expectations.append((target, match.group(3)))
    return expectations


def verify_diagnostics(chunk: Chunk, source: str, arguments, pipeline) -> list[str]:
    """Problems with the chunk's diagnostics: an expected error that did not happen or differs, or an unexpected one."""
    expectations = expected_errors(chunk)
    try:
        process(chunk.text.encode(), source, arguments, pipeline, io.StringIO())
        error = None
    except MlirxlaError as raised:
        error = raised
    if error is None:
        return [f"{source}:{line}: expected error \"{text}\" was not produced" for line, text in expectations]
    match = re.match(r".*?:(\d+):\d+$", error.location or "")
    line = int(match.group(1)) if match else None
    for expected_line, text in expectations:
        if text in error.message and (line is None or line == expected_line):
            return []
    return [f"{error.location or source}: unexpected error: {first_line(error.message)}"]


def opt(argv) -> int:
    arguments = parse_arguments(argv)
    if arguments.list_passes:
        for name, summary in registry.pass_listing():
            print(f"  {name:32} {summary}")
        return EXIT_OK
    pipeline = build_pipeline(arguments)
    if arguments.print_pipeline:
        print("\n".join(pipeline.describe()) if pipeline else "(no pipeline)")
        return EXIT_OK
    data, source = read_input(arguments.input)
    if arguments.report and (arguments.split_input_file or arguments.verify_diagnostics):
        raise MlirxlaError("--report writes the page of one module: not with --split-input-file or --verify-diagnostics")
    if not arguments.split_input_file and not arguments.verify_diagnostics:
        with reported(arguments, data, source) as recording, progress.compiling(source):
            text = process(data, source, arguments, pipeline, sys.stderr)
        write_output(arguments.output, text)
        if recording is not None:
            recording.write(arguments.report)
        return EXIT_OK
    chunks = split_chunks(data.decode("utf-8", errors="replace")) if arguments.split_input_file else [Chunk(1, data.decode("utf-8", errors="replace"))]
    if arguments.verify_diagnostics:
        problems = [p for chunk in chunks for p in verify_diagnostics(chunk, source, arguments, pipeline)]
        for problem in problems:
            print(problem, file=sys.stderr)
        return EXIT_CHECK_FAILED if problems else EXIT_OK
    outputs = [process(chunk.text.encode(), source, arguments, pipeline, sys.stderr) for chunk in chunks]
    write_output(arguments.output, "// -----\n".join(outputs))
    return EXIT_OK


def main(argv=None) -> int:
    return run_tool("mlirxla-opt", lambda: opt(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
