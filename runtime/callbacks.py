"""Python functions a compiled program calls while it runs (`jax.debug.print`,
`jax.debug.callback`, `jax.pure_callback`, `jax.experimental.io_callback`): registered in
this process under an id, which the program carries as a `custom_call
@mlirxla.python_callback` with the id as its backend config; the cpu backend runs it as a
`host` thunk (`host_calls.python_callback`).

A callback takes the operands' arrays and returns one array per result the program
declares for it (none for the debug callbacks): each must have the declared shape and
dtype, since it is written into the program's result buffer as it is. An exception raised
inside a callback ends the execution as a `CallbackError` naming the callback, with one line.

The ids mean nothing in another process: a cached or deserialized executable whose
callbacks were never registered here fails when it reaches one, with an error naming the id.
"""

import itertools
import threading
from dataclasses import dataclass

import numpy as np

from mlirxla.errors import MlirxlaError

TARGET = "mlirxla.python_callback"


class CallbackError(Exception):
    """A Python callback raised: the execution that called it fails with this."""


@dataclass(frozen=True)
class Callback:
    function: object
    name: str  # how errors name it: what jax called it for, and the Python function


@dataclass(frozen=True)
class ResultSpec:
    """A result the program declares for a callback: its shape and numpy dtype name."""

    shape: tuple[int, ...]
    dtype: str

    def text(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


_REGISTRY: dict[int, Callback] = {}
_IDS = itertools.count(1)
_LOCK = threading.Lock()


def register(function, name: str | None = None) -> int:
    """The id a program calls `function` by; `name` (by default the function's) is how
    errors name it."""
    if name is None:
        name = f"Python callback {getattr(function, '__qualname__', type(function).__name__)!r}"
    with _LOCK:
        identifier = next(_IDS)
        _REGISTRY[identifier] = Callback(function, name)
    return identifier


def call(identifier: int, arrays: list, results: list[ResultSpec]) -> list[np.ndarray]:
    """The callback's results for `arrays`, checked against the `results` the program declares."""
    callback = _REGISTRY.get(identifier)
    if callback is None:
        raise MlirxlaError(f"the program calls Python callback {identifier}, which this process never registered")
    try:
        returned = callback.function(*arrays)
    except Exception as error:
        raise CallbackError(f"{callback.name} raised {type(error).__name__}: {first_line(error)}") from error
    values = [] if returned is None else [np.asarray(value) for value in returned]
    if len(values) != len(results):
        raise MlirxlaError(f"{callback.name} returned {len(values)} value(s), the program declares {len(results)}")
    for index, (value, declared) in enumerate(zip(values, results)):
        got = ResultSpec(value.shape, value.dtype.name)
        if got != declared:
            raise MlirxlaError(f"{callback.name} returned {got.text()} as result {index}, the program declares {declared.text()}")
    return values


def first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"
