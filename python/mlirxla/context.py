"""The MLIR context every mlirxla stage works in: StableHLO, xhlo and check registered.

Every compile imports into a new context (so that the attributes it creates, weights
included, are freed with it). Loading a Python-defined dialect builds its IRDL definition op
by op and canonicalizes it, about 20 ms for xhlo, the largest fixed cost of a small
compile; the definition is the same in every context, so it is built once per process and
each later context parses it from bytecode (`load_dialect`).
"""

import io

from mlirxla.dialects.check import Check
from mlirxla.dialects.xhlo import Xhlo
from mlirxla.mlir import _cext, ext, ir, irdl, stablehlo
from mlirxla.runtime import literals

_DEFINITIONS: dict[type, bytes] = {}  # each dialect's canonical IRDL definition, as bytecode


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
        load_dialect(Xhlo)
        load_dialect(Check)
    return context


def load_dialect(dialect: type[ext.Dialect]) -> None:
    """`dialect.load()` in the current context, from the definition the first load built.

    What `ext.Dialect.load` does after building its definition, the same way: the ops'
    traits and verifiers attached and the types' and attributes' casters registered, which
    are per context; the Python classes of the dialect and its ops stay registered from the
    first load (they are per process)."""
    if dialect not in _DEFINITIONS:
        dialect.load()
        bytecode = io.BytesIO()
        dialect._mlir_module.operation.write_bytecode(bytecode)
        _DEFINITIONS[dialect] = bytecode.getvalue()
        return
    dialect._mlir_module = ir.Module.parse(_DEFINITIONS[dialect])  # held as `load` holds it
    irdl.load_dialects(dialect._mlir_module)
    for op in dialect.operations:
        op._attach_traits()
    for type_ in dialect.types:
        _cext.register_type_caster(ir.DynamicType.lookup_typeid(type_.type_name), replace=True)(type_)
    for attribute in dialect.attributes:
        _cext.register_type_caster(ir.DynamicAttr.lookup_typeid(attribute.attr_name), replace=True)(attribute)
