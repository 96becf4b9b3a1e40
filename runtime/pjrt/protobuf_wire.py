"""Protocol buffers' wire format, read without a protobuf package: varints and the fields of a
message (the compile options PJRT hands the plugin, the descriptor of XLA's options)."""

from mlirxla.errors import MlirxlaError

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if position >= len(data):
            raise MlirxlaError("compile options: truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def fields(data: bytes):
    """(field number, wire type, value) per field: an int for varints and fixed-size fields,
    bytes for length-delimited ones."""
    position = 0
    while position < len(data):
        key, position = read_varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, position = read_varint(data, position)
        elif wire_type in (FIXED64, FIXED32):
            width = 8 if wire_type == FIXED64 else 4
            value, position = int.from_bytes(data[position:position + width], "little"), position + width
        elif wire_type == LENGTH_DELIMITED:
            size, position = read_varint(data, position)
            value, position = data[position:position + size], position + size
        else:
            raise MlirxlaError(f"compile options: unsupported wire type {wire_type}")
        yield number, wire_type, value
