"""The strings an MLIR bytecode file holds, read from its string section alone.

The front door asks of bytecode which dialects it names: sdy shardings need jaxlib's MLIR,
the VHLO dialect makes it a portable artifact, quant types need their legalization. A
substring test over the whole file answered that before, and the random bytes of a large
constant held `sdy` often enough (a 64 MB float32 weight about half the time) that such a
compile went through jaxlib's text round trip for nothing, two seconds more.

Every dialect a file uses is named by one entry of its string section, which bytecode keeps
apart from attribute payloads such as a constant's data; so a dialect's name among those
entries is the exact test, and a string attribute spelled like a dialect name errs on the
safe side. The format, as MLIR's bytecode reader reads it: the magic `ML\\xefR`, a version,
a NUL-terminated producer, then sections of an id byte (high bit: aligned), a length, for an
aligned section its alignment and 0xCB padding up to it, and the payload. The string section
(id 0) is a count, each entry's length with its NUL (last entry first), then the entries.
Integers are prefix varints: the first byte's trailing zeros count the bytes that follow.
"""

MAGIC = b"ML\xefR"
STRING_SECTION = 0
ALIGNED = 0x80


class Unreadable(Exception):
    """The data end before a field the format says is there."""


class Reader:
    def __init__(self, data: bytes, position: int = 0):
        self.data, self.position = data, position

    def byte(self) -> int:
        if self.position >= len(self.data):
            raise Unreadable
        self.position += 1
        return self.data[self.position - 1]

    def take(self, count: int) -> bytes:
        if self.position + count > len(self.data):
            raise Unreadable
        self.position += count
        return self.data[self.position - count:self.position]

    def varint(self) -> int:
        first = self.byte()
        if first == 0:
            return int.from_bytes(self.take(8), "little")
        following = (first & -first).bit_length() - 1
        return int.from_bytes(bytes([first]) + self.take(following), "little") >> (following + 1)

    def nul_terminated(self) -> bytes:
        end = self.data.find(b"\0", self.position)
        if end < 0:
            raise Unreadable
        text, self.position = self.data[self.position:end], end + 1
        return text


def string_section(data: bytes) -> bytes:
    """The payload of the string section of bytecode `data`; empty where it has none. Other
    sections are stepped over by their lengths, never copied: one may hold a large constant."""
    reader = Reader(data, len(MAGIC))
    reader.varint()
    reader.nul_terminated()
    while reader.position < len(data):
        tag = reader.byte()
        length = reader.varint()
        if tag & ALIGNED:
            alignment = reader.varint()
            while alignment and reader.position % alignment:
                if reader.byte() != 0xCB:
                    raise Unreadable
        if tag & ~ALIGNED == STRING_SECTION:
            return reader.take(length)
        if reader.position + length > len(data):
            raise Unreadable
        reader.position += length
    return b""


def strings(data: bytes) -> frozenset[bytes] | None:
    """The entries of the string section of bytecode `data`, without their NULs; None where
    `data` is not bytecode this reader can follow."""
    if not data.startswith(MAGIC):
        return None
    try:
        payload = string_section(data)
        if not payload:
            return frozenset()
        reader = Reader(payload)
        lengths = [reader.varint() for _ in range(reader.varint())]
        entries, end = [], len(payload)
        for length in lengths:
            start = end - length
            if start < reader.position or length == 0:
                raise Unreadable
            entries.append(payload[start:end - 1])
            end = start
        if end != reader.position:
            raise Unreadable
        return frozenset(entries)
    except Unreadable:
        return None


def names_dialect(data: bytes, dialect: str) -> bool:
    """Whether bytecode `data` may use `dialect`: its name is a string of the file; where the
    file cannot be read, whether the name occurs in it at all."""
    entries = strings(data)
    if entries is None:
        return dialect.encode() in data
    return dialect.encode() in entries
