"""The register-tiled direct convolution as runtime-library functions, one per register block.

An f32 NHWC convolution a kernel computes with loops (one inside a batch-slice fusion, where
no GEMM runs) is the direct convolution's micro-kernel that IREE's and XLA's CPU code
generators use: blocks of `width` output columns by `features` output channels held in
vector registers across the filter rows, columns and input channels (4 x 16 f32: 8 AVX2
registers), loaded from and stored to the output once per block. Seven plain nested loops
with a multiply-add on memory ran the conv net's convolutions at 13 GFLOP/s on two AVX2
cores; this runs them at about 110.

It used to be built per kernel, for its shapes (upstream's transform dialect: tiling,
decomposition into 1-D convolutions, vectorization, hoisting the block out of the reduction
loops); that loop nest was about half of a convolution kernel's cold compile, some 8 ms of
lowering and 10 ms of LLVM work per convolution (the conv net's kernel: lowering 28 -> 13 ms,
LLVM 59 -> 40 ms without its two). The same loop nest with its sizes and strides as
arguments is the same code for every convolution of one register block, so it is compiled
once per process into the runtime library (`runtime_library.py`), as XLA:CPU calls its
library convolutions; a kernel calls it with its sizes (`call_library_convolutions`, after
bufferization, on the `linalg.conv_2d_nhwc_hwcf` of memrefs; the linalg lowering would make
it plain loops).

The function computes what the tiled loops computed, in the same order (the block loaded from
the output, then for each filter row, column and input channel one multiply-add of a
broadcast input value by a vector of filter values per column), so results are the same bit
for bit: out[b, y, x, g] += in[b, y*sh + p*dh, x*sw + q*dw, k] * filter[p, q, k, g]. Its
arguments: the input, filter and output as base pointer and offset (in elements), the sizes
(n, oh, ow, c, f, kh, kw), the input's image, row and pixel strides, the filter's row, column
and channel strides, the output's image, row and pixel strides (each innermost stride 1), the
window strides and dilations. `width` must divide ow and `features` f, as the tiling chose.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import func, ir

PREFIX = "mlirxla_conv2d_nhwc_f32_"
MARK = "mlirxla.library_convolution"
SIZES = ("n", "oh", "ow", "c", "f", "kh", "kw", "in_image", "in_row", "in_pixel", "filter_row", "filter_column",
         "filter_channel", "out_image", "out_row", "out_pixel", "sh", "sw", "dh", "dw")


def function_name(width: int, features: int) -> str:
    return f"{PREFIX}{width}x{features}"


def function_text(width: int, features: int) -> str:
    """LLVM IR of the library convolution for blocks of `width` columns by `features` channels.
    Loop counters and accumulators live in stack slots, which O3 promotes to registers (the
    function is compiled once per process: its compile time does not matter)."""
    vector = f"<{features} x float>"
    name = function_name(width, features)
    sizes = ", ".join(f"i64 %{size}" for size in SIZES)
    lines = [
        f"declare {vector} @llvm.fmuladd.v{features}f32({vector}, {vector}, {vector})",
        "",
        f"define void @{name}(ptr noalias readonly %in_base, i64 %in_offset, ptr noalias readonly %filter_base, "
        f"i64 %filter_offset, ptr noalias %out_base, i64 %out_offset, {sizes}) {{",
        "entry:",
        "  %in = getelementptr float, ptr %in_base, i64 %in_offset",
        "  %filter = getelementptr float, ptr %filter_base, i64 %filter_offset",
        "  %out = getelementptr float, ptr %out_base, i64 %out_offset",
        "  %column_step = mul i64 %sw, %in_pixel",
        # a window row's pixels adjacent in the input and in the filter: its columns and
        # channels are one loop (the conv net's first layer: 9 multiply-adds a row, not 3 x 3)
        "  %dilated_pixel = mul i64 %in_pixel, %dw",
        "  %adjacent_in = icmp eq i64 %dilated_pixel, %c",
        "  %filter_pixel = mul i64 %c, %filter_channel",
        "  %adjacent_filter = icmp eq i64 %filter_column, %filter_pixel",
        "  %adjacent = and i1 %adjacent_in, %adjacent_filter",
        "  %window_row = mul i64 %kw, %c",
        "  %columns = select i1 %adjacent, i64 1, i64 %kw",
        "  %channels = select i1 %adjacent, i64 %window_row, i64 %c",
    ]
    lines += [f"  %acc{i} = alloca {vector}" for i in range(width)]
    body = []
    body.append("  %in_y0 = mul i64 %y, %sh")
    body.append("  %in_x0 = mul i64 %x, %sw")
    body.append("  %out_image_offset = mul i64 %b, %out_image")
    body.append("  %out_row_offset = mul i64 %y, %out_row")
    body.append("  %out_rows = add i64 %out_image_offset, %out_row_offset")
    for i in range(width):
        body.append(f"  %out_x{i} = add i64 %x, {i}")
        body.append(f"  %out_pixel_offset{i} = mul i64 %out_x{i}, %out_pixel")
        body.append(f"  %out_at{i} = add i64 %out_rows, %out_pixel_offset{i}")
        body.append(f"  %out_element{i} = add i64 %out_at{i}, %g")
        body.append(f"  %out_pointer{i} = getelementptr float, ptr %out, i64 %out_element{i}")
        body.append(f"  %block{i} = load {vector}, ptr %out_pointer{i}, align 4")
        body.append(f"  store {vector} %block{i}, ptr %acc{i}")
    inner = []
    inner.append("  %row_dilated = mul i64 %p, %dh")
    inner.append("  %in_y = add i64 %in_y0, %row_dilated")
    inner.append("  %column_dilated = mul i64 %q, %dw")
    inner.append("  %in_x = add i64 %in_x0, %column_dilated")
    inner.append("  %in_image_offset = mul i64 %b, %in_image")
    inner.append("  %in_row_offset = mul i64 %in_y, %in_row")
    inner.append("  %in_pixel_offset = mul i64 %in_x, %in_pixel")
    inner.append("  %in_rows = add i64 %in_image_offset, %in_row_offset")
    inner.append("  %in_at = add i64 %in_rows, %in_pixel_offset")
    inner.append("  %filter_row_offset = mul i64 %p, %filter_row")
    inner.append("  %filter_column_offset = mul i64 %q, %filter_column")
    inner.append("  %filter_window = add i64 %filter_row_offset, %filter_column_offset")
    inner.append("  %filter_at = add i64 %filter_window, %g")
    channel = []
    channel.append("  %filter_channel_offset = mul i64 %k, %filter_channel")
    channel.append("  %filter_element = add i64 %filter_at, %filter_channel_offset")
    channel.append("  %filter_pointer = getelementptr float, ptr %filter, i64 %filter_element")
    channel.append(f"  %weights = load {vector}, ptr %filter_pointer, align 4")
    channel.append("  %in_channel = add i64 %in_at, %k")
    for i in range(width):
        channel.append(f"  %in_column_offset{i} = mul i64 {i}, %column_step")
        channel.append(f"  %in_element{i} = add i64 %in_channel, %in_column_offset{i}")
        channel.append(f"  %in_pointer{i} = getelementptr float, ptr %in, i64 %in_element{i}")
        channel.append(f"  %value{i} = load float, ptr %in_pointer{i}, align 4")
        channel.append(f"  %one{i} = insertelement {vector} poison, float %value{i}, i64 0")
        channel.append(f"  %splat{i} = shufflevector {vector} %one{i}, {vector} poison, <{features} x i32> zeroinitializer")
        channel.append(f"  %sum{i} = load {vector}, ptr %acc{i}")
        channel.append(f"  %product{i} = call {vector} @llvm.fmuladd.v{features}f32({vector} %splat{i}, {vector} %weights, {vector} %sum{i})")
        channel.append(f"  store {vector} %product{i}, ptr %acc{i}")
    after = [f"  %result{i} = load {vector}, ptr %acc{i}\n  store {vector} %result{i}, ptr %out_pointer{i}, align 4"
             for i in range(width)]
    nest = loop("k", "%channels", 1, channel)
    nest = loop("q", "%columns", 1, inner + nest)
    nest = loop("p", "%kh", 1, nest)
    nest = loop("g", "%f", features, body + nest + after)
    nest = loop("x", "%ow", width, nest)
    nest = loop("y", "%oh", 1, nest)
    nest = loop("b", "%n", 1, nest)
    lines += [f"  %{counter}_slot = alloca i64" for counter in "byxgpqk"]
    lines += [f"  %empty{index} = icmp slt i64 %{size}, 1" for index, size in enumerate(SIZES[:7])]
    lines += [f"  %any_empty{index} = or i1 %{'empty0' if index == 1 else f'any_empty{index - 1}'}, %empty{index}" for index in range(1, 7)]
    lines += ["  br i1 %any_empty6, label %done, label %work", "work:"]
    lines += nest
    lines += ["  br label %done", "done:"]
    lines += ["  ret void", "}"]
    return "\n".join(lines) + "\n"


def loop(counter: str, bound: str, step: int, body: list[str]) -> list[str]:
    """`body` in a loop of `counter` from 0 to `bound` by `step`, entered from and left to the
    current block; the counter lives in the stack slot `%<counter>_slot`. Tested at the
    bottom (every size is at least 1 past the entry's check): a test at the top made LLVM
    unswitch each loop on its outer loops' entry tests, twice the code."""
    return [f"  store i64 0, ptr %{counter}_slot",
            f"  br label %{counter}_body",
            f"{counter}_body:",
            f"  %{counter} = load i64, ptr %{counter}_slot",
            *body,
            f"  %{counter}_next = add i64 %{counter}, {step}",
            f"  store i64 %{counter}_next, ptr %{counter}_slot",
            f"  %{counter}_more = icmp slt i64 %{counter}_next, {bound}",
            f"  br i1 %{counter}_more, label %{counter}_body, label %{counter}_exit",
            f"{counter}_exit:"]


FEATURE_TILES = (16, 8)
WIDTH_TILES = (4, 2, 1)
BLOCKS = tuple((width, features) for width in WIDTH_TILES for features in FEATURE_TILES)
FUNCTIONS = tuple(function_name(width, features) for width, features in BLOCKS)


def block_of(name: str) -> tuple[int, int]:
    """(width, features) of library function `name`."""
    return BLOCKS[FUNCTIONS.index(name)]


def tile_sizes(convolution: ir.Operation) -> tuple[int, int] | None:
    """(width, features) of the register block for `convolution`: `features` 16 or 8 (two
    vectors or one of 8 f32), `width` 4, 2 or 1 output columns, the largest that divides the
    output's extent (a partial block would need masked vectors); None (generic loops) when
    its output channels divide by neither or its elements are not f32."""
    if any(str(ir.ShapedType(operand.type).element_type) != "f32" for operand in convolution.operands):
        return None
    _, _, width, features = ir.ShapedType(convolution.results[0].type).shape
    feature_tile = next((tile for tile in FEATURE_TILES if features % tile == 0), None)
    if feature_tile is None:
        return None
    return next(tile for tile in WIDTH_TILES if width % tile == 0), feature_tile


def mark_library_convolutions(module: ir.Module) -> None:
    """Mark each f32 `linalg.conv_2d_nhwc_hwcf` of `module` (on tensors) with its register
    block: bufferization keeps the mark on the convolution it makes on memrefs."""
    for convolution in ops_named(module, "linalg.conv_2d_nhwc_hwcf"):
        sizes = tile_sizes(convolution)
        if sizes is not None:
            convolution.attributes[MARK] = ir.StringAttr.get(function_name(*sizes))


def call_library_convolutions(module: ir.Module) -> int:
    """Replace each marked convolution on memrefs (whose innermost dimensions are contiguous)
    by a call of its library function; how many were."""
    declared = set()
    called = 0
    for convolution in ops_named(module, "linalg.conv_2d_nhwc_hwcf"):
        if MARK not in convolution.attributes:
            continue
        name = ir.StringAttr(convolution.attributes[MARK]).value
        buffers = list(convolution.operands)
        layouts = [ir.MemRefType(buffer.type).get_strides_and_offset() for buffer in buffers]
        if any(strides[-1] != 1 for strides, _ in layouts):
            del convolution.attributes[MARK]
            continue
        if name not in declared:
            declare(module, name)
            declared.add(name)
        with ir.InsertionPoint(convolution), convolution.location:
            func.CallOp([], ir.FlatSymbolRefAttr.get(name), call_operands(convolution, buffers))
        convolution.erase()
        called += 1
    return called


def call_operands(convolution: ir.Operation, buffers: list[ir.Value]) -> list[ir.Value]:
    """The library function's operands for `convolution` (input, filter, output memrefs)."""
    index = ir.IndexType.get()
    operands, strides = [], []
    for buffer in buffers:
        rank = ir.MemRefType(buffer.type).rank
        element = ir.MemRefType(buffer.type).element_type
        metadata = ir.Operation.create("memref.extract_strided_metadata", operands=[buffer],
                                       results=[ir.MemRefType.get([], element)] + [index] * (1 + 2 * rank))
        operands += [metadata.results[0], metadata.results[1]]
        strides.append(list(metadata.results)[2 + rank:2 + 2 * rank - 1])
    n, oh, ow, f = ir.MemRefType(buffers[2].type).shape
    kh, kw, c, _ = ir.MemRefType(buffers[1].type).shape
    window = [int(value) for value in ir.DenseIntElementsAttr(convolution.attributes["strides"])]
    dilation = [int(value) for value in ir.DenseIntElementsAttr(convolution.attributes["dilations"])]
    constants = [constant(value) for value in (n, oh, ow, c, f, kh, kw)]
    return operands + constants + strides[0] + strides[1] + strides[2] + [constant(value) for value in window + dilation]


def constant(value: int) -> ir.Value:
    return ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                               attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), value)}).result


def declare(module: ir.Module, name: str) -> None:
    """The library function's declaration in `module`: base pointers as 0-d memrefs (a bare
    pointer each), offsets, sizes and strides as indices."""
    index = ir.IndexType.get()
    base = ir.MemRefType.get([], ir.F32Type.get())
    inputs = [base, index] * 3 + [index] * len(SIZES)
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        func.FuncOp(name, ir.FunctionType.get(inputs, []), visibility="private")
