"""A broadcast of values a kernel generates from indices and constants (a causal attention
mask: iotas compared, selected, then broadcast over the batch and heads), or of a predicate
it computes from its operands too (a padding mask: positions compared with the sequence
lengths), becomes the same computation at the broadcast's shape.

`stablehlo-legalize-to-linalg` lowers each op to a loop nest over its own shape, and
linalg's elementwise fusion only fuses a producer whose loop nest maps one to one onto its
consumer's: an iota compared over [128, 128] and broadcast to [4, 128, 128] stays a loop
nest of its own whose i1 result is materialized in scratch, one scalar byte store per
element (LLVM cannot widen stores of i1), and read back by the kernel. transformer_grad's
masked exponential ran at a sixth of the unmasked one's speed that way. Computed at the
broadcast's shape (an iota along the dimension its own maps to, a splat at the larger
shape, each elementwise op on its operands' broadcasts), once for each op that reads it
(linalg fuses a producer into its consumer only when it has no other), the mask fuses into
the loop nests that read it; XLA's elemental emitter computes a broadcast's operand per
element the same way.

Only values whose leaves are iotas and constants are moved, through cheap elementwise ops
(no transcendentals): recomputing them per element of the larger shape costs less than the
loads of a materialized copy. Kernel operands are leaves too for a predicate (i1), whose
materialization is the costly one (a byte store per element); a float value computed from
operands keeps its broadcast: recomputed per element of the larger shape, it cost
transformer_grad's layer-norm kernels up to a third more time than its materialization.
"""

from mlirxla.dialects.xhlo.builder import splat_of_type
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms import erasure

CHEAP_ELEMENTWISE = frozenset(
    f"stablehlo.{name}" for name in ("add", "subtract", "multiply", "negate", "abs", "maximum", "minimum", "and", "or",
                                     "xor", "not", "compare", "select", "convert", "shift_left",
                                     "shift_right_logical", "shift_right_arithmetic"))
MAX_DEPTH = 8  # a generated value deeper than this is rare and stays a broadcast


def recompute_generated_broadcasts(module: ir.Module) -> int:
    """Rewrite every broadcast of a generated value in `module`; how many were rewritten."""
    rewritten = 0
    for op in erasure.live_ops(ops_named(module, "stablehlo.broadcast_in_dim")):
        operand = op.operands[0]
        result_type = ir.RankedTensorType(op.results[0].type)
        reads_operands = is_predicate(result_type.element_type)
        if read_operand(operand) or not generated(operand, MAX_DEPTH, reads_operands) or not result_type.has_static_shape:
            continue
        dimensions = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
        shape = result_type.shape
        for user, position in [(use.owner, use.operand_number) for use in op.results[0].uses]:
            with ir.InsertionPoint(user), op.location:
                user.operands[position] = at_shape(operand, dimensions, shape)
        erasure.erase(op)
        rewritten += 1
    return rewritten


def is_predicate(element: ir.Type) -> bool:
    return isinstance(element, ir.IntegerType) and ir.IntegerType(element).width == 1


def read_operand(value: ir.Value) -> bool:
    """Whether `value` is a kernel operand (which linalg reads through a broadcast's indexing
    map as it is)."""
    return not isinstance(value.owner, ir.Block) and value.owner.name == "bufferization.to_tensor"


def generated(value: ir.Value, depth: int, reads_operands: bool) -> bool:
    """Whether `value` is computed from iotas and splat constants (and kernel operands when
    `reads_operands`) by broadcasts and cheap elementwise ops (each operand of the result's
    own shape)."""
    if depth == 0 or isinstance(value.owner, ir.Block):
        return False
    op = value.owner
    if op.name == "stablehlo.iota":
        return True
    if read_operand(value):
        return reads_operands
    if op.name == "stablehlo.constant":
        return splat_of(op) is not None
    if op.name == "stablehlo.broadcast_in_dim":
        return generated(op.operands[0], depth - 1, reads_operands)
    if op.name not in CHEAP_ELEMENTWISE:
        return False
    shape = ir.RankedTensorType(value.type).shape
    return all(ir.RankedTensorType(operand.type).shape == shape and generated(operand, depth - 1, reads_operands)
               for operand in op.operands)


def at_shape(value: ir.Value, dimensions: list[int], shape: list[int]) -> ir.Value:
    """`value` (a generated one) computed at `shape`, its dimension i being `dimensions[i]`."""
    op = value.owner
    result_type = ir.RankedTensorType.get(shape, ir.RankedTensorType(value.type).element_type)
    if op.name == "stablehlo.iota":
        iota_dimension = dimensions[ir.IntegerAttr(op.attributes["iota_dimension"]).value]
        return ir.Operation.create("stablehlo.iota", results=[result_type], attributes={
            "iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), iota_dimension)}).results[0]
    if read_operand(value):  # read through the broadcast's indexing map
        return ir.Operation.create("stablehlo.broadcast_in_dim", results=[result_type], operands=[value], attributes={
            "broadcast_dimensions": ir.DenseI64ArrayAttr.get(dimensions)}).results[0]
    if op.name == "stablehlo.constant":
        return ir.Operation.create("stablehlo.constant", results=[result_type], attributes={
            "value": splat_of_type(splat_of(op), result_type)}).results[0]
    if op.name == "stablehlo.broadcast_in_dim":
        inner = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
        return at_shape(op.operands[0], [dimensions[d] for d in inner], shape)
    operands = [at_shape(operand, dimensions, shape) for operand in op.operands]
    attributes = {name: op.attributes[name] for name in op.attributes}
    return ir.Operation.create(op.name, results=[result_type], operands=operands, attributes=attributes).results[0]


def splat_of(constant: ir.Operation) -> ir.Attribute | None:
    """The element of a splat integer or float constant, else None (complex splats come back
    as pairs that a splat of another shape cannot take)."""
    value = constant.attributes["value"]
    if not isinstance(value, ir.DenseElementsAttr) or not value.is_splat:
        return None
    element = ir.RankedTensorType(constant.results[0].type).element_type
    return value.get_splat_value() if isinstance(element, (ir.IntegerType, ir.FloatType)) else None
