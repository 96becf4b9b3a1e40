"""The profile in jax's own profiler: what the PJRT plugin's profiler extension hands it.

jax (0.10.2) asks every PJRT plugin it registers for the PJRT profiler extension
(`_profiler.register_plugin_profiler`, called by `xla_bridge.register_plugin`). The plugin
(`mlirxla_pjrt.c`) answers with XLA's plugin profiler API, whose calls come here through the
bridge: when `jax.profiler.trace` (or `start_trace`) starts, `JaxProfilerFeed.start` starts a
`profile.Profile` (or takes note of where the MLIRXLA_PROFILE one stands); when it stops,
`collect` encodes what was recorded as an XSpace, the protobuf jax's profiler merges into its
own. The trace jax writes (TensorBoard, Perfetto through `create_perfetto_link`) then holds a
plane `/device:CUSTOM:0 (mlirxla)`: a line per thread, an event per thunk run, execution and
compile phase, each thunk with its kind, kernel, bytes and flops as stats.

The XSpace is written with a small protobuf writer (varints and length-delimited fields, the
message layout of tsl's xplane.proto), so no protobuf package is needed.
"""

import struct
import threading

from . import profile as profiles

PLANE_NAME = "/device:CUSTOM:0 (mlirxla)"  # jax's trace viewer shows /device:CUSTOM: planes
PLANE_ID = 0

# xplane.proto field numbers
SPACE_PLANES = 1
PLANE_ID_FIELD, PLANE_NAME_FIELD, PLANE_LINES, PLANE_EVENT_METADATA, PLANE_STAT_METADATA = 1, 2, 3, 4, 5
LINE_ID, LINE_NAME, LINE_TIMESTAMP_NS, LINE_EVENTS, LINE_DISPLAY_ID, LINE_DISPLAY_NAME = 1, 2, 3, 4, 10, 11
EVENT_METADATA_ID, EVENT_OFFSET_PS, EVENT_DURATION_PS, EVENT_STATS = 1, 2, 3, 4
STAT_METADATA_ID, STAT_DOUBLE, STAT_UINT64, STAT_INT64, STAT_STR = 1, 2, 3, 4, 5
METADATA_ID, METADATA_NAME, METADATA_DISPLAY_NAME = 1, 2, 4
MAP_KEY, MAP_VALUE = 1, 2


# ---------------------------------------------------------------------- protobuf writing

def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as ten bytes, as protobuf writes them
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def integer(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value) if value else b""


def length_delimited(number: int, data: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(data)) + data


def text(number: int, value: str) -> bytes:
    return length_delimited(number, value.encode()) if value else b""


def double(number: int, value: float) -> bytes:
    return varint(number << 3 | 1) + struct.pack("<d", value)


def stat(metadata_id: int, value) -> bytes:
    field = integer(STAT_METADATA_ID, metadata_id)
    if isinstance(value, str):
        return field + text(STAT_STR, value)
    if isinstance(value, float):
        return field + double(STAT_DOUBLE, value)
    return field + varint(STAT_INT64 << 3) + varint(value)


class Plane:
    """An XPlane being written: metadata ids handed out by name."""

    def __init__(self, plane_id: int, name: str):
        self.plane_id, self.name = plane_id, name
        self.event_ids: dict[str, int] = {}
        self.stat_ids: dict[str, int] = {}
        self.lines: list[bytes] = []

    def event_id(self, name: str) -> int:
        return self.event_ids.setdefault(name, len(self.event_ids) + 1)

    def stat_id(self, name: str) -> int:
        return self.stat_ids.setdefault(name, len(self.stat_ids) + 1)

    def event(self, name: str, offset_ps: int, duration_ps: int, stats: dict) -> tuple[int, bytes]:
        """(its offset, the XEvent as a field of its line)."""
        body = integer(EVENT_METADATA_ID, self.event_id(name)) + integer(EVENT_OFFSET_PS, offset_ps)
        body += integer(EVENT_DURATION_PS, duration_ps)
        for key, value in stats.items():
            body += length_delimited(EVENT_STATS, stat(self.stat_id(key), value))
        return offset_ps, length_delimited(LINE_EVENTS, body)

    def add_line(self, line_id: int, name: str, timestamp_ns: int, events: list[tuple[int, bytes]]) -> None:
        """A line of `events` (from `event`), in time order."""
        body = integer(LINE_ID, line_id) + integer(LINE_DISPLAY_ID, line_id) + text(LINE_NAME, name)
        body += text(LINE_DISPLAY_NAME, name) + integer(LINE_TIMESTAMP_NS, timestamp_ns)
        body += b"".join(event for _, event in sorted(events, key=lambda event: event[0]))
        self.lines.append(length_delimited(PLANE_LINES, body))

    def serialized(self) -> bytes:
        body = integer(PLANE_ID_FIELD, self.plane_id) + text(PLANE_NAME_FIELD, self.name) + b"".join(self.lines)
        for name, number in self.event_ids.items():
            metadata = integer(METADATA_ID, number) + text(METADATA_NAME, name) + text(METADATA_DISPLAY_NAME, name)
            body += length_delimited(PLANE_EVENT_METADATA, integer(MAP_KEY, number) + length_delimited(MAP_VALUE, metadata))
        for name, number in self.stat_ids.items():
            metadata = integer(METADATA_ID, number) + text(METADATA_NAME, name)
            body += length_delimited(PLANE_STAT_METADATA, integer(MAP_KEY, number) + length_delimited(MAP_VALUE, metadata))
        return body


# ---------------------------------------------------------------------- the profile as an XSpace

def xspace(recorded: profiles.Profile, spans: list, executions: list, thunk_runs: list) -> bytes:
    """An XSpace of one plane holding `spans`, `executions` and `thunk_runs` (slices of
    `recorded`'s lists), a line per thread, times on the wall clock as jax's events are."""
    plane = Plane(PLANE_ID, PLANE_NAME)
    origin_ns = recorded.wall_origin_ns
    by_thread: dict[int, list[tuple[int, bytes]]] = {}
    at = lambda start: max(start - recorded.origin_ns, 0) * 1000  # picoseconds after the line's timestamp

    for phase, end in spans:
        name = profiles.PHASE_NAMES.get(phase.category, "{}").format(phase.name)
        by_thread.setdefault(phase.thread, []).append(
            plane.event(name, at(phase.start_ns), (end - phase.start_ns) * 1000, {"category": phase.category}))
    for key, start, end, thread in executions:
        executable = recorded.executables.get(key)
        module = executable.module if executable else "executable"
        by_thread.setdefault(thread, []).append(plane.event(f"execute {module}", at(start), (end - start) * 1000,
                                                            {"module": module}))
    infos = recorded.infos()
    for thunk, start, end, thread in thunk_runs:
        info = recorded.info_of(thunk, infos)
        by_thread.setdefault(thread, []).append(plane.event(
            info.name, at(start), (end - start) * 1000,
            {"kind": info.kind, "kernel": info.routine, "bytes_in": info.bytes_in, "bytes_out": info.bytes_out,
             "flops": round(info.flops), "module": info.module}))
    for number, (thread, events) in enumerate(sorted(by_thread.items()), start=1):
        plane.add_line(number, recorded.thread_names.get(thread, f"thread {thread}"), origin_ns, events)
    return length_delimited(SPACE_PLANES, plane.serialized())


class JaxProfilerFeed:
    """One session of jax's profiler, as the plugin's profiler extension drives it: what was
    recorded between `start` and `stop` (up to now when collected while still running)."""

    def __init__(self, options: bytes = b""):
        self.options = options  # tensorflow.ProfileOptions: nothing in it changes what is recorded
        self.profile: profiles.Profile | None = None
        self.own = False  # whether this session started the profile (else MLIRXLA_PROFILE's is reused)
        self.begin: tuple = ()  # the lengths of the profile's lists at start and at stop
        self.end: tuple | None = None
        self.lock = threading.Lock()

    def lengths(self) -> tuple[int, int, int]:
        return len(self.profile.spans), len(self.profile.executions), len(self.profile.thunk_runs)

    def start(self) -> None:
        with self.lock:
            if self.profile is not None:
                return
            self.profile = profiles.recording_now()
            self.own = self.profile is None
            if self.own:
                self.profile = profiles.start()
            self.begin = self.lengths()

    def stop(self) -> None:
        with self.lock:
            if self.profile is None or self.end is not None:
                return
            self.end = self.lengths()
            if self.own:
                profiles.stop(self.profile)

    def collect(self) -> bytes:
        with self.lock:
            if self.profile is None:
                return b""
            (spans, executions, runs), (spans_end, executions_end, runs_end) = self.begin, self.end or self.lengths()
            recorded = self.profile
            return xspace(recorded, recorded.spans[spans:spans_end], recorded.executions[executions:executions_end],
                          recorded.thunk_runs[runs:runs_end])
