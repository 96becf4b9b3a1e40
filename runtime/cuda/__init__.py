"""The cuda backend's runtime: loads an `.mlirxla` file (`executable_file.py`) and runs its
thunk plan on a GPU over one slab (`executor.py`), through NVIDIA's CUDA Python driver
bindings and cuBLAS (`cuda_device.py`). It needs numpy and, on the GPU machine,
`cuda-bindings` and the cuBLAS library of `nvidia-cublas`: no MLIR toolkit, no jax, no other
part of mlirxla. It imports only itself (relative imports), so a plain copy of this folder
on PYTHONPATH works under any name (`scripts/gpu-pack` ships it as
`mlirxla_cuda_runtime`).

    from mlirxla_cuda_runtime import load
    executable = load("prog.mlirxla")          # a CudaDevice on GPU 0 unless one is given
    outputs = executable.run([x, w])           # numpy arrays in, numpy arrays out
"""

from .executable_file import ExecutableFile, ExecutableFileError, read
from .executor import Executable, load

__all__ = ["Executable", "ExecutableFile", "ExecutableFileError", "load", "read"]
