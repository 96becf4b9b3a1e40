"""One program across the processes of a real MPI job (`mpirun -n 2` and `-n 4` on this
machine, oversubscribed): `mlirxla-run --distributed` on the sharded example and on a
program for four replicas that runs every kind of collective, each bitwise equal to the
same program on four devices of one process; `Client(distributed=True)`; operands packed into
one message per process and unpacked whole (any dtype, 0-d, empty); a process killed, or
hung, mid-run ends every process within twice the collective timeout with a non-zero exit
(the hung one named, with the collective, in the errors of those waiting for it). Skipped
without the distributed extra (mpi4py and MPICH's mpiexec)."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from .conftest import REPOSITORY, mpi_environment, mpich_file

MPIEXEC = pathlib.Path(mpich_file("mpiexec") or pathlib.Path(sys.executable).parent / "mpiexec")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or not MPIEXEC.exists(),
                                reason="the distributed extra (mpi4py, mpich) is not installed")

TIMEOUT = 10  # MLIRXLA_COLLECTIVE_TIMEOUT in these tests, seconds
EXAMPLE = pathlib.Path(REPOSITORY) / "examples" / "mlp_sharded.mlir"
RUN = [sys.executable, "-m", "mlirxla.tools.run"]

# Every device brings x * (replica id + 1), so that every collective has distinct operands.
ADD = """({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  })"""
EVERY_COLLECTIVE = f"""
module attributes {{mhlo.num_replicas = 4 : i32}} {{
  func.func @main(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<16x4xf32>, tensor<4x4xf32>, tensor<2x16xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {{
    %id = stablehlo.replica_id : tensor<ui32>
    %f = stablehlo.convert %id : (tensor<ui32>) -> tensor<f32>
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    %g = stablehlo.add %f, %one : tensor<f32>
    %scale = stablehlo.broadcast_in_dim %g, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %v = stablehlo.multiply %x, %scale : tensor<8x4xf32>
    %ar = "stablehlo.all_reduce"(%v) {ADD} {{replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %ag = "stablehlo.all_gather"(%v) {{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>}} : (tensor<8x4xf32>) -> tensor<16x4xf32>
    %rs = "stablehlo.reduce_scatter"(%v) {ADD} {{scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}} : (tensor<8x4xf32>) -> tensor<4x4xf32>
    %aa = "stablehlo.all_to_all"(%v) {{split_dimension = 0 : i64, concat_dimension = 1 : i64, split_count = 4 : i64, replica_groups = dense<[[3, 2, 1, 0]]> : tensor<1x4xi64>}} : (tensor<8x4xf32>) -> tensor<2x16xf32>
    %cp = "stablehlo.collective_permute"(%v) {{source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %cb = "stablehlo.collective_broadcast"(%v) {{replica_groups = dense<[[2, 0], [3, 1]]> : tensor<2x2xi64>}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %ar, %ag, %rs, %aa, %cp, %cb : tensor<8x4xf32>, tensor<16x4xf32>, tensor<4x4xf32>, tensor<2x16xf32>, tensor<8x4xf32>, tensor<8x4xf32>
  }}
}}
"""


def environment() -> dict:
    return {**mpi_environment(), "MLIRXLA_COLLECTIVE_TIMEOUT": str(TIMEOUT)}


def mpirun(processes: int, command: list[str], extra: tuple = ()) -> subprocess.CompletedProcess:
    return subprocess.run([str(MPIEXEC), *extra, "-n", str(processes), *command], capture_output=True, text=True,
                          env=environment(), timeout=600)


def run_alone(arguments: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(RUN + arguments, capture_output=True, text=True, env=environment(), timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def assert_bitwise_equal(path_a, path_b) -> None:
    a, b = np.load(path_a), np.load(path_b)
    assert sorted(a.files) == sorted(b.files)
    for name in a.files:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), f"{name} differs"


@pytest.mark.parametrize("processes", [2, 4])
def test_a_sharded_program_across_processes_is_bitwise_the_single_process_result(processes, tmp_path):
    run_alone([str(EXAMPLE), "-o", str(tmp_path / "alone.npz")])
    done = mpirun(processes, RUN + ["--distributed", str(EXAMPLE), "-o", str(tmp_path / "across.npz")])
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("result 0:") == 1  # process 0 prints the gathered result, the others nothing
    assert f"{4 // processes} device(s) in each of {processes} process(es)" in done.stdout
    assert_bitwise_equal(tmp_path / "alone.npz", tmp_path / "across.npz")


@pytest.mark.parametrize("processes", [2, 4])
def test_every_collective_across_processes_is_bitwise_the_single_process_result(processes, tmp_path):
    program = tmp_path / "collectives.mlir"
    program.write_text(EVERY_COLLECTIVE)
    x = np.random.default_rng(5).standard_normal((8, 4)).astype(np.float32)
    np.savez(tmp_path / "x.npz", arg0=x)
    inputs = ["--inputs", str(tmp_path / "x.npz")]
    run_alone([str(program), *inputs, "-o", str(tmp_path / "alone.npz")])
    done = mpirun(processes, RUN + ["--distributed", str(program), *inputs, "-o", str(tmp_path / "across.npz")])
    assert done.returncode == 0, done.stderr
    assert_bitwise_equal(tmp_path / "alone.npz", tmp_path / "across.npz")
    outputs = np.load(tmp_path / "across.npz")
    in_rank_order = ((x * 1 + x * 2) + x * 3) + x * 4
    for device in range(4):
        assert outputs[f"device{device}.result0"].tobytes() == in_rank_order.tobytes()


def test_the_python_client_across_processes(tmp_path):
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(f"""
        import pathlib
        import numpy as np
        from mlirxla.runtime.client import Client

        client = Client(device_count=2, distributed=True)
        assert [d.process_index for d in client.devices()] == [0, 0, 1, 1]
        assert [d.id for d in client.local_devices()] == [2 * client.process_index, 2 * client.process_index + 1]
        rng = np.random.default_rng(0)
        arguments = [rng.standard_normal(s).astype(np.float32) for s in ((32, 64), (64, 128), (128,), (128, 16))]
        [out] = client.compile({str(EXAMPLE)!r}).execute_numpy(arguments)
        [alone] = Client(device_count=4).compile({str(EXAMPLE)!r}).execute_numpy(arguments)
        assert out.tobytes() == alone.tobytes()
        verdict = pathlib.Path({str(tmp_path)!r}) / f"process{{client.process_index}}.txt"
        verdict.write_text(f"process {{client.process_index}} of {{client.process_count}} agrees")
    """))
    done = mpirun(2, [sys.executable, str(script)])
    assert done.returncode == 0, done.stderr
    # Each process reports in its own file: their shared stdout interleaves (seen: "processprocess 1").
    verdicts = [(tmp_path / f"process{index}.txt").read_text() for index in range(2)]
    assert verdicts == ["process 0 of 2 agrees", "process 1 of 2 agrees"]


def test_what_runs_in_one_process_only_is_refused_with_distributed():
    done = subprocess.run(RUN + ["--distributed", "--check", str(EXAMPLE)], capture_output=True, text=True,
                          env=environment(), timeout=600)
    assert done.returncode == 2
    assert done.stderr.strip() == ("mlirxla-run (process 0 of 1): error: --check runs in one process: "
                                   "it cannot be combined with --distributed")


def test_processes_that_cannot_share_the_devices_evenly_are_refused(tmp_path):
    done = mpirun(3, RUN + ["--distributed", str(EXAMPLE)])
    assert done.returncode != 0
    assert "4 devices, which 3 processes cannot share evenly" in done.stderr
    assert "Traceback" not in done.stderr


STOPPER = """
import os, signal, sys, time
from mlirxla.runtime import mpi_exchange
from mlirxla.tools import run

victim, after, how, stamp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]  # how: die or hang
exchanges = [0]
everyone = mpi_exchange.MpiExchange.everyone

def stops_mid_run(self, *arguments):
    exchanges[0] += 1
    if self.rank == victim and exchanges[0] > after:
        with open(stamp, "w") as out:
            out.write(repr(time.time()))
        if how == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(3600)
    return everyone(self, *arguments)

mpi_exchange.MpiExchange.everyone = stops_mid_run
sys.exit(run.main(sys.argv[5:]))
"""


def stop_one_process_mid_run(tmp_path, how: str):
    """Process 1 of 4 dies (SIGKILL) or hangs at its fourth cross-process collective (in the
    second execution of fifty): the job's return, and how long after it stopped the job ended."""
    stopper = tmp_path / "stopper.py"
    stopper.write_text(STOPPER)
    stamp = tmp_path / "stopped_at"
    done = mpirun(4, [sys.executable, str(stopper), "1", "3", how, str(stamp), "--distributed", str(EXAMPLE),
                      "--repeat", "50"])
    return done, time.time() - float(stamp.read_text())


@pytest.mark.slow
def test_a_process_killed_mid_run_ends_every_process_within_twice_the_timeout(tmp_path):
    """mpiexec sees the dead process and ends the others (non-zero exit)."""
    done, ended_after = stop_one_process_mid_run(tmp_path, "die")
    assert done.returncode != 0
    assert ended_after < 2 * TIMEOUT, f"the job ended {ended_after:.1f} s after the kill"


@pytest.mark.slow
def test_a_process_that_never_arrives_fails_the_others_naming_it_and_the_collective(tmp_path):
    """Process 1 hangs (alive, but never arrives: a hung host, which no launcher sees): the
    processes waiting for it fail at the timeout with an error naming it and the
    collective; their non-zero exit makes mpiexec end the rest, process 1 included."""
    done, ended_after = stop_one_process_mid_run(tmp_path, "hang")
    assert done.returncode != 0
    assert ended_after < 2 * TIMEOUT, f"the job ended {ended_after:.1f} s after process 1 stopped"
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert errors and all(re.search(r"\(process [023] of 4\)", line) for line in errors), done.stderr
    assert all("process(es) [1]" in line or "process 1 did not arrive" in line for line in errors), done.stderr
    assert re.search(r"error: .*xhlo\.all_(reduce|gather) \(channel \d\) on process [023]: process\(es\) \[1\] "
                     r"\(devices \[1\] of the group \[\d, \d\]\) did not arrive within 10 s", done.stderr), done.stderr
    assert "Traceback" not in done.stderr


def test_the_operands_of_several_members_travel_as_one_message_and_come_back_whole():
    import ml_dtypes

    from mlirxla.runtime.mpi_exchange import pack, unpack

    members = [[np.arange(6, dtype=np.float32).reshape(2, 3) * (m + 1), np.array(m % 2 == 0),
                np.arange(5, dtype=ml_dtypes.bfloat16)[::2] + m, np.zeros((0, 4), np.int64)] for m in range(3)]
    message = pack(members)
    assert message.dtype == np.uint8 and message.nbytes == 3 * (24 + 1 + 6 + 0)
    for sent, received in zip(members, unpack(message, members[0], 3)):
        for a, b in zip(sent, received):
            assert (a.dtype, a.shape) == (b.dtype, b.shape) and np.ascontiguousarray(a).tobytes() == b.tobytes()
