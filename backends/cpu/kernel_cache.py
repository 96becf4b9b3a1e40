"""Kernels compiled earlier in this process, whose native code a later compile reuses instead
of lowering and optimizing them again.

jax compiles many programs that share kernels: the programs of a test file, a training step
and its evaluation step, a function jitted again for new static arguments. In jax's
`lax_numpy_operators_test.py` the plugin built 530 kernels over 718 compiles, and 288 of them
had the same StableHLO and the same symbol as one compiled before in the process; their
lowering and LLVM work was a third of the file's compile time. The whole-program compile
cache (`runtime/compile_cache.py`) serves none of them: the programs differ.

A kernel is found by the compile's variant (what changes a kernel's lowering:
`compiler.Variant`, which holds the excess-precision and denormal settings), its symbol and
its StableHLO without the symbol. With the symbol in the key, a kernel found here is the very
object a fresh compile makes, so an executable's archive is the same bytes whether its
kernels came from here or not, and no forwarder is needed (the symbol is kept apart from the
StableHLO in the key only because `compiler.LoweredKernels` keys on the StableHLO alone). Only
the cpu backend's own kernels are kept: another backend's loops lowered for this CPU (the
cuda backend's host check) may read settings of their own while lowered. A
compile that dumps needs each kernel's optimized IR, kept only when the dumps ask for it: a
kernel stored without it is compiled again.

`MLIRXLA_KERNEL_CACHE_MB` bounds the bytes kept (object code and IR text, 64 by default; 0
keeps none); the least recently used kernels go first.
"""

import os
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import replace

from mlirxla.errors import MlirxlaError

VARIABLE = "MLIRXLA_KERNEL_CACHE_MB"
DEFAULT_MEGABYTES = 64


def budget() -> int:
    """The bytes the cache may hold: `MLIRXLA_KERNEL_CACHE_MB` megabytes (64 when unset)."""
    text = os.environ.get(VARIABLE, "").strip()
    if not text:
        return DEFAULT_MEGABYTES << 20
    if not text.isdigit():
        raise MlirxlaError(f"{VARIABLE}={text!r}: expected a whole number of megabytes (0 keeps no kernels)")
    return int(text) << 20


class KernelCache:
    """Compiled kernels (`compiler.CompiledKernel`, finished) by variant, symbol and StableHLO;
    safe to use from several compiling threads."""

    def __init__(self):
        self.entries: OrderedDict[tuple, object] = OrderedDict()
        self.sizes: dict[tuple, int] = {}
        self.held = 0
        self.hits = 0
        self.lock = threading.Lock()

    def find(self, variant, symbol: str, source_key: str, needs_optimized_ir: bool):
        """A copy of the kernel compiled before with this key, its native code ready; None when
        there is none, or when it lacks the optimized IR a dumping compile needs."""
        key = (variant, symbol, source_key)
        with self.lock:
            kernel = self.entries.get(key)
            if kernel is None or (needs_optimized_ir and not kernel.optimized.optimized_ir):
                return None
            self.entries.move_to_end(key)
            self.hits += 1
        native = Future()
        native.set_result(kernel.optimized)
        return replace(kernel, native=native)

    def keep(self, variant, kernel) -> None:
        """Keep finished `kernel` (its own native code, not a forwarder's), dropping the least
        recently used kernels past the budget."""
        key = (variant, kernel.symbol, kernel.source_key)
        size = kernel_bytes(kernel)
        limit = budget()
        if size > limit:
            return
        with self.lock:
            self.held -= self.sizes.pop(key, 0)
            self.entries[key] = replace(kernel, native=None)
            self.entries.move_to_end(key)
            self.sizes[key] = size
            self.held += size
            while self.held > limit:
                oldest, _ = self.entries.popitem(last=False)
                self.held -= self.sizes.pop(oldest)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.sizes.clear()
            self.held = 0
            self.hits = 0


def kernel_bytes(kernel) -> int:
    optimized = kernel.optimized
    return len(optimized.object_code) + len(optimized.ir_without_opt) + len(optimized.optimized_ir) + len(kernel.stablehlo)


KERNELS = KernelCache()
