"""XLA's compile option names read from a serialized `xla/xla.proto` descriptor
(`runtime/pjrt/xla_debug_options.py`), here one built by hand around a library's other bytes,
and the errors XLA gives for names and values it refuses."""

import pytest

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.pjrt import xla_debug_options

LENGTH_DELIMITED, VARINT = 2, 0


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, payload) -> bytes:
    if isinstance(payload, int):
        return varint(number << 3 | VARINT) + varint(payload)
    payload = payload.encode() if isinstance(payload, str) else payload
    return varint(number << 3 | LENGTH_DELIMITED) + varint(len(payload)) + payload


def message(name: str, *option_fields: tuple[str, int]) -> bytes:
    return field(1, name) + b"".join(field(2, field(1, option) + field(5, kind)) for option, kind in option_fields)


DESCRIPTOR = (field(1, "xla/xla.proto") + field(2, "xla") + field(4, message("CompilationEnvironmentsProto"))
              + field(4, message("DebugOptions", ("xla_embed_ir_in_executable", 8), ("xla_dump_max_hlo_modules", 5))))


def test_the_descriptor_is_read_to_its_end_among_other_bytes(monkeypatch):
    library = b"\x00\x7fELF other code" + DESCRIPTOR + b"\x00\x00\xff trailing code"
    start = library.find(xla_debug_options.DESCRIPTOR_START)
    assert library[start:xla_debug_options.descriptor_end(library, start)] == DESCRIPTOR
    monkeypatch.setattr(xla_debug_options, "file_descriptor", lambda: DESCRIPTOR)
    xla_debug_options.debug_option_types.cache_clear()
    try:
        assert xla_debug_options.debug_option_types() == {"xla_embed_ir_in_executable": 8, "xla_dump_max_hlo_modules": 5}
        xla_debug_options.checked("xla_embed_ir_in_executable", "true")
        xla_debug_options.checked("xla_dump_max_hlo_modules", 3)
        xla_debug_options.checked("optimization_level", 1)
        with pytest.raises(MlirxlaError, match="No such compile option: 'xla_dump_max_modules'"):
            xla_debug_options.checked("xla_dump_max_modules", 3)
        with pytest.raises(MlirxlaError, match="value maybe is not a valid bool value."):
            xla_debug_options.checked("xla_embed_ir_in_executable", "maybe")
    finally:
        xla_debug_options.debug_option_types.cache_clear()


def test_without_a_schema_only_mlirxla_options_are_taken(monkeypatch):
    monkeypatch.setattr(xla_debug_options, "file_descriptor", lambda: None)
    xla_debug_options.debug_option_types.cache_clear()
    try:
        with pytest.raises(MlirxlaError, match="No such compile option: 'xla_embed_ir_in_executable'"):
            xla_debug_options.checked("xla_embed_ir_in_executable", True)
    finally:
        xla_debug_options.debug_option_types.cache_clear()
