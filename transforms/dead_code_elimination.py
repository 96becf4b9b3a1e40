"""xhlo-dce: remove dead ops and dead computations (XLA's HloDCE).

An op is dead when none of its results is used and it has no side effect; side effects are
`custom_call` with `has_side_effect = true`, `rng` (its state is implicit), infeed, outfeed,
send and recv, and collectives with a `channel_handle` (they talk to other programs, as
XLA's HloChannelInstruction); a loop or conditional holding one, in its regions or in a
computation it calls, is kept too. Ops without
results (the check ops, terminators) are never dead. Removing one dead op can make its
operands' producers dead, so ops are visited from the last to the first, inner regions
included. A computation is dead when it is a private function that nothing refers to.
Changed: any op or function removed.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.ir_queries import first_op_where
from mlirxla.mlir import ir

from .erasure import erase, live_ops
from .pass_base import ModulePass

SIDE_EFFECTING = frozenset({"xhlo.rng", "xhlo.infeed", "xhlo.outfeed", "xhlo.send", "xhlo.recv"})


def has_side_effect(op: ir.Operation) -> bool:
    if op.name in SIDE_EFFECTING:
        return True
    if op.name == "xhlo.custom_call" and "has_side_effect" in op.attributes:
        return ir.BoolAttr(op.attributes["has_side_effect"]).value
    return "channel_handle" in op.attributes


def is_dead(op: ir.Operation) -> bool:
    if not op.name.startswith("xhlo.") or len(op.results) == 0 or has_side_effect(op):
        return False
    return all(not list(result.uses) for result in op.results) and not holds_side_effect(op)


def holds_side_effect(op: ir.Operation, visited: set[str] | None = None) -> bool:
    """Whether a side-effecting op runs inside `op`: in its regions (a while body) or in a
    computation it calls (a conditional's branches, a call), as XLA's HloDCE keeps a loop
    whose body prints although nothing reads its results (jax.debug.print in a fori_loop)."""
    if first_op_where(op, has_side_effect) is not None:
        return True
    visited = set() if visited is None else visited
    module = enclosing_module(op)
    if module is None:
        return False
    functions = None
    for name in sorted(called_symbols(op) - visited):
        visited.add(name)
        functions = functions if functions is not None else {
            ir.StringAttr(f.attributes["sym_name"]).value: f.operation for f in module.regions[0].blocks[0].operations
            if f.operation.name == "func.func"}
        if name in functions and holds_side_effect(functions[name], visited):
            return True
    return False


def enclosing_module(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "builtin.module":
        parent = parent.parent
    return parent


def collect_symbols(attr: ir.Attribute, names: set[str]) -> None:
    """The function names `attr` holds (a symbol reference, or an array of them) into `names`."""
    if isinstance(attr, ir.FlatSymbolRefAttr):
        names.add(attr.value)
    elif isinstance(attr, ir.ArrayAttr):
        for element in attr:
            collect_symbols(element, names)


def called_symbols(op: ir.Operation) -> set[str]:
    names: set[str] = set()

    def visit(inner):
        for name in inner.attributes:
            collect_symbols(inner.attributes[name], names)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return names


def ops_in_reverse(module: ir.Module) -> list[ir.Operation]:
    found = []

    def visit(op):
        found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return list(reversed(found))


def referenced_symbols(module: ir.Module) -> set[str]:
    """Names of the functions some op refers to (callee, branch computations, ...)."""
    names: set[str] = set()

    def visit(op):
        if op.operation.name != "func.func":
            for name in op.attributes:
                collect_symbols(op.attributes[name], names)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return names


def remove_dead_functions(module: ir.Module) -> bool:
    """Erase the private functions nothing refers to, until none is left. A module without
    private functions is not walked for references (every op's attributes read)."""
    changed = True
    removed = False
    while changed:
        changed = False
        private = [op for op in module.body.operations if op.operation.name == "func.func" and "sym_visibility" in op.attributes
                   and ir.StringAttr(op.attributes["sym_visibility"]).value == "private"]
        if not private:
            break
        used = referenced_symbols(module)
        for op in private:
            if ir.StringAttr(op.attributes["sym_name"]).value not in used:
                erase(op)
                changed = removed = True
    return removed


@dataclass(frozen=True)
class DeadCodeEliminationPass(ModulePass):
    """Removes unused side-effect-free xhlo ops and unreferenced private functions."""

    name: ClassVar[str] = "xhlo-dce"
    summary: ClassVar[str] = "dead code elimination: unused side-effect-free ops and unreferenced computations"

    def run(self, module: ir.Module) -> bool:
        changed = False
        for op in live_ops(ops_in_reverse(module)):
            if is_dead(op):
                erase(op)
                changed = True
        return remove_dead_functions(module) or changed
