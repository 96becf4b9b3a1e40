"""An innermost loop whose mask compares its own position with a bound fixed for the loop
(a causal mask's `key <= query`, a padding mask's `key < length`) is split where the
comparison changes, so that each part computes only the branch it selects.

Why: a masked softmax computes its exponential for every position and then selects the
constant for the masked ones; under a causal mask half of them. Once the comparison is a
constant in a loop, LLVM folds the select, and the masked part's arithmetic, now invariant,
is hoisted out of it (its exponential computed once a row, the loop a store of a splat):
transformer_bf16's masked exponential kernel computes about 60% of its exponentials.

How: the comparison `cast(i) < b` (or <=, >, >=; signed, the index cast to an integer
wide enough for the loop's range, `b` defined outside the loop) holds on a prefix or a
suffix of the loop's range, ending at s = b, b + 1 clamped to the range. The loop
becomes three: the blocks of `BLOCK` positions before the block holding s, with the
comparison's prefix value; that block, as it was; the blocks after it, with the suffix
value. Splitting at block boundaries, not at s itself, keeps every part a whole number of
the vectorizer's 16 lanes times 4 interleaved vectors (an exact split left up to 63
positions each side to scalar code, an exponential each), and the prefix and the suffix run
block by block, a loop over blocks around a loop of one block, whose trip count LLVM sees:
each part is one vector loop, with no epilogue or scalar remainder to optimize and compile
(three unblocked parts made attention_mask's cold compile 2.0 -> 2.5-2.8x XLA's; blocked,
2.5-2.6x; two parts, the unmasked side keeping its select, 2.0-2.5x, but transformer_bf16's
kernel 10% slower than three). The positions run in the same order as before: results are
bit for bit those of the unsplit loop.

Which loops: innermost `scf.for` loops of step 1 and constant bounds spanning at least two
blocks (a whole number of them), carrying no values (a reduction's accumulator is memory by
then: `convert-linalg-to-loops` makes no loop-carried values), with math (`math.*`) or a division among their ops (work
a resolved select skips) and a comparison as above feeding a select. One comparison per
loop: the first in program order.
"""

from dataclasses import dataclass

from mlirxla.ir_queries import defining_op, is_inside, nested_ops, ops_named
from mlirxla.mlir import ir, scf
from mlirxla.transforms.erasure import erase

from .native_bf16_rounding import root_of

BLOCK = 64
EXPENSIVE = ("arith.divf",)
# predicate (i on the left) -> (holds on the prefix, offset of s from b)
SPLITS = {"slt": (True, 0), "sle": (True, 1), "sgt": (False, 1), "sge": (False, 0)}
# the same comparison with its operands swapped
SWAPPED = {"slt": "sgt", "sle": "sge", "sgt": "slt", "sge": "sle"}
PREDICATE_NAMES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


@dataclass
class MaskSplit:
    comparison: ir.Operation
    bound: ir.Value
    prefix_holds: bool
    offset: int  # s = bound + offset


def split_masked_loops(module: ir.Module) -> int:
    """Split every qualifying innermost loop of `module`; how many were split."""
    split = 0
    for loop in ops_named(module, "scf.for"):
        plan = split_of(loop)
        if plan is not None:
            with ir.InsertionPoint(loop), loop.location:
                split_loop(loop, plan)
            split += 1
    return split


def constant_index(value: ir.Value) -> int | None:
    op = defining_op(value)
    if op is None or op.name != "arith.constant" or not isinstance(value.type, ir.IndexType):
        return None
    return ir.IntegerAttr(op.attributes["value"]).value


def split_of(loop: ir.Operation) -> MaskSplit | None:
    """How `loop` splits, or None when it does not qualify."""
    body_ops = nested_ops(loop)[:-1]  # the walk visits the loop itself last
    if any(op.name == "scf.for" for op in body_ops):
        return None
    lower, upper, step = (constant_index(loop.operands[i]) for i in range(3))
    if len(loop.operands) > 3 or lower is None or upper is None or step != 1 or (upper - lower) % BLOCK \
            or upper - lower < 2 * BLOCK:
        return None
    if not any(op.name.startswith("math.") or op.name in EXPENSIVE for op in body_ops):
        return None
    stored = stored_memory(body_ops)
    induction = loop.regions[0].blocks[0].arguments[0]
    for op in body_ops:
        if op.name == "arith.cmpi" and any(use.owner.name == "arith.select" for use in op.results[0].uses):
            plan = mask_split(op, induction, loop, lower, upper, stored)
            if plan is not None:
                return plan
    return None


def mask_split(comparison: ir.Operation, induction: ir.Value, loop: ir.Operation, lower: int, upper: int,
               stored: set | None) -> MaskSplit | None:
    predicate = PREDICATE_NAMES[ir.IntegerAttr(comparison.attributes["predicate"]).value]
    left, right = comparison.operands[0], comparison.operands[1]
    if is_position(left, induction, lower, upper) and invariant(right, loop, stored):
        bound = right
    elif is_position(right, induction, lower, upper) and invariant(left, loop, stored):
        bound, predicate = left, SWAPPED.get(predicate)
    else:
        return None
    if predicate not in SPLITS:
        return None
    prefix_holds, offset = SPLITS[predicate]
    return MaskSplit(comparison, bound, prefix_holds, offset)


def is_position(value: ir.Value, induction: ir.Value, lower: int, upper: int) -> bool:
    """`value` is the induction variable, or its signed cast to an integer holding every
    position of the loop (so that comparing it is monotonic in the position)."""
    if value == induction:
        return True
    op = defining_op(value)
    if op is None or op.name != "arith.index_cast" or op.operands[0] != induction:
        return False
    width = value.type.width
    return -(1 << (width - 1)) <= lower and upper - 1 < (1 << (width - 1))


def invariant(value: ir.Value, loop: ir.Operation, stored: set | None) -> bool:
    """`value` is the same in every iteration of `loop`: defined outside it, or computed at the
    top of its body (run every iteration, so computing it once before the loop runs nothing
    the loop would not) by arithmetic, or by loads of memory no store of the loop can reach
    (`stored`: the memory the loop stores to, None when that is not known), from such values."""
    op = defining_op(value)
    if op is None:
        return value.owner != loop.regions[0].blocks[0]  # not the loop's own position or carried values
    if not is_inside(op, loop):
        return True
    if op.parent != loop:
        return False
    if op.name == "memref.load":
        root = root_of(op.operands[0])
        if stored is None or root is None or root in stored:
            return False
    elif not op.name.startswith("arith."):
        return False
    return all(invariant(operand, loop, stored) for operand in op.operands)


def stored_memory(body_ops: list[ir.Operation]) -> set | None:
    """The memory the loop stores to (`native_bf16_rounding.root_of`), when no other memory
    can overlap it (`llvm.noalias` arguments and allocations); None when an op may write
    memory otherwise or a store's memory may be another argument's."""
    stored = set()
    for op in body_ops:
        if op.name == "memref.store":
            root = root_of(op.operands[1])
            if root is None or root[0] not in ("private", "allocation"):
                return None
            stored.add(root)
        elif not (op.name.startswith(("arith.", "math.")) or op.name in ("memref.load", "scf.yield", "scf.if")):
            return None
    return stored


def hoisted(value: ir.Value, loop: ir.Operation) -> ir.Value:
    """`value` (invariant in `loop`) computed before the loop: its ops inside copied there."""
    op = defining_op(value)
    if op is None or not is_inside(op, loop):
        return value
    copy = op.clone(ip=ir.InsertionPoint(loop))
    for index, operand in enumerate(op.operands):
        copy.operands[index] = hoisted(operand, loop)
    return copy.results[0]


def index_constant(value: int) -> ir.Value:
    return ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                               attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), value)}).result


def arith(name: str, left: ir.Value, right: ir.Value) -> ir.Value:
    return ir.Operation.create(f"arith.{name}", results=[left.type], operands=[left, right]).result


def mixed_block_start(plan: MaskSplit, loop: ir.Operation, lower: int, upper: int) -> ir.Value:
    """The first position of the block holding s, the last block when s is past the range."""
    bound = hoisted(plan.bound, loop)
    if not isinstance(bound.type, ir.IndexType):
        bound = ir.Operation.create("arith.index_cast", results=[ir.IndexType.get()], operands=[bound]).result
    split = arith("addi", bound, index_constant(plan.offset)) if plan.offset else bound
    inside = arith("maxsi", arith("minsi", split, index_constant(upper)), index_constant(lower))
    if lower:
        inside = arith("subi", inside, index_constant(lower))
    block = arith("minui", arith("divui", inside, index_constant(BLOCK)), index_constant((upper - lower) // BLOCK - 1))
    start = arith("muli", block, index_constant(BLOCK))
    return arith("addi", start, index_constant(lower)) if lower else start


def split_loop(loop: ir.Operation, plan: MaskSplit) -> None:
    """Before `loop`: its prefix blocks and its mixed block; `loop` itself keeps the suffix
    blocks. The prefix and the suffix each run as a loop over their blocks around the loop of
    one block."""
    lower, upper = constant_index(loop.operands[0]), constant_index(loop.operands[1])
    mixed_start = mixed_block_start(plan, loop, lower, upper)
    mixed_end = arith("addi", mixed_start, index_constant(BLOCK))
    position = nested_ops(loop).index(plan.comparison)
    prefix = loop.clone()
    mixed = loop.clone()
    mixed.operands[0] = mixed_start
    mixed.operands[1] = mixed_end
    resolve(nested_ops(prefix)[position], plan.prefix_holds)
    resolve(plan.comparison, not plan.prefix_holds)
    block_by_block(prefix, loop.operands[0], mixed_start)
    block_by_block(loop, mixed_end, loop.operands[1])


def block_by_block(loop: ir.Operation, start: ir.Value, end: ir.Value) -> None:
    """`loop` over [start, end) (a whole number of blocks) as a loop over its blocks around
    `loop` over one block: the inner trip count is `BLOCK` where LLVM sees it, so the
    vectorizer makes one vector loop of it, with no epilogue and no scalar remainder (each
    a copy of the loop's arithmetic to optimize and compile)."""
    with ir.InsertionPoint(loop), loop.location:
        blocks = scf.ForOp(start, end, index_constant(BLOCK))
        with ir.InsertionPoint(blocks.body):
            first = blocks.induction_variable
            last = arith("addi", first, index_constant(BLOCK))
            terminator = scf.YieldOp([])
    loop.move_before(terminator)
    loop.operands[0] = first
    loop.operands[1] = last


def resolve(comparison: ir.Operation, holds: bool) -> None:
    with ir.InsertionPoint(comparison), comparison.location:
        value = ir.Operation.create("arith.constant", results=[ir.IntegerType.get_signless(1)],
                                    attributes={"value": ir.IntegerAttr.get(ir.IntegerType.get_signless(1), int(holds))})
    comparison.results[0].replace_all_uses_with(value.result)
    erase(comparison)
