"""Backends by name. `backend("cpu")` imports the backend's package (lazily: asking for the
names costs nothing) and returns its `Backend`; `--backend NAME` on the tools,
`Client(backend=NAME)` and `MLIRXLA_BACKEND=NAME` for the JAX plugin all come here."""

import importlib
import os

from mlirxla.errors import MlirxlaError

from .backend import Backend

# name -> the package whose BACKEND it is
BACKENDS = {
    "cpu": "mlirxla.backends.cpu",
    "cuda": "mlirxla.backends.cuda",
    "cuda-host": "mlirxla.backends.cuda.host_check",
    "iree": "mlirxla.backends.iree",
    "reference": "mlirxla.backends.reference",
}
DEFAULT = "cpu"


def names() -> list[str]:
    return list(BACKENDS)


def backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise MlirxlaError(f"unknown backend '{name}' (known: {', '.join(names())})")
    return importlib.import_module(BACKENDS[name]).BACKEND


def from_environment() -> str:
    """The backend `MLIRXLA_BACKEND` names, or the default."""
    name = os.environ.get("MLIRXLA_BACKEND", DEFAULT)
    backend(name)
    return name
