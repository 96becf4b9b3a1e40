"""mlirxla-run: import a module, run its entry function, judge its checks.

    mlirxla-run model.mlir                       # compiled for the host CPU, generated inputs (seed 0)
    mlirxla-run model.mlir --inputs x.npz        # arrays arg0, arg1, ... (or in file order)
    mlirxla-run model.mlir --check               # compare with the StableHLO reference interpreter
    mlirxla-run model.mlir --backend reference   # run on the reference interpreter instead
    mlirxla-run model.mlir -o outputs.npz --dump-to dump/   # dump: every pass, kernel and thunk
    mlirxla-run model.mlir --report report.html  # the compile as one HTML page
    mlirxla-run model.mlir --profile trace.json --repeat 10   # a Perfetto trace; top kernels on stderr

Exit status 0 when every check op in the module holds (and --check agrees), 1 when one
fails (it is printed), 2 on bad input.
"""

import argparse
import contextlib
import os
import sys

import numpy as np

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError, in_file, location_text
from mlirxla.ir_queries import public_entry_name
from mlirxla.mlir import ir
from mlirxla.pipelines.runner import RunOptions
from mlirxla.backends import registry
from mlirxla.runtime import checks, driver, literals, memory, oracle, reference
from mlirxla.report import progress

from . import npz_inputs
from .cli import EXIT_CHECK_FAILED, EXIT_OK, run_tool
from .opt import read_input


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="mlirxla-run", description=__doc__.splitlines()[0])
    parser.add_argument("input", help="input file (.mlir text, bytecode or portable artifact); - for stdin")
    parser.add_argument("--inputs", help=".npz file with the arguments (arg0, arg1, ... or in file order)")
    parser.add_argument("--seed", type=int, default=0, help="seed for generated arguments (default 0)")
    parser.add_argument("--entry", help="function to run (default: main, else the first public function)")
    parser.add_argument("-o", "--output", help="save the outputs to this .npz file (result0, result1, ...)")
    parser.add_argument("--check", action="store_true", help="compare with the StableHLO reference interpreter")
    parser.add_argument("--backend", choices=registry.names(), default=registry.DEFAULT,
                        help="the backend that compiles it: cpu (native code, the default) or reference (the StableHLO "
                             "reference interpreter)")
    parser.add_argument("--dump-to", help="write the dumps to this directory: the module as imported, the pipeline's "
                                          "decisions, the code (each kernel's LLVM IR on cpu) and the thunk sequence")
    parser.add_argument("--report", metavar="FILE.html",
                        help="write the compile as one self-contained HTML page: the pass timeline and the changes of each "
                             "pass, the fusion graph, buffer assignment, the thunk sequence (measured too with --profile)")
    parser.add_argument("--profile", metavar="FILE.json",
                        help="write a Chrome trace (Perfetto, chrome://tracing): the compile's phases and every thunk run; "
                             "the top kernels by time go to stderr")
    parser.add_argument("--repeat", type=int, default=1, help="run the executable this many times (default 1; the last "
                                                               "run's results are shown and checked)")
    parser.add_argument("--rtol", type=float, default=1e-4,
                        help="relative tolerance of --check (default 1e-4: native kernels sum in another order, and BLAS blocks its sums)")
    parser.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance of --check (default 1e-5)")
    return parser.parse_args(argv)


def generated_argument(shaped: ir.RankedTensorType, rng: np.random.Generator) -> np.ndarray:
    """Random values that suit the element type: normal floats, small integers, random booleans."""
    dtype = literals.storage_dtype(shaped.element_type)
    shape = list(shaped.shape)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind in "iu" or isinstance(shaped.element_type, ir.IntegerType):
        return rng.integers(0, min(8, 2 ** (ir.IntegerType(shaped.element_type).width - 1)), shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def tensor_text(shaped: ir.RankedTensorType) -> str:
    return f"{shaped.element_type}[{','.join(map(str, shaped.shape))}]"


def entry_parameters(module: ir.Module, entry: str) -> list[npz_inputs.Parameter]:
    parameters = []
    for index, value_type in enumerate(reference.argument_types(module, entry)):
        if not isinstance(value_type, ir.RankedTensorType) or not ir.RankedTensorType(value_type).has_static_shape:
            raise MlirxlaError(f"argument #{index} of @{entry} has type {value_type}: mlirxla-run passes tensors of static shape only")
        shaped = ir.RankedTensorType(value_type)
        dtype = literals.numpy_dtype(shaped.element_type)
        if dtype is None:
            raise MlirxlaError(f"argument #{index} of @{entry} has element type {shaped.element_type}, which no array holds")
        parameters.append(npz_inputs.Parameter(index, dtype, tuple(shaped.shape), str(value_type), tensor_text(shaped)))
    return parameters


GENERATOR_BYTES_PER_ELEMENT = 8  # numpy draws random numbers as float64 or int64 before the cast


def require_memory_for_arguments(parameters: list[npz_inputs.Parameter], generated: bool) -> None:
    """Say how much memory the arguments need before making or reading them."""
    sizes = [memory.tensor_bytes(p.shape, p.dtype.itemsize) for p in parameters]
    for parameter, size in zip(parameters, sizes):
        memory.require(size, f"the argument {parameter.spec}")
    workspace = max((memory.tensor_bytes(p.shape, GENERATOR_BYTES_PER_ELEMENT) for p in parameters), default=0) if generated else 0
    memory.require(sum(sizes) + workspace, f"the {len(parameters)} arguments" + (" (and generating them)" if generated else ""))


def require_memory_for_interpreter(module: ir.Module) -> None:
    """The reference interpreter holds every value it computes: refuse a module whose largest
    value cannot be held."""
    largest = [0, None, None]

    def visit(op):
        for result in op.results:
            if isinstance(result.type, ir.RankedTensorType) and ir.RankedTensorType(result.type).has_static_shape:
                shaped = ir.RankedTensorType(result.type)
                dtype = literals.numpy_dtype(shaped.element_type)
                size = memory.tensor_bytes(shaped.shape, dtype.itemsize if dtype is not None else 8)
                if size > largest[0]:
                    largest[:] = [size, shaped, op]
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    size, shaped, op = largest
    if op is not None:
        memory.require(size, f"on the reference interpreter, the value {tensor_text(shaped)} of '{op.name}'",
                       location=location_text(op.location))


def write_outputs(path: str, outputs: list[np.ndarray]) -> None:
    try:
        np.savez(path, **{f"result{i}": array for i, array in enumerate(outputs)})
    except OSError as error:
        raise MlirxlaError(f"cannot write outputs: {error.strerror}", path) from None


def describe(array: np.ndarray) -> str:
    preview = np.array2string(array.reshape(-1)[:6], precision=6, separator=", ", max_line_width=200)
    return f"{array.dtype}{list(array.shape)} {preview}{' ...' if array.size > 6 else ''}"


def run(argv) -> int:
    arguments = parse_arguments(argv)
    if arguments.repeat < 1:
        raise MlirxlaError(f"--repeat takes a count of at least 1, not {arguments.repeat}")
    data, source = read_input(arguments.input)
    try:
        return run_module(arguments, data, source)
    except MlirxlaError as error:
        raise error.with_source(source) from None


def run_inputs(arguments, module: ir.Module, entry: str) -> list[np.ndarray]:
    """The arguments: read from --inputs, or generated from --seed."""
    parameters = entry_parameters(module, entry)
    require_memory_for_arguments(parameters, generated=not arguments.inputs)
    if arguments.backend == "reference" or arguments.check:
        require_memory_for_interpreter(module)
    if arguments.inputs:
        return npz_inputs.read_arguments(arguments.inputs, parameters, entry)
    rng = np.random.default_rng(arguments.seed)
    return [generated_argument(ir.RankedTensorType(t), rng) for t in reference.argument_types(module, entry)]


HOW = {"cpu": "compiled for the host CPU and ran", "reference": "ran on the reference interpreter"}


def run_module(arguments, data: bytes, source: str) -> int:
    context = new_context()
    with seen(arguments, data, source) as (recording, profile):
        with progress.compiling(source):  # on a terminal, what a long compile is at
            imported = frontdoor.import_bytes(data, source, context)
            module = imported.module
            with context, ir.Location.unknown():
                entry = arguments.entry or public_entry_name(module)
                inputs = run_inputs(arguments, module, entry)
                options = RunOptions(dump_to=arguments.dump_to, backend=arguments.backend)
                executable, found_checks, result_types = driver.compile_entry(module, entry, options, arguments.backend)
        with context, ir.Location.unknown():
            execution = driver.run_compiled(module, entry, executable, found_checks, result_types, inputs, arguments.repeat)
            outputs = [literals.to_numpy(value) for value in execution.outputs]
            verdicts = checks.judge(execution)

    how = HOW.get(arguments.backend, f"compiled by the {arguments.backend} backend and ran")
    print(f"{source}: imported ({imported.form}{', StableHLO v' + imported.artifact_version if imported.artifact_version else ''}), verified, {how} @{entry}")
    for index, array in enumerate(outputs):
        print(f"  result {index}: {describe(array)}")
    if arguments.dump_to:
        print(f"  dump: {arguments.dump_to}/ ({len(os.listdir(arguments.dump_to))} files: the pipeline's decisions, "
              "the code, the thunk sequence)")
    if arguments.output:
        write_outputs(arguments.output, outputs)
        print(f"  outputs saved to {arguments.output}")
    if profile is not None:
        profile.write_trace(arguments.profile)
        sys.stdout.flush()
        sys.stderr.write(profile.summary())
        print(f"  profile: {arguments.profile} ({len(profile.thunk_runs)} thunk runs over {len(profile.executions)} "
              "execution(s); open it in https://ui.perfetto.dev or chrome://tracing)")
    if recording is not None:
        recording.write(arguments.report, executable, profile.measured() if profile is not None else None)
        print(f"  report: {arguments.report}")

    failed = report_checks(verdicts, source)
    if arguments.check:
        expected = oracle.evaluate(data, source, entry, inputs)
        comparison = oracle.compare(outputs, expected, arguments.rtol, arguments.atol)
        print(f"  check against the StableHLO reference interpreter: {comparison.summary}")
        failed = failed or not comparison.matches
    return EXIT_CHECK_FAILED if failed else EXIT_OK


@contextlib.contextmanager
def seen(arguments, data: bytes, source: str):
    """(the --report recording, the --profile profile) around the compile and the runs; None
    for what was not asked for."""
    from mlirxla.report import page, profile

    with contextlib.ExitStack() as stack:
        recording = stack.enter_context(page.Recording(source, arguments.backend, data)) if arguments.report else None
        recorded = stack.enter_context(profile.recording()) if arguments.profile else None
        yield recording, recorded


def report_checks(verdicts: list[checks.Verdict], source: str) -> bool:
    if not verdicts:
        return False
    judged = [v for v in verdicts if v.judged]
    failures = [v for v in judged if not v.passed]
    print(f"  checks: {len(judged) - len(failures)} of {len(judged)} hold" + (f", {len(verdicts) - len(judged)} not judged" if len(judged) < len(verdicts) else ""))
    for verdict in failures:
        print(f"  FAILED {verdict.check.name} at {in_file(verdict.check.location, source)}: {verdict.detail}")
    return bool(failures)


def main(argv=None) -> int:
    return run_tool("mlirxla-run", lambda: run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
