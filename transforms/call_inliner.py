"""xhlo-call-inliner: replace each `xhlo.call` by the body of the computation it calls (XLA's
CallInliner).

A call site is inlined when its callee is a private function of the module with a single
block ending in `func.return`: the callee is cloned, its arguments are replaced by the call's
operands, its ops move in front of the call, and the call's results are replaced by the
returned values. Calls inside inlined bodies are inlined in turn. HLO has no recursion; should a
module have some anyway, calls of functions that reach themselves are left alone. Public callees are other entry points
and are left called. Conditional branch computations (`branch_computations`) are not calls:
they stay functions. After inlining, each callee that nothing refers to any more is removed.
Changed: any call inlined (removing callees only follows from that).
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.mlir import ir

from .dead_code_elimination import referenced_symbols
from .erasure import erase, live_ops
from .pass_base import ModulePass
from .rewriting import splice_block

# nesting depth of calls inlined in one run before the module is taken as recursive
MAX_ROUNDS = 64


def private_functions(module: ir.Module) -> dict[str, ir.Operation]:
    functions = {}
    for op in module.body.operations:
        if op.operation.name != "func.func" or "sym_visibility" not in op.attributes:
            continue
        if ir.StringAttr(op.attributes["sym_visibility"]).value == "private":
            functions[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation
    return functions


def callee_name(call: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def collect_calls(module: ir.Module) -> list[ir.Operation]:
    found = []

    def visit(op):
        if op.name == "xhlo.call":
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def recursive_functions(module: ir.Module, functions: dict[str, ir.Operation]) -> set[str]:
    """Private functions that can reach themselves through calls: inlining them never ends."""
    edges = {}
    for name, function in functions.items():
        callees = set()

        def visit(op, callees=callees):
            if op.name == "xhlo.call":
                callees.add(callee_name(op.operation))
            return ir.WalkResult.ADVANCE

        function.walk(visit)
        edges[name] = callees
    recursive = set()
    for start in edges:
        seen, stack = set(), list(edges[start])
        while stack:
            name = stack.pop()
            if name == start:
                recursive.add(start)
                break
            if name not in seen and name in edges:
                seen.add(name)
                stack.extend(edges[name])
    return recursive


def inlinable(call: ir.Operation, callee: ir.Operation | None) -> bool:
    if callee is None or len(callee.regions[0].blocks) != 1:
        return False
    block = callee.regions[0].blocks[0]
    if len(block.arguments) != len(call.operands):
        return False
    terminator = list(block.operations)[-1]
    return terminator.name == "func.return" and len(terminator.operands) == len(call.results)


def inline_call(call: ir.Operation, callee: ir.Operation) -> None:
    """Clone `callee` next to `call`, splice its body in place of the call, drop the clone."""
    with ir.InsertionPoint(call):
        clone = callee.clone()
    splice_block(clone.regions[0].blocks[0], call)
    erase(clone)


def remove_unreferenced(module: ir.Module, names: set[str]) -> None:
    used = referenced_symbols(module)
    for name, function in private_functions(module).items():
        if name in names and name not in used:
            erase(function)


@dataclass(frozen=True)
class CallInlinerPass(ModulePass):
    """Inlines calls of private computations, then removes callees left unreferenced. Changed: any call inlined."""

    name: ClassVar[str] = "xhlo-call-inliner"
    summary: ClassVar[str] = "inline xhlo.call of private computations and drop the callees left unused"

    def run(self, module: ir.Module) -> bool:
        inlined: set[str] = set()
        for _ in range(MAX_ROUNDS):
            functions = private_functions(module)
            recursive = recursive_functions(module, functions)
            calls = [
                c
                for c in collect_calls(module)
                if callee_name(c) not in recursive and inlinable(c, functions.get(callee_name(c)))
            ]
            if not calls:
                break
            for call in live_ops(calls):
                name = callee_name(call)
                inline_call(call, functions[name])
                inlined.add(name)
        remove_unreferenced(module, inlined)
        return bool(inlined)
