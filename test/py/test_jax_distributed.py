"""JAX across processes on the mlirxla plugin: `mpirun -n 2` and `-n 4` of a script that
calls `jax.distributed.initialize` (process id = MPI rank), four mlirxla devices in all.
Every process sees the four devices with their process index and addresses its own;
`jax.make_array_from_process_local_data` takes each process's part; a `jax.jit` MLP over a
2x2 mesh spanning the processes (its collectives over MPI), and a sum over a ring of the
devices in another order (each process's devices not contiguous in the program), are
bitwise the same programs on four devices of one process;
`multihost_utils.process_allgather` gives every process the whole array and each process's
value, and `sync_global_devices` returns in every process. A jax process id other than the
MPI rank is refused at backend creation in one line. Skipped without the distributed extra
(mpi4py, mpich)."""

import importlib.util
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from .conftest import mpi_environment, mpich_file

MPIEXEC = mpich_file("mpiexec")
pytestmark = [pytest.mark.jax,
              pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or importlib.util.find_spec("jax") is None
                                 or MPIEXEC is None, reason="needs jax and the distributed extra (mpi4py, mpich)")]

SCRIPT = textwrap.dedent("""
    import os
    import sys

    import numpy as np
    from mpi4py import MPI

    rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    os.environ["JAX_PLATFORMS"] = "mlirxla"
    os.environ["MLIRXLA_NUM_DEVICES"] = str(4 // size)
    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    if size > 1:
        jax.distributed.initialize(coordinator_address=sys.argv[1], num_processes=size, process_id=rank)
    assert (jax.process_index(), jax.process_count()) == (rank, size)
    assert [(d.id, d.process_index) for d in jax.devices()] == [(i, i // (4 // size)) for i in range(4)]
    assert [d.id for d in jax.local_devices()] == [rank * (4 // size) + i for i in range(4 // size)]

    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w1 = rng.standard_normal((16, 32)).astype(np.float32) / 4
    w2 = rng.standard_normal((32, 8)).astype(np.float32) / 4
    mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("batch", "model"))

    def from_local_part(spec, array):  # the global array from this process's span of its devices' shards
        sharding = NamedSharding(mesh, spec)
        indices = sharding.addressable_devices_indices_map(array.shape).values()
        span = tuple(slice(min(index[k].indices(n)[0] for index in indices), max(index[k].indices(n)[1] for index in indices))
                     for k, n in enumerate(array.shape))
        return jax.make_array_from_process_local_data(sharding, array[span], array.shape)

    gx = from_local_part(P("batch", None), x)
    for shard in gx.addressable_shards:
        assert np.array_equal(np.asarray(shard.data), x[shard.index])
    gw1 = from_local_part(P(None, "model"), w1)
    gw2 = from_local_part(P("model", None), w2)
    mlp = jax.jit(lambda a, b, c: jnp.maximum(a @ b, 0) @ c, out_shardings=NamedSharding(mesh, P()))
    out = mlp(gx, gw1, gw2)
    assert out.shape == (8, 8) and out.is_fully_replicated
    np.save(sys.argv[2] + f".{rank}.npy", np.asarray(out.addressable_data(0)))

    # devices in another order: with 2 processes, the program's devices 0 and 3 in process 0, 1 and 2 in process 1
    ring = Mesh(np.array(jax.devices())[[1, 2, 3, 0]], ("batch",))
    total = jax.jit(lambda a: (a * 2).sum(axis=0), out_shardings=NamedSharding(ring, P()))(
        jax.device_put(x, NamedSharding(ring, P("batch"))))
    np.save(sys.argv[2] + f".total.{rank}.npy", np.asarray(total.addressable_data(0)))

    assert np.array_equal(multihost_utils.process_allgather(gx, tiled=True), x)
    assert np.array_equal(multihost_utils.process_allgather(np.float32(rank + 1)), np.arange(1, size + 1, dtype=np.float32))
    multihost_utils.sync_global_devices("the end")
    with open(sys.argv[2] + f".done.{rank}", "w") as done:  # printed lines of two processes may interleave
        done.write(f"process {rank} of {size} done")
    if size > 1:
        jax.distributed.shutdown()
""")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def run(command: list[str]) -> subprocess.CompletedProcess:
    environment = {**mpi_environment(), "MLIRXLA_COLLECTIVE_TIMEOUT": "60"}
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=900)


@pytest.mark.parametrize("processes", [2, 4])
def test_a_jit_over_a_mesh_spanning_processes_is_bitwise_the_one_process_result(processes, tmp_path):
    script = tmp_path / "across.py"
    script.write_text(SCRIPT)
    alone = run([sys.executable, str(script), "-", str(tmp_path / "alone")])
    assert alone.returncode == 0, alone.stderr
    across = run([MPIEXEC, "-n", str(processes), sys.executable, str(script), f"localhost:{free_port()}",
                  str(tmp_path / "across")])
    assert across.returncode == 0, across.stderr
    assert [(tmp_path / f"across.done.{rank}").read_text() for rank in range(processes)] == [
        f"process {rank} of {processes} done" for rank in range(processes)]
    rng = np.random.default_rng(3)
    x, w1, w2 = (rng.standard_normal(shape).astype(np.float32) / scale for shape, scale in (((8, 16), 1), ((16, 32), 4), ((32, 8), 4)))
    for name, reference in (("", np.maximum(x @ w1, 0) @ w2), (".total", (x * 2).sum(axis=0))):
        expected = np.load(tmp_path / f"alone{name}.0.npy")
        np.testing.assert_allclose(expected, reference, rtol=1e-5, atol=1e-5)
        for rank in range(processes):
            assert np.load(tmp_path / f"across{name}.{rank}.npy").tobytes() == expected.tobytes(), (name, rank)


def test_a_jax_process_id_other_than_the_mpi_rank_is_refused_in_one_line(tmp_path):
    script = tmp_path / "swapped.py"
    script.write_text(textwrap.dedent("""
        import os
        import sys

        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()
        os.environ["JAX_PLATFORMS"] = "mlirxla"
        import jax

        jax.distributed.initialize(coordinator_address=sys.argv[1], num_processes=2, process_id=1 - rank)
        try:
            jax.devices()
        except RuntimeError as error:
            with open(sys.argv[2] + f".{rank}", "w") as refused:
                refused.write(str(error))
        jax.distributed.shutdown()
    """))
    done = run([MPIEXEC, "-n", "2", sys.executable, str(script), f"localhost:{free_port()}", str(tmp_path / "refused")])
    assert done.returncode == 0, done.stderr
    for rank in range(2):
        assert (f"INVALID_ARGUMENT: jax.distributed.initialize made this process {1 - rank} of 2, but MPI made it rank {rank} "
                f"of 2: run the processes under mpirun -n 2 with process_id = the MPI rank") in (tmp_path / f"refused.{rank}").read_text()
