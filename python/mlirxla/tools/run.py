"""mlirxla-run: import a module, run its entry function, judge its checks.

    mlirxla-run model.mlir                       # compiled for the host CPU, generated inputs (seed 0)
    mlirxla-run model.mlir --inputs x.npz        # arrays arg0, arg1, ... (or in file order)
    mlirxla-run model.mlir --check               # compare with the StableHLO reference interpreter
    mlirxla-run model.mlir --backend reference   # run on the reference interpreter instead
    mlirxla-run model.mlir --backend iree        # compiled by IREE after mlirxla's simplification
    mlirxla-run model.mlir -o outputs.npz --dump-to dump/   # dump: every pass, kernel and thunk

Exit status 0 when every check op in the module holds (and --check agrees), 1 when one
fails (it is printed), 2 on bad input.
"""

import argparse
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
    parser.add_argument("--dump-to", help="write the dumps to this directory: the module as imported, the pipeline's "
                                          "decisions, the code (each kernel's LLVM IR on cpu) and the thunk sequence")
    parser.add_argument("--rtol", type=float, default=1e-4,
                        help="relative tolerance of --check (default 1e-4: native kernels sum in another order, and BLAS blocks its sums)")
    parser.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance of --check (default 1e-5)")
    arguments = parser.parse_args(argv)
    arguments.iree_flags = iree_flags(arguments)
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
    data, source = read_input(arguments.input)
    try:
        return run_module(arguments, data, source)
    except MlirxlaError as error:
        raise error.with_source(source) from None


HOW = {"cpu": "compiled for the host CPU and ran", "iree": "compiled by IREE and ran on its runtime",
       "reference": "ran on the reference interpreter"}


def run_module(arguments, data: bytes, source: str) -> int:
    context = new_context()
    imported = frontdoor.import_bytes(data, source, context)
    module = imported.module
    with context, ir.Location.unknown():
        entry = arguments.entry or public_entry_name(module)
        parameters = entry_parameters(module, entry)
        require_memory_for_arguments(parameters, generated=not arguments.inputs)
        if arguments.backend == "reference" or arguments.check:
            require_memory_for_interpreter(module)
        if arguments.inputs:
            inputs = npz_inputs.read_arguments(arguments.inputs, parameters, entry)
        else:
            rng = np.random.default_rng(arguments.seed)
            inputs = [generated_argument(ir.RankedTensorType(t), rng) for t in reference.argument_types(module, entry)]
        options = RunOptions(dump_to=arguments.dump_to, backend=arguments.backend, iree_flags=arguments.iree_flags)
        execution = driver.execute(module, inputs, entry, options, backend=arguments.backend)
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

    failed = report_checks(verdicts, source)
    if arguments.check:
        expected = oracle.evaluate(data, source, entry, inputs)
        comparison = oracle.compare(outputs, expected, arguments.rtol, arguments.atol)
        print(f"  check against the StableHLO reference interpreter: {comparison.summary}")
        failed = failed or not comparison.matches
    return EXIT_CHECK_FAILED if failed else EXIT_OK


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
