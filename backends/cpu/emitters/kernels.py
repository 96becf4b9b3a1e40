"""Kernels: an op or a fusion compiled into one native function, called once (`kernel`), or
once per slice of its leading dimension (`sliced_kernel`: a batch-slice fusion, or a large
kernel that keeps the rows of dimension 0 apart, spread over the thread pool)."""

import math
from dataclasses import dataclass

import numpy as np

from mlirxla.mlir import ir
from mlirxla.runtime.threads import cpu_threads
from mlirxla.runtime.thunks import KernelThunk, SlicedKernelThunk
from mlirxla.transforms.batch_slice_fusion import RECOMPUTED_WHOLE_BYTES, SliceCheck, leading_size, slice_problem
from mlirxla.transforms.cost_analysis import kernel_cost
from mlirxla.transforms.scheduling import type_bytes

from .. import thread_split
from ..column_blocks import parallel_columns
from ..kernel_source import SlicePlan, plan_of_check, slice_plan


@dataclass
class KernelSpec:
    """A kernel to compile: the op, its symbol, and how (one slice of it; its epilogue only)."""

    symbol: str
    op: ir.Operation
    plan: SlicePlan | None = None
    library_result: ir.Value | None = None
    interpret: str | None = None  # why the interpreter evaluates it instead (no native lowering)
    source: str | None = None  # the kernel's own module text (an im2col), instead of the op's
    library_call: str | None = None  # LLVM IR calling the runtime library, which the CPU compiles instead of `source`
    in_place: tuple[tuple[int, int], ...] = ()  # (operand, result) pairs sharing one buffer slice
    private_results: tuple[int, ...] = ()  # results no other argument's memory overlaps (`private_results`)


def emit_kernel(emitter, op: ir.Operation) -> list:
    """One kernel, its rows spread over the threads when that pays and it keeps them apart."""
    split = parallel_rows(op) if emitter.slice_rows else None
    if split:
        rows, check = split
        return [emit_sliced(emitter, op, plan_of_check(op, rows, check), "parallel row blocks")]
    columns = parallel_columns(op) if emitter.slice_rows else None
    if columns:
        return [emit_sliced(emitter, op, columns, "parallel column blocks")]
    return [kernel_thunk(emitter, op)]


def emit_batch_slices(emitter, op: ir.Operation) -> list:
    return [emit_sliced(emitter, op, slice_plan(op), "batch slices")]


def kernel_thunk(emitter, op: ir.Operation, library_result: ir.Value | None = None, interpret: str | None = None) -> KernelThunk:
    """The kernel computing `op` (with `library_result`: only its epilogue, over the output a
    library call wrote; with `interpret`: on the reference interpreter, for that reason)."""
    name = emitter.name_of(op)
    symbol = emitter.symbol(name if library_result is None else f"{name}_epilogue")
    operands = [emitter.slice_of(v) for v in op.operands]
    in_place = updated_in_place(emitter, op) if library_result is None else library_output_in_place(op)
    if library_result is not None:
        operands.append(emitter.slice_of(op.results[0]))
    results = [emitter.slice_of(r) for r in op.results]
    emitter.kernels.append(KernelSpec(symbol, op, library_result=library_result, interpret=interpret, in_place=in_place,
                                      private_results=private_results(emitter, operands, results, in_place)))
    return KernelThunk(name, symbol, tuple(operands + results), len(results))


def private_results(emitter, operands: list, results: list, in_place: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """The results whose buffer slice overlaps no other argument's (an operand updated in
    place, `in_place`, is read through the result's argument: its own goes unused) and lies
    in memory of the executable's own (the temp slab, an output allocation; not a parameter,
    which a caller may pass twice): their kernel arguments are marked noalias. Without it
    LLVM guards every vectorized loop reading an operand and writing a result with a run-time
    overlap check and keeps a scalar copy of the loop: a max pool's kernel was 641 lines of
    optimized IR, 273 with its result noalias, and half the LLVM time."""
    def overlap(a, b) -> bool:
        return a.allocation == b.allocation and a.offset < b.offset + b.size and b.offset < a.offset + a.size

    arguments = operands + results
    private = []
    for index, result in enumerate(results):
        others = [other for position, other in enumerate(arguments)
                  if position != len(operands) + index and (position, index) not in in_place]
        if result.allocation >= emitter.slab and not any(overlap(result, other) for other in others):
            private.append(index)
    return tuple(private)


def library_output_in_place(op: ir.Operation) -> tuple[tuple[int, int], ...]:
    """An epilogue reads the library call's output (its operand after the op's own) where it
    writes its result, the same buffer: read through the result's argument, the loop loads
    and stores one pointer at one index, which LLVM vectorizes; through two arguments its
    runtime check found them overlapping and ran the scalar loop (transformer's GELU
    epilogue at a tenth of the machine's bandwidth)."""
    return ((len(op.operands), 0),)


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
        result_type = plan.result_slice_type(result.type) if plan else result.type
        for operand_index, operand in enumerate(op.operands):
            if (emitter.slice_of(operand) == emitter.slice_of(result)
                    and types.get(inner[operand_index], inner[operand_index].type) == result_type):
                pairs.append((operand_index, result_index))
    return tuple(pairs)


def emit_sliced(emitter, op: ir.Operation, plan: SlicePlan, why: str, library_result: ir.Value | None = None) -> SlicedKernelThunk:
    """`op` in `plan`'s slices (with `library_result`: its epilogue only, each slice updating
    its rows of the output a library call wrote)."""
    name = emitter.name_of(op)
    symbol = emitter.symbol(name if library_result is None else f"{name}_epilogue")
    in_place = library_output_in_place(op) if library_result is not None else updated_in_place(emitter, op, plan)
    arguments = [emitter.slice_of(v) for v in op.operands]
    strides = [slice_bytes(v.type, plan.rows, plan.across(index)) if sliced else 0
               for index, (v, sliced) in enumerate(zip(op.operands, plan.sliced_operands))]
    if library_result is not None:
        arguments.append(emitter.slice_of(op.results[0]))
        strides.append(type_bytes(op.results[0].type) // plan.count)
    if plan.positions:
        arguments.append(emitter.constant(np.arange(plan.count, dtype=np.int64) * plan.rows))
        strides.append(np.dtype(np.int64).itemsize)
    results = [emitter.slice_of(r) for r in op.results]
    emitter.kernels.append(KernelSpec(symbol, op, plan=plan, library_result=library_result, in_place=in_place,
                                      private_results=private_results(emitter, arguments, results, in_place)))
    arguments += results
    strides += [slice_bytes(r.type, plan.rows, plan.result_across(r.type)) for r in op.results]
    transposed = 0 if plan.columns else sum(1 for index in range(len(plan.sliced_operands)) if plan.across(index))
    emitter.decisions.append(f"{name}: {why}, {plan.count} slices of {plan.rows} {'column' if plan.columns else 'row'}(s), "
                             f"{sum(plan.sliced_operands)} operand(s) read slice by slice"
                             + (f" ({transposed} in blocks of another dimension, transposed)" if transposed else ""))
    return SlicedKernelThunk(name, symbol, tuple(arguments), len(op.results), slices=plan.count, strides=tuple(strides))


def epilogue_thunk(emitter, op: ir.Operation, library_result: ir.Value):
    """The epilogue of an output fusion whose dot or convolution a library call computed:
    in row blocks over the threads when its transcendentals' work makes that pay (the
    fusion's slices: its dot or convolution kept slice by slice), else one kernel. Its bytes
    do not count: the library call has just written them, so they come from the caches (a
    ReLU epilogue of 1 MiB ran 2x slower split, a GELU one 1.3x faster)."""
    threads = cpu_threads()
    n = leading_size(op.results[0])
    blocks = thread_split.slice_count(n, threads) if emitter.slice_rows and n and threads > 1 else None
    work = thread_split.TRANSCENDENTAL_FLOPS * kernel_cost(op).transcendentals
    if (blocks is None or not thread_split.estimate_moving(0, work, threads).pays
            or slice_problem(op, n, [], batched_dots=True, transposed_reads=True)[0]):
        return kernel_thunk(emitter, op, library_result=library_result)
    return emit_sliced(emitter, op, slice_plan(op, n // blocks), "epilogue in parallel row blocks", library_result)


def slice_bytes(value_type: ir.Type, rows: int, across: int) -> int:
    """How far one slice of `rows` rows of dimension `across` lies from the next."""
    shape = ir.RankedTensorType(value_type).shape
    return type_bytes(value_type) // math.prod(shape[:across + 1]) * rows


def parallel_rows(op: ir.Operation) -> tuple[int, SliceCheck] | None:
    """Rows per slice, and the slice check that kept them apart, when the kernel is worth
    spreading over the threads by blocks of dimension 0 (`thread_split.py` estimates that it
    pays, and it keeps its rows apart), else None."""
    if not thread_split.splittable(op):
        return None
    threads = cpu_threads()
    n = leading_size(op.results[0])
    blocks = thread_split.slice_count(n, threads) if n and threads > 1 else None
    if blocks is None or not thread_split.estimate_at_best(op, threads).pays:
        return None  # it would not pay even read transposed: the slice check (a walk of its body) is not needed
    problem, check = slice_problem(op, n, [], batched_dots=True, transposed_reads=True,
                                   recomputed_whole_bytes=row_block_recomputed_bytes(op, n // blocks))
    bandwidth = thread_split.TRANSPOSED_CORE_BANDWIDTH_BYTES_PER_S if check.read_across else None
    if problem or not thread_split.estimate(op, threads, bandwidth).pays:
        return None
    return n // blocks, check


def row_block_recomputed_bytes(op: ir.Operation, rows: int) -> int:
    """How large a value on whole operands each row block may compute again: as large as the
    block's own results (a causal mask's positions over a whole attention row block: fused into
    the block's loops it is index arithmetic, and with one block per thread it is done a few
    times in all), and never below the batch slices' bound."""
    block_bytes = sum(type_bytes(result.type) for result in op.results) * rows // leading_size(op.results[0])
    return max(RECOMPUTED_WHOLE_BYTES, block_bytes)
