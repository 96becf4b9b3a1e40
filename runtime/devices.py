"""Run one execution on many devices of this process: a thread per device (kept between
executions), each running its executable as that device (`collectives.on_device`), all
meeting at one rendezvous (XLA's PjRtCpuClient running a replicated or partitioned
executable: one execute per device, the collectives in between). The devices run side by
side, so when there are at least as many devices as pool workers each runs its thunks on its
own thread (`executor.without_pool`).

Devices are numbered by flattened id, `replica * partition_count + partition`. The
executables may all be one (SPMD: the same program on every device) or differ per device
(the interpreter tests' `run_parallel` runs a send on one device and a recv on another).
When a device fails, the others' meetings end too, and the execution raises the first
device's own error, not the errors of those it stopped.
"""

import functools
import threading
from collections import deque
from dataclasses import dataclass

import numpy as np

from .collectives import DeviceContext, DeviceFailed, Rendezvous, on_device
from .executor import ThreadPool, without_pool


@dataclass(frozen=True)
class DeviceGrid:
    """How many replicas and partitions an execution runs on."""

    replica_count: int = 1
    partition_count: int = 1

    @property
    def device_count(self) -> int:
        return self.replica_count * self.partition_count

    def place(self, device: int) -> tuple[int, int]:
        """(replica, partition) of a flattened device id."""
        return divmod(device, self.partition_count)


@dataclass(frozen=True)
class DeviceRun:
    """One device's part of an execution over several: the executable, the parameters whose
    memory it may write (donated), and the arguments' addresses when the caller knows them."""

    executable: object
    donated: frozenset = frozenset()
    addresses: list | None = None

    def execute(self, arrays: list) -> list:
        return self.executable.execute(arrays, donated=self.donated, addresses=self.addresses)


class DeviceThreads:
    """Threads kept for the devices of executions, so that an execution starts none (starting
    eight threads cost 0.7 ms, more than a small program runs). Every device of an execution
    gets a thread of its own at once, since they wait for each other at their collectives:
    an execution takes idle threads (device d the d-th when it is idle, so that a profile's
    "device-d" track is device d) and starts more when too few are idle."""

    def __init__(self):
        self.lock = threading.Lock()
        self.threads: list[DeviceThread] = []

    def run(self, work: list) -> None:
        """Call every function of `work` on a thread of its own; return when all returned
        (each catches what it raises)."""
        done = threading.Semaphore(0)
        with self.lock:
            chosen = []
            for index in range(len(work)):
                mine = self.threads[index] if index < len(self.threads) and self.threads[index].idle else None
                thread = mine or next((t for t in reversed(self.threads) if t.idle), None)
                if thread is None:
                    thread = DeviceThread(f"device-{len(self.threads)}")
                    self.threads.append(thread)
                thread.idle = False
                chosen.append(thread)
        for thread, function in zip(chosen, work):
            thread.give(function, done)
        for _ in work:
            done.acquire()


class DeviceThread(threading.Thread):
    """A daemon thread running the functions it is given, one at a time."""

    def __init__(self, name: str):
        super().__init__(name=name, daemon=True)
        self.idle = False
        self.work: deque = deque()
        self.ready = threading.Semaphore(0)
        self.start()

    def give(self, function, done: threading.Semaphore) -> None:
        self.work.append((function, done))
        self.ready.release()

    def run(self) -> None:
        while True:
            self.ready.acquire()
            function, done = self.work.popleft()
            try:
                function()
            finally:
                self.idle = True  # before `done`: once its caller returns, it serves the next execution
                done.release()


THREADS = DeviceThreads()


def execute_on_devices(executables: list, arguments: list[list[np.ndarray]], grid: DeviceGrid,
                       infeeds: list[list[list[np.ndarray]]] | None = None, timeout: float | None = None,
                       outfeeds: list[list] | None = None, local: list[int] | None = None,
                       exchange=None) -> list[list[np.ndarray]]:
    """Run `executables[i]` with `arguments[i]` as device `local[i]` of `grid` (default: every
    device of the grid, all here); the outputs in that order. `infeeds[i]` fills its infeed
    queue (a list of value lists, read in order); what it outfeeds is appended to
    `outfeeds[i]` when given. With devices in other processes, `local` names this process's
    and `exchange` (`mpi_exchange.MpiExchange`) reaches the others."""
    here = list(range(grid.device_count)) if local is None else list(local)
    count = len(here)
    if len(executables) != count or len(arguments) != count:
        raise ValueError(f"{count} devices need {count} executables and argument lists, "
                         f"got {len(executables)} and {len(arguments)}")
    rendezvous = Rendezvous(timeout, exchange)
    outputs: list = [None] * count
    errors: dict[int, BaseException] = {}
    # devices that fill the cores run their kernels whole, each on its own thread
    alone = count >= ThreadPool.shared().workers

    def run(index: int) -> None:
        device = here[index]
        replica, partition = grid.place(device)
        context = DeviceContext(replica, partition, grid.partition_count, rendezvous,
                                deque(infeeds[index]) if infeeds else deque(),
                                outfeeds[index] if outfeeds else [])
        try:
            with on_device(context), without_pool(alone):
                outputs[index] = executables[index].execute(arguments[index])
        except BaseException as error:  # every device's failure is reported after all have stopped
            errors[device] = error
            rendezvous.fail(device, error)

    THREADS.run([functools.partial(run, index) for index in range(count)])
    if errors:
        first_cause = [error for _, error in sorted(errors.items()) if not isinstance(error, DeviceFailed)]
        raise (first_cause or [errors[min(errors)]])[0]
    return outputs
