"""The one import point for the MLIR toolkit.

Every other module imports MLIR through here, so the provider (today the upstream MLIR
Python bindings and StableHLO carried by the `torch-mlir==20261001` wheel) can be swapped
in one place.
"""

import importlib
import sys
import types

from torch_mlir import ir, passmanager
from torch_mlir._mlir_libs import _stablehlo as stablehlo
from torch_mlir.dialects._ods_common import _cext

# The dialects' Python modules, imported on first use (`from mlirxla.mlir import linalg` goes
# through `__getattr__`): together they take 0.15 s to import (linalg's named-op definitions
# alone 0.09 s), which a process that only loads cached executables and runs them never needs.
DIALECTS = ("arith", "ext", "func", "gpu", "irdl", "linalg", "llvm", "memref", "scf", "tensor", "vector")


def __getattr__(name: str) -> types.ModuleType:
    if name not in DIALECTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"torch_mlir.dialects.{name}")
    globals()[name] = module
    return module


# The bindings look up a Python module for every dialect whose ops they wrap
# (`<prefix>.<dialect>`), and retry the import each time it fails. Our dialects live in
# mlirxla.dialects (xhlo, check): without this prefix every xhlo op handed to Python costs a
# failed import.
if "mlirxla.dialects" not in _cext.globals.dialect_search_modules:
    _cext.globals.append_dialect_search_prefix("mlirxla.dialects")
# StableHLO has no Python op classes in this wheel, so its lookup failed for every StableHLO
# op handed to Python (two failed imports each: a quarter of the front door's time on the
# transformer). A module without classes, found once, says so.
sys.modules.setdefault("mlirxla.dialects.stablehlo", types.ModuleType(
    "mlirxla.dialects.stablehlo", "StableHLO's ops as the bindings see them: no Python classes, generic views."))

__all__ = ["ir", "passmanager", "stablehlo", *DIALECTS]
