"""XLA's HloSharding as the `xhlo.sharding` string attribute."""

from mlirxla.mlir import ir


def sharding_problem(attr: ir.Attribute, result_count: int) -> str | None:
    if not isinstance(attr, ir.StringAttr):
        return f"xhlo.sharding must be a string in XLA's HloSharding syntax, got {attr}"
    return None
