"""An innermost loop's induction variable cast to i32 (an iota, a mask comparing positions
with lengths) becomes an i32 counter the loop carries.

linalg's index is the loop's `index` (i64) induction variable, truncated where the kernel
computes in i32. LLVM's induction-variable simplification removes the truncation by
widening the comparison instead (the other operand sign-extended to i64), so the loop
vectorizer widens a vector of i64 positions: a masked softmax's mask cost two vector adds,
two i64 compares and a mask merge per 16 floats, in each of its two passes. A counter of
the narrow type, started at the truncated lower bound and stepped by the truncated step,
wraps exactly as the truncation does (the same value every iteration), and the vectorizer
keeps it in 16 i32 lanes: one add and one compare.

Runs after row fusion (which leaves loops carrying values alone) on innermost `scf.for`
loops, for every `arith.index_cast` or `arith.index_castui` of their induction variable to
an integer narrower than 64 bits.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir, scf
from mlirxla.transforms.erasure import erase

CASTS = ("arith.index_cast", "arith.index_castui")


def count_in_narrow_integers(module: ir.Module) -> int:
    """Give every innermost loop of `module` a counter per narrow type its induction
    variable is cast to; how many loops changed."""
    changed = 0
    for loop in ops_named(module, "scf.for"):
        casts = narrow_casts(loop)
        if casts:
            with ir.InsertionPoint(loop), loop.location:
                add_counters(loop, casts)
            changed += 1
    return changed


def narrow_casts(loop: ir.Operation) -> list[ir.Operation]:
    """The casts of `loop`'s induction variable to narrow integers, when `loop` is innermost."""
    if len(ops_named(loop, "scf.for")) > 1:
        return []
    induction = loop.regions[0].blocks[0].arguments[0]
    return [use.owner for use in induction.uses
            if use.owner.name in CASTS and ir.IntegerType(use.owner.results[0].type).width < 64]


def cast(value: ir.Value, to: ir.Type) -> ir.Value:
    return ir.Operation.create("arith.index_cast", results=[to], operands=[value]).result


def add_counters(loop: ir.Operation, casts: list[ir.Operation]) -> None:
    """`loop` replaced by one that also carries a counter per narrow type in `casts`, each cast
    replaced by its type's counter."""
    lower, upper, step = loop.operands[0], loop.operands[1], loop.operands[2]
    carried = list(loop.operands)[3:]
    types = list(dict.fromkeys(cast_op.results[0].type for cast_op in casts))
    steps = [cast(step, kind) for kind in types]
    replacement = scf.ForOp(lower, upper, step, [cast(lower, kind) for kind in types] + carried)
    old_body, body = loop.regions[0].blocks[0], replacement.body
    counters = list(body.arguments)[1:1 + len(types)]
    for cast_op in casts:
        cast_op.results[0].replace_all_uses_with(counters[types.index(cast_op.results[0].type)])
        erase(cast_op)
    old_body.arguments[0].replace_all_uses_with(body.arguments[0])
    for old, new in zip(list(old_body.arguments)[1:], list(body.arguments)[1 + len(types):]):
        old.replace_all_uses_with(new)
    old_yield = list(old_body.operations)[-1]
    with ir.InsertionPoint(body):
        advanced = [ir.Operation.create("arith.addi", results=[kind], operands=[counter, kind_step]).result
                    for kind, counter, kind_step in zip(types, counters, steps)]
        scf.YieldOp(advanced + list(old_yield.operands))
    terminator = list(body.operations)[-1]
    for op in list(old_body.operations)[:-1]:
        op.operation.move_before(terminator)
    for old, new in zip(loop.results, list(replacement.results)[len(types):]):
        old.replace_all_uses_with(new)
    erase(loop)
