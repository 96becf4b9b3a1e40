"""What a sort's comparator orders by: the keys of a lexicographic order, read off its region,
so that the host sort can hand them to numpy instead of calling the comparator per pair.

Comparators as jax writes them (`lax.sort` with `num_keys`, `jnp.lexsort`, complex and float
sorts) are lexicographic chains

    LT(k0) or (EQ(k0) and (LT(k1) or (EQ(k1) and ... LT(kn))))

where each comparison reads the two block arguments of one operand (`2i` and `2i + 1`), either
way round (GT, or LT with the arguments swapped, is descending), through the canonicalizing
selects jax puts on floats (-0.0 as +0.0, every NaN as one NaN, which is then the greatest
value) and through `real` / `imag` for complex keys. A key is a `SortKey`; a comparator of any
other shape is not understood (`comparator_keys` returns None) and the sort runs on the
reference interpreter instead.
"""

from dataclasses import dataclass

from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir

STRICT = ("LT", "GT")


@dataclass(frozen=True)
class SortKey:
    """One key: operand `operand` (or its real or imaginary `part`), ascending or not;
    `canonical` when -0.0/+0.0 and all NaNs compare equal (else IEEE total order)."""

    operand: int
    descending: bool
    part: str = "value"
    canonical: bool = True

    def as_dict(self) -> dict:
        return {"operand": self.operand, "descending": self.descending, "part": self.part, "canonical": self.canonical}


@dataclass(frozen=True)
class Reading:
    """What one compare operand reads: block argument `argument`, its `part`, canonicalized or not."""

    argument: int
    part: str
    canonical: bool


def reading(value: ir.Value) -> Reading | None:
    """Follow `value` back to a block argument through canonicalizing selects and real/imag."""
    part, canonical = "value", False
    while (op := defining_op(value)) is not None:
        if op.name == "xhlo.select":
            canonical, value = True, op.operands[2]
        elif op.name in ("xhlo.real", "xhlo.imag") and part == "value":
            part, value = op.name.removeprefix("xhlo."), op.operands[0]
        else:
            return None
    return Reading(ir.BlockArgument(value).arg_number, part, canonical)


def compared(op: ir.Operation | None, directions) -> tuple[SortKey, str] | None:
    """(the key, the direction) of a compare of one operand's two arguments."""
    if op is None or op.name != "xhlo.compare":
        return None
    direction = ir.StringAttr(op.attributes["comparison_direction"]).value
    left, right = (reading(v) for v in op.operands)
    if direction not in directions or left is None or right is None:
        return None
    if left.argument // 2 != right.argument // 2 or left.argument == right.argument or left.part != right.part:
        return None
    total_order = ir.StringAttr(op.attributes["compare_type"]).value == "TOTALORDER" if "compare_type" in op.attributes else False
    swapped = left.argument % 2 == 1
    descending = (direction == "GT") != swapped
    key = SortKey(left.argument // 2, descending, left.part, left.canonical or right.canonical or not total_order)
    return key, direction


def chain(value: ir.Value) -> list[SortKey] | None:
    op = defining_op(value)
    if (strict := compared(op, STRICT)) is not None:
        return [strict[0]]
    if op is None or op.name != "xhlo.or":
        return None
    for first, rest in (op.operands, reversed(list(op.operands))):
        strict = compared(defining_op(first), STRICT)
        conjunction = defining_op(rest)
        if strict is None or conjunction is None or conjunction.name != "xhlo.and":
            continue
        for equal, tail in (conjunction.operands, reversed(list(conjunction.operands))):
            tie = compared(defining_op(equal), ("EQ",))
            if tie is not None and (tie[0].operand, tie[0].part) == (strict[0].operand, strict[0].part):
                following = chain(tail)
                if following is not None:
                    return [strict[0], *following]
    return None


def comparator_keys(sort: ir.Operation) -> list[SortKey] | None:
    """The keys the sort's comparator orders by, most significant first; None when the
    comparator is not a lexicographic chain."""
    block = sort.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    return chain(terminator.operands[0])
