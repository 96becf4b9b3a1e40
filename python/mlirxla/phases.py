"""What a compile is doing, told to whoever listens: profiles (`report/profile.py`), the
progress line of a long compile (`report/progress.py`) and the HTML report's recorder
(`report/record.py`).

The layers announce two things. A phase is a span of work with a category and a name: the
front door, a pipeline, a pass, the thunk emission, a kernel's compile
(`with phases.phase("pass", "xhlo-algsimp"): ...`). A publication hands a listener an object
it may want to keep: the pipeline runner when it starts on a module ("pipeline-runner"), the
runner after a pass changed its module ("module-changed"), how many kernels the backend will
compile ("kernel-count"), a compiled kernel ("kernel"), a loaded executable ("executable");
`phases.publish("kernel", compiled)`.

Nobody listening is the common case and costs one truth test: `phase` then returns a shared
do-nothing context and `publish` returns at once. Listeners are process-wide (the PJRT plugin
compiles on jax's threads); each is told the thread a phase ran on.
"""

import contextlib
import threading
import time
from dataclasses import dataclass

_NOTHING = contextlib.nullcontext()
_listeners: tuple = ()
_lock = threading.Lock()


@dataclass(frozen=True)
class Phase:
    category: str  # frontdoor | pipeline | pass | backend | kernel
    name: str
    start_ns: int  # time.perf_counter_ns()
    thread: int  # threading.get_ident()


class Listener:
    """What a listener may override; every method does nothing by default."""

    def started(self, phase: Phase) -> None:
        pass

    def finished(self, phase: Phase, end_ns: int) -> None:
        pass

    def published(self, kind: str, value) -> None:
        pass


def add_listener(listener: Listener) -> None:
    global _listeners
    with _lock:
        _listeners = (*_listeners, listener)


def remove_listener(listener: Listener) -> None:
    global _listeners
    with _lock:
        _listeners = tuple(other for other in _listeners if other is not listener)


@contextlib.contextmanager
def listening(listener: Listener):
    """`listener` hears every phase and publication of the with-block (and of other threads
    meanwhile)."""
    add_listener(listener)
    try:
        yield listener
    finally:
        remove_listener(listener)


def phase(category: str, name: str):
    """A context manager announcing the phase to the listeners, when there are any."""
    return _Announced(category, name, _listeners) if _listeners else _NOTHING


def publish(kind: str, value) -> None:
    for listener in _listeners:
        listener.published(kind, value)


class _Announced:
    def __init__(self, category: str, name: str, listeners: tuple):
        self.category, self.name, self.listeners = category, name, listeners

    def __enter__(self):
        self.phase = Phase(self.category, self.name, time.perf_counter_ns(), threading.get_ident())
        for listener in self.listeners:
            listener.started(self.phase)

    def __exit__(self, *_):
        end = time.perf_counter_ns()
        for listener in self.listeners:
            listener.finished(self.phase, end)
