"""Control flow: `while` and `conditional` thunks holding the thunks of their computations,
with every slice those touch declared, so the executor orders them against the rest."""

from mlirxla.mlir import ir
from mlirxla.runtime.thunks import ConditionalThunk, ParallelCopyThunk, WhileThunk
from mlirxla.transforms.copy_insertion import is_carried_value_copy
from mlirxla.transforms.erasure import live_ops
from mlirxla.transforms.while_loop_trip_count_annotator import known_trip_count


def emit_while(emitter, op: ir.Operation) -> list:
    condition_block = op.regions[0].blocks[0]
    body_block = op.regions[1].blocks[0]
    condition = emitter.emit_block(condition_block)
    predicate = emitter.slice_of(list(condition_block.operations)[-1].operation.operands[0])
    body = emit_body(emitter, body_block)
    touched = own_slices(emitter, op, [predicate])
    return [WhileThunk(emitter.name_of(op), condition, predicate, body, touched, trip_count=known_trip_count(op))]


def emit_conditional(emitter, op: ir.Operation) -> list:
    branches = []
    for symbol in ir.ArrayAttr(op.attributes["branch_computations"]):
        function = emitter.functions[ir.FlatSymbolRefAttr(symbol).value]
        branches.append(emitter.emit_block(function.regions[0].blocks[0]))
    selector = op.operands[0]
    is_predicate = str(ir.RankedTensorType(selector.type).element_type) == "i1"
    touched = own_slices(emitter, op, [emitter.slice_of(selector)])
    return [ConditionalThunk(emitter.name_of(op), emitter.slice_of(selector), is_predicate, branches, touched)]


def emit_body(emitter, block: ir.Block) -> list:
    """A while body's thunks, its carried values' final copies (copies used only by the
    return) gathered at the end into one parallel copy: a body that returns its carried
    values swapped or rotated reads each before any is overwritten."""
    terminator = list(block.operations)[-1].operation
    final, thunks = [], []
    for op in live_ops(list(block.operations)[:-1]):
        emitted = emitter.emit_op(op)
        if is_carried_value_copy(op, terminator):
            final.extend(emitted)
        else:
            thunks.extend(emitted)
    if len(final) > 1:
        thunks.append(ParallelCopyThunk("carried values", tuple(final)))
    else:
        thunks.extend(final)
    return thunks


def own_slices(emitter, op: ir.Operation, extra: list) -> tuple:
    """The slices a control-flow op touches itself: its operands, results and `extra` (the
    thunk adds what the thunks inside touch, `runtime/thunks.py` ControlFlow)."""
    slices = [emitter.slice_of(v) for v in list(op.operands) + list(op.results)] + extra
    return tuple(dict.fromkeys(slices))
