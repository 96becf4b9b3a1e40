"""Collectives on a grid of CPU devices in one process (`runtime/collectives.py`,
`runtime/devices.py`): each op against what numpy computes from every device's operand,
in the four replica-group modes; results bitwise equal across runs and devices; a device
that never arrives ends the execution with an error naming the collective and the missing
devices; a device that fails ends the others' meetings; `mlirxla-run --devices`, and
`mlirxla-run` on a module sharded over its partitions; a grid's GEMMs on one OpenBLAS thread
each, never overlapping executions on another count; device threads kept between executions;
devices that fill the cores running their thunks on their own threads."""

import pathlib
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.runtime import driver, executor, thunks
from mlirxla.runtime.devices import DeviceGrid, execute_on_devices
from mlirxla.runtime.executor import ThreadPool
from mlirxla.tools import run as run_tool

from .conftest import REPOSITORY

JAX_DATA = pathlib.Path(REPOSITORY) / "test" / "data" / "jax"

ADD = """({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  })"""


def compile_program(body: str, grid: DeviceGrid, signature: str):
    text = (f"module attributes {{mhlo.num_replicas = {grid.replica_count} : i32, "
            f"mhlo.num_partitions = {grid.partition_count} : i32}} {{\n"
            f"func.func @main{signature} {{\n{body}\n}}\n}}\n")
    module = frontdoor.import_text(text, "collective.mlir", new_context()).module
    with module.context:
        return driver.compile_entry(module, "main", backend="cpu")[0]


def run_on_grid(body: str, grid: DeviceGrid, signature: str, arguments: list[list[np.ndarray]], timeout=None):
    executable = compile_program(body, grid, signature)
    return execute_on_devices([executable] * grid.device_count, arguments, grid, timeout=timeout)


def device_values(count: int, shape=(4,), seed=0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(count)]


def in_rank_order(values: list[np.ndarray]) -> np.ndarray:
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total


@pytest.mark.parametrize("groups, shape, expected_groups", [
    ("[[0, 1, 2, 3]]", "1x4", [[0, 1, 2, 3]]),
    ("[[0, 2], [1, 3]]", "2x2", [[0, 2], [1, 3]]),
    ("[[3, 1, 0], [2, -1, -1]]", "2x3", [[3, 1, 0], [2]]),  # uneven groups (padded with -1), out of order
])
def test_all_reduce_across_replicas(groups, shape, expected_groups):
    grid = DeviceGrid(4, 1)
    body = (f'  %r = "stablehlo.all_reduce"(%x) {ADD} {{replica_groups = dense<{groups}> : tensor<{shape}xi64>}} '
            ': (tensor<4xf32>) -> tensor<4xf32>\n  return %r : tensor<4xf32>')
    values = device_values(4)
    outputs = run_on_grid(body, grid, "(%x: tensor<4xf32>) -> tensor<4xf32>", [[v] for v in values])
    for group in expected_groups:
        want = in_rank_order([values[d] for d in group])
        for device in group:
            np.testing.assert_array_equal(outputs[device][0], want)


def test_the_modes_over_replicas_and_partitions():
    """On 2 replicas x 2 partitions: an all-reduce with a channel and replica ids reduces every
    partition of the replicas listed, partition by partition (cross_replica_and_partition:
    rank order 0, 2, 1, 3); an all-to-all with a channel lists partitions, per replica
    (cross_partition); with global device ids the groups are flattened ids."""
    grid = DeviceGrid(2, 2)
    values = device_values(4)
    across_both = (f'  %r = "stablehlo.all_reduce"(%x) {ADD} {{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, '
                   'channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<4xf32>) -> tensor<4xf32>\n'
                   '  %t = "stablehlo.all_to_all"(%x) {split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = 2 : i64, '
                   'replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, '
                   'channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>} : (tensor<4xf32>) -> tensor<4xf32>\n'
                   '  return %r, %t : tensor<4xf32>, tensor<4xf32>')
    outputs = run_on_grid(across_both, grid, "(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)", [[v] for v in values])
    for device in range(4):
        np.testing.assert_array_equal(outputs[device][0], in_rank_order([values[d] for d in (0, 2, 1, 3)]))
        replica, partition = divmod(device, 2)
        halves = [values[replica * 2 + p][partition * 2:partition * 2 + 2] for p in range(2)]
        np.testing.assert_array_equal(outputs[device][1], np.concatenate(halves))
    flattened = (f'  %r = "stablehlo.all_reduce"(%x) {ADD} {{replica_groups = dense<[[0, 3], [1, 2]]> : tensor<2x2xi64>, '
                 'channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, use_global_device_ids} '
                 ': (tensor<4xf32>) -> tensor<4xf32>\n  return %r : tensor<4xf32>')
    outputs = run_on_grid(flattened, grid, "(%x: tensor<4xf32>) -> tensor<4xf32>", [[v] for v in values])
    for group in ([0, 3], [1, 2]):
        for device in group:
            np.testing.assert_array_equal(outputs[device][0], in_rank_order([values[d] for d in group]))


def test_all_gather_reduce_scatter_all_to_all():
    grid = DeviceGrid(4, 1)
    values = device_values(4, shape=(4, 2))
    groups = "replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>"
    body = (f'  %g = "stablehlo.all_gather"(%x) {{all_gather_dim = 0 : i64, {groups}}} : (tensor<4x2xf32>) -> tensor<16x2xf32>\n'
            f'  %s = "stablehlo.reduce_scatter"(%x) {ADD} {{scatter_dimension = 0 : i64, {groups}}} '
            ': (tensor<4x2xf32>) -> tensor<1x2xf32>\n'
            f'  %t = "stablehlo.all_to_all"(%x) {{split_dimension = 0 : i64, concat_dimension = 1 : i64, split_count = 4 : i64, '
            f'{groups}}} : (tensor<4x2xf32>) -> tensor<1x8xf32>\n'
            '  return %g, %s, %t : tensor<16x2xf32>, tensor<1x2xf32>, tensor<1x8xf32>')
    outputs = run_on_grid(body, grid, "(%x: tensor<4x2xf32>) -> (tensor<16x2xf32>, tensor<1x2xf32>, tensor<1x8xf32>)",
                          [[v] for v in values])
    total = in_rank_order(values)
    for device in range(4):
        gathered, scattered, exchanged = outputs[device]
        np.testing.assert_array_equal(gathered, np.concatenate(values))
        np.testing.assert_array_equal(scattered, total[device:device + 1])
        np.testing.assert_array_equal(exchanged, np.concatenate([v[device:device + 1] for v in values], axis=1))


def test_collective_permute_broadcast_and_device_ids():
    grid = DeviceGrid(4, 1)
    values = device_values(4)
    body = ('  %p = "stablehlo.collective_permute"(%x) {source_target_pairs = dense<[[0, 1], [1, 2], [2, 3]]> : tensor<3x2xi64>} '
            ': (tensor<4xf32>) -> tensor<4xf32>\n'
            '  %b = "stablehlo.collective_broadcast"(%x) {replica_groups = dense<[[2, 0], [3, 1]]> : tensor<2x2xi64>} '
            ': (tensor<4xf32>) -> tensor<4xf32>\n'
            '  %r = stablehlo.replica_id : tensor<ui32>\n  %q = stablehlo.partition_id : tensor<ui32>\n'
            '  return %p, %b, %r, %q : tensor<4xf32>, tensor<4xf32>, tensor<ui32>, tensor<ui32>')
    outputs = run_on_grid(body, grid, "(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<ui32>, tensor<ui32>)",
                          [[v] for v in values])
    np.testing.assert_array_equal(outputs[0][0], np.zeros(4, np.float32))  # nobody sends to device 0
    for device in (1, 2, 3):
        np.testing.assert_array_equal(outputs[device][0], values[device - 1])
    for device, root in ((0, 2), (2, 2), (1, 3), (3, 3)):  # the first of each group is its root
        np.testing.assert_array_equal(outputs[device][1], values[root])
    assert [int(o[2]) for o in outputs] == [0, 1, 2, 3] and [int(o[3]) for o in outputs] == [0, 0, 0, 0]


def test_reductions_are_bitwise_equal_across_runs_and_in_rank_order():
    """Float sums depend on their order: eight devices' values summed in rank order every time,
    whichever thread arrives first."""
    grid = DeviceGrid(8, 1)
    values = [v * np.float32(10.0 ** (i % 4)) for i, v in enumerate(device_values(8, shape=(1024,), seed=3))]
    body = (f'  %r = "stablehlo.all_reduce"(%x) {ADD} {{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}} '
            ': (tensor<1024xf32>) -> tensor<1024xf32>\n  return %r : tensor<1024xf32>')
    executable = compile_program(body, grid, "(%x: tensor<1024xf32>) -> tensor<1024xf32>")
    want = in_rank_order(values)
    for _ in range(5):
        outputs = execute_on_devices([executable] * 8, [[v] for v in values], grid)
        for device_outputs in outputs:
            assert device_outputs[0].tobytes() == want.tobytes()


def test_a_device_that_never_arrives_ends_the_execution():
    grid = DeviceGrid(2, 1)
    waiting = compile_program(f'  %r = "stablehlo.all_reduce"(%x) {ADD} {{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, '
                              'channel_handle = #stablehlo.channel_handle<handle = 7, type = 1>} '
                              ': (tensor<4xf32>) -> tensor<4xf32>\n  return %r : tensor<4xf32>',
                              grid, "(%x: tensor<4xf32>) -> tensor<4xf32>")
    absent = compile_program("  return %x : tensor<4xf32>", grid, "(%x: tensor<4xf32>) -> tensor<4xf32>")
    values = device_values(2)
    with pytest.raises(MlirxlaError, match=r"xhlo.all_reduce \(channel 7\) on device 0: devices \[1\] .* did not arrive within 0.5 s"):
        execute_on_devices([waiting, absent], [[v] for v in values], grid, timeout=0.5)


def test_a_failing_device_ends_the_others_meetings():
    """Device 1 is given an argument of the wrong shape: its own error is raised, and device 0,
    waiting for it at the all-reduce, stops long before the timeout."""
    grid = DeviceGrid(2, 1)
    body = (f'  %r = "stablehlo.all_reduce"(%x) {ADD} {{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}} '
            ': (tensor<4xf32>) -> tensor<4xf32>\n  return %r : tensor<4xf32>')
    executable = compile_program(body, grid, "(%x: tensor<4xf32>) -> tensor<4xf32>")
    with pytest.raises(MlirxlaError, match="argument") as raised:
        execute_on_devices([executable] * 2, [[np.zeros(4, np.float32)], [np.zeros(5, np.float32)]], grid, timeout=600)
    assert "failed" not in str(raised.value)  # the first cause, not the meeting it ended


def test_send_and_recv_between_devices():
    grid = DeviceGrid(2, 1)
    sender = compile_program('  %t = stablehlo.after_all : !stablehlo.token\n'
                             '  %d = "stablehlo.send"(%x, %t) {channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, '
                             'is_host_transfer = false} : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token\n'
                             '  return %x : tensor<4xf32>', grid, "(%x: tensor<4xf32>) -> tensor<4xf32>")
    receiver = compile_program('  %t = stablehlo.after_all : !stablehlo.token\n'
                               '  %r:2 = "stablehlo.recv"(%t) {channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, '
                               'is_host_transfer = false} : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)\n'
                               '  return %r#0 : tensor<4xf32>', grid, "(%x: tensor<4xf32>) -> tensor<4xf32>")
    values = device_values(2)
    outputs = execute_on_devices([sender, receiver], [[v] for v in values], grid)
    np.testing.assert_array_equal(outputs[1][0], values[0])


def test_a_module_for_several_devices_is_run_on_its_grid_only(tmp_path, capsys):
    program = tmp_path / "all_reduce.mlir"
    program.write_text(f'func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<ui32>) {{\n'
                       f'  %r = "stablehlo.all_reduce"(%x) {ADD} {{replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>}} '
                       ': (tensor<3xf32>) -> tensor<3xf32>\n  %i = stablehlo.replica_id : tensor<ui32>\n'
                       '  return %r, %i : tensor<3xf32>, tensor<ui32>\n}\n')
    outputs = tmp_path / "out.npz"
    assert run_tool.main([str(program), "--devices", "3", "-o", str(outputs)]) == 0
    assert "on 3 devices (3 replica(s) x 1 partition(s))" in capsys.readouterr().out
    saved = np.load(outputs)
    assert [int(saved[f"device{d}.result1"]) for d in range(3)] == [0, 1, 2]
    for device in range(3):
        np.testing.assert_array_equal(saved[f"device{device}.result0"], saved["device0.result0"])
    assert run_tool.main([str(program)]) == 2  # replica 1 and 2 do not exist on one device
    assert "out of range [0, 1)" in capsys.readouterr().err
    assert run_tool.main([str(program), "--devices", "3", "--backend", "reference"]) == 2
    assert "runs a program on one device" in capsys.readouterr().err


SHARDED_PROGRAMS = {  # examples/jax_programs.py: what each computes, in numpy
    "03_sharded_namedsharding": lambda x, w: np.maximum(x @ w, 0).sum(axis=1),
    "04_sharded_gspmd_mhlo_sharding": lambda x, w: np.maximum(x @ w, 0).sum(axis=1),
    "05_shard_map_psum": lambda x: x.sum(),
}


@pytest.mark.parametrize("name", list(SHARDED_PROGRAMS))
def test_mlirxla_run_partitions_a_sharded_module_and_assembles_its_results(name, tmp_path, capsys):
    """A program sharded over a 2x2 mesh: mlirxla-run splits the global arguments by their
    shardings, runs the partitioned program on 4 devices and assembles the global results."""
    compute = SHARDED_PROGRAMS[name]
    rng = np.random.default_rng(1)
    shapes = [(16, 64), (64, 128)][:compute.__code__.co_argcount]
    arguments = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    np.savez(tmp_path / "inputs.npz", *arguments)
    status = run_tool.main([str(JAX_DATA / f"{name}.stablehlo.mlir"), "--inputs", str(tmp_path / "inputs.npz"),
                            "-o", str(tmp_path / "outputs.npz")])
    assert status == 0 and "on 4 devices (1 replica(s) x 4 partition(s)), partitioned by its shardings" in capsys.readouterr().out
    np.testing.assert_allclose(np.load(tmp_path / "outputs.npz")["result0"], compute(*arguments), rtol=1e-4, atol=1e-4)


def test_an_async_all_reduce_runs_as_the_all_reduce_it_wraps(tmp_path, capsys):
    """jax's `psum_start(x, 'i').done()` in a shard_map over 2 devices (the front door inlines
    the async pair): each device's half is the sum of both halves, doubled after the done."""
    values = np.arange(8, dtype=np.float32)
    np.savez(tmp_path / "inputs.npz", values)
    status = run_tool.main([str(pathlib.Path(REPOSITORY) / "test" / "lit" / "frontdoor" / "async-regions.mlir"),
                            "--inputs", str(tmp_path / "inputs.npz"), "-o", str(tmp_path / "outputs.npz")])
    assert status == 0 and "on 2 devices" in capsys.readouterr().out
    halves = (values[:4] + values[4:]) * 2
    np.testing.assert_array_equal(np.load(tmp_path / "outputs.npz")["result0"], np.concatenate([halves, halves]))


class Probe:
    """Runs `executable` as a device and notes its thread."""

    def __init__(self, executable, seen: list):
        self.executable, self.seen = executable, seen

    def execute(self, arguments):
        self.seen.append(threading.get_ident())
        return self.executable.execute(arguments)


DOT = ("  %r = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<64x500xf32>, tensor<500x64xf32>) "
       "-> tensor<64x64xf32>\n  return %r : tensor<64x64xf32>")
DOT_SIGNATURE = "(%x: tensor<64x500xf32>, %w: tensor<500x64xf32>) -> tensor<64x64xf32>"


def test_a_grids_gemms_keep_the_bits_of_one_device():
    """A 64x64x500 GEMM's last bits depend on how it is split: every device of a grid, run
    side by side with the others, gets the bits one device alone gets, on every run."""
    grid = DeviceGrid(4, 1)
    executable = compile_program(DOT, grid, DOT_SIGNATURE)
    rng = np.random.default_rng(5)
    arguments = [[rng.standard_normal((64, 500)).astype(np.float32), rng.standard_normal((500, 64)).astype(np.float32)]
                 for _ in range(4)]
    want = [executable.execute(a)[0] for a in arguments]
    for _ in range(3):
        outputs = execute_on_devices([executable] * 4, arguments, grid)
        assert all(o[0].tobytes() == w.tobytes() for o, w in zip(outputs, want))


def test_device_threads_are_kept_and_concurrent_grids_each_get_all_their_devices():
    """Devices run on threads kept between executions (none started per call), a thread of its
    own for every device; two grids meeting at all-reduces at once both finish."""
    grid = DeviceGrid(4, 1)
    body = (f'  %r = "stablehlo.all_reduce"(%x) {ADD} {{replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}} '
            ': (tensor<256xf32>) -> tensor<256xf32>\n  return %r : tensor<256xf32>')
    executable = compile_program(body, grid, "(%x: tensor<256xf32>) -> tensor<256xf32>")
    values = device_values(4, shape=(256,), seed=9)
    runs = []
    for _ in range(2):
        seen: list = []
        execute_on_devices([Probe(executable, seen)] * 4, [[v] for v in values], grid)
        runs.append(set(seen))
    assert len(runs[0]) == 4 and runs[0] == runs[1]
    with ThreadPoolExecutor(3) as callers:
        results = list(callers.map(lambda _: execute_on_devices([executable] * 4, [[v] for v in values], grid), range(3)))
    want = in_rank_order(values)
    assert all(o[0].tobytes() == want.tobytes() for outputs in results for o in outputs)


def test_devices_that_fill_the_cores_run_their_thunks_on_their_own_thread(monkeypatch):
    """A program that would run as a graph on the pool (whatever bytes it moves) runs in
    order on each device's thread when the grid has a device per worker of the pool."""
    monkeypatch.setattr(executor, "SEQUENTIAL_BYTES_BELOW", 0)
    devices = max(ThreadPool.shared().workers, 2)
    grid = DeviceGrid(devices, 1)
    lines = [f"  %d{i} = stablehlo.dot_general %x, %w{i}, contracting_dims = [1] x [0] : (tensor<64x500xf32>, tensor<500x64xf32>) "
             f"-> tensor<64x64xf32>" for i in range(8)]
    lines += [f"  %s{i} = stablehlo.add %{'d0' if i == 1 else f's{i - 1}'}, %d{i} : tensor<64x64xf32>" for i in range(1, 8)]
    body = "\n".join(lines) + "\n  return %s7 : tensor<64x64xf32>"
    weights = ", ".join(f"%w{i}: tensor<500x64xf32>" for i in range(8))
    executable = compile_program(body, grid, f"(%x: tensor<64x500xf32>, {weights}) -> tensor<64x64xf32>")
    assert executable.graph is not None
    rng = np.random.default_rng(2)
    arguments = [[rng.standard_normal((64, 500)).astype(np.float32)] +
                 [rng.standard_normal((500, 64)).astype(np.float32) for _ in range(8)]] * devices
    devices_threads: list = []
    thunk_threads = set()

    class Observer:
        def run(self, thunk, bases, pool):
            thunk_threads.add(threading.get_ident())
            thunk.run(bases, pool)

        def execution(self, thunks, run):
            run()

    thunks.observe(Observer())
    try:
        execute_on_devices([Probe(executable, devices_threads)] * devices, arguments, grid)
    finally:
        thunks.observe(None)
    assert thunk_threads == set(devices_threads)


@pytest.mark.parametrize("variadic", [False, True], ids=["forty-combined", "one-of-forty"])
def test_forty_all_reduces_of_a_pytree(variadic):
    """jax's psum of a pytree is one all-reduce of every leaf, and forty psums of one leaf each
    become one after the all-reduce combiner: either way an op of forty operands."""
    grid = DeviceGrid(2, 1)
    types = [f"tensor<{i + 1}xf32>" for i in range(40)]
    signature = f"({', '.join(f'%x{i}: {t}' for i, t in enumerate(types))}) -> ({', '.join(types)})"
    attributes = "{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}"
    if variadic:
        body = (f'  %r:40 = "stablehlo.all_reduce"({", ".join(f"%x{i}" for i in range(40))}) {ADD} {attributes} : '
                f'({", ".join(types)}) -> ({", ".join(types)})\n  return {", ".join(f"%r#{i}" for i in range(40))} : {", ".join(types)}')
    else:
        body = "\n".join(f'  %r{i} = "stablehlo.all_reduce"(%x{i}) {ADD} {attributes} : ({t}) -> {t}' for i, t in enumerate(types))
        body += f'\n  return {", ".join(f"%r{i}" for i in range(40))} : {", ".join(types)}'
    values = [[np.arange(i + 1, dtype=np.float32) * (device + 1) for i in range(40)] for device in range(2)]
    outputs = run_on_grid(body, grid, signature, values)
    for device in range(2):
        for i in range(40):
            np.testing.assert_array_equal(outputs[device][i], np.arange(i + 1, dtype=np.float32) * 3)
