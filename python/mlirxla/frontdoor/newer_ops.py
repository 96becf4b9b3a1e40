"""StableHLO ops in a newer form than the toolkit's StableHLO dialect verifies: the spec's
variadic `collective_broadcast` (several operands, or a dynamic root as the last operand).

The toolkit refuses them while parsing ("requires a single operand"), so `rename` gives their
generic form an unregistered name first (`"stablehlo.collective_broadcast"` ->
`"stablehlo_next.collective_broadcast"`), and `legalize` turns them into the xhlo ops, which
verify them, when the rest of the module becomes xhlo.
"""

import re

from mlirxla.ir_queries import ops_in_dialect
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import live_ops

DIALECT = "stablehlo_next"
# a newer op's generic form with more than one operand
_VARIADIC = re.compile(r'"stablehlo\.(collective_broadcast)"\(([^()]*,[^()]*)\)')


def rename(text: str) -> str:
    return _VARIADIC.sub(lambda match: f'"{DIALECT}.{match.group(1)}"({match.group(2)})', text)


def legalize(module: ir.Module, legalize_generic) -> None:
    """Each renamed op becomes the xhlo op of its name, by `legalize_generic(op, name, renames)`."""
    for op in live_ops(ops_in_dialect(module, DIALECT)):
        legalize_generic(op, "xhlo." + op.name.removeprefix(DIALECT + "."), {})
