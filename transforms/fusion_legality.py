"""Can a producer fuse into a consumer? (XLA's InstructionFusion::ShouldFuse and the CPU/GPU
`IsFusible` checks, rebuilt for xhlo.)

`fusion_refusal(producer, consumer, duplicate=..., limits=...)` returns None when the fusion is
legal, else one sentence in XLA's words saying why not ("the producer is not fusible",
"both the producer and the consumer contain a reduce", "the fusion would result in an overly
large code duplication", "fusion would create a cycle"). `duplicate` says whether the
producer stays outside (it has other users), so that fusing copies it into the consumer.

Also here: the graph helpers the fusion passes share (users within a block, reachability,
the ops inside a fusion).
"""

import functools
from dataclasses import dataclass

from mlirxla.dialects.xhlo.ops import ELEMENTWISE_OPS, FUSION_SLOTS
from mlirxla.dialects.xhlo.types import bit_width
from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir, stablehlo

ELEMENTWISE = frozenset(name.removeprefix("xhlo.") for name in ELEMENTWISE_OPS)
# XLA's HloInstruction::IsOpElementwise + IsExpensive: elementwise ops too costly to duplicate
TRANSCENDENTAL = frozenset(
    "atan2 cbrt cosine divide exponential exponential_minus_one log log_plus_one logistic power "
    "remainder rsqrt sine sqrt tan tanh".split()
)
SHAPE_OPS = frozenset(
    "broadcast reshape bitcast transpose slice concatenate pad iota constant reverse dynamic_slice "
    "dynamic_update_slice gather copy".split()
)
# bitcast_convert is no elementwise op (between widths it reshapes), but a loop fuses it like one
FUSIBLE = ELEMENTWISE | SHAPE_OPS | {"bitcast_convert", "reduce", "fusion"}
LIBRARY_CALLS = frozenset({"dot", "convolution"})
# never fused: control flow, calls, side effects, collectives and ops with their own emitters
NOT_FUSIBLE_REASONS = {
    "dot": "a dot is a library call",
    "convolution": "a convolution is a library call",
    "while": "control flow is not fusible",
    "conditional": "control flow is not fusible",
    "call": "a call is not fusible",
    "custom_call": "a custom call is opaque",
    "sort": "sort has its own emitter",
    "rng": "rng has a side effect",
    "rng_bit_generator": "rng_bit_generator has its own emitter",
}
# ops that are not kernels of their own (they produce no code or are plain data)
NOT_KERNELS = frozenset({"constant", "tuple", "get_tuple_element", "bitcast", "after_all", "optimization_barrier", "partition_id", "replica_id"})
# ops a kernel computes inside one loop nest with the elementwise ops around them, never
# materializing their values (views and per-element index arithmetic)
READ_WHERE_WRITTEN = ELEMENTWISE | {"constant", "broadcast", "iota", "reshape", "bitcast", "bitcast_convert", "slice", "dynamic_slice", "copy",
                                    "return"}
CHEAP_TO_DUPLICATE = frozenset({"constant", "broadcast", "iota", "reshape", "bitcast", "transpose", "slice", "convert", "bitcast_convert"})


@dataclass(frozen=True)
class FusionLimits:
    """Size limits of one fusion (XLA: kMaxOperandsAndOutputsPerFusion, the code-duplication
    guard in InstructionFusion, the 'large constant' rule)."""

    max_fused_ops: int = 512  # jax's unrolled threefry with its consumer fits (about 290 ops); XLA caps operands, not ops
    max_operands: int = FUSION_SLOTS  # the xhlo.fusion op's operand slots
    max_duplicated_ops: int = 16  # a duplicated producer may hold at most this many ops
    max_constant_elements: int = 1024  # larger non-splat constants stay buffers
    row_fusion: bool = True  # reductions over the same rows may share a kernel (see row_compatible)


def kind_of(op: ir.Operation) -> str:
    name = op.name
    return name[5:] if name.startswith("xhlo.") else name


def fusion_kind(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["kind"]).value


def fused_ops(op: ir.Operation) -> list[ir.Operation]:
    """The ops a kernel holds: the body of a fusion (without its return), else the op itself."""
    if op.name != "xhlo.fusion":
        return [op]
    return [inner.operation for inner in list(op.regions[0].blocks[0].operations)[:-1]]


def fused_kinds(op: ir.Operation) -> list[str]:
    return [kind_of(inner) for inner in fused_ops(op)]


def root_kinds(op: ir.Operation) -> list[str]:
    """The kinds of the ops that produce a kernel's results (a fusion's ROOT)."""
    if op.name != "xhlo.fusion":
        return [kind_of(op)]
    terminator = list(op.regions[0].blocks[0].operations)[-1]
    kinds = []
    for value in terminator.operands:
        owner = value.owner
        kinds.append(kind_of(owner.operation) if isinstance(owner, (ir.Operation, ir.OpView)) else "parameter")
    return kinds


def contains_reduce(op: ir.Operation) -> bool:
    return "reduce" in fused_kinds(op)


@dataclass(frozen=True)
class Body:
    """What the legality rules read off a kernel's body: its ops' kinds and its roots' kinds."""

    kinds: tuple[str, ...]
    roots: tuple[str, ...]

    @classmethod
    def of(cls, op: ir.Operation) -> "Body":
        return cls(tuple(fused_kinds(op)), tuple(root_kinds(op)))

    @functools.cached_property
    def expensive(self) -> bool:
        """`expensive_kinds` of its kinds, read once (the rules ask it of a producer with
        other users for each consumer offered to it, and a fusion's kinds grow with each merge)."""
        return expensive_kinds(self.kinds)


class Bodies:
    """Each kernel's `Body` for one pass run, a fusion's read once under its name: names are
    unique in a module and a fusion's body never changes under its name (a merge makes a new
    fusion), while the rules ask for the same consumer's body on every producer offered to it."""

    def __init__(self):
        self.by_name: dict[str, Body] = {}
        self.by_op_name: dict[str, Body] = {}  # an op that is no fusion: its own kind, one root

    def of(self, op: ir.Operation) -> Body:
        op_name = op.name
        if op_name != "xhlo.fusion":
            body = self.by_op_name.get(op_name)
            if body is None:
                body = self.by_op_name[op_name] = Body.of(op)
            return body
        if "name" not in op.attributes:
            return Body.of(op)
        name = ir.StringAttr(op.attributes["name"]).value
        body = self.by_name.get(name)
        if body is None:
            body = self.by_name[name] = Body.of(op)
        return body


def _shape(value_type: ir.Type) -> tuple[int, ...] | None:
    return tuple(ir.RankedTensorType(value_type).shape) if isinstance(value_type, ir.RankedTensorType) else None


def row_compatible(ops: list[ir.Operation]) -> bool:
    """Whether two kernels that both reduce, holding `ops` together (the producer's, then the
    consumer's), work row by row, so one kernel can run them.

    Rows: every reduce (single input) reduces the trailing dimensions of inputs of one shape S,
    leaving the row shape R; every broadcast takes a scalar, maps R's dimensions (or R's
    with the reduced ones kept as 1, a layer norm's keepdims mean) onto the leading ones, or
    the reduced dimensions' shape C onto the trailing ones (a layer norm's scale, the same in
    every row); every other value has shape S, R, R kept, C, or is a scalar, or is computed
    from iotas and constants alone (`index_only`: an attention's causal mask, whatever its
    shape and however broadcast, is a function of the element's position). Then each row's
    results depend on that row alone, and a kernel can compute a row's reductions and the
    elementwise work between them in one sweep (a softmax is one such kernel, as XLA's
    custom CPU fusions and its GPU softmax fusions make it).
    """
    inputs, rows = set(), set()
    for op in ops:
        if kind_of(op) != "reduce":
            continue
        if len(op.operands) != 2:
            return False
        shape = _shape(op.operands[0].type)
        dimensions = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        kept = len(shape) - len(dimensions)
        if not dimensions or dimensions != list(range(kept, len(shape))):
            return False
        inputs.add(shape)
        rows.add(shape[:kept])
    if len(inputs) != 1 or len(rows) != 1:
        return False
    full, row = inputs.pop(), rows.pop()
    kept = row + (1,) * (len(full) - len(row))  # a row's value with the reduced dimensions kept (keepdims)
    columns = full[len(row):]  # one value per position of a row, the same in every row (a layer norm's scale)
    allowed = {full, row, kept, columns, ()}
    positional: dict = {}
    for op in ops:
        if index_only(op, positional):
            continue
        if kind_of(op) == "broadcast" and not index_only(op.operands[0], positional):
            operand = _shape(op.operands[0].type)
            dimensions = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
            mapped = {(): [], row: list(range(len(row))), kept: list(range(len(full))), columns: list(range(len(row), len(full)))}
            if operand not in mapped or dimensions != mapped[operand]:
                return False
        if any(_shape(result.type) not in allowed for result in op.results):
            return False
    return True


INDEX_KINDS = frozenset({"iota", "constant", "broadcast", "reshape", "transpose", "compare", "select", "and", "or", "not",
                         "xor", "add", "subtract", "multiply", "convert", "maximum", "minimum"})


def index_only(node, memo: dict) -> bool:
    """Whether an op (or the op defining a value) computes from iotas and constants alone."""
    op = node.owner if isinstance(node, ir.Value) else node
    if isinstance(op, ir.OpView):
        op = op.operation
    if not isinstance(op, ir.Operation):
        return False  # a kernel's parameter
    if op not in memo:
        memo[op] = kind_of(op) in INDEX_KINDS and all(index_only(operand, memo) for operand in op.operands)
    return memo[op]


def element_count(value_type: ir.Type) -> int:
    if not isinstance(value_type, ir.ShapedType) or not ir.ShapedType(value_type).has_rank:
        return 1
    count = 1
    for size in ir.ShapedType(value_type).shape:
        count *= max(size, 0)
    return count


@dataclass(frozen=True)
class ContiguousCopy:
    """What a kernel that only copies reads: `size` bytes of `source` from byte `offset`."""

    source: ir.Value
    offset: int
    size: int


def contiguous_copy(op: ir.Operation) -> ContiguousCopy | None:
    """The byte range a kernel copies when all it does is copy one contiguous range of its one
    operand (row-major): a slice with unit strides whose every dimension after the first
    partial one is whole and every one before it has extent 1 (a stacked weight's layer),
    alone or followed by reshapes. Such a kernel is a memcpy (XLA's copy thunk), not a loop
    to compile; None for any other op."""
    chain = fused_ops(op) if op.name == "xhlo.fusion" else [op]
    if not chain or kind_of(chain[0]) != "slice" or any(kind_of(inner) not in ("reshape", "bitcast") for inner in chain[1:]):
        return None
    if len(op.results) != 1 or len(op.operands) != 1 or len(chain[0].operands) != 1:
        return None
    slice_op = chain[0]
    operand_type = slice_op.operands[0].type
    if not isinstance(operand_type, ir.RankedTensorType):
        return None
    shape = list(ir.RankedTensorType(operand_type).shape)
    starts, limits, strides = (list(ir.DenseI64ArrayAttr(slice_op.attributes[name])) for name in ("start_indices", "limit_indices", "strides"))
    extents = [limit - start for start, limit in zip(starts, limits)]
    element_bytes = max(1, (bit_width(ir.RankedTensorType(operand_type).element_type) + 7) // 8)  # as buffers hold them
    if any(stride != 1 for stride in strides) or 0 in extents:
        return None
    partial = [index for index, (extent, size) in enumerate(zip(extents, shape)) if extent != size]
    if partial and any(extent != 1 for extent in extents[:partial[-1]]):
        return None
    linear = 0
    for start, size in zip(starts, shape):
        linear = linear * size + start
    count = 1
    for extent in extents:
        count *= extent
    return ContiguousCopy(op.operands[0], linear * element_bytes, count * element_bytes)


def is_splat_constant(op: ir.Operation) -> bool:
    value = op.attributes["value"]
    return isinstance(value, ir.DenseElementsAttr) and ir.DenseElementsAttr(value).is_splat


def ancestor_in_block(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """`op`, or the op enclosing it, that sits directly in `block`; None when outside it."""
    op = op.operation
    while True:
        if op.block == block:
            return op
        parent = op.parent
        if parent is None or parent.name == "builtin.module":
            return None
        op = parent.operation


def users_in_block(op: ir.Operation) -> list[ir.Operation]:
    """The distinct ops of `op`'s block that use one of its results, in block order."""
    found = users_in_block_unordered(op)
    if len(found) < 2:
        return list(found)
    return sorted(found, key=functools.cmp_to_key(block_order))


def users_in_block_unordered(op: ir.Operation) -> set[ir.Operation]:
    """The distinct ops of `op`'s block that use one of its results (no order: sorting them
    asks the block where each stands)."""
    block = op.block
    found: set = set()
    for result in op.results:
        for use in result.uses:
            user = use.owner.operation
            if user.block != block:
                user = ancestor_in_block(user, block)
                if user is None:
                    continue
            found.add(user)
    return found


def block_order(first: ir.Operation, second: ir.Operation) -> int:
    """-1, 0 or 1 as `first` comes before, is, or comes after `second` in their block."""
    if first == second:
        return 0
    return -1 if first.is_before_in_block(second) else 1


def producers_in_block(op: ir.Operation) -> list[ir.Operation]:
    block = op.block
    found: list[ir.Operation] = []
    for value in op.operands:
        owner = value.owner
        if isinstance(owner, (ir.Operation, ir.OpView)) and owner.operation.block == block and owner.operation not in found:
            found.append(owner.operation)
    return found


def reachable(source: ir.Operation, target: ir.Operation, skip_direct: bool = False) -> bool:
    """Is there a path of uses from `source` to `target` within their block? With
    `skip_direct`, paths made of the single edge source -> target do not count. Ops after
    `target` are not followed (a path to it never passes them); the block keeps its ops'
    order, so asking it costs no walk over the block, and a query stays local to the path.
    The answer does not depend on the order the users are followed in, so they are not sorted."""
    stack = [u for u in users_in_block_unordered(source) if not (skip_direct and u == target)]
    seen: set = set()
    while stack:
        op = stack.pop()
        if op == target:
            return True
        if op in seen or target.is_before_in_block(op):
            continue
        seen.add(op)
        stack.extend(users_in_block_unordered(op))
    return False


def not_fusible_reason(op: ir.Operation, limits: FusionLimits) -> str | None:
    """Why `op` can take part in no fusion at all, or None."""
    kind = kind_of(op)
    if not op.name.startswith("xhlo."):
        return f"{op.name} is not an xhlo op"
    if kind in NOT_FUSIBLE_REASONS:
        return NOT_FUSIBLE_REASONS[kind]
    if kind == "fusion" and fusion_kind(op) not in ("loop", "input"):
        return f"it is a fusion of kind {fusion_kind(op)}"
    if kind not in FUSIBLE:
        return f"xhlo.{kind} is not a fusible op"
    if kind == "constant" and not is_splat_constant(op) and element_count(op.results[0].type) > limits.max_constant_elements:
        return f"it is a large constant ({element_count(op.results[0].type)} elements)"
    return None


def is_expensive(op: ir.Operation) -> bool:
    """XLA's IsExpensive, over a fusion's body: transcendental ops, reductions, gathers."""
    return expensive_kinds(fused_kinds(op))


EXPENSIVE_KINDS = TRANSCENDENTAL | {"reduce", "gather", "dynamic_update_slice"}


def expensive_kinds(kinds) -> bool:
    return not EXPENSIVE_KINDS.isdisjoint(kinds)


class IrKernels:
    """What the legality rules ask of two kernels, answered by their MLIR ops (`bodies`
    remembers the kernels' bodies over a pass run). Priority fusion asks its own graph of the
    block the same questions (`fusion_graph.FusionGraph`)."""

    def __init__(self, bodies: Bodies | None = None):
        self.body = bodies.of if bodies is not None else Body.of

    @staticmethod
    def same_block(producer: ir.Operation, consumer: ir.Operation) -> bool:
        return consumer.block == producer.block

    @staticmethod
    def not_fusible(op: ir.Operation, limits: FusionLimits) -> str | None:
        return not_fusible_reason(op, limits)

    kind = staticmethod(kind_of)

    @staticmethod
    def result_count(op: ir.Operation) -> int:
        return len(op.results)

    @staticmethod
    def updates_in_place(consumer: ir.Operation, producer: ir.Operation) -> bool:
        """Whether `consumer` updates `producer`'s result in place (dynamic-update-slice)."""
        updated = in_place_operand(consumer)
        return updated is not None and _is(defining_op(updated), producer)

    ops = staticmethod(fused_ops)

    @staticmethod
    def creates_cycle(producer: ir.Operation, consumer: ir.Operation) -> bool:
        return reachable(producer, consumer, skip_direct=True)

    @staticmethod
    def operand_count(producer: ir.Operation, consumer: ir.Operation) -> int:
        return fused_operand_count(producer, consumer)


def fusion_refusal(
    producer,
    consumer,
    *,
    duplicate: bool,
    limits: FusionLimits = FusionLimits(),
    bodies: Bodies | None = None,
    kernels=None,
) -> str | None:
    """None when `producer` may fuse into `consumer`, else why not (one sentence). The two are
    MLIR ops (`bodies` remembers the kernels' bodies over a pass run), or whatever `kernels`
    answers the rules' questions about (`IrKernels`' methods)."""
    if kernels is None:
        kernels = IrKernels(bodies)
        producer, consumer = producer.operation, consumer.operation
    if not kernels.same_block(producer, consumer):
        return "the consumer is in another computation"
    reason = kernels.not_fusible(producer, limits)
    if reason:
        return f"the producer is not fusible ({reason})"
    reason = kernels.not_fusible(consumer, limits)
    if reason:
        return f"the consumer is not fusible ({reason})"
    if kernels.kind(consumer) == "constant":
        return "the consumer is not fusible (a constant has no operands)"
    if kernels.result_count(producer) != 1:
        return "the producer has several results (multi-output producers are fused by xhlo-multi-output-fusion)"
    producer_body, consumer_body = kernels.body(producer), kernels.body(consumer)
    producer_roots = producer_body.roots
    if "dynamic_update_slice" in producer_roots:
        return "the producer is an in-place dynamic-update-slice, which must stay a fusion root"
    # the updated buffer (operand 0) must stay a separate buffer to be updated in place
    if "dynamic_update_slice" in consumer_body.roots and kernels.updates_in_place(consumer, producer):
        return "the consumer updates the producer's result in place (dynamic-update-slice)"
    if ("reduce" in producer_body.kinds and "reduce" in consumer_body.kinds
            and not (limits.row_fusion and not duplicate and row_compatible(kernels.ops(producer) + kernels.ops(consumer)))):
        return "both the producer and the consumer contain a reduce"
    if "reduce" in producer_roots and kernels.kind(consumer) == "reduce":
        return "both the producer and the consumer contain a reduce"
    if duplicate:
        if producer_body.expensive:
            return "the producer is expensive and has other users; fusing would duplicate it"
        if len(producer_body.kinds) > limits.max_duplicated_ops:
            return "the fusion would result in an overly large code duplication"
    elif kernels.creates_cycle(producer, consumer):
        return "fusion would create a cycle"
    size = len(producer_body.kinds) + len(consumer_body.kinds)
    # a constant taken in is a number in the kernel instead of an operand loaded from memory:
    # jax's randint divides by its span, which as an operand LLVM could not turn into a
    # multiply, and the kernel ran a scalar division per element
    if size > limits.max_fused_ops and set(producer_body.kinds) != {"constant"}:
        return f"the fusion would hold {size} ops, more than the maximum of {limits.max_fused_ops}"
    operands = kernels.operand_count(producer, consumer)
    if operands > limits.max_operands:
        return f"the fusion would have {operands} operands, more than the maximum of {limits.max_operands}"
    return None


def _is(a, b) -> bool:
    return a is not None and b is not None and a == b


def in_place_pair(op: ir.Operation) -> tuple[int, int] | None:
    """(operand, result) indices of a dynamic-update-slice, of a fusion with one rooted in it
    updating a fusion parameter, or of a custom call whose result aliases one of its operands
    (`output_operand_aliases`: jax's LAPACK calls overwrite a matrix they are given): the
    result may be written over that operand's buffer (XLA's in-place input/output pairs)."""
    if op.name == "xhlo.dynamic_update_slice":
        return (0, 0)
    if op.name == "xhlo.custom_call":
        return aliased_operand(op)
    if op.name != "xhlo.fusion":
        return None
    block = op.regions[0].blocks[0]
    terminator = list(block.operations)[-1]
    arguments = list(block.arguments)
    for result_index, value in enumerate(terminator.operands):
        root = defining_op(value)
        if root is not None and root.name == "xhlo.dynamic_update_slice" and root.operands[0] in arguments:
            return (arguments.index(root.operands[0]), result_index)
    return None


def aliased_operand(op: ir.Operation) -> tuple[int, int] | None:
    """(operand, result) of a custom call's one `output_operand_aliases` entry between whole
    values, or None."""
    if "output_operand_aliases" not in op.attributes:
        return None
    aliases = [stablehlo.OutputOperandAlias(alias) for alias in ir.ArrayAttr(op.attributes["output_operand_aliases"])]
    if len(aliases) != 1 or list(aliases[0].operand_tuple_indices) or len(aliases[0].output_tuple_indices) > 1:
        return None
    outputs = list(aliases[0].output_tuple_indices)
    return (aliases[0].operand_index, outputs[0] if outputs else 0)


def in_place_operand(op: ir.Operation) -> ir.Value | None:
    """The operand a dynamic-update-slice (or a fusion rooted in one) updates in place."""
    pair = in_place_pair(op)
    return op.operands[pair[0]] if pair else None


def fused_operand_count(producer: ir.Operation, consumer: ir.Operation) -> int:
    # the producer's results by value: asking each operand for its defining op makes an op
    # handle per operand (a legality check per producer and consumer offered)
    values: set = set(producer.results)
    for value in list(consumer.operands) + list(producer.operands):
        values.add(value)
    return len(values) - len(producer.results)


def elementwise_read_operands(fusion: ir.Operation, index: int = 0, positional: bool = False) -> list[ir.Value]:
    """Operands of a loop fusion that it reads only elementwise at the index it writes: every
    path of uses from the parameter to the fusion's root goes through elementwise ops of the
    result's shape (XLA's AreTransitiveUsesElementwiseOrTuple; an elementwise op feeding a
    transpose reads another index than the one written), converts included (a bf16 dot's f32
    result rounded, biased and widened again is still read where it is written). Such an
    operand, of the result's type, can give its buffer to the result (each element is read
    before it is overwritten). Only a fusion of ops its kernel computes in one loop nest shares
    an operand (`READ_WHERE_WRITTEN`): its kernel may keep a value it materializes (a
    reduction, a transpose) in the result's buffer before the root reads the operand there
    (`jnp.ptp`'s max - min read the minimum back as the maximum, `jax.scipy.special.spence`'s
    polynomial returned garbage). `index` picks the result of a multi-output fusion: its
    kernel reads an operand before any loop nest overwrites it (`overwritten_operands.py`
    joins sibling nests or reads a copy). With `positional`, a path may also go through
    reshapes and unit-dimension broadcasts, which keep each element at its position in
    row-major order, and through a gather's indices, one element gathered per index (jax's
    binary search gathers the midpoints of its bounds): the element at a position is still
    read only to compute the result there."""
    result_type = fusion.results[index].type
    if ("kind" not in fusion.attributes or ir.StringAttr(fusion.attributes["kind"]).value != "loop"
            or not isinstance(result_type, ir.RankedTensorType)):
        return []
    block = fusion.regions[0].blocks[0]
    allowed = READ_WHERE_WRITTEN | {"gather"} if positional else READ_WHERE_WRITTEN
    if any(kind_of(op) not in allowed for op in block.operations):
        return []
    shape = ir.RankedTensorType(result_type).shape
    return [operand for argument, operand in zip(block.arguments, fusion.operands)
            if argument.type == result_type
            and (reaches_root_at_its_position(argument) if positional else reaches_root_elementwise(argument, shape))]


def reaches_root_elementwise(value: ir.Value, shape: list[int]) -> bool:
    work, seen = [value], set()
    while work:
        users = [use.owner for use in work.pop().uses]
        if not users:
            return False
        for user in users:
            if user.name == "xhlo.return" or user in seen:
                continue
            result_type = user.results[0].type
            if (kind_of(user) not in ELEMENTWISE or not isinstance(result_type, ir.RankedTensorType)
                    or ir.RankedTensorType(result_type).shape != shape):
                return False
            seen.add(user)
            work.append(user.results[0])
    return True


def reaches_root_at_its_position(value: ir.Value) -> bool:
    """Whether every path of uses from `value` to a root keeps each element at its row-major
    position (`elementwise_read_operands`' `positional`)."""
    count = element_count(value.type)
    work, seen = [value], set()
    while work:
        current = work.pop()
        uses = list(current.uses)
        if not uses:
            return False
        for use in uses:
            user = use.owner
            if user.name == "xhlo.return" or user in seen:
                continue
            if not keeps_positions(user, use.operand_number, count):
                return False
            seen.add(user)
            work.append(user.results[0])
    return True


def keeps_positions(user: ir.Operation, operand: int, count: int) -> bool:
    """Whether `user`'s result element at each row-major position depends on its operand
    `operand` only at that position, and there are `count` of each."""
    result_type = user.results[0].type
    if not isinstance(result_type, ir.RankedTensorType) or element_count(result_type) != count:
        return False
    kind = kind_of(user)
    if kind in ELEMENTWISE:
        return list(ir.RankedTensorType(result_type).shape) == list(ir.RankedTensorType(user.operands[operand].type).shape)
    if kind in ("reshape", "bitcast"):
        return True
    if kind == "broadcast":
        dimensions = list(ir.DenseI64ArrayAttr(user.attributes["dimensions"]))
        return dimensions == sorted(dimensions)
    if kind == "gather":
        return operand == 1 and user.operands[0] != user.operands[1] and all(
            size == 1 for size in ir.DenseI64ArrayAttr(user.attributes["slice_sizes"]))
    return False
