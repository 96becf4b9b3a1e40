"""The cuda backend's program run on this CPU: the cuda pipeline, whole kernels (no row
slices), and each kernel's loop nests mapped to blocks and threads exactly as for the GPU
(`lowering.map_buffer_loops`), then run sequentially by the cpu backend's lowering
(`scf.parallel` becomes nested loops) and runtime, GEMMs in BLAS. It is the `cuda-host`
backend: `mlirxla-run --backend cuda-host --check` and `mlirxla-conformance --backend
cuda-host` check the tiling and mapping against the reference interpreter without a GPU.
`MLIRXLA_CUDA_HOST_ORDER=reversed` runs every launch's blocks and threads last to first, a
probe for kernels whose result depends on the order (`reversed_threads.py`)."""

from mlirxla.backends.backend import Backend, CompiledProgram
from mlirxla.backends.cpu import compiler as cpu_compiler



def map_loops(module, symbol) -> None:
    from .lowering import map_buffer_loops
    from .reversed_threads import order_from_environment, reverse_mapped_loops

    map_buffer_loops(module, symbol, host=True)
    if order_from_environment() == "reversed":
        reverse_mapped_loops(module, symbol)


# a kernel the lowering cannot make runs on the interpreter, as on the cpu backend, and the
# thunk sequence says so (the cuda backend refuses it); every bf16 op rounded, as before:
# excess precision (`backends/cpu/excess_precision.py`) is the cpu backend's decision
VARIANT = cpu_compiler.Variant(pipeline="cuda", alignment=256, slice_rows=False, buffer_loops=map_loops, excess_precision=False,
                                gpu_kernels=True)


def compile_program(module, options) -> CompiledProgram:
    return cpu_compiler.compile_module(module, options, variant=VARIANT)


def load_code(object_code: bytes):
    from mlirxla.backends import cpu

    return cpu.load_code(object_code)


def environment() -> str:
    from mlirxla.backends import cpu

    from .reversed_threads import order_from_environment

    return f"cuda-host;{order_from_environment()};" + cpu.environment()


BACKEND = Backend("cuda-host", "cuda", "the cuda backend's kernels, mapped to blocks and threads, run sequentially on the host CPU "
                  "(checks tiling and mapping without a GPU)", compile_program, load_code, environment)
