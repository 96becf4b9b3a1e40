"""What this installation's code is: a digest of mlirxla's Python sources and the version of the
MLIR toolkit that lowers them, taken once, when this module is first imported.

Everything mlirxla keeps across processes keys on it: the runtime library's objects
(`backends/cpu/library_cache.py`), the compile cache's entries and serialized executables
(`runtime/client.py`'s `environment`). The package's version string alone would not do: the
people who use mlirxla change its passes, and an entry compiled by the code before an edit
must never be served to the code after it. Hashing the sources (about 2 MB) takes 5-25 ms.
Taken at import, not at first use: a source edited while a process runs must not name what
that process builds from its older code.
"""

import hashlib
import importlib.metadata
import importlib.util
import os

# The package's source roots (pyproject.toml's package-dir)
PACKAGES = ("mlirxla", "mlirxla.dialects", "mlirxla.transforms", "mlirxla.pipelines", "mlirxla.runtime", "mlirxla.backends")


def source_roots() -> list[str]:
    """The folders of `PACKAGES`, none inside another (an installed wheel nests them)."""
    folders = sorted({os.path.realpath(folder) for name in PACKAGES for folder in importlib.util.find_spec(name).submodule_search_locations})
    return [folder for folder in folders if not any(folder.startswith(other + os.sep) for other in folders)]


def hash_sources(roots: list[str]) -> str:
    """SHA-256 of every Python file under `roots`: its path below its root and its bytes."""
    digest = hashlib.sha256()
    for root in roots:
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    with open(path, "rb") as stream:
                        digest.update(f"{os.path.relpath(path, root)}\0".encode() + stream.read() + b"\0")
    return digest.hexdigest()


def toolkit_version() -> str:
    try:
        return importlib.metadata.version("torch-mlir")
    except importlib.metadata.PackageNotFoundError:  # the toolkit found without its metadata: the sources still key
        return "unknown"


# 64 bits of the digest: enough to tell two states of the sources apart, short enough to read
# in a message that names both
DIGEST = hash_sources(source_roots())[:16]
TOOLKIT = toolkit_version()


def fingerprint() -> str:
    """`sources=<digest>;torch-mlir=<version>`, in the `name=value;...` form of environments."""
    return f"sources={DIGEST};torch-mlir={TOOLKIT}"
