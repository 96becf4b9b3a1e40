"""Legalize chlo ops (JAX's client ops: erf, lgamma, top_k, ...) into xhlo compositions.

Each rule builds the op's meaning from xhlo ops at the chlo op's location and returns the
replacement values; `legalize_chlo` applies the rule of every chlo op in the module. The
chlo ops arrive as unregistered generic ops (our toolkit has no chlo dialect); an op with no
rule is refused by name and location.
"""

from collections.abc import Callable

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase, live_ops

from mlirxla.dialects.xhlo.builder import XhloBuilder

ChloRule = Callable[[XhloBuilder, ir.Operation], list[ir.Value]]
CHLO_RULES: dict[str, ChloRule] = {}


def chlo_rule(name: str):
    """Register the composition of `chlo.<name>`."""

    def register(rule: ChloRule) -> ChloRule:
        CHLO_RULES[f"chlo.{name}"] = rule
        return rule

    return register


def collect_chlo(module: ir.Module) -> list[ir.Operation]:
    found = []

    def visit(op):
        if op.name.startswith("chlo."):
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.POST_ORDER)
    return found


def legalize_chlo(module: ir.Module) -> None:
    from . import chlo_rules  # noqa: F401  (registers the rules)

    for op in live_ops(collect_chlo(module)):
        rule = CHLO_RULES.get(op.name)
        if rule is None:
            raise MlirxlaError(f"unsupported op '{op.name}': no xhlo composition for it", location_text(op.location))
        with ir.InsertionPoint(op), op.location:
            replacements = rule(XhloBuilder(op.location), op)
        for old, new in zip(op.results, replacements):
            old.replace_all_uses_with(new)
        erase(op)
