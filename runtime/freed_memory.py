"""Freed memory kept in the process, so that an execution's fresh outputs do not page-fault.

Every execution allocates its outputs and temp slab fresh (numpy arrays the caller then owns).
With glibc's default malloc settings, freeing them the call before shrinks the heap back to
the kernel (the trim threshold follows the mmap threshold, about 2 MiB after the first large
free), so the next execution gets zero pages from the kernel again: one page fault and one
page zeroing per 4 KiB written. An Adam step over 16 MiB of parameters writes 48 MiB of
outputs: 12,000 faults per call, three quarters of its run time (47 ms against 11 ms without
them, 2 cores). XLA's allocator keeps freed memory; so do we, for what one execution makes
fresh: the mmap threshold is fixed at glibc's largest (32 MiB, so arrays below it come from
the heap) and the trim threshold raised to twice the largest fresh memory of any executable
made so far, capped at an eighth of the machine's memory and at 1 GiB (`mallopt` takes an
int). Other C libraries lack `mallopt`
and keep their own behaviour.
"""

import ctypes
import ctypes.util
import threading

from . import memory

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
LARGEST_HEAP_ALLOCATION = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit machines
LARGEST_KEPT = 1 << 30


class _Retention:
    def __init__(self):
        self.lock = threading.Lock()
        self.kept = 0
        self.mallopt = _glibc_mallopt()

    def keep(self, fresh_bytes: int) -> int:
        """Keep at least twice `fresh_bytes` of freed memory; the bytes kept from now on (0
        where malloc cannot be told)."""
        if self.mallopt is None:
            return 0
        wanted = min(2 * fresh_bytes, memory.physical_memory() // 8, LARGEST_KEPT)
        with self.lock:
            if wanted > self.kept:
                if self.kept == 0:
                    self.mallopt(M_MMAP_THRESHOLD, LARGEST_HEAP_ALLOCATION)
                if self.mallopt(M_TRIM_THRESHOLD, wanted) == 1:
                    self.kept = wanted
            return self.kept


def _glibc_mallopt():
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


_RETENTION = _Retention()


def keep_for(fresh_bytes: int) -> int:
    """Called for each executable with the bytes it allocates per execution."""
    return _RETENTION.keep(fresh_bytes)
