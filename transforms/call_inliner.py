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

The front door inlines `func.call` with the same machinery (`inline_calls(module, "func.call",
every_function)`): MLIR's own inliner leaves a call in place when its callee holds an op of a
dialect without an inliner interface (an xhlo op made from a chlo one, an unregistered op).
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .dead_code_elimination import referenced_symbols
from .erasure import erase, live_ops
from .pass_base import ModulePass
from .rewriting import splice_block

# nesting depth of calls inlined in one run before the module is taken as recursive
MAX_ROUNDS = 64


def private_functions(module: ir.Module) -> dict[str, ir.Operation]:
    return {name: function for name, function in every_function(module).items() if is_private(function)}


def every_function(module: ir.Module) -> dict[str, ir.Operation]:
    return {ir.StringAttr(op.attributes["sym_name"]).value: op.operation for op in module.body.operations if op.operation.name == "func.func"}


def is_private(function: ir.Operation) -> bool:
    return "sym_visibility" in function.attributes and ir.StringAttr(function.attributes["sym_visibility"]).value == "private"


def callee_name(call: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def recursive_functions(functions: dict[str, ir.Operation], call_name: str) -> set[str]:
    """Functions that can reach themselves through calls: inlining them never ends."""
    edges = {}
    for name, function in functions.items():
        callees = set()

        def visit(op, callees=callees):
            if op.name == call_name:
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
    if not names:
        return  # nothing inlined, nothing to drop: no walk reading every op's attributes
    used = referenced_symbols(module)
    for name, function in private_functions(module).items():
        if name in names and name not in used:
            erase(function)


def inline_calls(module: ir.Module, call_name: str = "xhlo.call", callees=private_functions) -> set[str]:
    """Inline every `call_name` op whose callee (among `callees(module)`) is inlinable, calls
    inside inlined bodies included; drop the private callees left unreferenced. The names of
    the functions inlined."""
    inlined: set[str] = set()
    for _ in range(MAX_ROUNDS):
        found = ops_named(module, call_name)
        if not found:
            break  # (without walking every callee for the calls it makes)
        functions = callees(module)
        recursive = recursive_functions(functions, call_name)
        calls = [c for c in found if callee_name(c) not in recursive and inlinable(c, functions.get(callee_name(c)))]
        if not calls:
            break
        for call in live_ops(calls):
            name = callee_name(call)
            inline_call(call, functions[name])
            inlined.add(name)
    remove_unreferenced(module, inlined)
    return inlined


@dataclass(frozen=True)
class CallInlinerPass(ModulePass):
    """Inlines calls of private computations, then removes callees left unreferenced. Changed: any call inlined."""

    name: ClassVar[str] = "xhlo-call-inliner"
    summary: ClassVar[str] = "inline xhlo.call of private computations and drop the callees left unused"

    def run(self, module: ir.Module) -> bool:
        return bool(inline_calls(module))
