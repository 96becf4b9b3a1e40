"""Generated loop kernels for the ops that were host calls: a scatter XLA:CPU would emit a
loop for (`scatter_kernel.py`), a select_and_scatter (`select_and_scatter_kernel.py`; it ran
on the interpreter), a reduce_window that is a cumulative reduction (`scan_kernel.py`) or
is padded (`reduce_window_kernel.py`; the linalg lowering padded a copy of the operand), and
a sort that is a top-k or a `TopK` custom call
(`top_k_kernel.py`). What they cannot take stays a host call (`host_calls.py`); the decisions
say which path each took."""

import math

from mlirxla.mlir import ir
from mlirxla.runtime.threads import cpu_threads
from mlirxla.runtime.thunks import KernelThunk, SlicedKernelThunk
from mlirxla.transforms.batch_slice_fusion import leading_size
from mlirxla.transforms.scheduling import type_bytes

from ..reduce_window_kernel import kernel_reason as reduce_window_reason, reduce_window_module_text, window_of
from ..scan_kernel import parallel_scan_module_text, scan_module_text, scan_of
from ..scatter_kernel import kernel_reason, scatter_atomic_kind, scatter_module_text
from ..select_and_scatter_kernel import Window, batch_apart, parallel_combiner, select_and_scatter_module_text
from mlirxla.transforms.top_k_rewriter import TARGET as TOP_K_TARGET

from .. import runtime_library, thread_split
from ..top_k_kernel import MAX_SELECTED, selected_count, top_k_call_text, top_k_module_text
from .host_calls import custom_call_target, emit_custom_call, emit_host_call
from .kernels import KernelSpec, emit_kernel, private_results


def emit_scatter(emitter, op: ir.Operation) -> list:
    name = emitter.name_of(op)
    if (reason := kernel_reason(op)) is not None:
        emitter.decisions.append(f"{name}: scatter stays a host call ({reason})")
        return emit_host_call(emitter, op)
    in_place = emitter.slice_of(op.operands[0]) == emitter.slice_of(op.results[0])
    how = "in place on its operand" if in_place else "the operand copied into the result first"
    if emitter.gpu_kernels:
        atomic = scatter_atomic_kind(op)
        how += f", a thread per update element ({atomic})" if atomic else ", one thread (no atomic update of its elements)"
    emitter.decisions.append(f"{name}: scatter as a loop kernel, {how}")
    return [loop_kernel(emitter, op, lambda symbol: scatter_module_text(symbol, op, in_place, parallel=emitter.gpu_kernels),
                        in_place=((0, 0),) if in_place else ())]


def emit_select_and_scatter(emitter, op: ir.Operation) -> list:
    """One the kernel cannot take never reaches here: `op_support.interpreted_reason` sent it
    to the interpreter. Windows that tile the operand write each result element once
    (`select_and_scatter_kernel.tiled_windows`), in blocks of the leading dimension over the
    threads when that pays."""
    name = emitter.name_of(op)
    window = Window.of(op)
    how = "a loop kernel, windows tiling the operand" if window.tiles() else "a loop kernel"
    if emitter.gpu_kernels:
        atomic = parallel_combiner(op)
        how += f", a thread per source element ({atomic})" if atomic else ", one thread (no atomic update of its elements)"
    slices = select_and_scatter_slices(op, window) if emitter.slice_rows else None
    if slices is None:
        emitter.decisions.append(f"{name}: select_and_scatter as {how}")
        return [loop_kernel(emitter, op, lambda symbol: select_and_scatter_module_text(symbol, op, parallel=emitter.gpu_kernels))]
    leading = leading_size(op.results[0]) // slices
    emitter.decisions.append(f"{name}: select_and_scatter as {how}, parallel blocks, {slices} slices of {leading} of its leading dimension")
    symbol = emitter.symbol(name)
    emitter.kernels.append(KernelSpec(symbol, op, source=select_and_scatter_module_text(symbol, op, leading)))
    values = [op.operands[0], op.operands[1], op.operands[2], op.results[0]]
    strides = tuple(0 if index == 2 else type_bytes(value.type) // slices for index, value in enumerate(values))
    return [SlicedKernelThunk(name, symbol, tuple(emitter.slice_of(value) for value in values), 1, slices=slices, strides=strides)]


# what a tiled window's selection costs an operand element: a load, a compare, two selects
# and a store
SELECT_AND_SCATTER_FLOPS_PER_ELEMENT = 5


def select_and_scatter_slices(op: ir.Operation, window: Window) -> int | None:
    """How many blocks of the leading dimension tiled windows run in over the threads, when
    no window spans it and `thread_split` says it pays; None to run whole."""
    threads = cpu_threads()
    if threads < 2 or not window.tiles() or not batch_apart(window):
        return None
    slices = thread_split.slice_count(window.operand_shape[0], threads)
    moved = type_bytes(op.operands[0].type) + type_bytes(op.operands[1].type) + type_bytes(op.results[0].type)
    work = SELECT_AND_SCATTER_FLOPS_PER_ELEMENT * math.prod(window.operand_shape)
    return slices if slices is not None and thread_split.estimate_moving(moved, work, threads).pays else None


def emit_reduce_window(emitter, op: ir.Operation) -> list:
    """A cumulative reduction (a cumsum) as the blocked scan kernel; a padded window as the
    window kernel, in blocks of the leading dimension over the threads when that pays; any
    other, the linalg lowering."""
    scan, name = scan_of(op), emitter.name_of(op)
    if scan is not None:
        emitter.decisions.append(f"{name}: reduce_window is a cumulative {scan.combiner} along dimension {scan.axis}"
                                 f"{' from its end' if scan.reverse else ''}: a scan kernel, blocks then their carries"
                                 f"{', each pass a parallel loop nest' if emitter.gpu_kernels else ''}")
        text = parallel_scan_module_text if emitter.gpu_kernels else scan_module_text
        return [loop_kernel(emitter, op, lambda symbol: text(symbol, op, scan))]
    if reduce_window_reason(op) is not None:
        return emit_kernel(emitter, op)
    slices = reduce_window_slices(op) if emitter.slice_rows else None
    if slices is None:
        emitter.decisions.append(f"{name}: padded reduce_window as a loop kernel, padding read as the init value")
        return [loop_kernel(emitter, op, lambda symbol: reduce_window_module_text(symbol, op))]
    leading = leading_size(op.results[0]) // slices
    emitter.decisions.append(f"{name}: padded reduce_window as a loop kernel, padding read as the init value, "
                             f"parallel blocks, {slices} slices of {leading} of its leading dimension")
    symbol = emitter.symbol(name)
    emitter.kernels.append(KernelSpec(symbol, op, source=reduce_window_module_text(symbol, op, leading)))
    values = [op.operands[0], op.operands[1], op.results[0]]
    strides = tuple(0 if index == 1 else type_bytes(value.type) // slices for index, value in enumerate(values))
    return [SlicedKernelThunk(name, symbol, tuple(emitter.slice_of(value) for value in values), 1, slices=slices, strides=strides)]


# what a padded window's position costs: a load, a select and the reducer
REDUCE_WINDOW_FLOPS_PER_POSITION = 3


def reduce_window_slices(op: ir.Operation) -> int | None:
    """How many blocks of the leading dimension a padded reduce_window runs in over the
    threads, when no window spans it and `thread_split` says it pays; None to run whole."""
    window, threads = window_of(op), cpu_threads()
    if threads < 2 or not batch_apart(window):
        return None
    slices = thread_split.slice_count(window.operand_shape[0], threads)
    moved = type_bytes(op.operands[0].type) + type_bytes(op.results[0].type)
    work = REDUCE_WINDOW_FLOPS_PER_POSITION * math.prod(window.dimensions) * math.prod(window.source_shape)
    return slices if slices is not None and thread_split.estimate_moving(moved, work, threads).pays else None


def emit_sort(emitter, op: ir.Operation) -> list:
    k = selected_count(op)
    if k is None:
        return emit_host_call(emitter, op)
    emitter.decisions.append(f"{emitter.name_of(op)}: sort read only in its first {k} position(s): a top-{k} selection "
                             f"kernel (bounded insertion, k <= {MAX_SELECTED})")
    return [loop_kernel(emitter, op, lambda symbol: top_k_module_text(symbol, op, k, parallel_rows=emitter.gpu_kernels))]


def emit_custom_call_kernel_or_host_call(emitter, op: ir.Operation) -> list:
    """A `TopK` custom call is the selection kernel, a call into the runtime library's TopK
    for f32 rows with i32 positions (its rows split over the threads when that pays); every
    other custom call a host call."""
    if custom_call_target(op) != TOP_K_TARGET:
        return emit_custom_call(emitter, op)
    k = ir.RankedTensorType(op.results[0].type).shape[-1]
    function = library_top_k(op)
    emitter.decisions.append(f"{emitter.name_of(op)}: TopK as a top-{k} selection "
                             + (f"in the runtime library ({function})" if function else
                                "kernel (bounded insertion, positions counted in the kernel, k-wide results written directly)"))
    slices = top_k_slices(op) if emitter.slice_rows else None
    if slices is None:
        return [loop_kernel(emitter, op, lambda symbol: top_k_call_text(symbol, op, parallel_rows=emitter.gpu_kernels),
                            function and (lambda symbol: top_k_library_call(symbol, function, op, None)))]
    name, rows = emitter.name_of(op), leading_size(op.results[0]) // slices
    symbol = emitter.symbol(name)
    emitter.kernels.append(KernelSpec(symbol, op, source=top_k_call_text(symbol, op, rows),
                                      library_call=function and top_k_library_call(symbol, function, op, rows)))
    values = list(op.operands) + list(op.results)
    emitter.decisions.append(f"{name}: parallel row blocks, {slices} slices of {rows} row(s)")
    return [SlicedKernelThunk(name, symbol, tuple(emitter.slice_of(v) for v in values), len(op.results), slices=slices,
                              strides=tuple(type_bytes(v.type) // slices for v in values))]


def library_top_k(op: ir.Operation) -> str | None:
    """The runtime library's TopK function for this custom call: f32 rows, i32 positions."""
    keys, positions = (ir.RankedTensorType(t).element_type for t in (op.operands[0].type, op.results[1].type))
    if not (isinstance(keys, ir.F32Type) and isinstance(positions, ir.IntegerType) and ir.IntegerType(positions).width == 32):
        return None
    return runtime_library.top_k_function(ir.BoolAttr(op.attributes["largest"]).value, ir.BoolAttr(op.attributes["canonical"]).value)


def top_k_library_call(symbol: str, function: str, op: ir.Operation, leading: int | None) -> str:
    """Kernel `symbol` calling `function` on the custom call's rows (with `leading`, a block of
    that many of the leading dimension's)."""
    shape = ir.RankedTensorType(op.operands[0].type).shape
    rows = math.prod(shape[:-1]) if leading is None else leading * math.prod(shape[1:-1])
    return runtime_library.top_k_call(symbol, function, rows, shape[-1], ir.RankedTensorType(op.results[0].type).shape[-1])


# what selecting costs an element: a 512x4096 f32 TopK (k=16) selected in 0.77 ms on one
# thread, 0.37 ns an element (a scalar insertion, whatever the host's vector width; six flops at
# the 16 G a second the split model once took for every host)
TOP_K_SECONDS_PER_ELEMENT = 0.375e-9


def top_k_slices(op: ir.Operation) -> int | None:
    """How many blocks of rows (of the leading dimension, the last being the rows' own) a TopK
    runs in over the threads, when that pays (`thread_split.py`: its bytes, and
    `TOP_K_SECONDS_PER_ELEMENT` as its work); None to run it whole."""
    threads = cpu_threads()
    operand = ir.RankedTensorType(op.operands[0].type)
    if operand.rank < 2 or threads < 2 or (slices := thread_split.slice_count(operand.shape[0], threads)) is None:
        return None
    elements = math.prod(operand.shape)
    work = TOP_K_SECONDS_PER_ELEMENT * elements * thread_split.core_flops_per_s()
    return slices if thread_split.estimate_moving(type_bytes(operand), work, threads).pays else None


def gpu_kernel_or_host_call(emitter, op: ir.Operation, decision: str, source_of) -> list:
    """`op` as the kernel whose module text `source_of(symbol)` gives where the emitter makes
    kernels for a GPU (the decision says how), else its host call."""
    if not emitter.gpu_kernels:
        return emit_host_call(emitter, op)
    emitter.decisions.append(f"{emitter.name_of(op)}: {decision}")
    return [loop_kernel(emitter, op, source_of)]


def loop_kernel(emitter, op: ir.Operation, source_of, library_call_of=None, in_place: tuple[tuple[int, int], ...] = ()) -> KernelThunk:
    """The kernel thunk for `op` whose code is the module text `source_of(symbol)` gives (on
    the CPU the call into the runtime library `library_call_of(symbol)` gives, when given),
    its arguments the op's operands and results; with `in_place`, the (operand, result) pairs
    whose operand the code reads through the result's argument only. Results no other
    argument overlaps are noalias (`private_results`): a scatter's stores into its result
    then do not keep its updates' loads in order, and its window is a vector."""
    name = emitter.name_of(op)
    symbol = emitter.symbol(name)
    operands = [emitter.slice_of(v) for v in op.operands]
    results = [emitter.slice_of(r) for r in op.results]
    emitter.kernels.append(KernelSpec(symbol, op, source=source_of(symbol), library_call=library_call_of and library_call_of(symbol),
                                      private_results=private_results(emitter, operands, results, in_place)))
    return KernelThunk(name, symbol, tuple(operands + results), len(op.results))
