"""xhlo-algsimp: XLA's algebraic simplifier, its exact staples (AlgebraicSimplifier).

The rewrites live in `algsimp_patterns/`, one function per rewrite, grouped by op. The pass
sweeps the module (inner regions included, operands before users), tries the rewrites of
each op, and on a match replaces the op's result, erases the op and then every producer
left without uses (as XLA's ReplaceInstruction removes unused operands). It sweeps again
until a sweep changes nothing, at most `max_sweeps` times. Every rewrite is exact for the
element types it accepts: the module computes the same bits before and after (NaN payloads
aside), unless `ignore_signed_zeros` is set, but one, which XLA makes too: a float division
by a constant becomes a multiplication by its reciprocal (`divide_by_constant_as_multiply`,
off to keep the division's bits), so that results are XLA:CPU's.

Ops that carry an `xhlo.sharding` are left alone (the value replacing them may be sharded
differently). Changed: any op replaced.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import defining_op, nested_ops
from mlirxla.mlir import ir

from .algsimp_patterns import EVERY_OP, NO_MATCH, REWRITES
from .dead_code_elimination import is_dead
from .erasure import erase, identity, live_ops
from .pass_base import ModulePass


@dataclass(frozen=True)
class AlgebraicSimplifierPass(ModulePass):
    """Folds algebraic identities on xhlo ops. Changed: any op replaced."""

    name: ClassVar[str] = "xhlo-algsimp"
    summary: ClassVar[str] = "algebraic simplification: exact identities, shape-op chains, trivial dots and reductions"

    # Options (XLA's AlgebraicSimplifierOptions), in pipeline text as kebab case.
    max_sweeps: int = 25  # sweeps over the module before giving up on a fixed point (XLA's HloPassFix cap)
    ignore_signed_zeros: bool = False  # also fold float x + (+0.0), 0.0 + x, x - (-0.0): wrong only for x = -0.0
    enable_dot_strength_reduction: bool = True  # integer dots contracting only size-1 dims -> multiply of broadcasts
    fold_trivial_reductions: bool = True  # reduces over size-1 (or size-0) dims -> reshape / combine with init
    fold_splats: bool = True  # broadcast(splat constant) and iota along a size-1 dim -> splat constant
    max_splat_constant_elements: int = 16  # larger broadcasts of splats stay broadcasts (a constant is a buffer)
    divide_by_constant_as_multiply: bool = True  # float x / c -> x * (1 / c), inexact, as XLA rewrites it

    def run(self, module: ir.Module) -> bool:
        changed = False
        for _ in range(self.max_sweeps):
            if not self.sweep(module):
                break
            changed = True
        return changed

    def sweep(self, module: ir.Module) -> bool:
        """One pass over every op; whether some rewrite applied."""
        # post-order: an op's operands' producers and its nested ops come before it, so the
        # ops a rewrite erases have all been visited already
        operations = nested_ops(module)
        changed = False
        for op in live_ops(operations):
            if not op.name.startswith("xhlo.") or "xhlo.sharding" in op.attributes:
                continue
            matched = self.first_match(op, EVERY_OP + REWRITES.get(op.name, ()))
            if matched is not None:
                replace(op, *matched)
                changed = True
        return changed

    def first_match(self, op: ir.Operation, rewrites: tuple) -> tuple[ir.Value, str] | None:
        """The value the first of `rewrites` that matches `op` replaces it by, and its name.
        One insertion point and location for all of them (entering them per rewrite was most
        of a sweep: two bindings contexts made and entered, about 2 us, per op and rewrite)."""
        with ir.InsertionPoint(op), op.location:
            for rewrite in rewrites:
                replacement = rewrite(op, self)
                if replacement is not NO_MATCH:
                    return replacement, rewrite.__name__
        return None


def replace(op: ir.Operation, value: ir.Value | list[ir.Value], rewrite: str) -> None:
    """Replace `op`'s result by `value` (its results by a list of them), erase `op` and the
    producers it leaves unused."""
    values = value if isinstance(value, list) else [value]
    for result, new in zip(op.results, values, strict=True):
        if str(new.type) != str(result.type):
            raise MlirxlaError(f"xhlo-algsimp: {rewrite} replaced {result.type} by {new.type}", location_text(op.location))
    producers = unique(defining_op(v) for v in op.operands)
    for result, new in zip(op.results, values):
        result.replace_all_uses_with(new)
    erase(op)
    erase_unused(producers)


def unique(ops) -> list[ir.Operation]:
    """The ops of `ops` but None, each once, in order (found by identity: a concatenate of 128
    parts compared each producer with every one kept, 0.1 s a sweep of a long gradient)."""
    found: dict[int, ir.Operation] = {}
    for op in ops:
        if op is not None:
            found.setdefault(identity(op), op)
    return list(found.values())


def erase_unused(worklist: list[ir.Operation]) -> None:
    """Erase the ops of `worklist` that have become dead, and then their producers."""
    queued = {identity(op) for op in worklist}
    while worklist:
        op = worklist.pop()
        queued.discard(identity(op))
        if not is_dead(op):
            continue
        producers = unique(defining_op(v) for v in op.operands)
        erase(op)
        for producer in producers:
            if identity(producer) not in queued:
                queued.add(identity(producer))
                worklist.append(producer)
