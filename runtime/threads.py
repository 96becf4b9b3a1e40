"""How many threads the CPU runtime runs a program's work on: `MLIRXLA_CPU_THREADS` when set
(a positive integer), else one per core. The thread pool has that many workers, and the
compiler splits a kernel over threads only where that count makes it pay
(`backends/cpu/thread_split.py`); with 1, no kernel is split."""

import os

from mlirxla.errors import MlirxlaError

VARIABLE = "MLIRXLA_CPU_THREADS"


def cpu_threads() -> int:
    text = os.environ.get(VARIABLE, "").strip()
    if not text:
        return os.cpu_count() or 1
    if not text.isdigit() or int(text) < 1:
        raise MlirxlaError(f"{VARIABLE}={text!r}: expected a positive number of threads")
    return int(text)
