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
made so far and at least 64 MiB (what host calls allocate beside the outputs is not counted),
capped at an eighth of the machine's memory and at 1 GiB (`mallopt` takes an int). Other C
libraries lack `mallopt`
and keep their own behaviour.

Arrays of 32 MiB or more never come from the heap, so their freed memory goes back to the
kernel whatever the thresholds say: a 32 MiB output filled fresh costs 2.4 ms, 1.7 of them in
8,192 page faults, against 0.8 ms in memory already touched (embedding_grad's zero fill ran
at 62% of the triad). Those arrays come from `LargeBlocks`: anonymous mappings on 2 MiB
boundaries with transparent huge pages asked for (a fault per 2 MiB where the kernel allows
it), and kept, when the last view of an array made in one dies, for the next array of that
size, up to the same retention budget as the heap's.

Arrays of 64 KiB or more start on 64 bytes (`ALIGNMENT`; the large blocks on 2 MiB), as
XLA:CPU aligns its buffers: the iree backend imports such an argument into IREE without a
copy (`backends/iree/loaded_module.py`), so one execution's output passed to the next costs
nothing, where malloc's large blocks start 16 bytes into their mapping and were copied.
"""

import ctypes
import ctypes.util
import functools
import math
import threading
from collections.abc import Callable

import numpy as np

from . import memory

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
LARGEST_HEAP_ALLOCATION = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit machines
LARGEST_KEPT = 1 << 30
# the heap keeps at least twice its largest block freed: what an execution allocates besides
# its outputs and slab (a host call's own result before it is copied into its output:
# scipy's FFT of 64 x 4096 complex numbers) is not counted in its fresh bytes, and 4 MiB of
# them freed at the heap's top each call were trimmed and faulted in again (0.6 -> 1.8 ms)
HEAP_KEPT_AT_LEAST = 2 * LARGEST_HEAP_ALLOCATION
# XLA:CPU's buffer alignment: a cache line and the widest vector, and what IREE's heap buffers
# need to be imported without a copy (the iree backend's arguments)
ALIGNMENT = 64
ALIGNED_FROM = 1 << 16  # smaller arrays keep numpy's own allocation: they are on every call's fast path


class _Retention:
    def __init__(self):
        self.lock = threading.Lock()
        self.kept = 0
        self.mallopt = _glibc_mallopt()

        self.wanted = 0  # what the large blocks may keep, with or without mallopt

    def keep(self, fresh_bytes: int) -> int:
        """Keep at least twice `fresh_bytes` of freed memory, and the heap at least
        `HEAP_KEPT_AT_LEAST`; the bytes the heap keeps from now on (0 where malloc cannot be
        told)."""
        ceiling = min(memory.physical_memory() // 8, LARGEST_KEPT)
        wanted = min(2 * fresh_bytes, ceiling)
        trimmed_above = max(wanted, min(HEAP_KEPT_AT_LEAST, ceiling))
        with self.lock:
            self.wanted = max(self.wanted, wanted)
            if self.mallopt is None:
                return 0
            if trimmed_above > self.kept:
                if self.kept == 0:
                    self.mallopt(M_MMAP_THRESHOLD, LARGEST_HEAP_ALLOCATION)
                if self.mallopt(M_TRIM_THRESHOLD, trimmed_above) == 1:
                    self.kept = trimmed_above
            return self.kept


def _libc_function(name: str, restype, *argtypes):
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = list(argtypes)
    function.restype = restype
    return function


def _glibc_mallopt():
    return _libc_function("mallopt", ctypes.c_int, ctypes.c_int, ctypes.c_int)


HUGE_PAGE = 2 << 20
PROT_READ_WRITE = 0x3  # Linux's mman.h
MAP_PRIVATE_ANONYMOUS = 0x22
MADV_HUGEPAGE = 14
MAP_FAILED = ctypes.c_void_p(-1).value


class LargeBlocks:
    """Memory for arrays of LARGEST_HEAP_ALLOCATION bytes or more, reused by size."""

    def __init__(self, retention: _Retention):
        self.retention = retention
        self.lock = threading.Lock()
        self.free: dict[int, list[int]] = {}
        self.held = 0
        self.mmap = _libc_function("mmap", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
        self.munmap = _libc_function("munmap", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
        self.madvise = _libc_function("madvise", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        self.block_types: dict[int, type] = {}

    def empty(self, shape: tuple, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        if count * dtype.itemsize < LARGEST_HEAP_ALLOCATION or None in (self.mmap, self.munmap, self.madvise):
            return heap_empty(shape, dtype, count * dtype.itemsize)
        size = -(-count * dtype.itemsize // HUGE_PAGE) * HUGE_PAGE
        with self.lock:
            spare = self.free.get(size)
            address = spare.pop() if spare else None
            if address is not None:
                self.held -= size
        if address is None:
            address = self.mapped(size)
        block = self.block_type(size).from_address(address)
        return np.frombuffer(block, dtype, count).reshape(shape)

    def mapped(self, size: int) -> int:
        """A fresh mapping of `size` bytes starting on a huge-page boundary."""
        start = self.mmap(None, size + HUGE_PAGE, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0)
        if start is None or start == MAP_FAILED:
            raise MemoryError(f"mmap of {memory.human(size)} failed")
        aligned = -(-start // HUGE_PAGE) * HUGE_PAGE
        if aligned > start:
            self.munmap(start, aligned - start)
        self.munmap(aligned + size, start + HUGE_PAGE - aligned)
        self.madvise(aligned, size, MADV_HUGEPAGE)
        return aligned

    def block_type(self, size: int) -> type:
        """A ctypes array type of `size` bytes whose instances give their memory back here
        when the last array viewing them dies."""
        if size not in self.block_types:
            self.block_types[size] = type("LargeBlock", (ctypes.c_ubyte * size,), {"__del__": lambda block: self.release(ctypes.addressof(block), size)})
        return self.block_types[size]

    def release(self, address: int, size: int) -> None:
        with self.lock:
            if self.held + size <= self.retention.wanted:
                self.free.setdefault(size, []).append(address)
                self.held += size
                return
        self.munmap(address, size)


def heap_empty(shape: tuple, dtype: np.dtype, size: int) -> np.ndarray:
    """An array from the heap; one of `ALIGNED_FROM` bytes or more starts on `ALIGNMENT`
    (malloc's large blocks start 16 bytes into their mapping)."""
    return np.empty(shape, dtype) if size < ALIGNED_FROM else aligned_empty(shape, dtype)


def aligned_empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialized array from the heap starting on `ALIGNMENT`: a view into one a little
    larger."""
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    raw = np.empty(size + ALIGNMENT, np.uint8)
    start = -ctypes.addressof(ctypes.c_char.from_buffer(raw)) % ALIGNMENT
    return raw[start:start + size].view(dtype).reshape(shape)


_RETENTION = _Retention()
LARGE_BLOCKS = LargeBlocks(_RETENTION)


def empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialized array, from memory an earlier one freed where it is large."""
    return LARGE_BLOCKS.empty(shape, dtype)


def allocator(shape: tuple, dtype) -> Callable[[], np.ndarray]:
    """A function making what `empty(shape, dtype)` makes, where to take the memory from
    decided once: an executable makes its outputs on every call, and for a small one the
    three calls deciding it took longer than numpy's allocation (1.1 us an output)."""
    dtype = np.dtype(dtype)
    if math.prod(shape) * dtype.itemsize < ALIGNED_FROM:
        return functools.partial(np.empty, shape, dtype)
    return functools.partial(empty, shape, dtype)


def keep_for(fresh_bytes: int) -> int:
    """Called for each executable with the bytes it allocates per execution."""
    return _RETENTION.keep(fresh_bytes)
