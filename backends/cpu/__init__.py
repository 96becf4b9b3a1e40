"""The CPU backend: kernels through StableHLO, linalg and LLVM to native code (llvmlite), BLAS
for GEMMs, host calls for library-style ops, and the thunk sequence the runtime executes
(`compiler.compile_module`)."""

from mlirxla.backends.backend import Backend, CompiledProgram


def compile_program(module, options) -> CompiledProgram:
    from .compiler import compile_module

    return compile_module(module, options)


def load_code(object_code: bytes):
    from .llvm_jit import JitEngine

    return JitEngine(object_code)


def environment() -> str:
    import llvmlite

    from mlirxla.runtime.threads import CONCURRENT_CALLS, cpu_threads

    from .denormal_flushing import flushed
    from .excess_precision import allowed
    from .llvm_jit import host_cpu

    return (f"llvmlite={llvmlite.__version__};cpu={host_cpu()};concurrent_calls={CONCURRENT_CALLS};threads={cpu_threads()}"
            f";excess_precision={int(allowed())};flush_denormals={int(flushed())}")


BACKEND = Backend("cpu", "cpu", "native kernels for the host CPU through linalg and LLVM, GEMMs in BLAS",
                  compile_program, load_code, environment, runs_collectives=True)
