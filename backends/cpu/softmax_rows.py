"""A softmax along the last dimension of f32 rows, as one function of the runtime library
(`runtime_library.py`), the way XLA:CPU hands the same fusion to YNNPACK: a program whose
softmax is this fusion compiles no kernel for it.

`is_softmax` recognizes the loop fusion `jax.nn.softmax` becomes after priority fusion:

    m = max(-inf, reduce(x, max, init -inf))   (the outer max optional: jax's stop_gradient form)
    e = exp(x - broadcast(m))
    y = e / broadcast(reduce(e, add, init 0))

with the reductions over the last dimension and the broadcasts along the others. The library
function (`softmax_library_text`) takes the rows, their length and two pointers; per row it
finds the maximum, writes the exponentials while summing them, then divides them by the sum:
the passes the generated kernel makes over a row in cache (`row_fusion.py`), the same ops in
the same element type (the sum reassociated as the generated kernel's vectorized sum is), so
results agree with it to rounding.
"""

from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir

from .loop_text import LoopText

NEGATIVE_INFINITY = float("-inf")


def is_softmax(op: ir.Operation) -> bool:
    """Whether `op` is a loop fusion computing the softmax of its one f32 operand along the
    last dimension (and nothing else)."""
    if op.name != "xhlo.fusion" or len(op.operands) != 1 or len(op.results) != 1:
        return False
    operand_type = ir.RankedTensorType(op.operands[0].type)
    if not isinstance(operand_type.element_type, ir.F32Type) or operand_type.rank < 1 or op.results[0].type != operand_type:
        return False
    block = op.regions[0].blocks[0]
    x = block.arguments[0]
    root = block.operations[len(block.operations) - 1].operands[0]
    return softmax_of(root, x, operand_type.rank)


def softmax_of(value: ir.Value, x: ir.Value, rank: int) -> bool:
    divide = producer(value, "xhlo.divide")
    if divide is None:
        return False
    exponentials, sums = divide.operands
    exponential = producer(exponentials, "xhlo.exponential")
    shifted = exponential and producer(exponential.operands[0], "xhlo.subtract")
    if shifted is None or shifted.operands[0] != x:
        return False
    row_sum = row_reduction(along_rows(sums, rank), "xhlo.add", 0.0, rank)
    return row_sum is not None and row_sum.operands[0] == exponentials and row_maximum_of(along_rows(shifted.operands[1], rank), x, rank)


def row_maximum_of(value: ir.Value | None, x: ir.Value, rank: int) -> bool:
    """Whether `value` is the row maximum of `x` (or its maximum with -inf)."""
    outer = producer(value, "xhlo.maximum")
    if outer is not None:
        low, high = outer.operands
        value = high if splat(low) == NEGATIVE_INFINITY else low if splat(high) == NEGATIVE_INFINITY else None
    reduction = row_reduction(value, "xhlo.maximum", NEGATIVE_INFINITY, rank)
    return reduction is not None and reduction.operands[0] == x


def along_rows(value: ir.Value, rank: int) -> ir.Value | None:
    """The per-row value `value` broadcasts along the last dimension, or None."""
    broadcast = producer(value, "xhlo.broadcast")
    if broadcast is None or list(ir.DenseI64ArrayAttr(broadcast.attributes["dimensions"])) != list(range(rank - 1)):
        return None
    return broadcast.operands[0]


def row_reduction(value: ir.Value | None, combiner: str, initial: float, rank: int) -> ir.Operation | None:
    """The `xhlo.reduce` defining `value` when it combines one operand along the last
    dimension with `combiner` from `initial`, else None."""
    reduce = producer(value, "xhlo.reduce")
    if reduce is None or len(reduce.operands) != 2 or list(ir.DenseI64ArrayAttr(reduce.attributes["dimensions"])) != [rank - 1]:
        return None
    body = [operation for operation in reduce.regions[0].blocks[0].operations]
    if len(body) != 2 or body[0].name != combiner or splat(reduce.operands[1]) != initial:
        return None
    return reduce


def producer(value: ir.Value | None, name: str) -> ir.Operation | None:
    op = defining_op(value) if value is not None else None
    return op if op is not None and op.name == name else None


def splat(value: ir.Value) -> float | None:
    """The float every element of a splat constant (or its broadcast) holds, else None."""
    broadcast = producer(value, "xhlo.broadcast")
    constant = producer(broadcast.operands[0] if broadcast else value, "xhlo.constant")
    if constant is None:
        return None
    attribute = constant.attributes["value"]
    if not isinstance(attribute, ir.DenseElementsAttr) or not attribute.is_splat:
        return None
    return ir.FloatAttr(attribute.get_splat_value()).value


def softmax_library_text(symbol: str) -> str:
    """The runtime library's softmax: (x, y, rows, n), y's rows the softmax of x's."""
    rows_type = "memref<?x?xf32>"
    text = LoopText(symbol, [("x_start", "memref<1xf32>"), ("y_start", "memref<1xf32>"), ("rows", "index"), ("n", "index")])
    for name in ("x", "y"):
        text.line(f"%{name} = memref.reinterpret_cast %{name}_start to offset: [0], sizes: [%rows, %n], "
                  f"strides: [%n, 1] : memref<1xf32> to {rows_type}")
    row = text.loop("%rows", "r")
    largest = row_fold(text, "%x", rows_type, row, text.constant("0xFF800000", "f32"),
                       lambda element, carried, column: text.value(f"arith.maximumf {carried}, {element} : f32"))

    def exponential(element: str, carried: str, column: str) -> str:
        value = text.value(f"math.exp {text.value(f'arith.subf {element}, {largest} : f32')} : f32")
        text.store(value, "%y", rows_type, [row, column])
        return text.value(f"arith.addf {carried}, {value} fastmath<reassoc> : f32")

    total = row_fold(text, "%x", rows_type, row, text.constant("0.0", "f32"), exponential)
    column = text.loop("%n", "c")
    divided = text.value(f"arith.divf {text.load('%y', rows_type, [row, column])}, {total} : f32")
    text.store(divided, "%y", rows_type, [row, column])
    text.close()
    text.close()
    return text.text()


def row_fold(text: LoopText, memref: str, memref_type: str, row: str, initial: str, step) -> str:
    """`step(element, carried, column)` over the row's elements from `initial`; the value after
    the last."""
    column, carried, result = text.fresh("c"), text.fresh("a"), text.fresh("a")
    text.open(f"{result} = scf.for {column} = {text.constant(0)} to %n step {text.constant(1)} iter_args({carried} = {initial}) -> (f32)")
    text.line(f"scf.yield {step(text.load(memref, memref_type, [row, column]), carried, column)} : f32")
    text.close()
    return result
