"""An executable's native objects (one per kernel, driver and the shared one) as one byte
string: a Unix `ar` archive, what `CompiledProgram.object_code` holds, the compile cache stores
and `JitEngine` loads. The members are named by position and carry no dates, owners or modes,
so the same objects make the same bytes; `ar x` takes them apart for a look. A lone ELF object
(what a test may emit) is read as itself."""

from mlirxla.errors import MlirxlaError

MAGIC = b"!<arch>\n"
_HEADER = 60  # name 16, date 12, owner 6, group 6, mode 8, size 10, end marker 2
_END = b"`\n"


def pack(objects: list[bytes]) -> bytes:
    parts = [MAGIC]
    for index, code in enumerate(objects):
        name = f"{index}.o/".encode()
        parts.append(name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
                     + str(len(code)).encode().ljust(10) + _END)
        parts.append(code + (b"\n" if len(code) % 2 else b""))  # members start at even offsets
    return b"".join(parts)


def unpack(data: bytes) -> list[bytes]:
    if not data.startswith(MAGIC):
        return [data]
    objects, offset = [], len(MAGIC)
    while offset < len(data):
        header = data[offset:offset + _HEADER]
        if len(header) != _HEADER or header[58:] != _END or not header[48:58].strip().isdigit():
            raise MlirxlaError(f"the native code archive is damaged at byte {offset}")
        size = int(header[48:58])
        start = offset + _HEADER
        if start + size > len(data):
            raise MlirxlaError(f"the native code archive is truncated at byte {offset}")
        objects.append(data[start:start + size])
        offset = start + size + size % 2
    return objects
