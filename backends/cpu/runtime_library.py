"""Shape-generic kernels compiled once per host, as XLA:CPU links its runtime library:
their sizes are arguments, so a program using one compiles no code of its own for it, only a
call with its constants. Each function is its own object, compiled the first time an
executable on this host calls it (`llvm_jit.library_object`; kept across processes by
`library_cache.py`, filled by `scripts/setup`).

`im2col` lays a convolution's receptive fields out as GEMM rows (`convolution_gemm.py` has
the layout): for each output position and filter row, the filter row's window of the input,
`kw` pixels of `c` channels, is one `memcpy` when it lies inside the input (stride along
the width does not matter: the window's pixels are adjacent) and pixel by pixel otherwise,
zeros for the padding. Its element size is an argument too: one function for f32 and f64.
A batch's convolution in blocks calls it from a kernel of its own that then calls BLAS's
GEMM on the block's rows (`im2col_gemm_call`; the JIT links the routine in numpy's OpenBLAS);
so does a layer's kernel gradient, each block's rows transposed times its output gradient
into a part of its own, which `mlirxla_sum_parts_<f32|f64>` then add up in order.
The generated kernel it replaces (the input padded into scratch, then one loop nest over the
windows) cost about 40 ms of the lowering and LLVM of conv_bn_pool's cold compile and ran
no faster (16 images of 32x32x32, 3x3: 0.50-0.59 ms generated, 0.52-0.60 here).

`mlirxla_widen_bf16` widens a bf16 matrix (rows of `columns` elements, `stride` apart) to a
dense f32 one: a GEMM whose operand is a bf16 weight widens it panel by panel, each panel
into its thread's scratch right before BLAS's f32 GEMM reads it (`widening_gemm_call`;
`transforms/widening_gemm_fusion.py` says when).

`mlirxla_top_k_f32_*` is XLA's runtime TopK (`__xla_cpu_runtime_TopKF32`, the only type XLA's
runtime takes too): a `TopK` custom call of f32 rows with i32 positions
(`transforms/top_k_rewriter.py`), the selection of `top_k_kernel.py` with the rows, their
length and k as arguments, one function per order (largest or smallest first) and NaN
handling (canonical or not), written in the loop dialects and lowered as the kernels are.
The generated kernel it replaces cost a top_k program two thirds of its cold compile.

`mlirxla_softmax_f32` is a softmax along the last dimension of f32 rows (`softmax_rows.py`),
which XLA:CPU hands to YNNPACK.

`mlirxla_rows_f32` is the row-program engine (`row_engine.py`): a loop fusion over f32 rows
(layer and rms norms, log-softmax, ...; `row_programs.py` recognizes them) is a program it
runs, a constant of the kernel calling it (`rows_call`); its functions are one per
instruction, internal to its object.

`mlirxla_pack_bytes_vnni` and `mlirxla_byte_gemm_vnni` are the int8 GEMM on VNNI
(`byte_gemm.py`): a slice of the rhs' columns packed into 4 x 16-byte blocks in the thread's
scratch, then the lhs' rows times them (`byte_gemm_call`, one sliced kernel).

`mlirxla_conv2d_nhwc_f32_<width>x<features>` is the register-tiled direct convolution
(`convolution_library.py`), one per register block; unlike the others it is called from
inside generated kernels (a batch-slice kernel's convolutions), not as a kernel of its own.

An executable's archive carries the object of each function its kernels call
(`called_functions`); a kernel calling one (`im2col_call`, `top_k_call`, `softmax_call`, `rows_call`) is compiled with
the forwarders, unoptimized: it is one call.
"""

from mlirxla import context
from mlirxla.mlir import ir
from mlirxla.runtime.blas import NO_TRANSPOSE, ROW_MAJOR, TRANSPOSE

from . import byte_gemm, convolution_library, lowering
from .row_engine import BUFFERS, cases_kept_apart, engine_library_text
from .softmax_rows import softmax_library_text
from .top_k_kernel import top_k_library_text

IM2COL = "mlirxla_im2col"
LIBRARY = """
declare void @llvm.memcpy.p0.p0.i64(ptr noalias nocapture writeonly, ptr noalias nocapture readonly, i64, i1)
declare void @llvm.memset.p0.i64(ptr nocapture writeonly, i8, i64, i1)

define void @mlirxla_im2col(ptr noalias nocapture readonly %input, ptr noalias nocapture writeonly %rows, i64 %element, i64 %n, i64 %h, i64 %w, i64 %c, i64 %kh, i64 %kw, i64 %oh, i64 %ow, i64 %sh, i64 %sw, i64 %top, i64 %left) {
entry:
  %pixel = mul i64 %c, %element
  %span = mul i64 %pixel, %kw
  %positions = mul i64 %n, %oh
  %rows_per_image = mul i64 %positions, %ow
  %segments = mul i64 %rows_per_image, %kh
  %any = icmp sgt i64 %segments, 0
  br i1 %any, label %segment, label %done

segment:
  %t = phi i64 [ 0, %entry ], [ %next, %continue ]
  %p = urem i64 %t, %kh
  %u = udiv i64 %t, %kh
  %j = urem i64 %u, %ow
  %v = udiv i64 %u, %ow
  %i = urem i64 %v, %oh
  %b = udiv i64 %v, %oh
  %i_scaled = mul i64 %i, %sh
  %y_shifted = add i64 %i_scaled, %p
  %y = sub i64 %y_shifted, %top
  %destination_offset = mul i64 %t, %span
  %destination = getelementptr i8, ptr %rows, i64 %destination_offset
  %row_inside = icmp ult i64 %y, %h
  br i1 %row_inside, label %row, label %zero_segment

zero_segment:
  call void @llvm.memset.p0.i64(ptr %destination, i8 0, i64 %span, i1 false)
  br label %continue

row:
  %j_scaled = mul i64 %j, %sw
  %x0 = sub i64 %j_scaled, %left
  %image_row = mul i64 %b, %h
  %input_row = add i64 %image_row, %y
  %input_pixels = mul i64 %input_row, %w
  %x_end = add i64 %x0, %kw
  %starts_inside = icmp sge i64 %x0, 0
  %ends_inside = icmp sle i64 %x_end, %w
  %whole = and i1 %starts_inside, %ends_inside
  br i1 %whole, label %copy_segment, label %column

copy_segment:
  %first_pixel = add i64 %input_pixels, %x0
  %source_offset = mul i64 %first_pixel, %pixel
  %source = getelementptr i8, ptr %input, i64 %source_offset
  call void @llvm.memcpy.p0.p0.i64(ptr %destination, ptr %source, i64 %span, i1 false)
  br label %continue

column:
  %q = phi i64 [ 0, %row ], [ %q_next, %column_done ]
  %x = add i64 %x0, %q
  %column_offset = mul i64 %q, %pixel
  %column_destination = getelementptr i8, ptr %destination, i64 %column_offset
  %column_inside = icmp ult i64 %x, %w
  br i1 %column_inside, label %copy_column, label %zero_column

copy_column:
  %pixel_index = add i64 %input_pixels, %x
  %pixel_offset = mul i64 %pixel_index, %pixel
  %pixel_source = getelementptr i8, ptr %input, i64 %pixel_offset
  call void @llvm.memcpy.p0.p0.i64(ptr %column_destination, ptr %pixel_source, i64 %pixel, i1 false)
  br label %column_done

zero_column:
  call void @llvm.memset.p0.i64(ptr %column_destination, i8 0, i64 %pixel, i1 false)
  br label %column_done

column_done:
  %q_next = add i64 %q, 1
  %columns_left = icmp slt i64 %q_next, %kw
  br i1 %columns_left, label %column, label %continue

continue:
  %next = add i64 %t, 1
  %more = icmp slt i64 %next, %segments
  br i1 %more, label %segment, label %done

done:
  ret void
}
"""

WIDEN_BF16 = "mlirxla_widen_bf16"
WIDEN_BF16_TEXT = """
define void @mlirxla_widen_bf16(ptr noalias nocapture readonly %source, ptr noalias nocapture writeonly %destination, i64 %rows, i64 %columns, i64 %stride) {
entry:
  %any_rows = icmp sgt i64 %rows, 0
  %any_columns = icmp sgt i64 %columns, 0
  %any = and i1 %any_rows, %any_columns
  br i1 %any, label %row, label %done

row:
  %r = phi i64 [ 0, %entry ], [ %r_next, %row_done ]
  %source_row = mul i64 %r, %stride
  %destination_row = mul i64 %r, %columns
  br label %column

column:
  %c = phi i64 [ 0, %row ], [ %c_next, %column ]
  %source_index = add i64 %source_row, %c
  %source_at = getelementptr i16, ptr %source, i64 %source_index
  %bits = load i16, ptr %source_at, align 2
  %wide = zext i16 %bits to i32
  %high = shl i32 %wide, 16
  %value = bitcast i32 %high to float
  %destination_index = add i64 %destination_row, %c
  %destination_at = getelementptr float, ptr %destination, i64 %destination_index
  store float %value, ptr %destination_at, align 4
  %c_next = add i64 %c, 1
  %columns_left = icmp slt i64 %c_next, %columns
  br i1 %columns_left, label %column, label %row_done

row_done:
  %r_next = add i64 %r, 1
  %rows_left = icmp slt i64 %r_next, %rows
  br i1 %rows_left, label %row, label %done

done:
  ret void
}
"""

SUM_PARTS = {"f32": "mlirxla_sum_parts_f32", "f64": "mlirxla_sum_parts_f64"}


def sum_parts_text(name: str) -> str:
    """`name(parts, sum, count, n)`: sum[j] = the sum over i < count of parts[i * n + j], in
    order (the first part copied, each next one added: one vectorized pass over each)."""
    scalar = "float" if name.endswith("f32") else "double"
    return f"""
define void @{name}(ptr noalias nocapture readonly %parts, ptr noalias nocapture %sum, i64 %count, i64 %n) {{
entry:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %first, label %done

first:
  %j = phi i64 [ 0, %entry ], [ %j_next, %first ]
  %first_at = getelementptr {scalar}, ptr %parts, i64 %j
  %first_value = load {scalar}, ptr %first_at
  %sum_at = getelementptr {scalar}, ptr %sum, i64 %j
  store {scalar} %first_value, ptr %sum_at
  %j_next = add i64 %j, 1
  %first_left = icmp slt i64 %j_next, %n
  br i1 %first_left, label %first, label %parts_loop

parts_loop:
  %i = phi i64 [ 1, %first ], [ %i_next, %part_done ]
  %more_parts = icmp slt i64 %i, %count
  br i1 %more_parts, label %part, label %done

part:
  %part_start = mul i64 %i, %n
  br label %add

add:
  %c = phi i64 [ 0, %part ], [ %c_next, %add ]
  %index = add i64 %part_start, %c
  %part_at = getelementptr {scalar}, ptr %parts, i64 %index
  %value = load {scalar}, ptr %part_at
  %total_at = getelementptr {scalar}, ptr %sum, i64 %c
  %total = load {scalar}, ptr %total_at
  %added = fadd {scalar} %total, %value
  store {scalar} %added, ptr %total_at
  %c_next = add i64 %c, 1
  %add_left = icmp slt i64 %c_next, %n
  br i1 %add_left, label %add, label %part_done

part_done:
  %i_next = add i64 %i, 1
  br label %parts_loop

done:
  ret void
}}
"""


def call_text(symbol: str, what: str, function: str, buffers: int, sizes) -> str:
    """LLVM IR of kernel `symbol`, whose arguments are `buffers` pointers: a tail call of library
    `function` with them and the constants `sizes`; `what` says in a comment what it computes."""
    pointers = ", ".join(f"ptr %{index}" for index in range(buffers))
    parameters = ", ".join(["ptr"] * buffers + ["i64"] * len(sizes))
    constants = "".join(f", i64 {size}" for size in sizes)
    return (f"; kernel {symbol}: {what}, in the runtime library\n"
            f"declare void @{function}({parameters})\n\n"
            f"define void @{symbol}({pointers}) {{\n"
            f"  tail call void @{function}({pointers}{constants})\n"
            f"  ret void\n}}\n")


def im2col_sizes(shape, images: int, out_rows: int, top) -> tuple:
    """The sizes `mlirxla_im2col` takes after its two pointers, in its order: `images` of
    `shape`'s, `out_rows` of their output rows, `top` rows of padding above them (a number,
    or an LLVM value the kernel computes)."""
    return (shape.width_bytes, images, shape.height, shape.width, shape.channels, shape.kernel_height, shape.kernel_width,
            out_rows, shape.out_width, *shape.strides, top, shape.padding[1][0])


def im2col_call(symbol: str, shape) -> str:
    """LLVM IR of kernel `symbol` (input, rows): `mlirxla_im2col` with `shape`'s sizes (a
    `convolution_strategy.Geometry`)."""
    sizes = im2col_sizes(shape, shape.batch, shape.out_height, shape.padding[0][0])
    what = (f"im2col of {shape.batch}x{shape.height}x{shape.width}x{shape.channels} {shape.element}, "
            f"a {shape.kernel_height}x{shape.kernel_width} window")
    return call_text(symbol, what, IM2COL, 2, sizes)


def im2col_gemm_call(symbol: str, shape, blocks, routine: str, kernel_gradient: bool = False) -> str:
    """LLVM IR of kernel `symbol`: one block of a convolution (`shape`, a
    `convolution_strategy.Geometry`, in `blocks`, a `convolution_gemm.Blocks`), laid out as GEMM
    rows by `mlirxla_im2col` into `rows` and multiplied with BLAS `routine` (`cblas_?gemm`)
    while the rows are still in the core's cache: by the kernel into the block's output, or
    (`kernel_gradient`) transposed, by the block's output gradient, into the block's part of
    the kernel gradient (`rows^T @ dy`, the parts summed afterwards).
    A block of whole images takes (input, kernel, output, rows), or (input, output gradient,
    part, rows), each pointer at its block.
    A block of an image's output rows takes (input, kernel, base, output, rows), or (input,
    base, output gradient, part, rows): the input whole, and the output (or output gradient)
    at the block, whose distance from its base says which image and which rows it is, so the
    input is read from that image with the top padding moved up past the rows before."""
    top = shape.padding[0][0]
    scalar = "float" if shape.element == "f32" else "double"
    m, n, k = blocks.images * blocks.rows * shape.out_width, shape.features, shape.k
    gemm = f"{k}x{n}x{m} GEMM of the rows transposed into the kernel gradient's part" if kernel_gradient else f"{m}x{n}x{k} GEMM"
    lines = [f"; kernel {symbol}: im2col of {blocks.images} {shape.height}x{shape.width}x{shape.channels} {shape.element} image(s), "
             f"{blocks.rows} output row(s) each, a {shape.kernel_height}x{shape.kernel_width} window, then a {gemm}, "
             "in the runtime library and BLAS",
             f"declare void @{IM2COL}(ptr, ptr{', i64' * 13})",
             f"declare void @{routine}(i32, i32, i32, i64, i64, i64, {scalar}, ptr, i64, ptr, i64, {scalar}, ptr, i64)", ""]
    image, image_top = "%input", top
    # the GEMM's other operand and its output; the pointer that says where a row block is
    operand, result = ("%gradient", "%part") if kernel_gradient else ("%kernel", "%output")
    blocked = operand if kernel_gradient else result
    parameters = ["%input", operand, result, "%rows"]
    if blocks.rows != shape.out_height:
        parameters.insert(1 if kernel_gradient else 2, "%base")
    lines.append(f"define void @{symbol}({', '.join(f'ptr {parameter}' for parameter in parameters)}) {{")
    if blocks.rows != shape.out_height:
        image, image_top = "%image", "%top"
        per_image = shape.out_height // blocks.rows
        block_bytes = m * n * shape.width_bytes
        image_bytes = shape.height * shape.width * shape.channels * shape.width_bytes
        lines += [f"  %at = ptrtoint ptr {blocked} to i64", "  %from = ptrtoint ptr %base to i64",
                  "  %offset = sub i64 %at, %from", f"  %block = udiv i64 %offset, {block_bytes}",
                  f"  %which = udiv i64 %block, {per_image}", f"  %part_of_image = urem i64 %block, {per_image}",
                  f"  %image_offset = mul i64 %which, {image_bytes}",
                  "  %image = getelementptr i8, ptr %input, i64 %image_offset",
                  f"  %rows_before = mul i64 %part_of_image, {blocks.rows * shape.strides[0]}",
                  f"  %top = sub i64 {top}, %rows_before"]
    sizes = "".join(f", i64 {size}" for size in im2col_sizes(shape, blocks.images, blocks.rows, image_top))
    lines.append(f"  call void @{IM2COL}(ptr {image}, ptr %rows{sizes})")
    if kernel_gradient:
        lines.append(f"  call void @{routine}(i32 {ROW_MAJOR}, i32 {TRANSPOSE}, i32 {NO_TRANSPOSE}, i64 {k}, i64 {n}, i64 {m}, {scalar} 1.0, "
                     f"ptr %rows, i64 {k}, ptr %gradient, i64 {n}, {scalar} 0.0, ptr %part, i64 {n})")
    else:
        lines.append(f"  call void @{routine}(i32 {ROW_MAJOR}, i32 {NO_TRANSPOSE}, i32 {NO_TRANSPOSE}, i64 {m}, i64 {n}, i64 {k}, {scalar} 1.0, "
                     f"ptr %rows, i64 {k}, ptr %kernel, i64 {n}, {scalar} 0.0, ptr %output, i64 {n})")
    lines += ["  ret void", "}", ""]
    return "\n".join(lines)


def sum_parts_call(symbol: str, element: str, count: int, n: int) -> str:
    """LLVM IR of kernel `symbol` (parts, sum): the library's sum of `count` parts of `n`."""
    return call_text(symbol, f"the sum of {count} parts of {n} {element}", SUM_PARTS[element], 2, (count, n))

def widening_gemm_call(symbol: str, panels, routine: str) -> str:
    """LLVM IR of kernel `symbol` (lhs, rhs, output, panel), each pointer at its panel: one
    panel of a GEMM's bf16 operand (`panels`, a `widening_gemm_fusion.Panels`) widened by
    `mlirxla_widen_bf16` into `panel` (scratch) and multiplied with the other operand by BLAS
    `routine` (`cblas_sgemm`) into the output's panel of rows (lhs) or columns (rhs). A panel
    of rows of a row-major [m, k] lhs, or of columns of a transposed [n, k] rhs, is contiguous;
    of columns of a [k, m] or [k, n] operand, `k` rows of `width` a row apart."""
    p = panels
    m, n = (p.width, p.n) if p.side == 0 else (p.m, p.width)
    if p.side == 0:
        rows, columns, stride = (p.k, p.width, p.m) if p.transpose_lhs else (p.width, p.k, p.k)
        source, lhs, rhs = "%lhs", "%panel", "%rhs"
        lda, ldb = (p.width if p.transpose_lhs else p.k), (p.k if p.transpose_rhs else p.n)
    else:
        rows, columns, stride = (p.width, p.k, p.k) if p.transpose_rhs else (p.k, p.width, p.n)
        source, lhs, rhs = "%rhs", "%lhs", "%panel"
        lda, ldb = (p.m if p.transpose_lhs else p.k), (p.k if p.transpose_rhs else p.width)
    transposes = (TRANSPOSE if p.transpose_lhs else NO_TRANSPOSE, TRANSPOSE if p.transpose_rhs else NO_TRANSPOSE)
    return "\n".join([
        f"; kernel {symbol}: a {rows}x{columns} bf16 panel of the {'lhs' if p.side == 0 else 'rhs'} widened to f32, then a "
        f"{m}x{n}x{p.k} GEMM, in the runtime library and BLAS",
        f"declare void @{WIDEN_BF16}(ptr, ptr, i64, i64, i64)",
        f"declare void @{routine}(i32, i32, i32, i64, i64, i64, float, ptr, i64, ptr, i64, float, ptr, i64)", "",
        f"define void @{symbol}(ptr %lhs, ptr %rhs, ptr %output, ptr %panel) {{",
        f"  call void @{WIDEN_BF16}(ptr {source}, ptr %panel, i64 {rows}, i64 {columns}, i64 {stride})",
        f"  call void @{routine}(i32 {ROW_MAJOR}, i32 {transposes[0]}, i32 {transposes[1]}, i64 {m}, i64 {n}, i64 {p.k}, float 1.0, "
        f"ptr {lhs}, i64 {lda}, ptr {rhs}, i64 {ldb}, float 0.0, ptr %output, i64 {p.n})",
        "  ret void", "}", ""])


def byte_gemm_call(symbol: str, m: int, columns: int, n: int, k: int, transposed_rhs: bool, signed_lhs: bool) -> str:
    """LLVM IR of kernel `symbol` (lhs, rhs, output, scratch), each pointer at its slice: the
    slice's `columns` of the k x n int8 rhs (transposed: stored as n x k) packed into
    `scratch` (its sign bits flipped for an int8 lhs, whose row sums follow it), then multiplied by
    the m x k lhs into those columns of the m x n int32 output (`byte_gemm.py`)."""
    strides = (1, k) if transposed_rhs else (n, 1)
    lhs = "int8" if signed_lhs else "uint8"
    return "\n".join([
        f"; kernel {symbol}: {columns} columns of a {m}x{n}x{k} {lhs} x int8 GEMM into int32 on VNNI, in the runtime library",
        f"declare void @{byte_gemm.PACK}(ptr, ptr, i64, i64, i64, i64, i64)",
        f"declare void @{byte_gemm.GEMM}(ptr, ptr, ptr, ptr, i64, i64, i64, i64, i64, i64)", "",
        f"define void @{symbol}(ptr %lhs, ptr %rhs, ptr %output, ptr %scratch) {{",
        f"  %row_sums = getelementptr i8, ptr %scratch, i64 {byte_gemm.packed_bytes(columns, k)}",
        f"  call void @{byte_gemm.PACK}(ptr %rhs, ptr %scratch, i64 {k}, i64 {columns}, i64 {strides[0]}, i64 {strides[1]}, "
        f"i64 {int(signed_lhs)})",
        f"  call void @{byte_gemm.GEMM}(ptr %lhs, ptr %scratch, ptr %row_sums, ptr %output, i64 {m}, i64 {columns}, i64 {k}, i64 {k}, "
        f"i64 {n}, i64 {int(signed_lhs)})",
        "  ret void", "}", ""])


def top_k_function(largest: bool, canonical: bool) -> str:
    return f"mlirxla_top_k_f32_{'largest' if largest else 'smallest'}{'_canonical' if canonical else ''}"


TOP_K_FUNCTIONS = {top_k_function(largest, canonical): (largest, canonical) for largest in (True, False) for canonical in (True, False)}


def top_k_call(symbol: str, function: str, rows: int, n: int, k: int) -> str:
    """LLVM IR of kernel `symbol` (x, values, positions): `function`, a TopK of the library,
    over `rows` rows of `n`."""
    return call_text(symbol, f"top {k} of {rows} f32 row(s) of {n}", function, 3, (rows, n, k))


SOFTMAX = "mlirxla_softmax_f32"


def softmax_call(symbol: str, rows: int, n: int) -> str:
    """LLVM IR of kernel `symbol` (x, y): the library's softmax over `rows` f32 rows of `n`."""
    return call_text(symbol, f"softmax of {rows} f32 row(s) of {n}", SOFTMAX, 2, (rows, n))


ROWS = "mlirxla_rows_f32"


def rows_call(symbol: str, program, rows: int, buffers: int) -> str:
    """LLVM IR of kernel `symbol` (its operands, then its results): the library's row engine
    running `program` (a `row_programs.RowProgram`) over `rows` of them, the program a
    constant of the kernel."""
    words = ", ".join(f"i64 {word}" for word in program.words)
    pointers = [f"ptr %{index}" for index in range(buffers)] + ["ptr null"] * (BUFFERS - buffers)
    sizes = (program.instructions, rows, program.n, program.block, program.scratch_slots)
    return (f"; kernel {symbol}: a program of {program.instructions} instructions over {rows} f32 row(s) of {program.n}, "
            f"in the runtime library\n"
            f"@{symbol}.program = private unnamed_addr constant [{len(program.words)} x i64] [{words}]\n"
            f"declare void @{ROWS}(ptr, {', '.join(['i64'] * len(sizes))}, {', '.join(['ptr'] * BUFFERS)})\n\n"
            f"define void @{symbol}({', '.join(pointers[:buffers])}) {{\n"
            f"  tail call void @{ROWS}(ptr @{symbol}.program, {', '.join(f'i64 {size}' for size in sizes)}, {', '.join(pointers)})\n"
            f"  ret void\n}}\n")


FUNCTIONS = (IM2COL, WIDEN_BF16, *SUM_PARTS.values(), *TOP_K_FUNCTIONS, SOFTMAX, ROWS, *convolution_library.FUNCTIONS,
             *byte_gemm.FUNCTIONS)


def host_functions() -> tuple[str, ...]:
    """The library functions this host runs: the byte GEMM's only where it has VNNI (LLVM
    cannot select `vpdpbusd` for a CPU without it)."""
    return tuple(name for name in FUNCTIONS if name not in byte_gemm.FUNCTIONS or byte_gemm.available())


def called_functions(ir_text: str) -> list[str]:
    """The library functions a kernel's LLVM IR calls."""
    return [name for name in FUNCTIONS if f"@{name}(" in ir_text]


def function_ir(name: str) -> str:
    """The LLVM IR of library function `name`: im2col's, the widening's and the sums of parts
    as written, the others lowered from their loops in a context of its own."""
    if name == IM2COL:
        return LIBRARY
    if name == WIDEN_BF16:
        return WIDEN_BF16_TEXT
    if name in SUM_PARTS.values():
        return sum_parts_text(name)
    if name in convolution_library.FUNCTIONS:
        return convolution_library.function_text(*convolution_library.block_of(name))
    if name in byte_gemm.FUNCTIONS:
        return byte_gemm.pack_text() if name == byte_gemm.PACK else byte_gemm.gemm_text()
    texts = {SOFTMAX: softmax_library_text, ROWS: engine_library_text}
    with context.new_context(), ir.Location.unknown():
        module = ir.Module.parse(texts[name](name) if name in texts else top_k_library_text(name, *TOP_K_FUNCTIONS[name]))
        lowering.lower_to_llvm_dialect(module, name)
        text = lowering.translate(module, name)
    return cases_kept_apart(text, name) if name == ROWS else text

