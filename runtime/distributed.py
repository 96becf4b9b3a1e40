"""One program across the processes of an MPI job (`mpirun -n P`): each process runs its own
devices' part on threads (`devices.execute_on_devices`), their collectives meeting the other
processes' over MPI (`mpi_exchange.py`), and the outputs are gathered so that every process
holds the whole result, as `jax.experimental.multihost_utils.process_allgather` gives it.

Process p of P holds devices p*L .. p*L+L-1 of a program for P*L devices (PJRT's numbering);
every process is given the same global arguments (the same file, or the same seed) and
takes its devices' shards of them, so nothing but collectives and outputs crosses processes.
"""

from __future__ import annotations

import numpy as np

from mlirxla.errors import MlirxlaError

from .buffers import Buffer
from .collectives import collective_timeout
from .devices import DeviceGrid, DeviceRun, execute_on_devices
from .mpi_exchange import MpiExchange, mpi


def process_count() -> int:
    return mpi().COMM_WORLD.Get_size()


def process_rank() -> int:
    return mpi().COMM_WORLD.Get_rank()


def join(device_count: int) -> MpiExchange:
    """This process's part of executions on `device_count` devices shared evenly by the job's
    processes."""
    processes = process_count()
    if device_count % processes:
        raise MlirxlaError(f"the program runs on {device_count} devices, which {processes} processes cannot share evenly "
                           f"(mpirun -n must divide {device_count})")
    return MpiExchange.create(device_count // processes)


def execute_per_device(executable, arguments: list[np.ndarray], grid: DeviceGrid, exchange: MpiExchange) -> list[list[np.ndarray]]:
    """Every device of `grid` runs `executable` on the same `arguments`, this process its own
    devices; every device's outputs, by global id."""
    local = exchange.local()
    outputs = execute_on_devices([executable] * len(local), [arguments] * len(local), grid, local=local, exchange=exchange)
    return gathered(outputs, exchange)


def execute_sharded(loaded, arguments: list[np.ndarray], exchange: MpiExchange) -> list[np.ndarray]:
    """`loaded` (a LoadedExecutable for several devices) on global `arguments`, split by its
    parameter shardings: this process runs its devices' shards; the global outputs."""
    from .sharded import Array, padded

    parameters, outputs = loaded.global_signature
    if len(arguments) != len(parameters):
        raise MlirxlaError(f"the executable takes {len(parameters)} argument(s), got {len(arguments)}")
    arrays = [np.asarray(argument) for argument in arguments]
    for index, (array, expected) in enumerate(zip(arrays, parameters)):
        if array.shape != expected.shape or array.dtype != expected.dtype:
            raise MlirxlaError(f"argument {index}: expected {expected.dtype}{list(expected.shape)}, got {array.dtype}{list(array.shape)}")
    local = exchange.local()
    shards = [[padded(array[spec.sharding.indices(array.shape)[device]], spec.sharding.shard_shape(array.shape))
               for array, spec in zip(arrays, parameters)] for device in local]
    plan = loaded.executable.plan
    grid = DeviceGrid(plan.replica_count, plan.partition_count)
    results = execute_on_devices([DeviceRun(loaded.executable)] * len(local), shards, grid, local=local, exchange=exchange)
    everyone = gathered(results, exchange)
    devices = loaded.devices
    return [Array(value.shape, value.dtype, value.sharding, [Buffer(everyone[d][j], device) for d, device in enumerate(devices)]).to_numpy()
            for j, value in enumerate(outputs)]


def gathered(outputs: list[list[np.ndarray]], exchange: MpiExchange) -> list[list[np.ndarray]]:
    """This process's devices' outputs and every other process's, by global device id."""
    mine = [[np.asarray(value) for value in values] for values in outputs]
    everyone = exchange.allgather(mine, "gathering the outputs", collective_timeout())
    return [values for process in everyone for values in process]
