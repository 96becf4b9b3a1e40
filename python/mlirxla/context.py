"""The MLIR context every mlirxla stage works in: StableHLO, xhlo and check registered."""

from mlirxla.dialects.check import Check
from mlirxla.dialects.xhlo import Xhlo
from mlirxla.mlir import ir, stablehlo
from mlirxla.runtime import literals


def new_context() -> ir.Context:
    """A context with StableHLO, xhlo and check loaded; unknown dialects parse as opaque ops.

    Unregistered dialects are allowed so that modules carrying other dialects' attributes
    (sdy, mhlo, jax) parse; the front door refuses unknown ops explicitly.
    """
    literals.install_dense_caster()
    context = ir.Context()
    context.allow_unregistered_dialects = True
    stablehlo.register_dialect(context)
    with context:
        Xhlo.load()
        Check.load()
    return context
