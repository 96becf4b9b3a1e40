"""Stream assignment: which CUDA stream each top-level thunk of a plan runs on, and which
events it waits on first (XLA:GPU's stream assignment, `xla/service/gpu/stream_assignment`,
and the execution-stream assignment that replaced it).

Decides: a thunk depends on an earlier one when their slab slices overlap in a way that
orders them (read after write, write after read, write after write: buffer assignment reuses
slab ranges between values, so a write-after-read on a reused range is as real as a data
dependence). Thunks are visited in plan order and each is placed

1. on a stream whose last thunk already happens before it (a dependence, or one implied by
   stream order and earlier waits): the chain continues there and nothing is serialized that
   was not already; the latest such stream wins, so that a chain stays on one stream;
2. else on a new stream while fewer than `max_streams` are open: independent work overlaps;
3. else on the stream whose last thunk is oldest (it has most likely finished already).

Then, for each dependence not yet implied (by the chosen stream's order or another wait), the
thunk waits on an event its predecessor records; a predecessor only records when some later
thunk waits on it. Why a small fixed number of streams: independent thunks in these plans are
a few GEMMs and kernels at a time (the branches of an attention head, a layer's bias
broadcasts), and each stream adds event traffic; XLA's default is likewise a handful.

The runtime forks the streams off stream 0 at the start of an execution and joins them back
at the end (`runtime/cuda/executor.py`), which a CUDA graph capture requires.
"""

from dataclasses import dataclass

from mlirxla.runtime.executor import dependency_graph

MAX_STREAMS = 4


@dataclass(frozen=True)
class StreamSlot:
    """Where one thunk runs: its stream and the thunks (by index) whose events it waits on."""

    stream: int
    waits: tuple[int, ...] = ()


@dataclass
class StreamAssignment:
    slots: list[StreamSlot]
    stream_count: int
    events: dict[int, int]  # thunk index -> the event it records after running (waited on later)

    def describe(self, names: list[str]) -> str:
        """One line per thunk (named by `names`): its stream, the events it waits on and records."""
        lines = [f"{self.stream_count} stream(s), {len(self.events)} event(s)"]
        for index, (slot, name) in enumerate(zip(self.slots, names)):
            waits = "".join(f" wait e{self.events[w]}" for w in slot.waits)
            record = f" record e{self.events[index]}" if index in self.events else ""
            lines.append(f"  {name}: stream {slot.stream}{waits}{record}")
        return "\n".join(lines) + "\n"


def predecessors(thunks: list) -> list[set[int]]:
    """For each thunk, the earlier thunks it must follow (overlapping slices, see above)."""
    nodes = dependency_graph(thunks)
    before: list[set[int]] = [set() for _ in thunks]
    for index, node in enumerate(nodes):
        for successor in node.successors:
            before[successor].add(index)
    return before


def assign_streams(thunks: list, max_streams: int = MAX_STREAMS) -> StreamAssignment:
    before = predecessors(thunks)
    happens_before: list[int] = []  # per thunk, a bitset of the thunks that finish before it starts
    tails: list[int] = []  # per stream, its last thunk
    slots = []
    for index, dependences in enumerate(before):
        stream = choose_stream(tails, dependences, happens_before, max_streams)
        implied = 0
        if stream < len(tails):
            tail = tails[stream]
            implied = happens_before[tail] | (1 << tail)
        waits = []
        for predecessor in sorted(dependences, reverse=True):  # latest first: its wait implies most
            if not implied >> predecessor & 1:
                waits.append(predecessor)
                implied |= happens_before[predecessor] | (1 << predecessor)
        happens_before.append(implied)
        if stream == len(tails):
            tails.append(index)
        else:
            tails[stream] = index
        slots.append(StreamSlot(stream, tuple(sorted(waits))))
    waited = sorted({w for slot in slots for w in slot.waits})
    return StreamAssignment(slots, max(1, len(tails)), {thunk: event for event, thunk in enumerate(waited)})


def choose_stream(tails: list[int], dependences: set[int], happens_before: list[int], max_streams: int) -> int:
    ancestors = 0
    for predecessor in dependences:
        ancestors |= happens_before[predecessor] | (1 << predecessor)
    continuing = [stream for stream, tail in enumerate(tails) if ancestors >> tail & 1]
    if continuing:
        return max(continuing, key=lambda stream: tails[stream])
    if len(tails) < max_streams:
        return len(tails)
    return min(range(len(tails)), key=lambda stream: tails[stream])
