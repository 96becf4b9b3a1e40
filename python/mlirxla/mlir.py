"""The one import point for the MLIR toolkit.

Every other module imports MLIR through here, so the provider (today the upstream MLIR
Python bindings and StableHLO carried by the `torch-mlir==20261001` wheel) can be swapped
in one place.
"""

from torch_mlir import ir, passmanager
from torch_mlir._mlir_libs import _stablehlo as stablehlo
from torch_mlir.dialects import ext, func

__all__ = ["ext", "func", "ir", "passmanager", "stablehlo"]
