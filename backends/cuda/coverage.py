"""How much of a test suite the cuda backend compiles to PTX that ptxas accepts, without a
GPU: every test function of the StableHLO interpreter suite (each file in a child process
of its own, so that a crash in a pass costs one file), its checks turned into results as the
conformance runner does, compiled by the cuda backend (PTX for sm_90, assembled by ptxas).

    python -m mlirxla.backends.cuda.coverage [SUITE_DIR] [-k FILTER] [--json]
    python -m mlirxla.backends.cuda.coverage --benchmarks

prints, per function, `compiled` (with its kernel and launch counts) or `refused` and why,
then the totals: functions compiled, GPU kernels assembled by ptxas, and the reasons for
refusals counted. `--benchmarks`: the six benchmark programs instead, each with its GPU
kernels counted by the emitter that made them (`loop`, `loop.v4`, `row`, `column`,
`transpose`) and whether ptxas assembled them all."""

import argparse
import collections
import json
import re
import subprocess
import sys


def compile_case(text: str, source: str, entry: str) -> dict:
    """One test function compiled by the cuda backend: its outcome as plain data."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.conformance import suite_options
    from mlirxla.errors import MlirxlaError
    from mlirxla.mlir import ir
    from mlirxla.runtime.reference import extract_checks, find_function, trim_to_entry

    from . import compiler, ptx

    try:
        context = new_context()
        imported = frontdoor.import_text(text, source, context)
        with context, ir.Location.unknown():
            extract_checks(find_function(imported.module, entry).operation)
            trim_to_entry(imported.module, entry)
        program = compiler.compile_program(imported.module, suite_options("cuda"))
    except MlirxlaError as error:
        return {"status": "refused", "reason": str(error)}
    except Exception as error:  # a bug: still one line
        return {"status": "refused", "reason": f"internal error: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}
    kernels = ptx.kernel_names(program.ptx) if program.ptx.strip() else []
    return {"status": "compiled", "kernels": len(kernels), "assembled": len(program.cubin.resources) if program.cubin else 0,
            "launches": sum(len(k.launches) for k in program.kernels)}


def file_outcomes(directory: str, relative: str, filter_text: str | None) -> dict[str, dict]:
    from mlirxla.conformance import collect

    outcomes = {}
    for case in collect(directory, filter_text):
        if case.file != relative or case.run_parallel:
            continue
        outcomes[case.name] = compile_case(case.text, case.file, case.function)
    return outcomes


def run(directory: str, filter_text: str | None) -> dict[str, dict]:
    """Every file in a child process; a child that dies marks its file's functions refused."""
    from mlirxla.conformance import collect

    files = sorted({case.file for case in collect(directory, filter_text) if not case.run_parallel})
    outcomes = {}
    for relative in files:
        done = subprocess.run([sys.executable, "-m", "mlirxla.backends.cuda.coverage", directory, "--file", relative]
                              + (["-k", filter_text] if filter_text else []), capture_output=True, text=True)
        if done.returncode == 0:
            outcomes.update(json.loads(done.stdout))
        else:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            outcomes[f"{relative} (whole file)"] = {"status": "refused", "reason": f"the compile died: {last}"}
    return outcomes


def summary(outcomes: dict[str, dict]) -> dict:
    compiled = [o for o in outcomes.values() if o["status"] == "compiled"]
    reasons = collections.Counter(re.sub(r"kernel \S+", "kernel K", o["reason"])[:100] for o in outcomes.values() if o["status"] == "refused")
    return {"functions": len(outcomes), "compiled": len(compiled), "kernels": sum(o["kernels"] for o in compiled),
            "assembled_by_ptxas": sum(o["assembled"] for o in compiled), "launches": sum(o["launches"] for o in compiled),
            "refusals": dict(reasons.most_common(12))}


def benchmark_emitters() -> dict[str, dict]:
    """Per benchmark program: its distinct GPU kernels by emitter, and ptxas's verdict."""
    import os

    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.pipelines.runner import RunOptions

    from . import compiler, ptx
    from .pack import BENCHMARKS, REPOSITORY

    counts = {}
    for name in BENCHMARKS:
        path = os.path.join(REPOSITORY, "test", "data", "jax", "programs", f"{name}.stablehlo.mlir")
        with open(path, "rb") as handle:
            program = compiler.compile_program(frontdoor.import_bytes(handle.read(), path, new_context()).module,
                                               RunOptions(backend="cuda"))
        emitters = collections.Counter(e for kernel in program.kernels if not kernel.same_as for e in kernel.emitters)
        entries = ptx.kernel_names(program.ptx)
        counts[name] = {"kernels": len(entries), "assembled_by_ptxas": len(program.cubin.resources) if program.cubin else 0,
                        "launches": sum(len(k.launches) for k in program.kernels), "emitters": dict(sorted(emitters.items()))}
    return counts


def main(argv=None) -> int:
    from mlirxla.tools.conformance import DEFAULT_DIRECTORY

    parser = argparse.ArgumentParser(prog="python -m mlirxla.backends.cuda.coverage", description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default=DEFAULT_DIRECTORY)
    parser.add_argument("-k", dest="filter_text", default=None)
    parser.add_argument("--file", help=argparse.SUPPRESS)  # a child's one file
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--benchmarks", action="store_true", help="the six benchmark programs' kernels by emitter")
    arguments = parser.parse_args(argv)
    if arguments.benchmarks:
        counts = benchmark_emitters()
        total = collections.Counter()
        for name, entry in counts.items():
            total.update(entry["emitters"])
            print(json.dumps({name: entry}))
        print(json.dumps({"all six": dict(sorted(total.items()))}))
        return 0
    if arguments.file:
        print(json.dumps(file_outcomes(arguments.directory, arguments.file, arguments.filter_text)))
        return 0
    outcomes = run(arguments.directory, arguments.filter_text)
    if arguments.json:
        print(json.dumps({"outcomes": outcomes, "summary": summary(outcomes)}, indent=1))
    else:
        for name, outcome in outcomes.items():
            detail = (f"{outcome['kernels']} kernel(s), {outcome['launches']} launch(es)" if outcome["status"] == "compiled"
                      else outcome["reason"])
            print(f"{name}: {outcome['status']}: {detail}")
        print(json.dumps(summary(outcomes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
