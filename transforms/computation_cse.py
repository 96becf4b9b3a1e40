"""xhlo-computation-cse: merge the identical ops MLIR's `cse` leaves alone (XLA's HloCSE on
instructions that call computations, and on custom calls).

MLIR's `cse` merges only ops it knows to be free of memory effects, the xhlo ops with the
Pure trait. Ops that carry a computation (reduce, reduce_window, sort, scatter, map,
select_and_scatter) and custom calls have no such trait: a custom call may have a side
effect, and an op's trait cannot depend on its attributes. XLA's HloCSE merges them all
unless the instruction has a side effect, comparing called computations structurally. jax
emits such twins: `eigh(x)[0]` and `eigh(x)[1]` in one function are two LAPACK calls.

Two ops merge when they sit in the same block, read the same values and have the same name,
attributes, result types and computations (compared as text). The later one's results
become the earlier one's; neither may have a side effect (a custom call with
`has_side_effect = true`, or one held in a region). `rng_bit_generator` merges too: the
same state gives the same bits. Changed: any op merged.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.mlir import ir

from .dead_code_elimination import has_side_effect, holds_side_effect
from .erasure import erase, live_ops
from .pass_base import ModulePass

MERGED = frozenset({"xhlo.reduce", "xhlo.reduce_window", "xhlo.sort", "xhlo.scatter", "xhlo.map",
                    "xhlo.select_and_scatter", "xhlo.custom_call", "xhlo.rng_bit_generator"})


def mergeable(op: ir.Operation) -> bool:
    return op.name in MERGED and not has_side_effect(op) and not holds_side_effect(op)


def op_key(op: ir.Operation) -> tuple:
    """What two ops share when one can stand for the other: their operands, attributes and
    result types, and for an op with computations (each isolated from above) its text printed
    on its own, where its values are numbered from its start and outside operands print
    alike."""
    attributes = tuple(sorted(f"{name} = {op.attributes[name]}" for name in op.attributes))
    computations = op.get_asm(print_generic_op_form=True, use_local_scope=True) if len(op.regions) else ""
    return op.name, tuple(op.operands), attributes, tuple(str(result.type) for result in op.results), computations


def merge_in_block(block: ir.Block) -> bool:
    first_of: dict[tuple, ir.Operation] = {}
    changed = False
    for op in live_ops(block):
        for region in op.regions:
            for inner in region.blocks:
                changed |= merge_in_block(inner)
        if not mergeable(op):
            continue
        key = op_key(op)
        kept = first_of.setdefault(key, op)
        if kept is op:
            continue
        for result, kept_result in zip(op.results, kept.results):
            result.replace_all_uses_with(kept_result)
        erase(op)
        changed = True
    return changed


@dataclass(frozen=True)
class ComputationCsePass(ModulePass):
    """Merges identical side-effect-free ops that call computations, and custom calls.
    Changed: any op merged."""

    name: ClassVar[str] = "xhlo-computation-cse"
    summary: ClassVar[str] = "merge identical reduces, sorts, scatters and side-effect-free custom calls"

    def run(self, module: ir.Module) -> bool:
        changed = False
        for function in module.body.operations:
            for region in function.regions:
                for block in region.blocks:
                    changed |= merge_in_block(block)
        return changed
