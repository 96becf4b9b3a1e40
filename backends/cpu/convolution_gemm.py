"""Convolutions as im2col + BLAS GEMM (XLA:CPU's library convolutions do the same job with
Eigen or oneDNN).

A 2-D convolution in NHWC layout with an HWIO kernel (stride, padding, dilations, no
groups, f32 or f64) is `im2col(input) @ kernel`: the im2col kernel lays every output
position's receptive field out as one row, [N*OH*OW, KH*KW*C] (kh, kw major, channels
minor, so the HWIO kernel read as [KH*KW*C, F] is already the GEMM's right-hand side), and
one GEMM writes the convolution's output, [N*OH*OW, F], in place. The im2col rows live in
scratch memory of their own, allocated per execution.

The emitter takes this path when the cost model (`transforms/convolution_strategy.py`) picks
`im2col_gemm`; the geometry is the model's `Geometry`.

A convolution runs in blocks (`convolution_blocks`), as Eigen's and YNNPACK's convolutions
pack their patches block by block: whole images, or the output rows of a large image in
parts. Each block's rows are laid out in its thread's scratch and multiplied at once by a
single-threaded GEMM (one kernel, `runtime_library.im2col_gemm_call`), the blocks spread
over the threads. The rows of the whole batch, written to memory and read back (an
8x32x32x32 -> 64 3x3 layer's 9 MiB), cost the copy about 1 ms and the GEMM its reads from
the last-level cache; a block's rows stay in the core's L2 cache between the two.
"""

from dataclasses import dataclass

from mlirxla.transforms.convolution_strategy import Geometry


def tensor(shape: list[int], element: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"


def im2col_module_text(symbol: str, shape: Geometry) -> str:
    """The im2col kernel, in destination-passing style: input memref -> rows memref. One loop
    nest writes the rows, seen as [N, OH, OW, KH, KW, C] (`memref.expand_shape`, a view),
    each element read from the input where its window tap falls on it and 0 where it falls
    on padding (or between the rows of an input dilation): the padded input is never made,
    which on a GPU was two more launches (its fill and its interior) and a pass over it. A
    window dilation is the step between a window's taps."""
    s = shape
    (top, _), (left, _) = s.padding
    input_memref = f"memref<{s.batch}x{s.height}x{s.width}x{s.channels}x{s.element}>"
    input_type = input_memref.replace("memref", "tensor")
    fields = [s.batch, s.out_height, s.out_width, s.kernel_height, s.kernel_width, s.channels]
    fields_type, rows_type = tensor(fields, s.element), tensor([s.m, s.k], s.element)
    fields_memref, rows_memref = fields_type.replace("tensor", "memref"), rows_type.replace("tensor", "memref")
    rows, row, row_valid = tap_coordinate("h", "i", "p", s.strides[0], s.rhs_dilation[0], top, s.lhs_dilation[0], s.height)
    columns, column, column_valid = tap_coordinate("w", "j", "q", s.strides[1], s.rhs_dilation[1], left, s.lhs_dilation[1], s.width)
    identity = "affine_map<(n, i, j, p, q, c) -> (n, i, j, p, q, c)>"
    parallel = ", ".join(['"parallel"'] * 6)
    return "\n".join([
        f"func.func @{symbol}(%input: {input_memref}, %rows: {rows_memref}) {{",
        f"  %x = bufferization.to_tensor %input restrict : {input_memref} to {input_type}",
        f"  %fields_view = memref.expand_shape %rows [[0, 1, 2], [3, 4, 5]] output_shape [{', '.join(map(str, fields))}] : {rows_memref} into {fields_memref}",
        f"  %empty = tensor.empty() : {fields_type}",
        f"  %fields = linalg.generic {{indexing_maps = [{identity}], iterator_types = [{parallel}]}} outs(%empty : {fields_type}) {{",
        f"  ^bb0(%out: {s.element}):",
        *(f"    %{name} = linalg.index {d} : index" for d, name in enumerate("nijpqc")),
        *rows,
        *columns,
        f"    %valid = arith.andi {row_valid}, {column_valid} : i1",
        f"    %read = tensor.extract %x[%n, {row}, {column}, %c] : {input_type}",
        f"    %zero = arith.constant 0.0 : {s.element}",
        f"    %value = arith.select %valid, %read, %zero : {s.element}",
        f"    linalg.yield %value : {s.element}",
        f"  }} -> {fields_type}",
        f"  bufferization.materialize_in_destination %fields in restrict writable %fields_view : ({fields_type}, {fields_memref}) -> ()",
        "  return",
        "}",
    ])


def tap_coordinate(name: str, position: str, tap: str, stride: int, tap_step: int, low: int, dilation: int,
                   size: int) -> tuple[list[str], str, str]:
    """Lines computing the input row (or column) a window tap reads, clamped into the input so
    that the read is in bounds, and whether the tap falls on it; with the names of both. The
    coordinate in the padded, dilated input is position * stride + tap * tap_step - low; the
    tap is on the input when it is within [0, (size - 1) * dilation] and a multiple of the
    dilation."""
    last = (size - 1) * dilation
    lines = [
        f"    %{name}_stride = arith.constant {stride} : index",
        f"    %{name}_step = arith.constant {tap_step} : index",
        f"    %{name}_low = arith.constant {low} : index",
        f"    %{name}_last = arith.constant {last} : index",
        f"    %{name}_zero = arith.constant 0 : index",
        f"    %{name}_at = arith.muli %{position}, %{name}_stride : index",
        f"    %{name}_tap = arith.muli %{tap}, %{name}_step : index",
        f"    %{name}_sum = arith.addi %{name}_at, %{name}_tap : index",
        f"    %{name}_dilated = arith.subi %{name}_sum, %{name}_low : index",
        f"    %{name}_above = arith.cmpi sge, %{name}_dilated, %{name}_zero : index",
        f"    %{name}_below = arith.cmpi sle, %{name}_dilated, %{name}_last : index",
        f"    %{name}_inside = arith.andi %{name}_above, %{name}_below : i1",
        f"    %{name}_clamped = arith.maxsi %{name}_dilated, %{name}_zero : index",
        f"    %{name}_in_range = arith.minsi %{name}_clamped, %{name}_last : index",
    ]
    if dilation == 1:
        return lines, f"%{name}_in_range", f"%{name}_inside"
    return lines + [
        f"    %{name}_dilation = arith.constant {dilation} : index",
        f"    %{name} = arith.divui %{name}_in_range, %{name}_dilation : index",
        f"    %{name}_offset = arith.remui %{name}_in_range, %{name}_dilation : index",
        f"    %{name}_on_row = arith.cmpi eq, %{name}_offset, %{name}_zero : index",
        f"    %{name}_valid = arith.andi %{name}_inside, %{name}_on_row : i1",
    ], f"%{name}", f"%{name}_valid"


# the im2col rows of one block: what stays in a core's L2 cache (1-1.25 MiB on the hosts
# measured) beside the GEMM's packed panels
BLOCK_ROWS_BYTES = 1 << 20
# fewer GEMM rows than this a block would leave BLAS's micro-kernels waiting on their packing
LEAST_BLOCK_ROWS = 64


@dataclass(frozen=True)
class Blocks:
    """How a convolution's batch splits into blocks: `images` whole images a block, or (one
    image a block) `rows` of each image's output rows; `count` blocks in all."""

    images: int
    rows: int
    count: int


def convolution_blocks(shape: Geometry, threads: int) -> Blocks | None:
    """The blocks of `shape`, or None where blocks do not pay: a dilated convolution (its rows
    come from a generated kernel, not the library's im2col), a single image whose rows fit one
    block, or blocks too small to give a GEMM rows enough. Images whose rows fit
    `BLOCK_ROWS_BYTES` group, as many as still leave a block for every thread; an image whose
    rows do not splits into blocks of output rows, the most that fit (a divisor of its output
    height, so that every block is one GEMM of the same size)."""
    if shape.dilated:
        return None
    row_bytes = shape.out_width * shape.k * shape.width_bytes  # one output row's im2col rows
    if shape.out_height * row_bytes > BLOCK_ROWS_BYTES:
        fitting = [rows for rows in divisors(shape.out_height) if rows * row_bytes <= BLOCK_ROWS_BYTES]
        rows = max(fitting, default=1)
        blocks = Blocks(1, rows, shape.batch * (shape.out_height // rows))
    elif shape.batch >= 2:
        fitting = [images for images in divisors(shape.batch) if images * shape.out_height * row_bytes <= BLOCK_ROWS_BYTES
                   and shape.batch // images >= min(threads, shape.batch)]
        images = max(fitting, default=1)
        blocks = Blocks(images, shape.out_height, shape.batch // images)
    else:
        return None
    return blocks if blocks.images * blocks.rows * shape.out_width >= LEAST_BLOCK_ROWS else None


def divisors(count: int) -> list[int]:
    return [d for d in range(1, count + 1) if count % d == 0]
