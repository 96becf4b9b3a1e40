"""How much memory a program needs, said before anything is allocated.

A tensor of 2^40 elements would otherwise end in numpy's MemoryError halfway through a
run (or in the kernel's OOM killer, when overcommit lets the allocation through). Sizes are
Python integers, so a shape whose element count overflows 64 bits is measured too.
"""

import math
import os
import resource

from mlirxla.errors import MlirxlaError

# allocations this small are not weighed against the memory there is: reading the process's
# limits would cost more than the allocation
ALWAYS_AFFORDABLE_BYTES = 64 << 20
_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


def tensor_bytes(shape, itemsize: int) -> int:
    return math.prod(int(extent) for extent in shape) * itemsize


def human(count: int) -> str:
    """`count` bytes in the largest binary unit that keeps the number at least 1 (4 TiB, 1.5 GiB)."""
    value, unit = float(count), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{count} bytes"
    return f"{value:.0f} {_UNITS[unit]}" if value >= 100 or value == int(value) else f"{value:.3g} {_UNITS[unit]}"


def physical_memory() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def mapped_bytes() -> int:
    """The process's address space in use now (0 where /proc cannot tell)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def available() -> tuple[int, str]:
    """(bytes a new allocation may take, what sets that bound, in words)."""
    physical = physical_memory()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft < physical:
        mapped = mapped_bytes()
        return max(soft - mapped, 0), f"the process may map {human(soft)} (RLIMIT_AS) and has {human(mapped)} mapped"
    return physical, f"this machine has {human(physical)} of memory"


def require(needed: int, what: str, detail: str = "", location: str | None = None) -> None:
    """Refuse `what` (e.g. "the argument f32[1099511627776]") when it needs more memory than
    the process can have; `detail` follows the size (" (the output ... alone 4 TiB)")."""
    if needed <= ALWAYS_AFFORDABLE_BYTES:
        return
    limit, bound = available()
    if needed > limit:
        raise MlirxlaError(f"{what} needs {human(needed)}{detail}; {bound}", location)


def exhausted(needed: int, what: str, detail: str = "") -> MlirxlaError:
    """The error for an allocation of `needed` bytes that failed although it looked possible."""
    _, bound = available()
    return MlirxlaError(f"{what} needs {human(needed)}{detail}, which could not be allocated; {bound}")
