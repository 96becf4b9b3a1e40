"""xhlo-while-loop-simplifier: shrink and remove while loops whose behaviour is known at compile
time (XLA's WhileLoopSimplifier, the parts JAX programs need).

Two rewrites, tried on each `xhlo.while`, innermost loops first:

1. Loops with a known trip count of 0 or 1 disappear. The trip count is known when the cond
   returns `compare(i, N)` (either operand order, LT/LE/GT/GE) of a carried value `i` and a
   scalar integer constant `N`, `i` starts at an integer constant, and the body's next `i` is
   `i + s` or `i - s` for a constant `s` (the induction variable JAX emits for `fori_loop`
   and `scan`: `i = 0; while i < N: i = i + 1`). The count is computed in closed form from
   those constants, with the type's range checked (a wrap-around makes the count unknown);
   the thunk emitter records it on `while` thunks too (a GPU runs such a loop without reading
   its predicate back).
   Trip count 0: the loop's results are its init values. Trip count 1: the body is inlined
   once in front of the loop, its arguments replaced by the init values, and the loop's results
   by what the body returns. The cond has no effect to keep (it only computes a predicate).

2. Dead carried values are dropped. Carried value k is dead when the loop's result k is
   unused, the cond never reads it, and in the body it feeds only ops that have no side effect
   and end in the returned values of dead carried values (itself passed through, or a value
   computed from itself). The dead set is found as a fixed point (a value that feeds a live
   one is live), the loop is rebuilt with fewer carried values, and the body ops left without
   users are removed. A loop with an `xhlo.sharding` on several results is left alone (its
   tuple sharding would need rewriting).

Changed: any loop removed, inlined or rebuilt with fewer carried values.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.ir_queries import defining_op, first_op_where, ops_named
from mlirxla.mlir import ir
from mlirxla.runtime import literals

from .dead_code_elimination import has_side_effect, is_dead
from .erasure import erase, live_ops
from .pass_base import ModulePass
from .rewriting import splice_block

# comparison direction when the operands are swapped: N < i is i > N
SWAPPED = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}
COMPARE = {
    "LT": lambda a, b: a < b,
    "LE": lambda a, b: a <= b,
    "GT": lambda a, b: a > b,
    "GE": lambda a, b: a >= b,
}


def argument_index(value: ir.Value, block: ir.Block) -> int | None:
    """The position of `value` among `block`'s arguments, or None if it is not one of them."""
    for index, argument in enumerate(block.arguments):
        if argument == value:
            return index
    return None


def scalar_integer(value: ir.Value) -> int | None:
    """The value of a scalar integer `xhlo.constant`, or None."""
    op = defining_op(value)
    if op is None or op.name != "xhlo.constant":
        return None
    type_ = ir.RankedTensorType(value.type)
    if type_.rank != 0 or not isinstance(type_.element_type, ir.IntegerType):
        return None
    array = literals.to_numpy(op.attributes["value"])
    return int(np.asarray(array).reshape(()))


def integer_range(type_: ir.Type) -> tuple[int, int]:
    element = ir.IntegerType(ir.RankedTensorType(type_).element_type)
    width = element.width
    if element.is_unsigned:
        return 0, 2**width - 1
    if width == 1:
        return -1, 0
    return -(2 ** (width - 1)), 2 ** (width - 1) - 1


def terminator(block: ir.Block) -> ir.Operation:
    return list(block.operations)[-1].operation


def cond_block(loop: ir.Operation) -> ir.Block:
    return loop.regions[0].blocks[0]


def body_block(loop: ir.Operation) -> ir.Block:
    return loop.regions[1].blocks[0]


# ---------------------------------------------------------------------------- trip count


def induction_step(loop: ir.Operation, index: int) -> int | None:
    """s when the body returns `i + s` (or `i - s` as -s) for carried value `index`, else None."""
    body = body_block(loop)
    next_value = terminator(body).operands[index]
    op = defining_op(next_value)
    if op is None or op.name not in ("xhlo.add", "xhlo.subtract") or op.block != body:
        return None
    lhs, rhs = op.operands
    if argument_index(lhs, body) == index and (step := scalar_integer(rhs)) is not None:
        return step if op.name == "xhlo.add" else -step
    if op.name == "xhlo.add" and argument_index(rhs, body) == index and (step := scalar_integer(lhs)) is not None:
        return step
    return None


def trip_count(loop: ir.Operation) -> int | None:
    """How many times the body runs, when an induction variable proves it (XLA's
    ComputeWhileLoopTripCount): the condition compares a carried integer with a constant, the
    loop starts it at a constant and the body adds a constant to it. None otherwise, and for a
    loop that would only end by wrapping around."""
    cond = cond_block(loop)
    predicate = defining_op(terminator(cond).operands[0])
    if predicate is None or predicate.name != "xhlo.compare":
        return None
    direction = ir.StringAttr(predicate.attributes["comparison_direction"]).value
    lhs, rhs = predicate.operands
    index, bound = argument_index(lhs, cond), scalar_integer(rhs)
    if index is None or bound is None:
        index, bound, direction = argument_index(rhs, cond), scalar_integer(lhs), SWAPPED.get(direction)
    if index is None or bound is None or direction not in COMPARE:
        return None
    start = scalar_integer(loop.operands[index])
    step = induction_step(loop, index)
    if start is None or step is None:
        return None
    low, high = integer_range(loop.operands[index].type)
    unsigned = "compare_type" in predicate.attributes and ir.StringAttr(predicate.attributes["compare_type"]).value == "UNSIGNED"
    if unsigned:  # a signed value compared as unsigned: counted only where both readings agree
        if min(start, bound) < 0:
            return None
        low = max(low, 0)
    return iterations(start, step, bound, direction, low, high)


def iterations(start: int, step: int, bound: int, direction: str, low: int, high: int) -> int | None:
    """The iterations of `i = start; while i <direction> bound: i += step` in [low, high]."""
    if not COMPARE[direction](start, bound):
        return 0
    if step == 0 or (direction in ("LT", "LE")) != (step > 0):
        return None
    distance, stride = abs(bound - start), abs(step)
    count = distance // stride + 1 if direction in ("LE", "GE") else -(-distance // stride)
    return count if low <= start + count * step <= high else None


def skip_loop(loop: ir.Operation) -> None:
    """Trip count 0: the results are the init values."""
    for result, init in zip(loop.results, loop.operands):
        result.replace_all_uses_with(init)
    erase(loop)


def inline_body_once(loop: ir.Operation) -> None:
    """Trip count 1: the body runs once on the init values, in front of the loop."""
    splice_block(body_block(loop), loop)


def remove_known_trip_count(loop: ir.Operation) -> bool:
    count = trip_count(loop)
    if count == 0:
        skip_loop(loop)
    elif count == 1:
        inline_body_once(loop)
    else:
        return False
    return True


# ---------------------------------------------------------------------------- dead carried values


def top_level_user(user: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """The ancestor of `user` that sits directly in `block` (None if it is outside)."""
    op = user
    while op is not None:
        if op.block == block:
            return op
        parent = op.parent
        op = parent.operation if parent is not None else None
    return None


def feeds_only(argument: ir.Value, body: ir.Block, dead: set[int]) -> bool:
    """Whether `argument` reaches nothing in `body` but side-effect-free ops and dead returns."""
    root = terminator(body)
    work, seen = [argument], []
    while work:
        value = work.pop()
        for use in value.uses:
            user = top_level_user(use.owner.operation, body)
            if user is None:
                return False
            if user == root:
                if use.operand_number not in dead:
                    return False
                continue
            if any(user == s for s in seen):
                continue
            seen.append(user)
            if first_op_where(user, has_side_effect) is not None:
                return False
            work.extend(user.results)
    return True


def dead_carried_values(loop: ir.Operation) -> set[int]:
    cond, body = cond_block(loop), body_block(loop)
    dead = {
        i
        for i in range(len(loop.operands))
        if not list(loop.results[i].uses) and not list(cond.arguments[i].uses)
    }
    changed = True
    while changed:
        changed = False
        for i in sorted(dead):
            if not feeds_only(body.arguments[i], body, dead):
                dead.discard(i)
                changed = True
    return dead


def remove_dead_ops(block: ir.Block) -> None:
    for op in live_ops(reversed(list(block.operations))):
        if is_dead(op):
            erase(op)


def remove_carried_values(loop: ir.Operation, dead: set[int]) -> None:
    keep = [i for i in range(len(loop.operands)) if i not in dead]
    cond, body = cond_block(loop), body_block(loop)
    root = terminator(body)
    with ir.InsertionPoint(root):
        create_op("xhlo.return", [root.operands[i] for i in keep], [], {}, root.location)
    erase(root)
    remove_dead_ops(body)
    for i in sorted(dead, reverse=True):
        cond.erase_argument(i)
        body.erase_argument(i)
    attributes = {}
    for name in loop.attributes:
        if name in ("operandSegmentSizes", "resultSegmentSizes"):
            continue
        if name == "result_layouts":
            layouts = list(ir.ArrayAttr(loop.attributes[name]))
            attributes[name] = ir.ArrayAttr.get([layouts[i] for i in keep])
        else:
            attributes[name] = loop.attributes[name]
    with ir.InsertionPoint(loop):
        new = create_op(
            "xhlo.while",
            [loop.operands[i] for i in keep],
            [loop.results[i].type for i in keep],
            attributes,
            loop.location,
            region_count=2,
        )
    cond.append_to(new.regions[0])
    body.append_to(new.regions[1])
    for position, i in enumerate(keep):
        loop.results[i].replace_all_uses_with(new.results[position])
    erase(loop)


def remove_dead_carried_values(loop: ir.Operation) -> bool:
    if "xhlo.sharding" in loop.attributes and len(loop.results) > 1:
        return False
    dead = dead_carried_values(loop)
    if not dead:
        return False
    remove_carried_values(loop, dead)
    return True


@dataclass(frozen=True)
class WhileLoopSimplifierPass(ModulePass):
    """Removes loops that run 0 or 1 times and carried values nothing needs. Changed: any loop rewritten."""

    name: ClassVar[str] = "xhlo-while-loop-simplifier"
    summary: ClassVar[str] = "remove while loops with trip count 0 or 1 and dead carried values"

    def run(self, module: ir.Module) -> bool:
        loops = ops_named(module, "xhlo.while")
        changed = False
        with module.context, ir.Location.unknown():
            for loop in live_ops(loops):
                changed = remove_known_trip_count(loop) or remove_dead_carried_values(loop) or changed
        return changed
