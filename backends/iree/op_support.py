"""What the iree backend refuses before IREE sees it: ops IREE 3.13 does not take, or takes
and gets wrong (each reason says which), with the op's location. The list and what was
seen are in docs/iree-backend.md."""

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import first_op_where

REFUSED_OPS = {
    "stablehlo.custom_call": "IREE runs no XLA custom calls",
    "stablehlo.infeed": "IREE has no infeed",
    "stablehlo.outfeed": "IREE has no outfeed",
    "stablehlo.send": "IREE has no host transfers",
    "stablehlo.recv": "IREE has no host transfers",
}


def refuse_unsupported(module) -> None:
    """Raise on the first op the backend refuses, naming it and where it is."""
    op = first_op_where(module, lambda op: op.name in REFUSED_OPS)
    if op is not None:
        raise MlirxlaError(f"the iree backend cannot compile '{op.name}': {REFUSED_OPS[op.name]}", location_text(op.location))
