"""What a backend is: a name, the pipeline it optimizes with, and a compiler from an imported
xhlo module to a `CompiledProgram` (a plain-data executable plan plus the code it calls),
with a loader that turns that code back into callable symbols.

The runtime never imports a backend by path: it asks `backends/registry.py` for one by name
and holds only the plan and the code bytes, so that a compiled program is cached, serialized
and executed the same way whoever compiled it. Backends import the runtime's plan, thunk and
buffer types (`runtime/executable.py`, `runtime/thunks.py`), never its client.
"""

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CompiledProgram:
    """A backend's output: the executable plan (the thunks and the memory they use) and the
    object code its kernels live in (empty when they are all host calls)."""

    plan: object  # runtime.executable.ExecutablePlan
    object_code: bytes = b""
    decisions: list = field(default_factory=list)


@dataclass(frozen=True)
class Backend:
    """One backend, as the registry hands it out.

    `compile(module, options)` takes an imported xhlo module and the pipeline runner's
    `RunOptions`, runs the backend's pipeline and returns a `CompiledProgram`;
    `load_code(object_code)` returns an object whose `address(symbol)` the plan's kernel
    thunks bind to; `environment()` names what else decides the code (versions, the host
    CPU), part of the compile cache's key; `runs_collectives` says whether its programs may
    talk to other devices (a module for several replicas or partitions runs on a grid of
    devices, `runtime/devices.py`). A backend whose compiler is an optional package
    says why it cannot compile here (`unavailable()`: None when it can); one whose object
    code is a program on its own says what the file is (`export_format`, which
    `mlirxla-compile -o` writes); one whose programs run on another machine says where
    (`runs_elsewhere`: the client and the conformance runner refuse it, the tools compile)."""

    name: str
    pipeline: str | None  # the named pipeline compile runs (None: none)
    summary: str
    compile: Callable
    load_code: Callable
    environment: Callable
    runs_collectives: bool = False
    unavailable: Callable[[], str | None] = lambda: None
    export_format: str | None = None
    runs_elsewhere: str | None = None


class NoCode:
    """The code of a program whose thunks are all host calls."""

    def address(self, symbol: str) -> int:
        raise KeyError(f"this program has no native code, and no symbol {symbol}")
