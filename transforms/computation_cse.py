"""xhlo-computation-cse: merge the identical ops MLIR's `cse` leaves alone (XLA's HloCSE on
instructions that call computations, and on custom calls).

MLIR's `cse` merges only ops it knows to be free of memory effects, the xhlo ops with the
Pure trait. Ops that carry a computation (reduce, reduce_window, sort, scatter, map,
select_and_scatter) and custom calls have no such trait: a custom call may have a side
effect, and an op's trait cannot depend on its attributes. XLA's HloCSE merges them all
unless the instruction has a side effect, comparing called computations structurally. jax
emits such twins: `eigh(x)[0]` and `eigh(x)[1]` in one function are two LAPACK calls.

Two ops merge when they sit in the same block, read the same values and have the same name,
attributes, result types and computations (compared op by op, values numbered from the
op's start). The later one's results
become the earlier one's; neither may have a side effect (a custom call with
`has_side_effect = true`, or one held in a region). `rng_bit_generator` merges too: the
same state gives the same bits. So do while loops (jax's `interp` twice on the same points
ran `searchsorted`'s binary search twice, 0.6 ms each on 50000 points), whose computations
may read values from outside: those must be the same values, read in the same order.
Changed: any op merged.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.mlir import ir

from .dead_code_elimination import has_side_effect, holds_side_effect
from .erasure import erase, live_ops
from .pass_base import ModulePass

MERGED = frozenset({"xhlo.reduce", "xhlo.reduce_window", "xhlo.sort", "xhlo.scatter", "xhlo.map",
                    "xhlo.select_and_scatter", "xhlo.custom_call", "xhlo.rng_bit_generator", "xhlo.while"})


def mergeable(op: ir.Operation) -> bool:
    return op.name in MERGED and not has_side_effect(op) and not holds_side_effect(op)


def op_key(op: ir.Operation) -> tuple:
    """What two ops share when one can stand for the other: their operands, attributes and
    result types, and for an op with computations their structure (`Computations`), values
    numbered from the op's start, and the values from outside they read."""
    computations = Computations()
    for region in op.regions:
        computations.region(region)
    return (*op_head(op, tuple(op.operands)), tuple(computations.parts), tuple(computations.captured))


def op_head(op: ir.Operation, operands: tuple) -> tuple:
    attributes = tuple(sorted(f"{name} = {op.attributes[name]}" for name in op.attributes))
    return op.name, operands, attributes, tuple(str(result.type) for result in op.results)


class Computations:
    """An op's regions as plain data: each op's name, operand numbers, attributes and result
    types, each block's argument types, region by region; a value defined inside numbered in
    order, one read from outside (a constant CSE moved out of a while loop's body) numbered
    apart and listed in `captured`."""

    def __init__(self):
        self.numbers: dict = {}
        self.captured: list = []
        self.parts: list = []

    def number(self, value: ir.Value) -> str:
        if value not in self.numbers:
            self.captured.append(value)
            self.numbers[value] = f"outside {len(self.captured)}"
        return self.numbers[value]

    def define(self, values) -> None:
        for value in values:
            self.numbers[value] = f"value {len(self.numbers)}"

    def region(self, region: ir.Region) -> None:
        self.parts.append("{")
        for block in region.blocks:
            self.define(block.arguments)
            self.parts.append(tuple(str(argument.type) for argument in block.arguments))
            for inner in block.operations:
                self.parts.append(op_head(inner, tuple(self.number(value) for value in inner.operands)))
                for nested in inner.regions:
                    self.region(nested)
                self.define(inner.results)
        self.parts.append("}")


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
