"""Compile options from JAX: the serialized CompileOptionsProto PJRT_Client_Compile receives,
and XLA_FLAGS, mapped onto the runtime's CompileOptions.

`jax.jit(f).lower(x).compile(compiler_options={...})` arrives as the proto's
`env_option_overrides` (field 7: a map from option name to a value); XLA_FLAGS
(`--name=value ...`) gives the same options for every compile, the compile's own winning.
XLA's debug options with an equivalent here, under their XLA names:

- `xla_dump_to`: the dump directory;
- `xla_dump_hlo_pass_re`: which passes dump the module they changed;
- `xla_disable_hlo_passes`: passes (or pipelines) to skip, comma-separated.

Any other field of XLA's DebugOptions (and XLA's effort and level settings) is accepted
without effect, as XLA's backends take the fields they do not read; any other name is refused
in XLA's words (`xla_debug_options.py`). Of the build options the replica and partition
counts and the device assignment are read (`build_grid`: the devices a program runs on), and
`allow_spmd_sharding_propagation_to_parameters` (`open_parameters`: jax sets it for the
arguments a jit leaves unspecified, and reads back the shardings propagation chose); the rest
(argument layouts among them) is not: executables are row-major. The proto is read with a
small wire-format reader (`protobuf_wire.py`), so no protobuf package is needed.
"""

import os
import shlex
from dataclasses import dataclass, replace

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import CompileOptions

from . import xla_debug_options
from .protobuf_wire import LENGTH_DELIMITED, VARINT, fields, read_varint

BUILD_OPTIONS, ENV_OPTION_OVERRIDES = 3, 7  # CompileOptionsProto
NUM_REPLICAS, NUM_PARTITIONS, DEVICE_ASSIGNMENT = 4, 5, 9  # ExecutableBuildOptionsProto
PROPAGATION_TO_PARAMETERS = 18  # ExecutableBuildOptionsProto: repeated bool, one per parameter
COMPUTATION_DEVICES, REPLICA_DEVICE_IDS = 3, 1  # DeviceAssignmentProto, its ComputationDevice
MAP_KEY, MAP_VALUE = 1, 2
STRING_FIELD, BOOL_FIELD, INT_FIELD = 1, 2, 3


def option_overrides(proto: bytes) -> dict[str, object]:
    overrides = {}
    for number, wire_type, entry in fields(proto):
        if number != ENV_OPTION_OVERRIDES or wire_type != LENGTH_DELIMITED:
            continue
        name, value = "", None
        for entry_number, _, entry_value in fields(entry):
            if entry_number == MAP_KEY:
                name = entry_value.decode()
            elif entry_number == MAP_VALUE:
                for kind, _, raw in fields(entry_value):
                    value = raw.decode() if kind == STRING_FIELD else bool(raw) if kind == BOOL_FIELD else raw
        overrides[name] = value
    return overrides


def submessages(data: bytes, number: int):
    return [value for field, wire_type, value in fields(data) if field == number and wire_type == LENGTH_DELIMITED]


@dataclass(frozen=True)
class BuildGrid:
    """What the build options say of the devices: the replica and partition counts (0 when not
    given) and the device of each (replica, partition) by flattened id, `replica *
    partition_count + partition` (empty when no device assignment is given)."""

    replica_count: int = 0
    partition_count: int = 0
    devices: tuple[int, ...] = ()


def build_grid(proto: bytes | None) -> BuildGrid:
    """The build options' replica and partition counts and device assignment. The assignment
    holds one ComputationDevice per partition, each listing the device of every replica."""
    grid = BuildGrid()
    for build in submessages(proto or b"", BUILD_OPTIONS):
        for number, wire_type, value in fields(build):
            if number == NUM_REPLICAS and wire_type == VARINT:
                grid = replace(grid, replica_count=value)
            elif number == NUM_PARTITIONS and wire_type == VARINT:
                grid = replace(grid, partition_count=value)
        for assignment in submessages(build, DEVICE_ASSIGNMENT):
            columns = [replica_devices(computation) for computation in submessages(assignment, COMPUTATION_DEVICES)]
            if any(len(column) != len(columns[0]) for column in columns):
                raise MlirxlaError("compile options: the device assignment's computations list different numbers of replicas")
            if columns:
                grid = replace(grid, devices=tuple(column[replica] for replica in range(len(columns[0])) for column in columns))
    return grid


def replica_devices(computation: bytes) -> list[int]:
    devices = []
    for field, wire_type, value in fields(computation):
        if field == REPLICA_DEVICE_IDS:
            devices += packed_varints(value) if wire_type == LENGTH_DELIMITED else [value]
    return devices


def packed_varints(data: bytes) -> list[int]:
    values, position = [], 0
    while position < len(data):
        value, position = read_varint(data, position)
        values.append(value)
    return values


OPTIONS = ("xla_dump_to", "xla_dump_hlo_pass_re", "xla_disable_hlo_passes")


def open_parameters(proto: bytes | None) -> tuple[int, ...]:
    """The parameters whose sharding the build options leave to the compiler."""
    allowed = []
    for build in submessages(proto or b"", BUILD_OPTIONS):
        for number, wire_type, value in fields(build):
            if number == PROPAGATION_TO_PARAMETERS:
                allowed += packed_varints(value) if wire_type == LENGTH_DELIMITED else [value]
    return tuple(index for index, allow in enumerate(allowed) if allow)


def xla_flags() -> dict[str, str]:
    """The `--name=value` settings of XLA_FLAGS that have an equivalent here (XLA_FLAGS is
    shared with jax's own backends, so the others are theirs, not errors)."""
    found = {}
    for flag in shlex.split(os.environ.get("XLA_FLAGS", "")):
        name, _, value = flag.lstrip("-").partition("=")
        if name in OPTIONS:
            found[name] = value
    return found


def compile_options_from_proto(proto: bytes | None) -> CompileOptions:
    overrides = option_overrides(proto or b"")
    for name in sorted(set(overrides) - set(OPTIONS)):
        xla_debug_options.checked(name, overrides[name])
    settings = xla_flags() | {name: value for name, value in overrides.items() if name in OPTIONS}
    disabled = settings.get("xla_disable_hlo_passes") or ""
    return CompileOptions(dump_to=settings.get("xla_dump_to") or None, dump_pass_re=settings.get("xla_dump_hlo_pass_re") or None,
                          disable_passes=tuple(name for name in str(disabled).split(",") if name),
                          open_parameters=open_parameters(proto))
