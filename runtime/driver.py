"""Compile and run one function of an xhlo module with a backend, its check ops judged: the
function's checks become extra results, the clone is compiled by the backend the registry
names, run, and the results come back as attributes in an `Execution`, so that `checks.judge`
and the tools treat every backend alike (`mlirxla-run --backend`, `mlirxla-conformance`).
"""

import numpy as np

from mlirxla.backends import registry
from mlirxla.ir_queries import public_entry_name
from mlirxla.mlir import ir

from . import literals
from .executable import Executable
from .reference import CheckRecord, Execution, argument_types, check_arguments, extract_checks, find_function, trim_to_entry


def compile_entry(module: ir.Module, entry: str, options=None,
                  backend: str = registry.DEFAULT) -> tuple[Executable, list[CheckRecord], list[ir.Type]]:
    """`entry` of a clone of `module`, its checks turned into results, compiled by `backend`:
    the executable, the checks, and the types of everything it returns."""
    from mlirxla.pipelines.runner import RunOptions

    clone = ir.Module.parse(module.operation.get_asm(enable_debug_info=True), module.context)
    with clone.context, ir.Location.unknown():
        function = find_function(clone, entry)
        checks = extract_checks(function.operation)
        trim_to_entry(clone, entry)
        result_types = list(ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).results)
    executable = Executable.of(registry.backend(backend).compile(clone, options or RunOptions(backend=backend)))
    return executable, checks, result_types


def execute(module: ir.Module, arguments: list[np.ndarray], entry: str | None = None, options=None,
            backend: str = registry.DEFAULT) -> Execution:
    """Compile `entry` (default: main or the first public function) of a clone of `module`
    with `backend` and run it on numpy `arguments`."""
    entry = entry or public_entry_name(module)
    check_arguments(argument_types(module, entry), arguments, entry)
    executable, checks, result_types = compile_entry(module, entry, options, backend)
    return run_compiled(module, entry, executable, checks, result_types, arguments)


def run_compiled(module: ir.Module, entry: str, executable: Executable, checks: list[CheckRecord], result_types: list,
                 arguments: list[np.ndarray], repeat: int = 1) -> Execution:
    """Run what `compile_entry` made on numpy `arguments` (`repeat` times: the last run's
    results are judged)."""
    result_count = len(ir.FunctionType(ir.TypeAttr(find_function(module, entry).attributes["function_type"]).value).results)
    for _ in range(max(repeat, 1)):
        outputs = executable.execute(arguments)
    with module.context:
        values = [literals.to_attribute(np.asarray(array), value_type) for array, value_type in zip(outputs, result_types)]
    return Execution(values, result_count, checks)
