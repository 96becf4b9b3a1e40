"""A persistent compile cache: executables keyed by a fingerprint of the module and options.

An entry is a directory `<root>/<fingerprint>/` holding `plan.json` (the executable plan:
thunks, allocations, constants), `kernels.a` (the native objects, as the backend's archive
holds them) and `manifest.json` (the SHA-256 of both, and the versions that made them). No
pickle: JSON and raw object code.

Writers build an entry in a private temporary directory and rename it into place, which is
atomic: a concurrent writer of the same fingerprint either wins or finds the entry there,
and a reader never sees half an entry. A reader checks the manifest's hashes; an entry
that fails (truncated, edited, unreadable) is removed and reported as a miss, so it is
compiled again and written anew.

Beside an entry, outside its manifest, a caller may keep views of the compile that nothing
executes (`attach`): the PJRT plugin keeps the partitioned program jax's `as_text()` shows,
so that a compile served from the cache shows it too. One that is missing or unreadable is
simply not there.
"""

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass

from .executable import ExecutablePlan

FORMAT = 5  # 2: host calls of callbacks carry their declared results; 3: plans keep a partitioned entry's global shapes and shardings; 4: control flow carries its native driver; 5: an archive of objects (one per kernel), kernels.a
OBJECTS = "kernels.a"


def fingerprint(module_text: str, options: str, environment: str) -> str:
    """The cache key: what was compiled, how, and by which versions for which CPU."""
    digest = hashlib.sha256()
    for part in (str(FORMAT), module_text, options, environment):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class CacheEntry:
    plan: ExecutablePlan
    object_code: bytes


class CompileCache:
    def __init__(self, root: str):
        self.root = root
        self.hits = 0
        self.misses = 0
        self.corrupted = 0

    def path(self, key: str) -> str:
        return os.path.join(self.root, key)

    def load(self, key: str) -> CacheEntry | None:
        folder = self.path(key)
        if not os.path.isdir(folder):
            self.misses += 1
            return None
        try:
            with open(os.path.join(folder, "manifest.json")) as stream:
                manifest = json.load(stream)
            with open(os.path.join(folder, "plan.json"), "rb") as stream:
                plan_bytes = stream.read()
            with open(os.path.join(folder, OBJECTS), "rb") as stream:
                object_code = stream.read()
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("plan") != _sha256(plan_bytes) or manifest.get("object") != _sha256(object_code):
                raise ValueError("hash mismatch")
            plan = ExecutablePlan.from_json(json.loads(plan_bytes))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            self.corrupted += 1
            self.misses += 1
            shutil.rmtree(folder, ignore_errors=True)
            return None
        self.hits += 1
        return CacheEntry(plan, object_code)

    def store(self, key: str, plan: ExecutablePlan, object_code: bytes) -> None:
        os.makedirs(self.root, exist_ok=True)
        plan_bytes = json.dumps(plan.to_json()).encode()
        manifest = {"format": FORMAT, "plan": _sha256(plan_bytes), "object": _sha256(object_code)}
        staging = tempfile.mkdtemp(prefix=".staging-", dir=self.root)
        try:
            for name, data in (("plan.json", plan_bytes), (OBJECTS, object_code), ("manifest.json", json.dumps(manifest).encode())):
                with open(os.path.join(staging, name), "wb") as stream:
                    stream.write(data)
            try:
                os.rename(staging, self.path(key))
            except OSError:
                pass  # another writer stored the same entry first
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def attach(self, key: str, name: str, data: bytes) -> None:
        """File `name` beside entry `key`, written whole or not at all (nothing without the entry)."""
        folder = self.path(key)
        try:
            handle, staging = tempfile.mkstemp(prefix=".staging-", dir=folder)
        except OSError:
            return
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.replace(staging, os.path.join(folder, name))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(staging)

    def attached(self, key: str, name: str) -> bytes | None:
        try:
            with open(os.path.join(self.path(key), name), "rb") as stream:
                return stream.read()
        except OSError:
            return None
