"""Kernels: an op or a fusion compiled into one native function, called once (`kernel`), or
once per slice of its leading dimension (`sliced_kernel`: a batch-slice fusion, or a large
kernel that keeps the rows of dimension 0 apart, spread over the thread pool)."""

from dataclasses import dataclass

from mlirxla.mlir import ir
from mlirxla.runtime.threads import cpu_threads
from mlirxla.runtime.thunks import KernelThunk, SlicedKernelThunk
from mlirxla.transforms.batch_slice_fusion import RECOMPUTED_WHOLE_BYTES, leading_size, slice_problem
from mlirxla.transforms.scheduling import type_bytes

from .. import thread_split
from ..kernel_source import SlicePlan, one_slice, slice_plan


@dataclass
class KernelSpec:
    """A kernel to compile: the op, its symbol, and how (one slice of it; its epilogue only)."""

    symbol: str
    op: ir.Operation
    plan: SlicePlan | None = None
    library_result: ir.Value | None = None
    interpret: str | None = None  # why the interpreter evaluates it instead (no native lowering)
    source: str | None = None  # the kernel's own module text (an im2col), instead of the op's
    in_place: tuple[tuple[int, int], ...] = ()  # (operand, result) pairs sharing one buffer slice


def emit_kernel(emitter, op: ir.Operation) -> list:
    """One kernel, its rows spread over the threads when that pays and it keeps them apart."""
    rows = parallel_rows(op) if emitter.slice_rows else None
    if rows:
        plan = slice_plan(op, rows, recomputed_whole_bytes=row_block_recomputed_bytes(op, rows))
        return [emit_sliced(emitter, op, plan, "parallel row blocks")]
    return [kernel_thunk(emitter, op)]


def emit_batch_slices(emitter, op: ir.Operation) -> list:
    return [emit_sliced(emitter, op, slice_plan(op), "batch slices")]


def kernel_thunk(emitter, op: ir.Operation, library_result: ir.Value | None = None, interpret: str | None = None) -> KernelThunk:
    """The kernel computing `op` (with `library_result`: only its epilogue, over the output a
    library call wrote; with `interpret`: on the reference interpreter, for that reason)."""
    name = emitter.name_of(op)
    symbol = emitter.symbol(name if library_result is None else f"{name}_epilogue")
    operands = [emitter.slice_of(v) for v in op.operands]
    emitter.kernels.append(KernelSpec(symbol, op, library_result=library_result, interpret=interpret,
                                      in_place=updated_in_place(emitter, op) if library_result is None else ()))
    if library_result is not None:
        operands.append(emitter.slice_of(op.results[0]))
    results = [emitter.slice_of(r) for r in op.results]
    return KernelThunk(name, symbol, tuple(operands + results), len(results))


def updated_in_place(emitter, op: ir.Operation, plan: SlicePlan | None = None) -> tuple[tuple[int, int], ...]:
    """The (operand, result) pairs buffer assignment gave one buffer, read through the
    result's argument. A `dynamic_update_slice` (or a fusion rooted in one) given its
    operand's buffer then writes only the update there, as XLA's in-place
    dynamic-update-slice does, instead of copying the whole operand over itself; an
    elementwise kernel writing over an operand that dies there loads and stores through one
    pointer, which the LLVM vectorizer sees is safe (through two pointers to the same memory
    its run-time overlap check fails and the scalar loop runs)."""
    inner = list(op.regions[0].blocks[0].arguments) if op.name == "xhlo.fusion" else list(op.operands)
    types = plan.types if plan else {}
    pairs = []
    for result_index, result in enumerate(op.results):
        result_type = one_slice(result.type, plan.rows) if plan else result.type
        for operand_index, operand in enumerate(op.operands):
            if (emitter.slice_of(operand) == emitter.slice_of(result)
                    and types.get(inner[operand_index], inner[operand_index].type) == result_type):
                pairs.append((operand_index, result_index))
    return tuple(pairs)


def emit_sliced(emitter, op: ir.Operation, plan: SlicePlan, why: str) -> SlicedKernelThunk:
    name = emitter.name_of(op)
    symbol = emitter.symbol(name)
    emitter.kernels.append(KernelSpec(symbol, op, plan=plan, in_place=updated_in_place(emitter, op, plan)))
    arguments = [emitter.slice_of(v) for v in op.operands] + [emitter.slice_of(r) for r in op.results]
    strides = [type_bytes(v.type) // plan.count if sliced else 0 for v, sliced in zip(op.operands, plan.sliced_operands)]
    strides += [type_bytes(r.type) // plan.count for r in op.results]
    emitter.decisions.append(f"{name}: {why}, {plan.count} slices of {plan.rows} row(s), "
                             f"{sum(plan.sliced_operands)} operand(s) read slice by slice")
    return SlicedKernelThunk(name, symbol, tuple(arguments), len(op.results), slices=plan.count, strides=tuple(strides))


def parallel_rows(op: ir.Operation) -> int | None:
    """Rows per slice when the kernel is worth spreading over the threads by blocks of
    dimension 0 (`thread_split.py` estimates that it pays, and it keeps its rows apart), else
    None."""
    if op.name == "xhlo.fusion":
        if ir.StringAttr(op.attributes["kind"]).value not in ("loop", "input"):
            return None
    elif op.regions and op.name != "xhlo.reduce":
        return None
    if not op.results or not all(isinstance(r.type, ir.RankedTensorType) for r in op.results):
        return None
    threads = cpu_threads()
    n = leading_size(op.results[0])
    blocks = thread_split.slice_count(n, threads) if n and threads > 1 else None
    if blocks is None or not thread_split.estimate(op, threads).pays:
        return None
    if slice_problem(op, n, [], batched_dots=True, recomputed_whole_bytes=row_block_recomputed_bytes(op, n // blocks))[0]:
        return None
    return n // blocks


def row_block_recomputed_bytes(op: ir.Operation, rows: int) -> int:
    """How large a value on whole operands each row block may compute again: as large as the
    block's own results (a causal mask's positions over a whole attention row block: fused into
    the block's loops it is index arithmetic, and with one block per thread it is done a few
    times in all), and never below the batch slices' bound."""
    block_bytes = sum(type_bytes(result.type) for result in op.results) * rows // leading_size(op.results[0])
    return max(RECOMPUTED_WHOLE_BYTES, block_bytes)
