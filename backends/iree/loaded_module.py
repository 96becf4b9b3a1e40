"""An IREE module on IREE's runtime: the vmfb in a VM context on the target's HAL device,
whose functions take and return numpy arrays (the code a `function` thunk binds to).

A vmfb is loaded once per content (a compile-cache hit or a second executable of the same
program shares it) and each HAL device once per process. Calls into one context take turns:
the VM context is not made for concurrent invocations.
"""

import functools
import threading

import numpy as np

from mlirxla.errors import MlirxlaError, first_line

from . import toolchain


@functools.cache
def runtime_config(driver: str):
    import iree.runtime

    return iree.runtime.Config(driver)


class LoadedModule:
    def __init__(self, vmfb: bytes, driver: str):
        import iree.runtime

        config = runtime_config(driver)
        self.context = iree.runtime.SystemContext(config=config)
        try:
            module = iree.runtime.VmModule.copy_buffer(config.vm_instance, vmfb)
        except (RuntimeError, ValueError) as error:
            raise MlirxlaError(f"IREE's runtime cannot load the module: {first_line(error)}") from None
        self.context.add_vm_module(module)
        self.functions = self.context.modules[module.name]
        self.turn = threading.Lock()

    def function(self, name: str):
        """`name` as a function of a list of numpy arrays returning a list of numpy arrays."""
        invoke = self.functions[name]

        def call(arrays: list[np.ndarray]) -> list[np.ndarray]:
            try:
                with self.turn:
                    results = invoke(*arrays)
                results = results if isinstance(results, (tuple, list)) else () if results is None else (results,)
                return [np.asarray(result) for result in results]  # the copy back to the host can fail too
            except (RuntimeError, ValueError) as error:
                raise MlirxlaError(f"IREE's runtime failed in @{name}: {first_line(error)}") from None

        return call

    def address(self, symbol: str) -> int:
        raise KeyError(f"an IREE module has no native symbol {symbol}: its functions are called through IREE's runtime")


@functools.lru_cache(maxsize=64)
def load(vmfb: bytes) -> LoadedModule:
    return LoadedModule(vmfb, toolchain.target().driver)
