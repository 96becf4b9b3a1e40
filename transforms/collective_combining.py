"""Combining independent collectives of one kind into one variadic collective: what XLA's
`AllReduceCombiner` and `AllGatherCombiner` share (`transforms/all_reduce_combiner.py`,
`transforms/all_gather_combiner.py` say what each may combine).

What it decides, and why:

* **Candidates** are the ops of one kind in one block whose *key* (what must be equal for
  one op to do the work of several: reducer, groups, channel kind, dims) is equal. A
  collective inside a while body or a reducer only meets collectives of its own block.
* **Independence**: a candidate joins a group only when it does not depend, through any
  chain of operands in the block (operands of ops nested in regions included), on a member;
  otherwise the combined op would have to run before its own operand. Members come in block
  order, so no member can depend on a later candidate.
* **Size**: a group grows while its results' bytes stay within the threshold (XLA's
  `combine_threshold_in_bytes`, which counts the output shape; an op alone over it is never
  combined) and its count within `threshold_count`.
* **Placement**: the combined op replaces the last member, where every member's operands
  exist. Ops between the first and the last member that use an earlier member's result
  (directly or through others) move after it, in order: none of them feeds a member, by
  independence. The combined op keeps the first member's channel and location.
* **One group at a time**: after each combination the block's dependences are read again,
  so that two groups can never be merged into a cycle (group A feeding a member of B while
  B feeds a member of A).

The report lists each combined group (members, operand shapes, result bytes) and the count of the
kind before and after, for the dump file the pass names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.errors import location_text
from mlirxla.ir_queries import defining_op, nested_ops
from mlirxla.mlir import ir

from .erasure import erase, identity
from .pass_base import PassReport, PassResult
from .spmd_builder import byte_size

SEGMENT_ATTRIBUTES = ("operandSegmentSizes", "resultSegmentSizes")


@dataclass
class CombinedGroup:
    kind: str
    members: list[str]
    shapes: list[str]
    bytes: int


@dataclass
class CombinerReport(PassReport):
    pass_name: str
    file_name: str
    kind: str
    threshold_bytes: int
    before: int = 0
    after: int = 0
    groups: list[CombinedGroup] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"{self.pass_name}: {self.kind} {self.before} -> {self.after} (threshold {self.threshold_bytes} bytes)", ""]
        lines.append("combined groups (operand shapes, result bytes; members in block order):")
        for group in self.groups:
            lines.append(f"  {len(group.members)} x {group.kind}: {', '.join(group.shapes)} ({group.bytes} bytes)")
            lines += [f"    {member}" for member in group.members]
        if not self.groups:
            lines.append("  none")
        return "\n".join(lines) + "\n"

    def dump_files(self) -> dict[str, str]:
        return {self.file_name: self.text()}


@dataclass(frozen=True)
class Combining:
    """What a combiner pass says about its kind: the op name, the key of an op (None: not a
    candidate) and the limits."""

    op_name: str
    key: Callable[[ir.Operation], Hashable | None]
    threshold_bytes: int
    threshold_count: int


def result_bytes(op: ir.Operation) -> int:
    return sum(byte_size(shape_of(v.type), element_of(v.type)) for v in op.results)


def describe(op: ir.Operation) -> str:
    return f"{op.name} at {location_text(op.location)}"


def combine_module(module: ir.Module, combining: Combining, report: CombinerReport) -> PassResult:
    """Combine in every block of the module; count the kind before and after (no report for
    a module without the kind: single-device programs' dumps stay as they were)."""
    report.before = sum(1 for op in nested_ops(module.operation) if op.name == combining.op_name)
    if report.before == 0:
        return PassResult(False)
    # the kind's own regions (reducers) hold no collectives, and members' regions go with them
    blocks = [block for op in nested_ops(module.operation) if op.name != combining.op_name
              for region in op.regions for block in region.blocks]
    changed = False
    for block in blocks:
        while (group := next_group(block, combining)) is not None:
            report.groups.append(combine(group))
            changed = True
    report.after = sum(1 for op in nested_ops(module.operation) if op.name == combining.op_name)
    return PassResult(changed, report)


def dependences(ops: list[ir.Operation], candidates: set[int]) -> dict[int, set[int]]:
    """Per op of a block (by identity), the candidates it depends on through operands in the
    block, its nested ops' operands included."""
    position = {identity(op): op for op in ops}
    depends: dict[int, set[int]] = {}
    for op in ops:
        found: set[int] = set()
        for inner in nested_ops(op):
            for value in inner.operands:
                producer = defining_op(value)
                key = identity(producer) if producer is not None else None
                if key in position and key in depends:
                    found |= depends[key]
                    if key in candidates:
                        found.add(key)
        depends[identity(op)] = found
    return depends


def next_group(block: ir.Block, combining: Combining) -> list[ir.Operation] | None:
    """The first group of two or more candidates that may be combined, in block order."""
    ops = list(block.operations)
    keyed = [(op, key) for op in ops if op.name == combining.op_name and (key := combining.key(op)) is not None]
    if len(keyed) < 2:
        return None
    depends = dependences(ops, {identity(op) for op, _ in keyed})
    for start, (first, key) in enumerate(keyed):
        group, total = [first], result_bytes(first)
        if total > combining.threshold_bytes:
            continue
        for op, other in keyed[start + 1:]:
            size = result_bytes(op)
            if other != key or total + size > combining.threshold_bytes or len(group) >= combining.threshold_count:
                continue
            if any(identity(member) in depends[identity(op)] for member in group):
                continue
            group.append(op)
            total += size
        if len(group) > 1:
            return group
    return None


def combine(group: list[ir.Operation]) -> CombinedGroup:
    """Replace `group` (block order) by one op with every member's operands, at the last
    member; users of earlier members in between move after it."""
    first, last = group[0], group[-1]
    summary = CombinedGroup(first.name.removeprefix("xhlo."), [describe(op) for op in group],
                            [f"{shape_of(v.type)}x{element_of(v.type)}" for op in group for v in op.operands],
                            sum(result_bytes(op) for op in group))
    operands = [v for op in group for v in op.operands]
    result_types = [r.type for op in group for r in op.results]
    attributes = {name: first.attributes[name] for name in first.attributes if name not in SEGMENT_ATTRIBUTES}
    with ir.InsertionPoint(last):
        combined = create_op(first.name, operands, result_types, attributes, first.location, region_count=len(first.regions))
    for old_region, new_region in zip(first.regions, combined.regions):
        for block in list(old_region.blocks):
            block.append_to(new_region)
    move_users_after(group, combined)
    results = list(combined.results)
    for op in group:
        for result in op.results:
            result.replace_all_uses_with(results.pop(0))
    for op in group:
        erase(op)
    return summary


def move_users_after(group: list[ir.Operation], combined: ir.Operation) -> None:
    """Ops between the first member and `combined` that use an earlier member's result,
    directly or through each other, moved (in order) to just after `combined`."""
    ops = list(combined.operation.block.operations)
    begin = next(i for i, op in enumerate(ops) if identity(op) == identity(group[0]))
    end = next(i for i, op in enumerate(ops) if identity(op) == identity(combined))
    tainted = {identity(op) for op in group[:-1]}
    moving = []
    for op in ops[begin + 1:end]:
        if identity(op) in tainted:
            continue
        uses = [defining_op(v) for inner in nested_ops(op) for v in inner.operands]
        if any(producer is not None and identity(producer) in tainted for producer in uses):
            tainted.add(identity(op))
            moving.append(op)
    anchor = combined
    for op in moving:
        op.move_after(anchor)
        anchor = op
