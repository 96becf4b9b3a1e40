"""A compile ends or refuses: one still running after its deadline stops where it is, with a
one-line error naming the pass or kernel it was at.

The compiler is Python over MLIR: a rewrite whose loop never settles spins in Python forever
(a kernel copying the same overwritten operand round after round kept jax's test process
compiling for 13 minutes, and a JAX user's process would wait forever). XLA reports slow
steps (its SlowOperationAlarm) but has none of this kind to stop. At the deadline a timer
thread raises `CompileTimeout` in the compiling thread (CPython's asynchronous exception);
Python code sees it at its next bytecode, so a step spinning in Python stops at once, while
a call into native code (LLVM, an MLIR pass) is stopped when it returns to Python.

`MLIRXLA_COMPILE_TIMEOUT`: the deadline in seconds (default 1800: the largest compiles
measured here take under a minute, `benchmarks/compile_time.py`); 0 turns it off.
"""

import contextlib
import ctypes
import os
import threading

from mlirxla import phases
from mlirxla.errors import MlirxlaError
from mlirxla.report.progress import CompilePosition

VARIABLE = "MLIRXLA_COMPILE_TIMEOUT"
DEFAULT_SECONDS = 1800.0
DELIVERY_SPINS = 1_000_000


class CompileTimeout(BaseException):
    """Raised into the compiling thread at its deadline; a BaseException, so that no
    `except Exception` of the compiler takes it for a failure it can recover from."""


def deadline_seconds() -> float:
    """`MLIRXLA_COMPILE_TIMEOUT`, or the default when unset; 0 for none."""
    text = os.environ.get(VARIABLE, "").strip()
    if not text:
        return DEFAULT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise MlirxlaError(f"{VARIABLE}={text!r}: give the compile deadline in seconds (0: none)")
    return seconds


def interrupt(thread: int) -> None:
    """Raise `CompileTimeout` in `thread` at its next bytecode. Never taken back: CPython's
    `PyThreadState_SetAsyncExc(id, NULL)` clears the exception but leaves the interpreter's
    signal for it set, and the next frame run under a profile function (sys.setprofile) then
    spun in place for ever (seen in a test after a deadline's clean-up)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(CompileTimeout))


@contextlib.contextmanager
def deadline(label: str, seconds: float | None = None):
    """The compile in the block stops with an MlirxlaError after `seconds` (the setting's by
    default). The timer and the block's end agree under a lock, and an exception the timer
    sent as the block ended is waited for and swallowed there, so none is left pending for
    whatever this thread runs next."""
    seconds = deadline_seconds() if seconds is None else seconds
    if not seconds:
        yield
        return
    position = CompilePosition()
    lock = threading.Lock()
    state = {"ended": False, "fired": False, "delivered": False}

    def expire() -> None:
        with lock:
            if not state["ended"]:
                state["fired"] = True
                interrupt(position.thread)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    phases.add_listener(position)
    timer.start()
    try:
        yield
    except CompileTimeout:
        state["delivered"] = True
        raise MlirxlaError(f"the compile did not finish in {seconds:g} s; it was at {position.doing} ({VARIABLE} sets the deadline)",
                           label) from None
    finally:
        try:
            with lock:
                state["ended"] = True
            for _ in range(DELIVERY_SPINS):  # a sent exception arrives at one of the next bytecodes
                if not state["fired"] or state["delivered"]:
                    break
        except CompileTimeout:
            pass  # sent as the compile ended: there is nothing left to stop
        timer.cancel()
        phases.remove_listener(position)
