"""Run one execution on many devices of this process: a thread per device, each running its
executable as that device (`collectives.on_device`), all meeting at one rendezvous
(XLA's PjRtCpuClient running a replicated or partitioned executable: one execute per
device, the collectives in between).

Devices are numbered by flattened id, `replica * partition_count + partition`. The
executables may all be one (SPMD: the same program on every device) or differ per device
(the interpreter tests' `run_parallel` runs a send on one device and a recv on another).
When a device fails, the others' meetings end too, and the execution raises the first
device's own error, not the errors of those it stopped.
"""

import threading
from collections import deque
from dataclasses import dataclass

import numpy as np

from .collectives import DeviceContext, DeviceFailed, Rendezvous, on_device


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


def execute_on_devices(executables: list, arguments: list[list[np.ndarray]], grid: DeviceGrid,
                       infeeds: list[list[list[np.ndarray]]] | None = None, timeout: float | None = None,
                       outfeeds: list[list] | None = None) -> list[list[np.ndarray]]:
    """Run `executables[d]` on device d with `arguments[d]` for every device of `grid`; the
    outputs per device. `infeeds[d]` fills device d's infeed queue (a list of value lists,
    read in order); what a device outfeeds is appended to `outfeeds[d]` when given."""
    count = grid.device_count
    if len(executables) != count or len(arguments) != count:
        raise ValueError(f"{count} devices need {count} executables and argument lists, "
                         f"got {len(executables)} and {len(arguments)}")
    rendezvous = Rendezvous(timeout)
    outputs: list = [None] * count
    errors: dict[int, BaseException] = {}

    def run(device: int) -> None:
        replica, partition = grid.place(device)
        context = DeviceContext(replica, partition, grid.partition_count, rendezvous,
                                deque(infeeds[device]) if infeeds else deque(),
                                outfeeds[device] if outfeeds else [])
        try:
            with on_device(context):
                outputs[device] = executables[device].execute(arguments[device])
        except BaseException as error:  # every device's failure is reported after all have stopped
            errors[device] = error
            rendezvous.fail(device, error)

    threads = [threading.Thread(target=run, args=(device,), name=f"device-{device}") for device in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        first_cause = [error for _, error in sorted(errors.items()) if not isinstance(error, DeviceFailed)]
        raise (first_cause or [errors[min(errors)]])[0]
    return outputs
