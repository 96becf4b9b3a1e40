"""The MLIR context every mlirxla stage works in: StableHLO, xhlo and check registered.

A compile of a large input (weights as constants) imports into a new context, so that the
attributes it creates are freed with it. Small programs share one (`compile_context`): a
context costs about 10 ms to make (3.5 ms the MLIR context itself, the rest the dialects),
a quarter of a one-kernel program's cold compile; since a context keeps every attribute and
type it uniqued, the shared one is renewed every `SHARED_CONTEXT_COMPILES` compiles. Loading a Python-defined dialect builds its IRDL definition op
by op and canonicalizes it, about 20 ms for xhlo, the largest fixed cost of a small
compile; the definition is the same in every context, so it is built once per process and
each later context parses it from bytecode (`load_dialect`).

A pass manager initializes its passes on its first run in a context (the canonicalizer
freezes the patterns of every loaded dialect, each conversion builds its pattern set): about
a third of a small kernel's lowering when every run parsed a new one. Within
`reused_pass_managers(context)` (one compile), `pass_manager` parses each pipeline once.
"""

import contextlib
import contextvars
import io
import threading
from dataclasses import dataclass, field

from mlirxla.dialects.check import Check
from mlirxla.dialects.xhlo import Xhlo
from mlirxla.mlir import _cext, ext, ir, irdl, passmanager, stablehlo
from mlirxla.runtime import literals

_DEFINITIONS: dict[type, bytes] = {}  # each dialect's canonical IRDL definition, as bytecode


@dataclass
class _ReusedPassManagers:
    context: ir.Context
    by_pipeline: dict[str, passmanager.PassManager] = field(default_factory=dict)


_REUSED: contextvars.ContextVar[_ReusedPassManagers | None] = contextvars.ContextVar("reused_pass_managers", default=None)


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


SHARED_CONTEXT_COMPILES = 32
SHARED_CONTEXT_MAX_INPUT_BYTES = 1 << 20  # a larger program (constants) gets a context of its own


@dataclass
class _SharedContext:
    context: ir.Context | None = None
    compiles: int = 0


_SHARED = _SharedContext()
_SHARED_LOCK = threading.Lock()


def compile_context(input_bytes: int) -> ir.Context:
    """The context to import a program of `input_bytes` into: the shared one for a small
    program (renewed every `SHARED_CONTEXT_COMPILES` compiles), a new one for a large one."""
    if input_bytes > SHARED_CONTEXT_MAX_INPUT_BYTES:
        return new_context()
    with _SHARED_LOCK:
        if _SHARED.context is None or _SHARED.compiles >= SHARED_CONTEXT_COMPILES:
            _SHARED.context, _SHARED.compiles = new_context(), 0
        _SHARED.compiles += 1
        return _SHARED.context


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


@contextlib.contextmanager
def reused_pass_managers(context: ir.Context):
    """Within it, `pass_manager` parses each pipeline for `context` once. The pass managers
    are dropped when it ends: the caller keeps `context` alive past that (a pass manager
    outliving its context would free its passes' patterns after their context)."""
    token = _REUSED.set(_ReusedPassManagers(context))
    try:
        yield
    finally:
        _REUSED.reset(token)


def pass_manager(pipeline: str) -> passmanager.PassManager:
    """A pass manager for `pipeline` (MLIR's textual syntax) in the current context: the scope's
    when `reused_pass_managers` covers this context, else a new one."""
    reused = _REUSED.get()
    if reused is None or reused.context is not ir.Context.current:
        return passmanager.PassManager.parse(pipeline)
    if (manager := reused.by_pipeline.get(pipeline)) is None:
        manager = reused.by_pipeline[pipeline] = passmanager.PassManager.parse(pipeline)
    return manager
