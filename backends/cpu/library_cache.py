"""A persistent cache of the runtime library's objects (`llvm_jit.library_object`) across
processes, so that the row engine's seconds of LLVM work are paid once per host and version
(at install time: `scripts/setup` builds them, `python -m mlirxla.backends.cpu.build_library`),
not once per process.

An object is a file `<directory>/<key>.o` (`directory`: `MLIRXLA_LIBRARY_CACHE`, else
`$XDG_CACHE_HOME/mlirxla/runtime-library`, `~/.cache` without it). The key is a SHA-256 of the
function's name, what its LLVM IR is made from (`mlirxla/sources.py`: the package's Python
sources and the MLIR toolkit's version), the host CPU with the LLVM options it is compiled
with, and the versions of LLVM and llvmlite. The key is taken over the IR's sources rather
than the IR text itself: lowering the engine to LLVM IR costs 0.5-0.9 s, a process would pay
it on every start only to find the object it names; any edit of the sources changes the key
as any edit of the IR would.

A file holds a header naming the payload's SHA-256, then the payload: a read that fails, or a
short or edited file, is a miss (the object is compiled and the file written anew). Files are
written to a temporary name and renamed into place (atomic: a concurrent reader sees the old
file or the whole new one); a directory that cannot be created or written leaves the cache
unused, never an error. A hit touches its file, and a store keeps the `LIMIT` most recently
used files (each source edit makes new keys; the engine's object is about 300 KB).
"""

import contextlib
import hashlib
import os
import tempfile

from mlirxla import sources

VARIABLE = "MLIRXLA_LIBRARY_CACHE"
FORMAT = 1
MAGIC = b"mlirxla runtime library object\n"
LIMIT = 128


def directory() -> str:
    configured = os.environ.get(VARIABLE)
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mlirxla", "runtime-library")


def key(function: str, toolchain: str) -> str:
    """The file name of `function`'s object compiled by `toolchain` (host CPU, LLVM options and
    versions)."""
    digest = hashlib.sha256()
    for part in (str(FORMAT), function, sources.fingerprint(), toolchain):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def read(path: str) -> bytes | None:
    """The object in file `path`, or None when it is absent, unreadable, short or edited."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError:
        return None
    header = len(MAGIC) + 65  # the payload's SHA-256 in hex and a newline
    payload = data[header:]
    if data[:len(MAGIC)] != MAGIC or data[len(MAGIC):header] != hashlib.sha256(payload).hexdigest().encode() + b"\n" or not payload:
        return None
    return payload


def write(path: str, payload: bytes) -> None:
    """File `path` holding `payload`, written whole or not at all (nothing when the folder
    cannot be made or written)."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        handle, staging = tempfile.mkstemp(prefix=".staging-", dir=folder)
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), 0o644)  # mkstemp's 0600 would hide a shared folder's objects from its other users
            stream.write(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(staging, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(staging)
    prune(folder)


def prune(folder: str) -> None:
    """Remove all but the `LIMIT` most recently used files of `folder` (a hit touches its file)."""
    with contextlib.suppress(OSError):
        entries = sorted(os.scandir(folder), key=lambda entry: entry.stat().st_mtime, reverse=True)
        for entry in entries[LIMIT:]:
            os.unlink(entry.path)


def path(function: str, toolchain: str) -> str:
    return os.path.join(directory(), f"{key(function, toolchain)}.o")


def cached_object(function: str, toolchain: str, build) -> bytes:
    """`function`'s object from the cache, else `build()`'s, stored for the next process."""
    file = path(function, toolchain)
    payload = read(file)
    if payload is not None:
        with contextlib.suppress(OSError):
            os.utime(file)
        return payload
    payload = build()
    write(file, payload)
    return payload
