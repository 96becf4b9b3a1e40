"""Collectives across processes over MPI (mpi4py, with the MPI library of the `distributed`
extra): the exchange of a `collectives.Rendezvous` whose devices live in several processes,
as XLA's CPU client runs one process per host with its collectives over Gloo or MPI.

Devices are numbered as in PJRT: global id = process index x local devices + local id, so
process p holds devices p*L .. p*L+L-1 and replica groups and channel ids mean what they
mean in one process. At a meeting of a group, this process's members meet at the local
rendezvous first; the last of them sends their operands, packed in one message, to every
other process holding members of the group, and takes theirs (`MpiExchange.everyone`).
Every process then has every member's operands and computes the group's result in rank
order with the same function as the in-process path: an all-reduce is an all-gather
followed by an ordered local reduction, since `MPI_Allreduce` promises no order of
summation. The results are bitwise equal across the two paths and across runs; the price is
that an all-reduce moves (group size - 1) times the data a ring would (`docs/scaling.md`).

Messages are matched by the meeting: (group, how many times this group met before) hashed
into an MPI tag, on a communicator of their own (a duplicate of COMM_WORLD), so meetings of
different groups that overlap in time do not take each other's messages, and MPI's
non-overtaking order keeps the meetings of one group apart across executions. Every wait
polls nonblocking requests against a deadline (`MLIRXLA_COLLECTIVE_TIMEOUT`): a process
that died or never arrives makes the others fail with an error naming its rank and the
collective, never a hang (a blocking MPI call would wait forever on a dead peer).
"""

from __future__ import annotations

import dataclasses
import pickle
import time
import zlib

import numpy as np

from mlirxla.errors import MlirxlaError

from .collectives import collective_timeout

MISSING_EXTRA = "needs the distributed extra (pip install 'mlirxla[distributed]': mpi4py and an MPI library)"


def mpi():
    """mpi4py's MPI module (initialising MPI), or a one-line error naming the extra."""
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise MlirxlaError(f"running across processes {MISSING_EXTRA}: {error}") from None
    return MPI


class Pending:
    """Nonblocking requests, waited for against a deadline with a short sleep between polls
    (several processes share the cores: spinning would take them from the others)."""

    FIRST_PAUSE, LONGEST_PAUSE = 2e-6, 2e-4

    def __init__(self):
        self.requests: list = []
        self.ranks: list[int] = []

    def add(self, request, rank: int) -> None:
        self.requests.append(request)
        self.ranks.append(rank)

    def wait(self, deadline: float) -> list[int]:
        """Ranks whose requests had not completed by the deadline (none when all did)."""
        pause = self.FIRST_PAUSE
        done = [False] * len(self.requests)
        while True:
            for index, request in enumerate(self.requests):
                if not done[index]:
                    done[index] = request.Test()
            if all(done):
                return []
            if time.monotonic() >= deadline:
                return sorted({rank for rank, finished in zip(self.ranks, done) if not finished})
            time.sleep(pause)
            pause = min(pause * 2, self.LONGEST_PAUSE)


ABANDONED: list = []  # requests a timeout left behind, with their buffers: MPI may still write them


@dataclasses.dataclass
class MpiExchange:
    """This process's part of an execution across `size` processes of `local_devices` each."""

    comm: object  # the exchanges' own communicator
    rank: int
    size: int
    local_devices: int
    tag_bound: int  # the largest tag this MPI takes (MPI_TAG_UB)
    # The process of each device of the program, when not device // local_devices: jax's
    # device assignment may put a program's device d on any process's device.
    placement: tuple[int, ...] | None = None

    @staticmethod
    def create(local_devices: int) -> "MpiExchange":
        MPI = mpi()
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise MlirxlaError("the MPI library does not run MPI calls from several threads at once (MPI_THREAD_MULTIPLE), "
                               "which the devices of a process need")
        world = MPI.COMM_WORLD
        rank, size = world.Get_rank(), world.Get_size()
        if size == 1:
            return MpiExchange(world, rank, size, local_devices, world.Get_attr(MPI.TAG_UB))
        timeout = collective_timeout()
        comm, request = world.Idup()
        starting = Pending()
        starting.add(request, -1)
        if starting.wait(time.monotonic() + timeout):
            raise MlirxlaError(f"process {rank} of {size}: the other processes did not start their collectives' "
                               f"communicator within {timeout:g} s (MLIRXLA_COLLECTIVE_TIMEOUT)")
        return MpiExchange(comm, rank, size, local_devices, comm.Get_attr(MPI.TAG_UB))

    def placed(self, placement: tuple[int, ...]) -> "MpiExchange":
        """This exchange for a program whose device d runs in process placement[d]."""
        return dataclasses.replace(self, placement=tuple(placement))

    def process_of(self, device: int) -> int:
        return self.placement[device] if self.placement is not None else device // self.local_devices

    def local(self) -> list[int]:
        """This process's devices, by global id."""
        if self.placement is not None:
            return [device for device, process in enumerate(self.placement) if process == self.rank]
        return list(range(self.rank * self.local_devices, (self.rank + 1) * self.local_devices))

    def members_here(self, group: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(device for device in group if self.process_of(device) == self.rank)

    def tag(self, key: tuple) -> int:
        return zlib.crc32(repr(key).encode()) % (self.tag_bound + 1)

    def everyone(self, key: tuple, group: tuple[int, ...], contributions: dict, what: str, timeout: float) -> list:
        """Every member's operands in the group's order: this process's (`contributions`), and
        the other processes' of the group, which have the same shapes (the same program)."""
        here = self.members_here(group)
        template = contributions[here[0]]
        per_member = sum(np.asarray(operand).nbytes for operand in template)
        peers = sorted({self.process_of(device) for device in group} - {self.rank})
        if not peers:
            return [contributions[device] for device in group]
        payload = pack([contributions[device] for device in here])
        tag = self.tag(key)
        deadline = time.monotonic() + timeout
        sends, receives = Pending(), Pending()
        inboxes = {}
        for peer in peers:
            members = [device for device in group if self.process_of(device) == peer]
            inboxes[peer] = np.empty(per_member * len(members), np.uint8)
            receives.add(self.comm.Irecv(inboxes[peer], source=peer, tag=tag), peer)
            sends.add(self.comm.Isend(payload, dest=peer, tag=tag), peer)
        missing = receives.wait(deadline)
        late = missing or sends.wait(deadline)
        if late:
            ABANDONED.append((sends, receives, payload, inboxes))
            devices = [device for device in group if self.process_of(device) in late]
            verb = "did not arrive" if missing else "did not take this process's operands"
            raise MlirxlaError(f"{what} on process {self.rank}: process(es) {late} (devices {devices} of the group "
                               f"{list(group)}) {verb} within {timeout:g} s (MLIRXLA_COLLECTIVE_TIMEOUT)")
        operands = {device: contributions[device] for device in here}
        for peer, inbox in inboxes.items():
            members = [device for device in group if self.process_of(device) == peer]
            operands.update(zip(members, unpack(inbox, template, len(members))))
        return [operands[device] for device in group]

    def allgather(self, value, what: str, timeout: float) -> list:
        """Every process's `value` (any picklable), in rank order, within the timeout."""
        payload = np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
        tag = self.tag(("allgather", what))
        deadline = time.monotonic() + timeout
        sends = Pending()
        for peer in range(self.size):
            if peer != self.rank:
                sends.add(self.comm.Isend(payload, dest=peer, tag=tag), peer)
        values = {self.rank: value}
        for peer in range(self.size):
            if peer != self.rank:
                values[peer] = pickle.loads(self.receive_any_size(peer, tag, what, deadline, timeout))
        if late := sends.wait(deadline):
            ABANDONED.append((sends, payload))
            raise MlirxlaError(f"{what} on process {self.rank}: process(es) {late} did not take its part within "
                               f"{timeout:g} s (MLIRXLA_COLLECTIVE_TIMEOUT)")
        return [values[peer] for peer in range(self.size)]

    def receive_any_size(self, peer: int, tag: int, what: str, deadline: float, timeout: float) -> np.ndarray:
        """The next message from `peer` with `tag`, of whatever size, by its deadline."""
        MPI = mpi()
        status = MPI.Status()
        pause = Pending.FIRST_PAUSE
        while (message := self.comm.Improbe(source=peer, tag=tag, status=status)) is None:
            if time.monotonic() >= deadline:
                raise MlirxlaError(f"{what} on process {self.rank}: process {peer} did not arrive within "
                                   f"{timeout:g} s (MLIRXLA_COLLECTIVE_TIMEOUT)")
            time.sleep(pause)
            pause = min(pause * 2, Pending.LONGEST_PAUSE)
        inbox = np.empty(status.Get_count(MPI.BYTE), np.uint8)
        receiving = Pending()
        receiving.add(message.Irecv(inbox), peer)
        if receiving.wait(deadline):
            ABANDONED.append((receiving, inbox))
            raise MlirxlaError(f"{what} on process {self.rank}: process {peer} stopped sending within {timeout:g} s")
        return inbox


def pack(members: list[list]) -> np.ndarray:
    """The members' operands, in order, as one byte buffer (the operand itself when there is
    one: nothing copied)."""
    arrays = [np.ascontiguousarray(operand) for operands in members for operand in operands]
    if len(arrays) == 1:
        return arrays[0].reshape(-1).view(np.uint8)
    return np.concatenate([array.reshape(-1).view(np.uint8) for array in arrays]) if arrays else np.empty(0, np.uint8)


def unpack(inbox: np.ndarray, template: list, members: int) -> list[list[np.ndarray]]:
    """`members` lists of operands shaped as `template`, viewing `inbox`."""
    out, at = [], 0
    for _ in range(members):
        operands = []
        for operand in template:
            operand = np.asarray(operand)
            operands.append(inbox[at:at + operand.nbytes].view(operand.dtype).reshape(operand.shape))
            at += operand.nbytes
        out.append(operands)
    return out
