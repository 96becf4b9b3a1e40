"""Collectives on the devices of one process: who this device is, where its group meets, and
what each collective computes (XLA:CPU's collective thunks and its in-process rendezvous).

Each device of an execution runs its program on a thread of its own (`runtime/devices.py`)
inside `on_device(context)`; a thread outside any gets the single device: replica 0,
partition 0, every group that device alone. A collective thunk calls `CALLS[kind]` with its
operands and the plain-data attributes the backend wrote (its process groups as device ids,
dimensions, the reducer's kind).

The devices of a group meet at the execution's `Rendezvous`: each brings its operands and
takes everyone's, in the group's rank order. Which devices are in this process, and how the
operands of the others reach it, is the rendezvous' `Exchange`: `InProcess` (every device
here: nothing to exchange) or `runtime/mpi_exchange.py`'s (devices in several processes, one
message per process of the group over MPI). Either way the group's result is computed from
every member's operands in rank order by the same function, so the two paths give the same
bits. A meeting is keyed by the group and by how many times this device has met that group
before, so that a collective inside a loop meets its own iteration, and every device of a
group must run the group's collectives in one order, as on any machine. Every device folds
the values it takes in rank order, so results are bitwise equal on every device and on
every run, whatever the threads' timing. A device that
does not arrive within the timeout (`MLIRXLA_COLLECTIVE_TIMEOUT` seconds, default 60) ends
the meeting with an error naming the collective, its channel and the missing devices; a
device that fails ends every meeting it would have joined.

`send`/`recv` pass values through a first-in first-out mailbox per channel; `infeed` reads
the device's queue of values and `outfeed` appends to its list.
"""

import os
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from mlirxla.errors import MlirxlaError

DEFAULT_TIMEOUT = 60.0


def collective_timeout() -> float:
    text = os.environ.get("MLIRXLA_COLLECTIVE_TIMEOUT", "")
    try:
        return float(text) if text else DEFAULT_TIMEOUT
    except ValueError:
        raise MlirxlaError(f"MLIRXLA_COLLECTIVE_TIMEOUT must be a number of seconds, got '{text}'") from None


class DeviceFailed(MlirxlaError):
    """A meeting ended because another device of the execution failed first."""


@dataclass
class Meeting:
    kind: str
    ready: threading.Condition  # on the rendezvous' lock: wakes this meeting's members only
    contributions: dict = field(default_factory=dict)  # device -> operands
    done: bool = False
    result: object = None  # what the last to arrive computed for the group
    failure: str | None = None  # why it could not


class InProcess:
    """The exchange of an execution whose devices are all in this process."""

    def members_here(self, group: tuple[int, ...]) -> tuple[int, ...]:
        return group

    def everyone(self, key: tuple, group: tuple[int, ...], contributions: dict, what: str, timeout: float) -> list:
        """Every member's operands in the group's order, given this process's members' (all)."""
        return [contributions[device] for device in group]


class Rendezvous:
    """Where the devices of one execution meet: collectives by group, send/recv by channel."""

    def __init__(self, timeout: float | None = None, exchange=None):
        self.timeout = collective_timeout() if timeout is None else timeout
        self.exchange = exchange or InProcess()
        self.lock = threading.Lock()
        self.condition = threading.Condition(self.lock)  # send/recv's mailboxes
        self.meetings: dict[tuple, Meeting] = {}
        self.arrivals: dict[tuple, int] = {}  # (device, group) -> meetings joined so far
        self.mailboxes: dict[int, deque] = {}
        self.failure: str | None = None

    def fail(self, device: int, error: BaseException) -> None:
        """Device `device` failed: every meeting now waiting, or joined later, ends."""
        with self.condition:
            if self.failure is None:
                self.failure = f"device {device} failed: {error}"
            self.condition.notify_all()
            for meeting in self.meetings.values():
                meeting.ready.notify_all()

    def meet(self, kind: str, device: int, group: tuple[int, ...], operands: list, what: str, combine):
        """Bring `operands` to this device's next meeting of `group`; what `combine` makes of
        everyone's operands (in the group's order), computed once by the last of this
        process's members to arrive (after the exchange brought the other processes'),
        outside the lock (other groups meet meanwhile), while the others wait: their operands
        are views of buffers they do not touch until the meeting ends, so nothing is copied."""
        here = self.exchange.members_here(group)
        with self.condition:
            count = self.arrivals.get((device, group), 0)
            self.arrivals[(device, group)] = count + 1
            key = (group, count)
            meeting = self.meetings.get(key)
            if meeting is None:
                meeting = self.meetings[key] = Meeting(kind, threading.Condition(self.lock))
            if meeting.kind != kind:
                raise MlirxlaError(f"{what}: device {device} runs {kind} where the other devices of its group "
                                   f"{list(group)} run {meeting.kind}")
            meeting.contributions[device] = operands
            last = len(meeting.contributions) == len(here)
            if not last:
                return self.outcome(meeting, device, here, what)
        try:
            meeting.result = combine(self.exchange.everyone(key, group, meeting.contributions, what, self.timeout))
        except BaseException as error:
            meeting.failure = f"device {device} failed: {error}"
            raise
        finally:
            with self.condition:
                meeting.done = True
                meeting.contributions.clear()  # their buffers are theirs again
                del self.meetings[key]
                meeting.ready.notify_all()
        return meeting.result

    def outcome(self, meeting: Meeting, device: int, group: tuple[int, ...], what: str):
        """Wait (holding the lock) until `meeting` is done; its result. `group` is the
        members in this process: once all are here, the last one's exchange with the other
        processes keeps its own time."""
        deadline = time.monotonic() + self.timeout
        while not meeting.done and self.failure is None:
            left = deadline - time.monotonic()
            if left <= 0 and len(meeting.contributions) < len(group):
                missing = [d for d in group if d not in meeting.contributions]
                raise MlirxlaError(f"{what} on device {device}: devices {missing} of its group {list(group)} did not "
                                   f"arrive within {self.timeout:g} s (MLIRXLA_COLLECTIVE_TIMEOUT)")
            meeting.ready.wait(max(left, 0) if len(meeting.contributions) < len(group) else None)
        if not meeting.done:
            raise DeviceFailed(f"{what} on device {device}: {self.failure}")
        if meeting.failure is not None:
            raise DeviceFailed(f"{what} on device {device}: {meeting.failure}")
        return meeting.result

    def send(self, channel: int, values: list) -> None:
        with self.condition:
            self.mailboxes.setdefault(channel, deque()).append(values)
            self.condition.notify_all()

    def receive(self, channel: int, device: int, what: str) -> list:
        with self.condition:
            box = self.mailboxes.setdefault(channel, deque())
            if not self.condition.wait_for(lambda: box or self.failure is not None, self.timeout):
                raise MlirxlaError(f"{what} on device {device}: nothing was sent on channel {channel} within "
                                   f"{self.timeout:g} s (MLIRXLA_COLLECTIVE_TIMEOUT)")
            if not box:
                raise DeviceFailed(f"{what} on device {device}: {self.failure}")
            return box.popleft()


@dataclass
class DeviceContext:
    """One device of an execution: its place in the replica x partition grid, the rendezvous
    it shares with the others, its infeed queue and its outfeed."""

    replica: int = 0
    partition: int = 0
    partition_count: int = 1
    rendezvous: Rendezvous = field(default_factory=Rendezvous)
    infeed: deque = field(default_factory=deque)
    outfeed: list = field(default_factory=list)

    @property
    def device(self) -> int:
        """The flattened id: replica * partition_count + partition."""
        return self.replica * self.partition_count + self.partition


_local = threading.local()


def current() -> DeviceContext:
    context = getattr(_local, "context", None)
    if context is None:
        context = _local.context = DeviceContext()
    return context


@contextmanager
def on_device(context: DeviceContext):
    """Run the body as device `context` on this thread."""
    previous = getattr(_local, "context", None)
    _local.context = context
    try:
        yield context
    finally:
        _local.context = previous


# --- what each collective computes -----------------------------------------------------------

REDUCERS = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


def reduce_in_order(values: list[np.ndarray], reducer: str) -> np.ndarray:
    """The values folded left to right, in a new array."""
    combine = REDUCERS[reducer]
    if values[0].dtype == np.bool_ and reducer in ("add", "multiply", "maximum", "minimum"):
        combine = {"add": np.logical_or, "maximum": np.logical_or}.get(reducer, np.logical_and)
    total = values[0] if len(values) > 1 else np.array(values[0])
    for value in values[1:]:
        total = combine(total, value).astype(values[0].dtype, copy=False)
    return total


def my_group(attributes: dict, device: int) -> tuple[int, ...] | None:
    """The group of `attributes["groups"]` that holds `device`, or None."""
    return next((tuple(g) for g in attributes["groups"] if device in g), None)


def description(kind: str, attributes: dict) -> str:
    channel = attributes.get("channel")
    return f"xhlo.{kind}" + (f" (channel {channel})" if channel else "")


def gather(kind: str, operands: list[np.ndarray], attributes: dict, combine, grouped: bool = True):
    """Meet this device's group: what `combine` makes of every member's operands in rank
    order (once for the group: arrays no member's buffer holds), and this device's rank. A
    device in no group is an error when the op needs one (`grouped`), else None."""
    context = current()
    group = my_group(attributes, context.device)
    if group is None:
        if grouped:
            raise MlirxlaError(f"{description(kind, attributes)}: device {context.device} is in none of its groups "
                               f"{attributes['groups']}")
        return None
    everyone = context.rendezvous.meet(kind, context.device, group, operands, description(kind, attributes), combine)
    return everyone, group.index(context.device)


def all_reduce(operands, attributes):
    def combine(everyone):
        return [reduce_in_order([values[i] for values in everyone], attributes["reducer"]) for i in range(len(operands))]

    return gather("all_reduce", operands, attributes, combine)[0]


def all_gather(operands, attributes):
    def combine(everyone):
        return [np.concatenate([values[i] for values in everyone], axis=attributes["dimension"]) for i in range(len(operands))]

    return gather("all_gather", operands, attributes, combine)[0]


def reduce_scatter(operands, attributes):
    def combine(everyone):
        total = reduce_in_order([values[0] for values in everyone], attributes["reducer"])
        return np.split(total, len(everyone), axis=attributes["dimension"])

    parts, rank = gather("reduce_scatter", operands, attributes, combine)
    return [parts[rank]]


def all_to_all(operands, attributes):
    split, concat = attributes["split_dimension"], attributes["concat_dimension"]
    count = attributes["split_count"]

    def combine(everyone):  # every rank's results
        parts = [[np.split(value, count, axis=split) for value in values] for values in everyone]
        return [[np.concatenate([parts[member][i][rank] for member in range(len(everyone))], axis=concat)
                 for i in range(len(operands))] for rank in range(len(everyone))]

    everyone, rank = gather("all_to_all", operands, attributes, combine)
    return everyone[rank]


def copies(everyone):
    return [[np.array(value) for value in values] for values in everyone]


def collective_permute(operands, attributes):
    """Every device of the permutation's group brings its operand; a device takes its source's,
    or zeros when nobody sends to it."""
    met = gather("collective_permute", operands, attributes, copies, grouped=False)
    device = current().device
    source = next((s for s, t in attributes["pairs"] if t == device), None)
    if met is None or source is None:
        return [np.zeros_like(operands[0])]
    everyone, _ = met
    group = my_group(attributes, device)
    return [everyone[group.index(source)][0]]


def collective_broadcast(operands, attributes):
    """Each result is the group's first device's operand, or with a dynamic root (the last
    operand, one index per result) the operand of the member it names; zeros on devices in no
    group."""
    data = operands[:-1] if attributes.get("dynamic_root") else operands
    met = gather("collective_broadcast", operands, attributes, copies, grouped=False)
    if met is None:
        return [np.zeros_like(operand) for operand in data]
    everyone, _ = met
    roots = [int(root) for root in operands[-1]] if attributes.get("dynamic_root") else [0] * len(data)
    return [everyone[root][index] for index, root in enumerate(roots)]


def collective_reduce(operands, attributes):
    """The group's first device takes the reduction; the others (and devices in no group) zeros."""
    def combine(everyone):
        return [reduce_in_order([values[i] for values in everyone], attributes["reducer"]) for i in range(len(operands))]

    met = gather("collective_reduce", operands, attributes, combine, grouped=False)
    if met is None or met[1] != 0:
        return [np.zeros_like(operand) for operand in operands]
    return met[0]


def replica_id(operands, attributes):
    return [np.uint32(current().replica)]


def partition_id(operands, attributes):
    return [np.uint32(current().partition)]


def send(operands, attributes):
    current().rendezvous.send(attributes["channel"], [np.array(operand) for operand in operands])
    return []


def recv(operands, attributes):
    context = current()
    return context.rendezvous.receive(attributes["channel"], context.device, description("recv", attributes))


def infeed(operands, attributes):
    context = current()
    if not context.infeed:
        raise MlirxlaError(f"xhlo.infeed on device {context.device}: the infeed is empty")
    return list(context.infeed.popleft())


def outfeed(operands, attributes):
    current().outfeed.append([np.array(operand) for operand in operands])
    return []


CALLS = {
    "all_reduce": all_reduce, "all_gather": all_gather, "reduce_scatter": reduce_scatter, "all_to_all": all_to_all,
    "collective_permute": collective_permute, "collective_broadcast": collective_broadcast,
    "collective_reduce": collective_reduce, "replica_id": replica_id, "partition_id": partition_id,
    "send": send, "recv": recv, "infeed": infeed, "outfeed": outfeed,
}
