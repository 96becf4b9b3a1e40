"""Collectives' bandwidth: in one process (N devices on threads, `collectives.Rendezvous`)
against across N processes over MPI (`mpi_exchange.MpiExchange`, one device each), for
all-reduce, all-gather, reduce-scatter and all-to-all of 1 KB to 64 MB per device, next to
the memory bandwidth of a STREAM triad measured in the same run, so that each path's cost
is a ratio to what the memory can do.

    python benchmarks/collectives.py [--processes 2] [--sizes 1K,64K,4M,64M] [--json]

Each collective is called directly, as the collective thunks call it (`collectives.CALLS`),
on every device at once, repeated, after one untimed call that brings every device to the
same point; a row's time is process 0's (every device ends a collective together). The
bandwidth is bytes per device / seconds per collective (the "algorithm bandwidth"). The MPI
side is this script again under `mpiexec -n N` (the distributed extra); without it the MPI
columns say why they are empty.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
DEFAULT_SIZES = "1K,16K,256K,4M,64M"
TARGET_SECONDS = 0.3  # per measurement: enough repeats of a small collective to see past the clock


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def size_text(size: int) -> str:
    return f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"


def attributes(kind: str, devices: int) -> dict:
    groups = [list(range(devices))]
    return {"all_reduce": {"groups": groups, "reducer": "add"},
            "all_gather": {"groups": groups, "dimension": 0},
            "reduce_scatter": {"groups": groups, "dimension": 0, "reducer": "add"},
            "all_to_all": {"groups": groups, "split_dimension": 0, "concat_dimension": 0, "split_count": devices}}[kind]


class Repeated:
    """A stand-in for an executable: `execute` calls one collective `repeats` times, as this
    device."""

    def __init__(self, kind: str, devices: int, repeats: int):
        from mlirxla.runtime import collectives

        self.call = collectives.CALLS[kind]
        self.attributes = attributes(kind, devices)
        self.repeats = repeats

    def execute(self, arguments):
        for _ in range(self.repeats):
            self.call(arguments, self.attributes)
        return []


def repeats_for(size: int) -> int:
    return int(min(200, max(2, (4 << 20) // max(size, 1))))


def measure(kind: str, size: int, devices: int, local: list[int], exchange) -> float:
    """Seconds per collective of `size` bytes per device, on `local` devices of `devices`."""
    from mlirxla.runtime.devices import DeviceGrid, execute_on_devices

    grid = DeviceGrid(devices, 1)
    element_count = max(size // 4, devices) // devices * devices  # split evenly by reduce-scatter and all-to-all
    operands = [[np.full(element_count, float(device + 1), np.float32)] for device in local]
    execute_on_devices([Repeated(kind, devices, 1)] * len(local), operands, grid, local=local, exchange=exchange)
    repeats = repeats_for(size)
    start = time.perf_counter()
    execute_on_devices([Repeated(kind, devices, repeats)] * len(local), operands, grid, local=local, exchange=exchange)
    return (time.perf_counter() - start) / repeats


def triad_bandwidth(megabytes: int = 64, repeats: int = 5) -> float:
    """Bytes per second of the STREAM triad a = b + s*c on float64 arrays of `megabytes`
    each, counted as STREAM counts it (three arrays moved), the best of `repeats`."""
    count = (megabytes << 20) // 8
    b, c, a = np.ones(count), np.full(count, 2.0), np.empty(count)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
        best = min(best, time.perf_counter() - start)
    return 3 * count * 8 / best


def in_process(sizes: list[int], devices: int) -> dict:
    return {(kind, size): measure(kind, size, devices, list(range(devices)), None) for kind in KINDS for size in sizes}


def across_processes(sizes: list[int], processes: int) -> tuple[dict, str | None]:
    """Seconds per collective across `processes` processes, or why there are none."""
    mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return {}, "no mpi4py: install the distributed extra"
    if not mpiexec.exists():
        return {}, f"no {mpiexec}: install the distributed extra"
    done = subprocess.run([str(mpiexec), "-n", str(processes), sys.executable, __file__, "--worker",
                           "--sizes", ",".join(map(str, sizes))], capture_output=True, text=True)
    if done.returncode != 0:
        return {}, f"mpiexec failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    return {(row["kind"], row["size"]): row["seconds"] for row in rows}, None


def worker(sizes: list[int]) -> None:
    """One process of the MPI job: one device each; process 0 prints the times as JSON."""
    from mlirxla.runtime import distributed

    exchange = distributed.join(distributed.process_count())
    rows = [{"kind": kind, "size": size, "seconds": measure(kind, size, exchange.size, exchange.local(), exchange)}
            for kind in KINDS for size in sizes]
    if exchange.rank == 0:
        print(json.dumps(rows))


def table(rows: list[dict], triad: float, processes: int, why_no_mpi: str | None) -> str:
    lines = [f"{processes} devices: in one process (threads) and across {processes} processes (MPI, one device each); "
             f"memory triad {triad / 1e9:.2f} GB/s",
             f"{'collective':<15} {'per device':>10} {'in-process GB/s':>16} {'MPI GB/s':>9} {'MPI / in-process':>17} "
             f"{'in-process / triad':>19} {'MPI / triad':>12}"]
    for row in rows:
        mpi = row["mpi_bandwidth"]
        lines.append(f"{row['kind']:<15} {size_text(row['size']):>10} {row['in_process_bandwidth'] / 1e9:>16.3f} "
                     f"{(mpi or 0) / 1e9:>9.3f} {row['mpi_over_in_process'] or 0:>17.2f} "
                     f"{row['in_process_bandwidth'] / triad:>19.3f} {(mpi or 0) / triad:>12.3f}")
    if why_no_mpi:
        lines.append(f"no MPI columns: {why_no_mpi}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="devices in one process, and processes across (default 2)")
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=f"bytes per device, comma-separated (default {DEFAULT_SIZES})")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    sizes = [parse_size(text) for text in arguments.sizes.split(",")]
    os.environ.setdefault("MLIRXLA_COLLECTIVE_TIMEOUT", "600")  # a 64 MB collective on a loaded machine is slow, not lost
    if arguments.worker:
        worker(sizes)
        return 0
    triad = triad_bandwidth()
    local = in_process(sizes, arguments.processes)
    across, why_no_mpi = across_processes(sizes, arguments.processes)
    triad = max(triad, triad_bandwidth())  # measured before and after: the better of the two
    rows = []
    for kind in KINDS:
        for size in sizes:
            in_bandwidth = size / local[(kind, size)]
            mpi_bandwidth = size / across[(kind, size)] if (kind, size) in across else None
            rows.append({"kind": kind, "size": size, "in_process_bandwidth": in_bandwidth, "mpi_bandwidth": mpi_bandwidth,
                         "mpi_over_in_process": mpi_bandwidth / in_bandwidth if mpi_bandwidth else None,
                         "in_process_over_triad": in_bandwidth / triad,
                         "mpi_over_triad": mpi_bandwidth / triad if mpi_bandwidth else None})
    if arguments.json:
        print(json.dumps({"processes": arguments.processes, "triad_bandwidth": triad, "why_no_mpi": why_no_mpi, "rows": rows}, indent=1))
    else:
        print(table(rows, triad, arguments.processes, why_no_mpi))
    return 0


if __name__ == "__main__":
    sys.exit(main())
