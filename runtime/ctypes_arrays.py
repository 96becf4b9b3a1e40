"""ctypes array types, made once per element type and length and kept.

ctypes makes `c_char * n` anew whenever nothing alive holds that type (its own cache holds
weak proxies), and a type lives in a reference cycle (its descriptors point back at it). So
every numpy view of raw memory and every table of addresses made with a fresh type left the
type to the cyclic collector: several per call of an executable, as garbage the next
collection has to find (jax's core_test checks that a jit call leaves none). Kept here, the
types are made once; the cache is bounded, so a process that meets ever more sizes drops
(and leaves to the collector) the least recently used.
"""

import ctypes
import functools

import numpy as np

KEPT_TYPES = 4096


@functools.lru_cache(maxsize=KEPT_TYPES)
def array_type(element, length: int):
    return element * length


def bytes_at(address: int, size: int):
    """The `size` bytes at `address` (at least one), as a ctypes array numpy can view."""
    return array_type(ctypes.c_char, max(size, 1)).from_address(address)


def array_at(address: int, count: int, dtype) -> np.ndarray:
    """The `count` elements of `dtype` at `address`, as a numpy view."""
    return np.frombuffer(bytes_at(address, count * np.dtype(dtype).itemsize), dtype, count=count)


def address(array: np.ndarray) -> int:
    """The address of an array's first byte: ctypes reads a writable one's buffer in a
    quarter of the time numpy's `.ctypes.data` takes (0.25 us against 0.87), which costs
    a LAPACK host call's dozen arguments microseconds; a read-only one takes numpy's way."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):
        return array.ctypes.data


def int64_table(values) -> ctypes.Array:
    values = list(values)
    return array_type(ctypes.c_int64, max(len(values), 1))(*values)
