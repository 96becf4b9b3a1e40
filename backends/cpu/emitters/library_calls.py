"""Library calls: a dot BLAS can run becomes a `gemm` thunk (f32/f64, row-major operands in
one of the four transpose combinations, optionally batched over dimension 0; bf16 too, its
operands widened to f32 for the f32 GEMM, accumulating in f32, as XLA:CPU does); an int8 dot
into int32 on a host with VNNI, the runtime library's byte GEMM (`byte_gemm.py`); a convolution
becomes what the convolution cost model picks (`transforms/convolution_strategy.py`): a
`gemm` straight over its buffers (1x1), an im2col kernel (on the CPU a call into the runtime
library, `runtime_library.py`; its module, `convolution_gemm.py`, for other backends) and a
`gemm`, a batch of images in blocks of im2col + GEMM on the threads (one sliced kernel
calling both, `convolution_gemm.convolution_blocks`), or a generated kernel; an output fusion rooted
in such a dot or convolution becomes that library call writing the fusion's output, then its
epilogue as a kernel reading the output elementwise and writing it in place. A softmax fusion
of f32 rows (`softmax_rows.py`) is a call into the runtime library, its rows in blocks over
the threads when that pays. What BLAS cannot take is a generated kernel; every choice goes to
the decisions."""

import dataclasses
from math import prod

from mlirxla.mlir import ir
from mlirxla.runtime import blas
from mlirxla.runtime.threads import cpu_threads
from mlirxla.runtime.thunks import WIDENED_GEMMS, BufferSlice, GemmThunk, KernelThunk, SlicedKernelThunk
from mlirxla.transforms import convolution_strategy as strategy
from mlirxla.transforms.dot_canonicalizer import gemm_shape
from mlirxla.transforms.fusion_legality import LIBRARY_CALLS, fused_ops, kind_of
from mlirxla.transforms.integer_dot_as_float import byte_gemm_refusal
from mlirxla.transforms.scheduling import type_bytes
from mlirxla.transforms.widening_gemm_fusion import panels as widening_panels
from mlirxla.transforms.widening_gemm_fusion import widened_side

from .. import byte_gemm, thread_split
from ..convolution_gemm import Blocks, convolution_blocks, im2col_module_text
from ..row_programs import PER_ROW, ROWS, RowProgram
from ..runtime_library import ROWS as ROW_ENGINE
from ..runtime_library import (SOFTMAX, byte_gemm_call, im2col_call, im2col_gemm_call, rows_call, softmax_call, sum_parts_call,
                               widening_gemm_call)
from .kernels import KernelSpec, emit_kernel, epilogue_thunk, kernel_thunk


def emit_dot(emitter, op: ir.Operation) -> list:
    library = dot_call(emitter, op, op, op.results[0], op.operands[0], op.operands[1])
    return library if library is not None else emit_kernel(emitter, op)


def dot_call(emitter, dot: ir.Operation, owner: ir.Operation, out: ir.Value, lhs: ir.Value, rhs: ir.Value) -> list | None:
    """The thunks of `dot` as the byte GEMM or a BLAS GEMM, or None (a generated kernel)."""
    library = byte_gemm_thunks(emitter, dot, owner, out, lhs, rhs)
    if library is None:
        gemm = gemm_for(emitter, dot, owner, out, lhs, rhs)
        library = [gemm] if gemm is not None else None
    return library


# multiply-adds from which a byte GEMM's columns are spread over the threads (about 20 us of one core)
PARALLEL_BYTE_PRODUCTS = 1 << 22


def byte_gemm_thunks(emitter, dot: ir.Operation, owner: ir.Operation, out: ir.Value, lhs: ir.Value, rhs: ir.Value) -> list | None:
    """`dot` as the runtime library's int8 GEMM on VNNI (`byte_gemm.py`): one kernel, in slices
    of the output's columns over the threads when there are enough products, each packing its
    columns of the rhs into its thread's scratch and multiplying them; None for a dot it does
    not take, on a host without VNNI and for a GPU's kernels."""
    if emitter.gpu_kernels or byte_gemm_refusal(dot) is not None or not byte_gemm.available():
        return None
    _, m, n, k, _, transpose_rhs = gemm_shape(dot)
    name = emitter.name_of(owner)
    symbol = emitter.symbol(name)
    threads = cpu_threads()
    slices = thread_split.slice_count(n, threads) if emitter.slice_rows and threads > 1 and m * n * k >= PARALLEL_BYTE_PRODUCTS else None
    slices = slices if slices is not None and n // slices >= byte_gemm.LANES else 1
    columns, parts = n // slices, min(threads, slices)
    scratch_bytes = byte_gemm.packed_bytes(columns, k) + 4 * m
    scratch = emitter.allocate(scratch_bytes * parts, owner, symbol,
                               f"int8 {k}x{columns} rhs in VNNI blocks and {m} row sums, x{parts} concurrent calls")
    signed = str(ir.RankedTensorType(lhs.type).element_type) == "i8"
    emitter.kernels.append(KernelSpec(symbol, owner, library_call=byte_gemm_call(symbol, m, columns, n, k, transpose_rhs, signed)))
    emitter.decisions.append(f"{name}: dot as the byte GEMM on VNNI {m}x{n}x{k} ({byte_gemm.GEMM})"
                             + (f", {slices} slices of {columns} column(s)" if slices > 1 else ""))
    rhs_stride = columns * (k if transpose_rhs else 1)
    arguments = (emitter.slice_of(lhs), emitter.slice_of(rhs), emitter.slice_of(out))
    return [SlicedKernelThunk(name, symbol, arguments, 1, slices=slices, strides=(0, rhs_stride, columns * 4),
                              scratch=BufferSlice(scratch.allocation, scratch.offset, scratch_bytes), scratch_offsets=(0,), scratch_parts=parts)]


def emit_convolution(emitter, op: ir.Operation) -> list:
    return convolution_as_gemm(emitter, op, op, op.operands[0], op.operands[1]) or emit_kernel(emitter, op)


def emit_softmax(emitter, op: ir.Operation) -> list:
    """The softmax fusion as the runtime library's softmax over its rows (blocks of the leading
    dimension's rows on the threads when `thread_split` says it pays)."""
    name, shape = emitter.name_of(op), ir.RankedTensorType(op.results[0].type).shape
    symbol = emitter.symbol(name)
    threads = cpu_threads()
    slices = thread_split.slice_count(shape[0], threads) if emitter.slice_rows and len(shape) > 1 and threads > 1 else None
    if slices is not None and not thread_split.estimate(op, threads).pays:
        slices = None
    rows = prod(shape[:-1]) // (slices or 1)
    emitter.kernels.append(KernelSpec(symbol, op, library_call=softmax_call(symbol, rows, shape[-1])))
    emitter.decisions.append(f"{name}: softmax of f32 rows in the runtime library ({SOFTMAX})"
                             + (f", parallel row blocks, {slices} slices of {rows} row(s)" if slices else ""))
    arguments = (emitter.slice_of(op.operands[0]), emitter.slice_of(op.results[0]))
    if slices is None:
        return [KernelThunk(name, symbol, arguments, 1)]
    block_bytes = type_bytes(op.results[0].type) // slices
    return [SlicedKernelThunk(name, symbol, arguments, 1, slices=slices, strides=(block_bytes, block_bytes))]


def emit_row_program(emitter, op: ir.Operation, program: RowProgram) -> list | None:
    """The fusion as the runtime library's row engine running `program` (blocks of rows on
    the threads when `thread_split` says it pays), or None when a result shares an operand's
    buffer in a way the program cannot write it: only the same buffer, its rows written after
    the operand's last read in a block."""
    name = emitter.name_of(op)
    operands = [emitter.slice_of(value) for value in op.operands]
    results = [emitter.slice_of(value) for value in op.results]
    for result, written in zip(results, program.written_at):
        for operand, role, read in zip(operands, program.operands, program.last_read):
            if overlaps(result, operand) and (result != operand or role != ROWS or written < read):
                return None
    threads = cpu_threads()
    slices = thread_split.slice_count(program.rows, threads) if emitter.slice_rows and threads > 1 else None
    if slices is not None and not thread_split.estimate(op, threads).pays:
        slices = None
    rows = program.rows // (slices or 1)
    symbol = emitter.symbol(name)
    arguments = (*operands, *results)
    emitter.kernels.append(KernelSpec(symbol, op, library_call=rows_call(symbol, program, rows, len(arguments))))
    emitter.decisions.append(f"{name}: a program of {program.instructions} instructions over f32 rows of {program.n} in the "
                             f"runtime library ({ROW_ENGINE}), {program.block} row(s) a block"
                             + (f", parallel row blocks, {slices} slices of {rows} row(s)" if slices else ""))
    if slices is None:
        return [KernelThunk(name, symbol, arguments, len(results))]
    row_bytes = {ROWS: rows * program.n * 4, PER_ROW: rows * 4}
    strides = tuple(row_bytes.get(role, 0) for role in (*program.operands, *program.results))
    return [SlicedKernelThunk(name, symbol, arguments, len(results), slices=slices, strides=strides)]


def overlaps(a, b) -> bool:
    return a.allocation == b.allocation and a.offset < b.offset + b.size and b.offset < a.offset + a.size


def emit_output_fusion(emitter, op: ir.Operation) -> list:
    """The library call of an output fusion (its operand widened panel by panel where the
    fusion holds the convert, `widening_gemm_fusion.py`), then its epilogue, if any."""
    call = next(inner for inner in fused_ops(op) if kind_of(inner) in LIBRARY_CALLS)
    block = op.regions[0].blocks[0]
    outer = {argument: value for argument, value in zip(block.arguments, op.operands)}
    side = widened_side(call) if kind_of(call) == "dot" else None
    if side is not None:
        widened = call.operands[side].owner.operands[0]
        values = [outer.get(widened if index == side else value) for index, value in enumerate(call.operands)]
    else:
        values = [outer.get(value) for value in call.operands]
    library = None
    if all(value is not None for value in values):
        if side is not None:
            library = widening_gemm(emitter, call, op, side, values)
        elif kind_of(call) == "dot":
            library = dot_call(emitter, call, op, op.results[0], *values)
        else:
            library = convolution_as_gemm(emitter, call, op, *values)
    if library:
        has_epilogue = list(block.operations)[-1].operands[0] != call.results[0]
        return library + [epilogue_thunk(emitter, op, call.results[0])] if has_epilogue else library
    emitter.decisions.append(f"{emitter.name_of(op)}: {kind_of(call)} generated with its epilogue in one kernel")
    return [kernel_thunk(emitter, op)]


def widening_gemm(emitter, dot: ir.Operation, owner: ir.Operation, side: int, values: list[ir.Value]) -> list | None:
    """`dot` with its operand `side` bf16 (`values`: the operands as `owner` reads them) as
    panels of that operand, each widened into its thread's scratch and multiplied by BLAS's
    f32 GEMM there (one sliced kernel, `runtime_library.widening_gemm_call`), or None when it
    does not split into panels."""
    name = emitter.name_of(owner)
    choice = widening_panels(dot, side, cpu_threads())
    if isinstance(choice, str):
        emitter.decisions.append(f"{name}: the widened operand generated with the dot: {choice}")
        return None
    p = choice
    panel_bytes = p.width * p.k * 4
    threads = min(cpu_threads(), p.count)
    symbol = emitter.symbol(f"{name}_panels")
    scratch = emitter.allocate(panel_bytes * threads, owner, symbol, f"f32 panel {p.width}x{p.k} of the widened operand, x{threads} concurrent calls")
    emitter.kernels.append(KernelSpec(symbol, owner, library_call=widening_gemm_call(symbol, p, blas.GEMM_ROUTINES["f32"])))
    what = "rows of the lhs" if side == 0 else "columns of the rhs"
    emitter.decisions.append(f"{name}: dot as {p.count} panels of {p.width} bf16 {what}, each widened to f32 and multiplied "
                             f"by BLAS GEMM f32 {p.m if side else p.width}x{p.width if side else p.n}x{p.k} on one thread")
    transposed = p.transpose_lhs if side == 0 else p.transpose_rhs
    # a panel of an operand's rows is `width` rows on; of its columns, `width` elements on
    along_rows = transposed if side == 1 else not transposed
    source_stride = p.width * (p.k if along_rows else 1) * 2
    output_stride = p.width * (p.n if side == 0 else 1) * 4
    strides = (source_stride, 0, output_stride) if side == 0 else (0, source_stride, output_stride)
    arguments = (*(emitter.slice_of(value) for value in values), emitter.slice_of(owner.results[0]))
    return [SlicedKernelThunk(name, symbol, arguments, 1, slices=p.count, strides=strides, calls_blas=True,
                              scratch=BufferSlice(scratch.allocation, scratch.offset, panel_bytes), scratch_offsets=(0,), scratch_parts=threads)]


def convolution_as_gemm(emitter, convolution: ir.Operation, owner: ir.Operation, lhs: ir.Value, rhs: ir.Value) -> list | None:
    """The thunks writing `owner`'s result for `convolution` when the cost model picks a GEMM
    (a `gemm` alone for a 1x1 convolution; blocks of im2col + GEMM, or an im2col kernel then
    a `gemm`; a kernel gradient's layer's im2col kernel, then a `gemm` of its rows
    transposed), else None (a generated kernel); the choice and the estimates behind it are
    recorded either way."""
    name = emitter.name_of(owner)
    choice = strategy.choose(convolution)
    emitter.decisions.append(f"{name}: convolution strategy {choice.describe()}")
    if choice.strategy not in (strategy.GEMM, strategy.IM2COL_GEMM, strategy.WEIGHT_GRADIENT_GEMM):
        return None
    out = emitter.slice_of(owner.results[0])
    if choice.strategy == strategy.WEIGHT_GRADIENT_GEMM:
        layer = strategy.weight_gradient(convolution)
        blocks = convolution_blocks(layer, cpu_threads()) if emitter.slice_rows else None
        if blocks is not None and blocks.count * layer.features <= layer.m:
            return kernel_gradient_in_blocks(emitter, name, convolution, layer, blocks, (lhs, rhs, owner.results[0]))
        emitter.decisions.append(f"{name}: kernel gradient as the layer's im2col rows, transposed, times the output gradient: "
                                 f"BLAS GEMM {layer.element} {layer.k}x{layer.features}x{layer.m}")
        rows, im2col = im2col_rows(emitter, name, convolution, owner, layer, lhs)
        return [im2col, GemmThunk(name, layer.element, rows, emitter.slice_of(rhs), out, layer.k, layer.features, layer.m, True, False)]
    shape = strategy.geometry(convolution)
    if choice.strategy == strategy.GEMM:
        emitter.decisions.append(f"{name}: convolution as a BLAS GEMM over its input {shape.element} {shape.m}x{shape.features}x{shape.k}")
        return [GemmThunk(name, shape.element, emitter.slice_of(lhs), emitter.slice_of(rhs), out, shape.m, shape.features, shape.k, False, False)]
    blocks = convolution_blocks(shape, cpu_threads()) if emitter.slice_rows else None
    if blocks is not None:
        return [convolution_in_blocks(emitter, name, convolution, shape, blocks, (lhs, rhs, owner.results[0]))]
    emitter.decisions.append(f"{name}: convolution as im2col + BLAS GEMM {shape.element} {shape.m}x{shape.features}x{shape.k}")
    rows, im2col = im2col_rows(emitter, name, convolution, owner, shape, lhs)
    return [im2col, GemmThunk(name, shape.element, rows, emitter.slice_of(rhs), out, shape.m, shape.features, shape.k, False, False)]


def im2col_rows(emitter, name: str, convolution: ir.Operation, owner: ir.Operation, shape: strategy.Geometry, lhs: ir.Value):
    """The scratch rows of the whole batch of `shape` and the im2col thunk writing them from
    `lhs`: one image per call over the threads where that pays."""
    symbol = emitter.symbol(f"{name}_im2col")
    rows_bytes = shape.m * shape.k * shape.width_bytes
    rows = emitter.allocate(rows_bytes, owner, symbol, f"im2col rows {shape.m}x{shape.k} {shape.element} for the GEMM")
    arguments = (emitter.slice_of(lhs), rows)
    threads = cpu_threads()
    if emitter.slice_rows and shape.batch > 1 and threads > 1 and thread_split.estimate_moving(shape.input_bytes + rows_bytes, 0, threads).pays:
        # one image's rows per call, spread over the thread pool (the GEMM after it is threaded too)
        image = dataclasses.replace(shape, batch=1)
        emitter.kernels.append(im2col_kernel(symbol, convolution, image))
        strides = (image.input_bytes, rows_bytes // shape.batch)
        im2col = SlicedKernelThunk(f"{name}.im2col", symbol, arguments, 1, slices=shape.batch, strides=strides)
    else:
        emitter.kernels.append(im2col_kernel(symbol, convolution, shape))
        im2col = KernelThunk(f"{name}.im2col", symbol, arguments, 1)
    return rows, im2col


def convolution_in_blocks(emitter, name: str, convolution: ir.Operation, shape: strategy.Geometry, blocks: Blocks,
                          values: tuple[ir.Value, ir.Value, ir.Value]) -> SlicedKernelThunk:
    """The convolution as `blocks`, each laid out as im2col rows in its thread's scratch and
    multiplied by the kernel at once (`convolution_gemm.py`)."""
    what = f"{blocks.images} image(s)" if blocks.rows == shape.out_height else f"{blocks.rows} output rows of an image"
    emitter.decisions.append(f"{name}: convolution as {blocks.count} blocks of {what}, each im2col + BLAS GEMM "
                             f"{shape.element} {block_rows(shape, blocks)}x{shape.features}x{shape.k} on one thread")
    return blocks_kernel(emitter, name, convolution, shape, blocks, tuple(emitter.slice_of(value) for value in values))


def kernel_gradient_in_blocks(emitter, name: str, convolution: ir.Operation, layer: strategy.Geometry, blocks: Blocks,
                              values: tuple[ir.Value, ir.Value, ir.Value]) -> list:
    """A layer's kernel gradient as `blocks` of the layer: each block's im2col rows laid out in
    its thread's scratch and multiplied, transposed, by the block's output gradient into a part
    of its own (`runtime_library.im2col_gemm_call`), then the parts summed into the gradient.
    Taken where the parts are no larger than the layer's rows would be (blocks x features at
    most the layer's output positions)."""
    part_bytes = layer.k * layer.features * layer.width_bytes
    symbol = emitter.symbol(f"{name}_sum")
    parts = emitter.allocate(part_bytes * blocks.count, convolution, symbol,
                             f"{blocks.count} parts {layer.k}x{layer.features} {layer.element} of the kernel gradient")
    what = f"{blocks.images} image(s)" if blocks.rows == layer.out_height else f"{blocks.rows} output rows of an image"
    emitter.decisions.append(f"{name}: kernel gradient as {blocks.count} blocks of {what}, each its im2col rows, transposed, times its "
                             f"output gradient, BLAS GEMM {layer.element} {layer.k}x{layer.features}x{block_rows(layer, blocks)} on one thread, "
                             "the parts summed")
    lhs, gradient, out = (emitter.slice_of(value) for value in values)
    emitter.kernels.append(KernelSpec(symbol, convolution, library_call=sum_parts_call(symbol, layer.element, blocks.count, layer.k * layer.features)))
    return [blocks_kernel(emitter, name, convolution, layer, blocks, (lhs, gradient, parts), part_bytes),
            KernelThunk(f"{name}.sum", symbol, (parts, out), 1)]


def block_rows(shape: strategy.Geometry, blocks: Blocks) -> int:
    """The GEMM rows of one block: its output positions."""
    return blocks.images * blocks.rows * shape.out_width


def blocks_kernel(emitter, name: str, convolution: ir.Operation, shape: strategy.Geometry, blocks: Blocks,
                  slices: tuple[BufferSlice, BufferSlice, BufferSlice], part_bytes: int | None = None) -> SlicedKernelThunk:
    """The sliced kernel of `blocks` of `shape` (`runtime_library.im2col_gemm_call`), each call
    with im2col rows of its own in scratch. `slices`: the input, the kernel and the output; or,
    for a kernel gradient (`part_bytes`, the size of a part), the input, the output gradient
    and the parts."""
    m = block_rows(shape, blocks)
    gradient = part_bytes is not None
    symbol = emitter.symbol(f"{name}_blocks")
    threads = min(cpu_threads(), blocks.count)
    rows_bytes = m * shape.k * shape.width_bytes
    rows = emitter.allocate(rows_bytes * threads, convolution, symbol,
                            f"im2col rows {m}x{shape.k} {shape.element} of a block, x{threads} concurrent calls")
    emitter.kernels.append(KernelSpec(symbol, convolution, library_call=im2col_gemm_call(
        symbol, shape, blocks, blas.GEMM_ROUTINES[shape.element], kernel_gradient=gradient)))
    lhs, other, written = slices
    block_output = m * shape.features * shape.width_bytes  # a block's output, or its output gradient
    written_stride = part_bytes if gradient else block_output
    if blocks.rows == shape.out_height:
        arguments = (lhs, other, written)
        strides = (blocks.images * shape.input_bytes // shape.batch, block_output if gradient else 0, written_stride)
    elif gradient:
        arguments, strides = (lhs, other, other, written), (0, 0, block_output, written_stride)
    else:
        arguments, strides = (lhs, other, written, written), (0, 0, 0, block_output)
    return SlicedKernelThunk(f"{name}.blocks" if gradient else name, symbol, arguments, 1, slices=blocks.count, strides=strides,
                             calls_blas=True, scratch=BufferSlice(rows.allocation, rows.offset, rows_bytes), scratch_offsets=(0,),
                             scratch_parts=threads)


def im2col_kernel(symbol: str, convolution: ir.Operation, shape: strategy.Geometry) -> KernelSpec:
    """The im2col kernel of `shape`: a call of the runtime library's, whose whole-window
    copies take no dilation; a dilated convolution's rows are generated from its source."""
    library_call = None if shape.dilated else im2col_call(symbol, shape)
    return KernelSpec(symbol, convolution, source=im2col_module_text(symbol, shape), library_call=library_call)


def gemm_for(emitter, dot: ir.Operation, owner: ir.Operation, out: ir.Value, lhs: ir.Value, rhs: ir.Value) -> GemmThunk | None:
    """A GEMM thunk for `dot` (reading `lhs`, `rhs`, writing `out`), or None when BLAS cannot
    run it; the decision is recorded either way."""
    name = emitter.name_of(owner)
    shape = gemm_shape(dot)
    element = str(ir.RankedTensorType(dot.results[0].type).element_type)
    operand_elements = {str(ir.RankedTensorType(v.type).element_type) for v in dot.operands}
    if operand_elements != {element}:
        element = f"{'/'.join(sorted(operand_elements))} to {element}"
    if shape is None or element not in ("f32", "f64", *WIDENED_GEMMS):
        emitter.decisions.append(f"{name}: dot generated as a kernel ({'element type ' + element if shape else 'dimension numbers BLAS cannot take'})")
        return None
    if "algorithm" in dot.attributes and not emitter.excess_precision:
        emitter.decisions.append(f"{name}: dot generated as a kernel (its precision algorithm rounds the operands, and excess precision is not allowed)")
        return None
    batch, m, n, k, transpose_lhs, transpose_rhs = shape
    emitter.decisions.append(f"{name}: dot as a BLAS GEMM {element} {batch}x{m}x{n}x{k}")
    return GemmThunk(name, element, emitter.slice_of(lhs), emitter.slice_of(rhs), emitter.slice_of(out), m, n, k,
                     transpose_lhs, transpose_rhs, batch)

