"""Execute an xhlo function with the CPU backend, with its check ops judged like the reference
executor's (`reference.execute`): the function's checks become extra results, the module is
compiled (cpu pipeline, kernels, thunks) and run natively, and the results come back as
attributes in an `Execution`, so `checks.judge` and the tools treat both paths alike.
"""

import numpy as np

from mlirxla.mlir import ir

from . import literals
from .reference import Execution, argument_types, check_arguments, entry_function, extract_checks, find_function, trim_to_entry


def execute(module: ir.Module, arguments: list[np.ndarray], entry: str | None = None, options=None) -> Execution:
    """Compile `entry` (default: main or the first public function) of a clone of `module`
    for the host CPU and run it on numpy `arguments`."""
    from mlirxla.backends.cpu.compiler import compile_module
    from mlirxla.pipelines.runner import RunOptions

    entry = entry or entry_function(module)
    types = argument_types(module, entry)
    check_arguments(types, arguments, entry)
    result_count = len(ir.FunctionType(ir.TypeAttr(find_function(module, entry).attributes["function_type"]).value).results)
    clone = ir.Module.parse(module.operation.get_asm(enable_debug_info=True), module.context)
    with clone.context, ir.Location.unknown():
        function = find_function(clone, entry)
        checks = extract_checks(function.operation)
        trim_to_entry(clone, entry)
        result_types = list(ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).results)
    executable = compile_module(clone, options or RunOptions())
    outputs = executable.execute(arguments)
    with module.context:
        values = [literals.to_attribute(np.asarray(array), value_type) for array, value_type in zip(outputs, result_types)]
    return Execution(values, result_count, checks)
