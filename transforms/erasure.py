"""Erasing ops while holding handles: the one safe way for passes, and a checker that proves it.

The toolkit's MLIR Python bindings keep no table of live operations: every `.operation` is a
fresh handle on the C++ op, and erasing the op through one handle leaves every other handle
pointing at freed memory. Reading one (`op.name`) reads whatever lives there now, or kills
the process: a pass that walked a snapshot of a block and met a consumer an earlier fusion
had erased segfaulted on the LU gradient. So passes follow two rules, which this module makes
the easy way:

- erase with `erase(op)`, never `op.erase()`: it records the op and every op nested in it as
  erased in the running pass's books;
- walk with `live_ops(ops)`: a snapshot that skips every op erased after the snapshot was
  taken, and that remembers the op being processed, so that an exception inside the pass
  becomes an error naming the pass and that op's location (`stage`, which the pipeline
  runner and the front door run every step in).

Ops are identified by `identity(op)`, the C++ pointer read from the handle's capsule, which
reads nothing behind the handle (`hash(op)` and `==` do read the op, and change or crash once
it is freed). Each erasure carries a sequence number: an op allocated later at a freed address
is only skipped by snapshots taken before that erasure, which never held it.

The checker (`stage(..., checking=True)`; `mlirxla-opt --check-erasure`,
`MLIRXLA_CHECK_ERASURE=1`, which the test suite sets) makes a broken rule loud instead of lucky:
`erase` does not free the op but buries it (its operands rewired to placeholders, so no live
value keeps a use from it, and moved into a graveyard module freed when the pass ends), and
every access through a handle of a buried op (name, attributes, operands, results, regions,
parent, block, location, printing, moving, erasing again) raises `UseAfterErase` naming the
pass and the op. Erasing an op whose results are still used is refused there too.
"""

import contextlib
import ctypes
import os
import threading
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import nested_ops
from mlirxla.mlir import ir


class UseAfterErase(MlirxlaError):
    """A handle of an op the running pass erased was used (checking mode)."""


@dataclass
class Erasures:
    """The books of one pass run: what it erased, and what it was processing."""

    stage: str
    checking: bool = False
    sequence: int = 0
    erased_at: dict[int, int] = field(default_factory=dict)  # op identity -> erasure sequence
    current: ir.Operation | None = None
    current_identity: int = 0
    current_since: int = 0
    # filled in when the current op itself is erased: its name and location (an attribute of
    # the context, which outlives the op), read as text only when an error needs it
    current_where: tuple[str, ir.Location] | None = None
    graveyard: ir.Module | None = None
    buried: dict[int, str] = field(default_factory=dict)  # identity -> "name at location"
    placeholders: dict[str, ir.Value] = field(default_factory=dict)

    def erased_since(self, identity: int, sequence: int) -> bool:
        return self.erased_at.get(identity, -1) > sequence

    def where(self) -> tuple[str, str] | None:
        """(op name, location) of the op the pass was processing, or None."""
        if self.current_where is not None:
            name, location = self.current_where
            return name, location_text(location)
        if self.current is None or self.erased_since(self.current_identity, self.current_since):
            return None
        return self.current.name, location_text(self.current.location)


_state = threading.local()


def active() -> Erasures | None:
    return getattr(_state, "erasures", None)


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]


_capsule_names: dict[type, bytes] = {}  # the Python class of an op -> its capsules' name


def identity(op) -> int:
    """The address of the C++ operation behind `op`, read without touching the operation.
    The capsule's name is the same for every op of a class, so it is asked once per class
    (the fusion passes ask for hundreds of thousands of identities)."""
    capsule = op._CAPIPtr
    name = _capsule_names.get(type(op))
    if name is None:
        name = _capsule_names[type(op)] = _capsule_name(capsule)
    return _capsule_pointer(capsule, name)


def describe(op: ir.Operation) -> str:
    return f"{op.name} at {location_text(op.location)}"


def checking_by_default() -> bool:
    return os.environ.get("MLIRXLA_CHECK_ERASURE", "") not in ("", "0")


@contextlib.contextmanager
def stage(name: str, checking: bool | None = None) -> Iterator[Erasures]:
    """Run one pass or step (`name`, as the error should call it: "pass 'xhlo-dce'") inside
    its erasure books; an exception other than a user-facing error leaves as an error naming
    the step and the op it was processing. Nested stages keep their own books."""
    checking = checking_by_default() if checking is None else checking
    if checking:
        install_guards()
    outer = active()
    erasures = Erasures(name, checking)
    _state.erasures = erasures
    try:
        yield erasures
    except MlirxlaError:
        raise
    except Exception as error:
        where = erasures.where()
        if where is None:
            raise MlirxlaError(f"{name} failed: {type(error).__name__}: {error}") from error
        raise MlirxlaError(f"{name} failed while processing {where[0]}: {type(error).__name__}: {error}", where[1]) from error
    finally:
        _state.erasures = outer
        erasures.buried.clear()
        erasures.placeholders.clear()
        erasures.graveyard = None


def live_ops(ops: Iterable) -> Iterator[ir.Operation]:
    """The operations of `ops` (a block, or any iterable of ops), snapshotted now, skipping
    those erased while the walk goes on; each op yielded is the one being processed."""
    erasures = active()
    if erasures is None:
        yield from [op.operation for op in ops]
        return
    snapshot = [(op.operation, identity(op)) for op in ops]
    taken = erasures.sequence
    for op, op_identity in snapshot:
        if erasures.erased_since(op_identity, taken):
            continue
        erasures.current, erasures.current_identity = op, op_identity
        erasures.current_since, erasures.current_where = erasures.sequence, None
        yield op


def processing(op: ir.Operation) -> None:
    """Mark `op` as the op being processed, for passes driven by a worklist of their own."""
    erasures = active()
    if erasures is not None:
        erasures.current, erasures.current_identity = op, identity(op)
        erasures.current_since, erasures.current_where = erasures.sequence, None


def erase(op) -> None:
    """Erase `op` (with its regions), recording it and every nested op as erased."""
    op = op.operation
    erasures = active()
    if erasures is None:
        op.erase()
        return
    nested = nested_ops(op)
    identities = [identity(inner) for inner in nested]
    erasures.sequence += 1
    if erasures.current is not None and erasures.current_identity in identities and erasures.current_where is None:
        erasures.current_where = erasures.current.name, erasures.current.location
    for inner_identity in identities:
        erasures.erased_at[inner_identity] = erasures.sequence
    if erasures.checking:
        bury(op, nested, identities, erasures)
    else:
        op.erase()


# --- the checker ---------------------------------------------------------------------------


def bury(op: ir.Operation, nested: list[ir.Operation], identities: list[int], erasures: Erasures) -> None:
    """Keep `op` alive but out of the program: no live value keeps a use from it."""
    for index, result in enumerate(op.results):
        if any(True for _ in result.uses):
            raise MlirxlaError(
                f"{erasures.stage} erased {op.name} while its result #{index} is still used",
                location_text(op.location),
            )
    if erasures.graveyard is None:
        erasures.graveyard = ir.Module.create(ir.Location.unknown(op.context))
    holder = erasures.graveyard.body
    for inner in nested:
        for index, value in enumerate(list(inner.operands)):
            inner.operands[index] = placeholder(erasures, holder, value.type)
    descriptions = {inner_identity: describe(inner) for inner, inner_identity in zip(nested, identities)}
    holder.append(op)
    erasures.buried.update(descriptions)


def placeholder(erasures: Erasures, holder: ir.Block, value_type: ir.Type) -> ir.Value:
    key = str(value_type)
    if key not in erasures.placeholders:
        erasures.placeholders[key] = holder.add_argument(value_type, ir.Location.unknown(value_type.context))
    return erasures.placeholders[key]


def refuse_if_buried(op) -> None:
    erasures = active()
    if erasures is None or not erasures.buried:
        return
    what = erasures.buried.get(identity(op))
    if what is not None:
        raise UseAfterErase(f"{erasures.stage} used {what} after erasing it")


# Everything a handle can do that reaches the op behind it.
GUARDED = {
    ir._OperationBase: (
        "attributes clone context detach_from_parent erase get_asm has_trait is_before_in_block location "
        "move_after move_before name op_operands operands parent print regions result results verify walk "
        "write_bytecode __str__"
    ),
    ir.Operation: "block successors opview",
    ir.OpView: "operation successors",
}
_guards_installed = False
_guards_lock = threading.Lock()


def install_guards() -> None:
    """Wrap every accessor of operation handles with `refuse_if_buried` (once per process)."""
    global _guards_installed
    with _guards_lock:
        if _guards_installed:
            return
        for owner, names in GUARDED.items():
            for name in names.split():
                setattr(owner, name, guarded(owner.__dict__[name]))
        _guards_installed = True


def guarded(attribute):
    if isinstance(attribute, property):

        def get(op):
            refuse_if_buried(op)
            return attribute.__get__(op)

        def set(op, value):
            refuse_if_buried(op)
            attribute.__set__(op, value)

        return property(get, set if attribute.fset is not None else None, doc=attribute.__doc__)

    def method(op, *args, **kwargs):
        refuse_if_buried(op)
        return attribute(op, *args, **kwargs)

    method.__doc__ = attribute.__doc__
    return method
