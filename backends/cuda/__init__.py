"""The cuda backend: kernels through linalg, the gpu and nvvm dialects and LLVM's NVPTX
target to PTX and cubins for an H200 (sm_90), GEMMs as cuBLAS calls, compiled ahead of time
into one `.mlirxla` file (`compiler.py`) which `mlirxla.runtime.cuda` runs on a GPU with
numpy and NVIDIA's CUDA Python packages only (`docs/cuda-backend.md`). This process runs no
program on a GPU: the backend compiles, `mlirxla-compile --backend cuda -o` writes the file."""

from mlirxla.backends.backend import Backend, CompiledProgram
from mlirxla.errors import MlirxlaError


def compile_program(module, options) -> CompiledProgram:
    from .compiler import compile_module

    return compile_module(module, options)


def load_code(object_code: bytes):
    raise MlirxlaError("the cuda backend's programs run on a GPU through mlirxla.runtime.cuda "
                       "(mlirxla-compile --backend cuda -o prog.mlirxla, then load it there), not in this process")


def environment() -> str:
    import llvmlite

    from .autotune import results_identity
    from .ptxas import find_ptxas

    return f"llvmlite={llvmlite.__version__};ptxas={find_ptxas()};autotune={results_identity()}"


BACKEND = Backend("cuda", "cuda", "kernels for an H200 (sm_90) through linalg, gpu, NVVM and PTX, GEMMs in cuBLAS; "
                  "compiled here, run by mlirxla.runtime.cuda on a GPU", compile_program, load_code, environment,
                  export_format="an mlirxla CUDA executable (.mlirxla): mlirxla.runtime.cuda loads and runs it on a GPU",
                  runs_elsewhere="the cuda backend's programs run on a GPU through mlirxla.runtime.cuda, not in this process: "
                                 "mlirxla-compile --backend cuda -o prog.mlirxla writes one")
