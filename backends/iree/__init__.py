"""The iree backend: mlirxla's front door and simplification, then IREE's compiler and runtime
(`docs/iree-backend.md`). The module goes back to StableHLO and through iree-compile for the
host CPU (llvm-cpu) or a CUDA GPU; the plan is one thunk calling the module's entry on IREE's
runtime, and the object code is the `.vmfb`. IREE is optional (the `iree` extra): without it
the backend says which extra to install."""

from mlirxla.backends.backend import Backend, CompiledProgram

from . import toolchain


def compile_program(module, options) -> CompiledProgram:
    from .compiler import compile_module

    return compile_module(module, options)


def load_code(object_code: bytes):
    from .loaded_module import held_past_exit, load

    toolchain.require()
    held_past_exit()
    return load(object_code)


def environment() -> str:
    return toolchain.environment()


BACKEND = Backend("iree", "iree", "IREE's compiler and runtime after mlirxla's simplification (llvm-cpu, or cuda on a GPU)",
                  compile_program, load_code, environment, unavailable=toolchain.unavailable,
                  export_format="an IREE module (.vmfb): iree-run-module --module=FILE --device=local-task runs it")
