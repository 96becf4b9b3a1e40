"""Kernels the toolkit cannot lower run on the StableHLO reference interpreter, one kernel at a
time, as host calls: correct, slow, and said in the dump.

A kernel falls back when its lowering fails (an op the linalg lowering does not take: a dot
with an algorithm, f8 dots, complex cbrt) or when the emitter knows the lowering would crash,
miscompute or does not exist (complex bitcast_convert, reduce_precision to 0 mantissa bits,
a select_and_scatter whose select is not one compare). A kernel the interpreter cannot run in process either (ops it
aborts on, integer division it may trap on) is refused with the original reason. The kernel's
op (a fusion or a single op) becomes a StableHLO function `@main` of its operands; the host
call evaluates it with the interpreter on views of the buffers. Everything else in the
program stays native.
"""

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.mlir import func, ir
from mlirxla.runtime import isolated
from mlirxla.runtime.reference import uninterpretable_op
from mlirxla.runtime.executable import ExecutablePlan, TensorSpec
from mlirxla.runtime.thunks import ConditionalThunk, HostThunk, KernelThunk, WhileThunk
from mlirxla.transforms.fusion_legality import kind_of
from mlirxla.transforms.xhlo_to_stablehlo import lower_module

from .kernel_source import clone_kernel


def fallback_module_text(op: ir.Operation, reason: str) -> str:
    """`op` as a StableHLO module whose `@main` takes its operands and returns its results;
    refused (with `reason`, why it is not native) when the interpreter cannot run it in this
    process either (it would abort)."""
    module = ir.Module.create()
    operand_types = [v.type for v in op.operands]
    result_types = [r.type for r in op.results]
    with ir.InsertionPoint(module.body), op.location:
        function = func.FuncOp("main", ir.FunctionType.get(operand_types, result_types))
        entry = function.add_entry_block()
    with ir.InsertionPoint(entry), op.location:
        func.ReturnOp(clone_kernel(op, list(entry.arguments), {}))
    lower_module(module)
    if uninterpretable_op(module) is not None or isolated.may_crash(module):
        raise MlirxlaError(f"{kind_of(op)}: {reason}, and the reference interpreter cannot run it in process either",
                           location_text(op.location))
    return module.operation.get_asm(print_generic_op_form=True)  # custom forms may not parse back (a 0-d dynamic slice)


def host_thunk_for(kernel: KernelThunk, op: ir.Operation, text: str) -> HostThunk:
    values = list(op.operands) + list(op.results)
    specs = [(at, tuple(ir.RankedTensorType(v.type).shape), TensorSpec.of(v.type).dtype) for at, v in zip(kernel.arguments, values)]
    count = len(op.operands)
    return HostThunk(kernel.name, "interpret", tuple(specs[:count]), tuple(specs[count:]), {"module": text})


def replace_kernel(plan: ExecutablePlan, symbol: str, op: ir.Operation, reason: str) -> None:
    """Swap the thunk that calls kernel `symbol` (wherever it is nested) for the interpreter."""
    text = fallback_module_text(op, reason)
    plan.thunks = _replaced(plan.thunks, symbol, op, text)


def _replaced(thunks: list, symbol: str, op: ir.Operation, text: str) -> list:
    result = []
    for thunk in thunks:
        if isinstance(thunk, KernelThunk) and thunk.symbol == symbol:
            thunk = host_thunk_for(thunk, op, text)
        elif isinstance(thunk, WhileThunk):
            thunk.condition = _replaced(thunk.condition, symbol, op, text)
            thunk.body = _replaced(thunk.body, symbol, op, text)
        elif isinstance(thunk, ConditionalThunk):
            thunk.branches = [_replaced(branch, symbol, op, text) for branch in thunk.branches]
        result.append(thunk)
    return result
