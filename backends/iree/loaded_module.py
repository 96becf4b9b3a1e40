"""An IREE module on IREE's runtime: the vmfb in a VM context on the target's HAL device,
whose functions take and return numpy arrays (the code a `function` thunk binds to).

A vmfb is loaded once per content (a compile-cache hit or a second executable of the same
program shares it) and each HAL device once per process. Calls into one context take turns:
the VM context is not made for concurrent invocations.

On the host CPU (the local-task driver) a large argument is not copied into a fresh IREE
buffer, which page-faults on every call: its memory is imported as a HAL buffer. IREE's heap
buffers must start on a 64-byte boundary, and importing one that does not crashes the process
inside the call, so a misaligned argument (numpy's large arrays start 16 bytes into their
mapping) is first copied into an aligned staging array the function keeps for its next calls
(`docs/iree-backend.md`, with the figures).
"""

import ctypes
import functools
import threading

import numpy as np

from mlirxla.errors import MlirxlaError, first_line
from mlirxla.runtime import freed_memory

from . import toolchain

IMPORTED_BYTES = 1 << 16  # below this IREE's own copy costs less than the import's calls
HOST_DRIVERS = {"local-task", "local-sync"}


@functools.cache
def runtime_config(driver: str):
    import iree.runtime

    return iree.runtime.Config(driver)


class LoadedModule:
    def __init__(self, vmfb: bytes, driver: str):
        import iree.runtime

        config = runtime_config(driver)
        self.device = config.device
        self.imports_host_memory = driver in HOST_DRIVERS
        self.context = iree.runtime.SystemContext(config=config)
        try:
            module = iree.runtime.VmModule.copy_buffer(config.vm_instance, vmfb)
        except (RuntimeError, ValueError) as error:
            raise MlirxlaError(f"IREE's runtime cannot load the module: {first_line(error)}") from None
        self.context.add_vm_module(module)
        self.functions = self.context.modules[module.name]
        self.turn = threading.Lock()

    def function(self, name: str):
        """`name` as a function of a list of numpy arrays returning a list of numpy arrays. A
        result may be a view of an argument: IREE hands an unchanged argument back as it is."""
        invoke = self.functions[name]
        staging: dict[int, np.ndarray] = {}

        def call(arrays: list[np.ndarray]) -> list[np.ndarray]:
            try:
                with self.turn:
                    results = invoke(*self.arguments(arrays, staging))
                    results = results if isinstance(results, (tuple, list)) else () if results is None else (results,)
                    # the copy back to the host can fail too; a staging array is the next call's
                    return [unstaged(np.asarray(result), staging) for result in results]
            except (RuntimeError, ValueError) as error:
                raise MlirxlaError(f"IREE's runtime failed in @{name}: {first_line(error)}") from None

        return call

    def arguments(self, arrays: list[np.ndarray], staging: dict[int, np.ndarray]) -> list:
        """What IREE's call takes for each array: the array itself (IREE copies it), or a
        buffer view of its memory or of its aligned staging copy."""
        if not self.imports_host_memory:
            return arrays
        return [self.imported(array, staging, index) if array.nbytes >= IMPORTED_BYTES else array
                for index, array in enumerate(arrays)]

    def imported(self, array: np.ndarray, staging: dict[int, np.ndarray], index: int):
        import iree.runtime
        from iree.runtime.array_interop import map_dtype_to_element_type

        element_type = map_dtype_to_element_type(array.dtype)
        if element_type is None:
            return array
        if not array.flags.c_contiguous or array.ctypes.data % freed_memory.ALIGNMENT:  # IREE's heap buffers' alignment
            array = staged(array, staging, index)
        buffer = self.device.allocator.import_host_allocation(
            writable_alias(array), memory_type=int(iree.runtime.MemoryType.HOST_LOCAL | iree.runtime.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(iree.runtime.BufferUsage.DEFAULT))
        return iree.runtime.HalBufferView(buffer, list(array.shape), int(element_type))

    def address(self, symbol: str) -> int:
        raise KeyError(f"an IREE module has no native symbol {symbol}: its functions are called through IREE's runtime")


def staged(array: np.ndarray, staging: dict[int, np.ndarray], index: int) -> np.ndarray:
    """`array` copied into the aligned staging array kept for argument `index`."""
    kept = staging.get(index)
    if kept is None or kept.shape != array.shape or kept.dtype != array.dtype:
        kept = staging[index] = freed_memory.aligned_empty(array.shape, array.dtype)
    np.copyto(kept, array)
    return kept


def unstaged(result: np.ndarray, staging: dict[int, np.ndarray]) -> np.ndarray:
    """`result`, copied where it is a view of a staging array."""
    if any(np.may_share_memory(result, kept) for kept in staging.values()):
        return result.copy()
    return result


def writable_alias(array: np.ndarray) -> np.ndarray:
    """`array`, or a writable view of its memory where it is read-only (the PJRT plugin's
    zero-copy host buffers): IREE's import asks for a writable buffer, but a function's
    arguments are immutable tensors that IREE only reads. The caller keeps `array` alive."""
    if array.flags.writeable:
        return array
    memory = (ctypes.c_byte * array.nbytes).from_address(array.ctypes.data)
    return np.frombuffer(memory, array.dtype).reshape(array.shape)


@functools.lru_cache(maxsize=64)
def held_past_exit() -> None:
    """Say that IREE's objects may outlive Python: an executable the PJRT plugin hands jax,
    and the modules, contexts and devices it holds, lives until jaxlib's C++ runtime lets go
    of it, after Python's finalization, where nanobind's leak checker would list every one
    of them on stderr (about 200 lines at each exit of a jax program on the iree backend).
    Called whenever an IREE module is loaded: which process a module ends up in is not
    known here."""
    from iree.runtime import _binding

    _binding.disable_leak_checker()


def load(vmfb: bytes) -> LoadedModule:
    return LoadedModule(vmfb, toolchain.target().driver)
