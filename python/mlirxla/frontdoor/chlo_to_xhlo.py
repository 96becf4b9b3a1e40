"""Legalize chlo ops (JAX's client ops: erf, lgamma, top_k, ...) into xhlo compositions.

Each rule (`chlo_rules.CHLO_RULES`) builds the op's meaning from xhlo ops at the chlo op's
location and returns the replacement values; `legalize_chlo` applies the rule of every chlo op
in the module. The chlo ops arrive as unregistered generic ops (our toolkit has no chlo
dialect); an op with no rule is refused by name and location.
"""

from mlirxla.dialects.xhlo.builder import XhloBuilder
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import ops_in_dialect
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase, live_ops

from .chlo_rules import CHLO_RULES


def legalize_chlo(module: ir.Module) -> None:
    for op in live_ops(ops_in_dialect(module, "chlo")):
        rule = CHLO_RULES.get(op.name)
        if rule is None:
            raise MlirxlaError(f"unsupported op '{op.name}': no xhlo composition for it", location_text(op.location))
        with ir.InsertionPoint(op), op.location:
            replacements = rule(XhloBuilder(op.location), op)
        for old, new in zip(op.results, replacements):
            old.replace_all_uses_with(new)
        erase(op)
