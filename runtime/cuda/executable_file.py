"""The `.mlirxla` file of the cuda backend: one compiled program as plain data.

    MLIRXLA-CUDA\\n                   magic (13 bytes)
    <8 bytes, little-endian>          length of the header
    <header: JSON, UTF-8>             format version, the plan, where each blob lies
    <blobs>                           cubin, PTX, constants' bytes, back to back

The header's `plan` holds the slab size, the parameters and outputs (offset in the slab,
shape, dtype), the constants (offset, blob), the kernels' names and the thunk list:
`launch` (kernel, grid, block, dynamic shared bytes, argument offsets into the slab),
`gemm` (dtype, m, n, k, batch, transposes, offsets of lhs, rhs, out), `memcpy` (source,
destination, bytes), and `while` / `conditional` holding thunk lists of their own. No code
is pickled: reading a file runs nothing but `json.loads`.

Version 2 adds streams: the plan's `streams` and `events` counts, and on each top-level
thunk its `stream`, the events it `wait`s on before it runs and the event it `record`s after.
A version 1 file (no streams: everything on stream 0, in order) is still read.

This module is shared by the compiler (which writes) and the runtime (which reads): it uses
the standard library only, so that the runtime's folder works from a plain copy.
"""

import json
import struct
from dataclasses import dataclass, field

MAGIC = b"MLIRXLA-CUDA\n"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)


class ExecutableFileError(ValueError):
    """The file is not an mlirxla CUDA executable this runtime reads."""


@dataclass
class ExecutableFile:
    plan: dict
    blobs: dict[str, bytes] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        layout, offset = {}, 0
        for name, data in self.blobs.items():
            layout[name] = [offset, len(data)]
            offset += len(data)
        header = json.dumps({"format": "mlirxla-cuda", "version": FORMAT_VERSION, "plan": self.plan, "blobs": layout},
                            sort_keys=True).encode()
        return MAGIC + struct.pack("<Q", len(header)) + header + b"".join(self.blobs.values())

    @staticmethod
    def from_bytes(data: bytes) -> "ExecutableFile":
        if not data.startswith(MAGIC):
            raise ExecutableFileError("not an mlirxla CUDA executable (no MLIRXLA-CUDA magic)")
        start = len(MAGIC) + 8
        (length,) = struct.unpack("<Q", data[len(MAGIC):start])
        try:
            header = json.loads(data[start:start + length])
        except ValueError as error:
            raise ExecutableFileError(f"the header is not JSON: {error}") from None
        if header.get("format") != "mlirxla-cuda" or header.get("version") not in READABLE_VERSIONS:
            raise ExecutableFileError(f"format {header.get('format')} version {header.get('version')}: "
                                      f"this runtime reads mlirxla-cuda versions {', '.join(map(str, READABLE_VERSIONS))}")
        base = start + length
        blobs = {name: data[base + offset: base + offset + size] for name, (offset, size) in header["blobs"].items()}
        return ExecutableFile(header["plan"], blobs)


def read(path: str) -> ExecutableFile:
    with open(path, "rb") as stream:
        return ExecutableFile.from_bytes(stream.read())
