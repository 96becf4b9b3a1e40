"""mlirxla-run: import a module, run its entry function, judge its checks.

    mlirxla-run model.mlir                       # compiled for the host CPU, generated inputs (seed 0)
    mlirxla-run model.mlir --inputs x.npz        # arrays arg0, arg1, ... (or in file order)
    mlirxla-run model.mlir --check               # compare with the StableHLO reference interpreter
    mlirxla-run model.mlir --backend reference   # run on the reference interpreter instead
    mlirxla-run model.mlir --backend iree        # compiled by IREE after mlirxla's simplification
    mlirxla-run model.mlir -o outputs.npz --dump-to dump/   # dump: every pass, kernel and thunk
    mlirxla-run model.mlir --devices 4          # 4 replicas, one thread per device, collectives between
    mlirxla-run sharded.mlir                     # a module sharded over its partitions: partitioned, global results
    mpirun -n 4 mlirxla-run --distributed sharded.mlir -o out.npz   # its devices shared by 4 processes, collectives over MPI
    mlirxla-run model.mlir --report report.html  # the compile as one HTML page
    mlirxla-run model.mlir --profile trace.json --repeat 10   # a Perfetto trace; top kernels on stderr

Exit status 0 when every check op in the module holds (and --check agrees), 1 when one
fails (it is printed), 2 on bad input. With --distributed every process runs its share of
the devices and process 0 prints (and writes) the gathered results; a process whose peer
died or never arrived fails within MLIRXLA_COLLECTIVE_TIMEOUT, its error naming the process
and the collective, and every process exits non-zero.
"""

import argparse
import contextlib
import os
import sys
from dataclasses import replace

import numpy as np

from mlirxla import frontdoor, phases
from mlirxla.context import new_context
from mlirxla.dialects.xhlo.config import write_config
from mlirxla.errors import MlirxlaError, in_file, location_text
from mlirxla.frontdoor.load import Loaded, load_bytes
from mlirxla.ir_queries import public_entry_name
from mlirxla.mlir import ir
from mlirxla.pipelines.runner import RunOptions
from mlirxla.backends import registry
from mlirxla.backends.cpu import excess_precision
from mlirxla.runtime import checks, distributed, driver, literals, memory, oracle, reference
from mlirxla.transforms.sharding_remover import partitioning_need
from mlirxla.report import progress

from . import npz_inputs
from .cli import EXIT_CHECK_FAILED, EXIT_OK, add_iree_flag_argument, iree_flags, run_tool
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
                        help="the backend that compiles it: cpu (native code, the default), iree (IREE's compiler and "
                             "runtime; the iree extra) or reference (the StableHLO reference interpreter)")
    add_iree_flag_argument(parser)
    parser.add_argument("--devices", type=int, help="run on this many devices of this process: the module's replicas x "
                                                     "partitions (default), or N replicas of a module that declares none; "
                                                     "every device gets the same arguments")
    parser.add_argument("--distributed", action="store_true",
                        help="run as one process of an MPI job (mpirun -n P): the program's devices shared evenly by the "
                             "processes, collectives over MPI, results gathered on process 0 (the distributed extra)")
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
    arguments = parser.parse_args(argv)
    arguments.iree_flags = iree_flags(arguments)
    if arguments.distributed:
        for flag, given in (("--check", arguments.check), ("--report", arguments.report), ("--profile", arguments.profile)):
            if given:
                raise MlirxlaError(f"{flag} runs in one process: it cannot be combined with --distributed")
    return arguments


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


def write_outputs(path: str, per_device: list[list[np.ndarray]]) -> None:
    """`result{i}` for one device; `device{d}.result{i}` for several."""
    def name(device: int, index: int) -> str:
        return f"device{device}.result{index}" if len(per_device) > 1 else f"result{index}"
    try:
        np.savez(path, **{name(d, i): array for d, outputs in enumerate(per_device) for i, array in enumerate(outputs)})
    except OSError as error:
        raise MlirxlaError(f"cannot write outputs: {error.strerror}", path) from None


def describe(array: np.ndarray) -> str:
    preview = np.array2string(array.reshape(-1)[:6], precision=6, separator=", ", max_line_width=200)
    return f"{array.dtype}{list(array.shape)} {preview}{' ...' if array.size > 6 else ''}"


def request_devices(loaded: Loaded, devices: int | None) -> None:
    """`--devices N` on a module that declares no grid makes it N replicas (before the front
    door verifies its replica groups); on one that declares a grid, N must be its size."""
    if devices is None:
        return
    config = frontdoor.module_config(loaded.module)
    if devices < 1:
        raise MlirxlaError(f"--devices {devices}: a program runs on at least one device")
    if config.device_count > 1 and devices != config.device_count:
        raise MlirxlaError(f"--devices {devices}, but the module is for {config.replica_count} replica(s) x "
                           f"{config.partition_count} partition(s) = {config.device_count} devices")
    if config.device_count == 1:
        with loaded.module.context:
            write_config(loaded.module, replace(config, replica_count=devices))


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


HOW = {"cpu": "compiled for the host CPU and ran", "iree": "compiled by IREE and ran on its runtime",
       "reference": "ran on the reference interpreter"}


def run_module(arguments, data: bytes, source: str) -> int:
    context = new_context()
    with seen(arguments, data, source) as (recording, profile):
        with progress.compiling(source):  # on a terminal, what a long compile is at
            with phases.phase("frontdoor", source):
                loaded = load_bytes(data, source, context)
                request_devices(loaded, arguments.devices)
                imported = frontdoor.import_loaded(loaded)
            module = imported.module
            with context, ir.Location.unknown():
                entry = arguments.entry or public_entry_name(module)
                inputs = run_inputs(arguments, module, entry)
                grid = driver.module_grid(module)
                if grid.device_count > 1 and arguments.check:
                    raise MlirxlaError(f"--check compares with the reference interpreter, which runs one device, not {grid.device_count}")
                driver.check_grid(arguments.backend, grid)
                options = RunOptions(dump_to=arguments.dump_to, backend=arguments.backend, iree_flags=arguments.iree_flags)
                sharded = grid.device_count > 1 and partitioning_need(module) is not None
                exchange = distributed.join(grid.device_count) if arguments.distributed else None
                if exchange is not None and exchange.rank != 0:
                    options = replace(options, dump_to=None)  # one process writes the dumps
                if sharded:
                    program = driver.load_sharded(module, arguments.backend, options, entry, exchange)
                    executable = program.executable
                else:
                    executable, found_checks, result_types = driver.compile_entry(module, entry, options, arguments.backend)
        with context, ir.Location.unknown():
            if sharded:  # global arguments split by their shardings, global results assembled
                for _ in range(arguments.repeat):
                    per_device, verdicts = [program.execute_numpy(inputs)], []
            else:
                executions = driver.run_compiled(module, entry, executable, found_checks, result_types, inputs, grid,
                                                 arguments.repeat, exchange)
                per_device = [[literals.to_numpy(value) for value in execution.outputs] for execution in executions]
                verdicts = [checks.judge(execution) for execution in executions]
            outputs = per_device[0]
    if exchange is not None and exchange.rank != 0:
        return EXIT_CHECK_FAILED if any(not v.passed for verdict in verdicts for v in verdict if v.judged) else EXIT_OK

    how = HOW.get(arguments.backend, f"compiled by the {arguments.backend} backend and ran")
    on_devices = f" on {grid.device_count} devices ({grid.replica_count} replica(s) x {grid.partition_count} partition(s))" \
        if grid.device_count > 1 else ""
    if sharded:
        on_devices += ", partitioned by its shardings (global results)"
    if exchange is not None:
        on_devices += f", {exchange.local_devices} device(s) in each of {exchange.size} process(es) (collectives over MPI)"
    print(f"{source}: imported ({imported.form}{', StableHLO v' + imported.artifact_version if imported.artifact_version else ''}), "
          f"verified, {how} @{entry}{on_devices}")
    for device, device_outputs in enumerate(per_device):
        for index, array in enumerate(device_outputs):
            print(f"  {f'device {device} ' if len(per_device) > 1 else ''}result {index}: {describe(array)}")
    if arguments.dump_to:
        print(f"  dump: {arguments.dump_to}/ ({len(os.listdir(arguments.dump_to))} files: the pipeline's decisions, "
              "the code, the thunk sequence)")
    if arguments.output:
        write_outputs(arguments.output, per_device)
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

    failed = False
    for device, device_verdicts in enumerate(verdicts):
        failed = report_checks(device_verdicts, source, f"device {device} " if len(verdicts) > 1 else "") or failed
    if arguments.check:
        expected = oracle.evaluate(data, source, entry, inputs)
        comparison = oracle.compare(outputs, expected, arguments.rtol, arguments.atol)
        print(f"  check against the StableHLO reference interpreter: {comparison.summary}")
        if (not comparison.matches and arguments.backend == "cpu" and excess_precision.allowed()
                and any(np.asarray(o).dtype.name == "bfloat16" for o in outputs)):
            print("  (bf16 values inside kernels are computed in f32 and rounded where stored, the interpreter rounds"
                  " every op: MLIRXLA_ALLOW_EXCESS_PRECISION=0 computes as it does)")
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


def report_checks(verdicts: list[checks.Verdict], source: str, device: str = "") -> bool:
    if not verdicts:
        return False
    judged = [v for v in verdicts if v.judged]
    failures = [v for v in judged if not v.passed]
    print(f"  {device}checks: {len(judged) - len(failures)} of {len(judged)} hold" + (f", {len(verdicts) - len(judged)} not judged" if len(judged) < len(verdicts) else ""))
    for verdict in failures:
        print(f"  {device}FAILED {verdict.check.name} at {in_file(verdict.check.location, source)}: {verdict.detail}")
    return bool(failures)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--distributed" not in argv:
        return run_tool("mlirxla-run", lambda: run(argv))
    tool = "mlirxla-run"
    with contextlib.suppress(MlirxlaError):
        tool = f"mlirxla-run (process {distributed.process_rank()} of {distributed.process_count()})"
    status = run_tool(tool, lambda: run(argv))
    if status != EXIT_OK:  # MPI's finalize would wait for peers that may be gone: leave now
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
