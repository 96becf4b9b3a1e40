"""XLA's own compile options: which names it takes, read from the DebugOptions schema in the
jaxlib that loaded the plugin.

XLA takes any field of its `DebugOptions` message as a compile option (`jax.jit(f,
compiler_options={...})`, the proto's `env_option_overrides`), most of which only some of
its backends read (the `xla_gpu_*` ones on a CPU), and refuses any other name with "No such
compile option: 'name'". mlirxla does the same: options with an equivalent here are
honoured (`compile_options.OPTIONS`), other DebugOptions fields are accepted without effect,
and other names are refused in XLA's words. The field names and types come from the
serialized `xla/xla.proto` descriptor compiled into jaxlib's shared library (the schema of
the XLA jax runs with: a list kept here would drift from it); where it cannot be found, only
mlirxla's own options are taken.
"""

import functools
import mmap
import os

from mlirxla.errors import MlirxlaError

from .protobuf_wire import LENGTH_DELIMITED, fields, read_varint

DESCRIPTOR_START = b"\n\rxla/xla.proto"  # FileDescriptorProto field 1 (name), 13 bytes
FILE_MESSAGES, MESSAGE_NAME, MESSAGE_FIELDS = 4, 1, 2  # FileDescriptorProto, DescriptorProto
FIELD_NAME, FIELD_TYPE = 1, 5  # FieldDescriptorProto
BOOL_TYPE = 8
LAST_FILE_FIELD = 14  # FileDescriptorProto's fields are numbered up to this
# ExecutableBuildOptions' settings XLA takes as compile options beside DebugOptions' fields
BUILD_OPTIONS = ("exec_time_optimization_effort", "memory_fitting_effort", "optimization_level", "memory_fitting_level")
LIBRARIES = ("libjax_common.so", "xla_extension.so")


@functools.cache
def debug_option_types() -> dict[str, int] | None:
    """DebugOptions' field name -> protobuf field type, or None where no jaxlib schema is found."""
    descriptor = file_descriptor()
    if descriptor is None:
        return None
    for number, wire_type, message in fields(descriptor):
        if number == FILE_MESSAGES and wire_type == LENGTH_DELIMITED and message_name(message) == "DebugOptions":
            return dict(field_types(message))
    return None


def message_name(message: bytes) -> str | None:
    return next((value.decode() for number, _, value in fields(message) if number == MESSAGE_NAME), None)


def field_types(message: bytes):
    for number, wire_type, field in fields(message):
        if number == MESSAGE_FIELDS and wire_type == LENGTH_DELIMITED:
            parts = {part: value for part, _, value in fields(field)}
            yield parts[FIELD_NAME].decode(), parts.get(FIELD_TYPE)


def file_descriptor() -> bytes | None:
    """xla/xla.proto's serialized FileDescriptorProto, from jaxlib's library: its fields read
    one after another from the start until one cannot be part of it."""
    try:
        import jaxlib
    except ImportError:
        return None
    for name in LIBRARIES:
        path = os.path.join(os.path.dirname(jaxlib.__file__), name)
        if not os.path.exists(path):
            continue
        with open(path, "rb") as stream, mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
            start = data.find(DESCRIPTOR_START)
            if start >= 0:
                return bytes(data[start:descriptor_end(data, start)])
    return None


def descriptor_end(data, start: int) -> int:
    position = start
    while position < len(data):
        try:
            key, after = read_varint(data, position)
            number, wire_type = key >> 3, key & 7
            if not 1 <= number <= LAST_FILE_FIELD or wire_type != LENGTH_DELIMITED:
                break
            size, after = read_varint(data, after)
        except MlirxlaError:
            break
        position = after + size
    return position


def checked(name: str, value) -> None:
    """Raise XLA's error for an option XLA would refuse: a name it does not know, or a bool
    option given a value that is not a bool."""
    types = debug_option_types()
    if name in BUILD_OPTIONS:
        return
    if types is None or name not in types:
        raise MlirxlaError(f"No such compile option: '{name}'")
    if types[name] == BOOL_TYPE and not isinstance(value, bool) and str(value).lower() not in ("true", "false", "1", "0"):
        raise MlirxlaError(f"value {value} is not a valid bool value.")
