"""Python functions a compiled program calls while it runs (`jax.debug.print`,
`jax.debug.callback`): registered in this process under an id, which the program carries as
a side-effecting `custom_call @mlirxla.python_callback` with the id as its backend config;
the cpu backend runs it as a `host` thunk (`host_calls.python_callback`).

The ids mean nothing in another process: a cached executable whose callbacks were never
registered here fails when it reaches one, with an error naming the id.
"""

import itertools
import threading

from mlirxla.errors import MlirxlaError

TARGET = "mlirxla.python_callback"
_REGISTRY: dict[int, object] = {}
_IDS = itertools.count(1)
_LOCK = threading.Lock()


def register(callback) -> int:
    with _LOCK:
        identifier = next(_IDS)
        _REGISTRY[identifier] = callback
    return identifier


def call(identifier: int, arrays: list) -> None:
    callback = _REGISTRY.get(identifier)
    if callback is None:
        raise MlirxlaError(f"the program calls Python callback {identifier}, which this process never registered")
    callback(*arrays)
