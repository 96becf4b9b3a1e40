"""How many threads the CPU runtime runs a program's work on: `MLIRXLA_CPU_THREADS` when set
(a positive integer), else one per core. The thread pool has that many workers, and the
compiler splits a kernel over threads only where that count makes it pay
(`backends/cpu/thread_split.py`); with 1, no kernel is split. The compiler's own threads
(`compile_threads`) default to the same count."""

import os

from mlirxla.errors import MlirxlaError

VARIABLE = "MLIRXLA_CPU_THREADS"
COMPILE_VARIABLE = "MLIRXLA_COMPILE_THREADS"
# a sliced kernel's concurrent calls, each with scratch of its own: the shared thread pool's
# workers on this host (part of the compile cache's key, `backends/cpu/__init__.environment`)
CONCURRENT_CALLS = os.cpu_count() or 1


def cpu_threads() -> int:
    return _threads(VARIABLE, os.cpu_count() or 1)


def compile_threads() -> int:
    """How many threads compile a program's kernels through LLVM (`backends/cpu/llvm_jit.py`'s
    `CodegenPool`): `MLIRXLA_COMPILE_THREADS` when set, else `cpu_threads()`. The executable is
    the same whatever the count (1 compiles on the calling thread), so the count is no part of
    the compile cache's key; it is a setting of its own so that it changes nothing in how
    kernels are split for the runtime's threads."""
    return _threads(COMPILE_VARIABLE, None) or cpu_threads()


def _threads(variable: str, default: int | None) -> int | None:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise MlirxlaError(f"{variable}={text!r}: expected a positive number of threads")
    return int(text)
