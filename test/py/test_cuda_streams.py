"""Streams, events and CUDA graphs of the cuda backend, without a GPU: the stream assignment
pass orders every pair of thunks whose slab slices conflict (read after write, write after
read, write after write) and puts independent thunks on different streams; the runtime, on
the recording stand-in device (`fake_cuda_device.py`), honours the waits and records so that
every dependence happens before its dependent, captures an execution into a CUDA graph once
and replays it with one launch per call, and runs without a graph, saying why, when told to
or when the plan has host work."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cuda import compiler, ptxas
from mlirxla.backends.cuda.stream_assignment import assign_streams, predecessors
from mlirxla.context import new_context
from mlirxla.pipelines.runner import RunOptions
from mlirxla.runtime.cuda import Executable, ExecutableFile
from mlirxla.runtime.thunks import BufferSlice

from .fake_cuda_device import ComputingDevice, FakeCudaDevice

WORK = ("launch", "matmul", "copy_on_device")


class Touching:
    """A thunk reduced to what stream assignment reads: the slices it reads and writes."""

    def __init__(self, reads=(), writes=()):
        self.reads = tuple(BufferSlice(0, offset, size) for offset, size in reads)
        self.writes = tuple(BufferSlice(0, offset, size) for offset, size in writes)


def test_a_chain_stays_on_one_stream_without_events():
    chain = [Touching(writes=[(0, 64)]), Touching([(0, 64)], [(64, 64)]), Touching([(64, 64)], [(128, 64)])]
    assignment = assign_streams(chain)
    assert [slot.stream for slot in assignment.slots] == [0, 0, 0]
    assert assignment.stream_count == 1 and assignment.events == {}


def test_independent_thunks_overlap_and_the_join_waits_for_both():
    """A writes x; B and C read x (reads do not conflict) and write y and z; D reads y and z."""
    a = Touching(writes=[(0, 64)])
    b = Touching([(0, 64)], [(64, 64)])
    c = Touching([(0, 64)], [(128, 64)])
    d = Touching([(64, 64), (128, 64)], [(192, 64)])
    assignment = assign_streams([a, b, c, d])
    streams = [slot.stream for slot in assignment.slots]
    assert streams[:2] == [0, 0] and streams[2] != 0
    assert assignment.slots[2].waits == (0,)  # C follows A across streams
    # D continues the latest of the two (C's stream) and waits on B's event
    assert streams[3] == streams[2] and assignment.slots[3].waits == (1,)
    assert assignment.events == {0: 0, 1: 1}


@pytest.mark.parametrize("first, second", [
    (Touching(writes=[(0, 128)]), Touching(reads=[(64, 8)], writes=[(512, 8)])),  # read after write, overlapping
    (Touching(reads=[(0, 128)], writes=[(512, 8)]), Touching(writes=[(120, 16)])),  # write after read: a reused range
    (Touching(writes=[(0, 128)]), Touching(writes=[(100, 100)])),  # write after write
])
def test_every_kind_of_conflict_orders_the_pair(first, second):
    independent = Touching(writes=[(1024, 64)])  # opens stream 1 so that `second` could have gone elsewhere
    assignment = assign_streams([first, independent, second])
    assert predecessors([first, independent, second])[2] == {0}
    slots = assignment.slots
    assert slots[1].stream != slots[0].stream
    assert slots[2].stream == slots[0].stream or 0 in slots[2].waits


def test_no_more_streams_than_allowed_and_the_oldest_is_reused():
    assignment = assign_streams([Touching(writes=[(64 * i, 64)]) for i in range(6)], max_streams=4)
    assert [slot.stream for slot in assignment.slots] == [0, 1, 2, 3, 0, 1]
    assert assignment.events == {}


# --- the runtime on the stand-in device ------------------------------------------------------

needs_ptxas = pytest.mark.skipif(ptxas.unavailable() is not None, reason=ptxas.unavailable() or "")

TWO_DOTS = """func.func @main(%x: tensor<16x32xf32>, %w1: tensor<32x24xf32>, %w2: tensor<32x24xf32>) -> tensor<16x24xf32> {
  %d1 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  %d2 = stablehlo.dot_general %x, %w2, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  %s = stablehlo.add %d1, %d2 : tensor<16x24xf32>
  return %s : tensor<16x24xf32>
}
"""

CHAIN = """func.func @main(%x: tensor<16x32xf32>, %w: tensor<32x24xf32>) -> tensor<16x24xf32> {
  %a = stablehlo.multiply %x, %x : tensor<16x32xf32>
  %d = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  %t = stablehlo.transpose %w, dims = [1, 0] : (tensor<32x24xf32>) -> tensor<24x32xf32>
  %e = stablehlo.dot_general %d, %t, contracting_dims = [1] x [0] : (tensor<16x24xf32>, tensor<24x32xf32>) -> tensor<16x32xf32>
  %f = stablehlo.negate %e : tensor<16x32xf32>
  %g = stablehlo.dot_general %f, %w, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  return %g : tensor<16x24xf32>
}
"""

UNTIL_BOUND_LOOP = """func.func @main(%v: tensor<8xf32>, %n: tensor<i32>) -> tensor<8xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:3 = stablehlo.while(%i = %zero, %x = %v, %bound = %n) : tensor<i32>, tensor<8xf32>, tensor<i32>
  cond {
    %lt = stablehlo.compare LT, %i, %bound, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %doubled = stablehlo.add %x, %x : tensor<8xf32>
    stablehlo.return %next, %doubled, %bound : tensor<i32>, tensor<8xf32>, tensor<i32>
  }
  return %0#1 : tensor<8xf32>
}
"""

COUNTING_LOOP = """func.func @main(%v: tensor<8xf32>) -> tensor<8xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %zero, %x = %v) : tensor<i32>, tensor<8xf32>
  cond {
    %three = stablehlo.constant dense<3> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %doubled = stablehlo.add %x, %x : tensor<8xf32>
    stablehlo.return %next, %doubled : tensor<i32>, tensor<8xf32>
  }
  return %0#1 : tensor<8xf32>
}
"""


def compile_text(text: str) -> compiler.CudaProgram:
    imported = frontdoor.import_bytes(text.encode(), "test.mlir", new_context())
    return compiler.compile_program(imported.module, RunOptions(backend="cuda"))


def inputs_for(plan: dict) -> list[np.ndarray]:
    generator = np.random.default_rng(0)
    return [generator.standard_normal(p["shape"]).astype(p["dtype"]) for p in plan["parameters"]]


def happens_before(calls: list) -> list[tuple[list, set[int]]]:
    """Each work call (launch, GEMM, copy on the device) with the indices of the work calls
    that finish before it starts, from stream order and event records and waits."""
    frontier: dict = {}
    recorded: dict = {}
    work = []
    for call in calls:
        if call[0] in WORK:
            stream = call[-1] if call[-1] != "captured" else call[-2]
            work.append((call, set(frontier.get(stream, set()))))
            frontier.setdefault(stream, set()).add(len(work) - 1)
        elif call[0] == "record_event":
            recorded[call[1]] = set(frontier.get(call[2], set()))
        elif call[0] == "wait_event":
            frontier.setdefault(call[1], set()).update(recorded.get(call[2], set()))
    return work


def plan_thunk_of_each_file_thunk(program: compiler.CudaProgram) -> tuple[list, list[int]]:
    """The plan's thunks that became GPU work, and for each file thunk the index of its own."""
    at, _ = compiler.slab_layout(program.plan)
    kernels = {kernel.symbol: kernel for kernel in program.kernels}
    thunks, owners = [], []
    for thunk in program.plan.thunks:
        pieces = compiler.plan_thunks([thunk], kernels, at)
        if pieces:
            owners += [len(thunks)] * len(pieces)
            thunks.append(thunk)
    return thunks, owners


@needs_ptxas
def test_independent_gemms_run_on_two_streams_and_every_dependence_is_honoured():
    program = compile_text(TWO_DOTS)
    plan = program.executable.plan
    device = FakeCudaDevice()
    Executable(program.executable, device, graphs=False).run(inputs_for(plan))
    work = happens_before(device.calls)
    thunks, owners = plan_thunk_of_each_file_thunk(program)
    assert len(work) == len(owners)
    gemm_streams = {call[-1] for call, _ in work if call[0] == "matmul"}
    assert plan["streams"] >= 2 and len(gemm_streams) == 2  # the two dots overlap
    before = predecessors(thunks)
    checked = 0
    for index, (call, finished) in enumerate(work):
        for earlier in range(index):
            if owners[earlier] in before[owners[index]] or owners[earlier] == owners[index]:
                assert earlier in finished, f"work {index} ({call[:2]}) may start before work {earlier}"
                checked += 1
    assert checked >= 2
    forks = [c for c in device.calls if c[0] == "wait_event" and c[1] != "stream0"]
    joins = [c for c in device.calls if c[0] == "wait_event" and c[1] == "stream0"]
    assert forks and joins  # the other streams start after stream 0's start and end before its end


@needs_ptxas
def test_a_chain_runs_on_one_stream():
    program = compile_text(CHAIN)
    plan = program.executable.plan
    assert plan["streams"] == 1 and plan["events"] == 0
    device = FakeCudaDevice()
    Executable(program.executable, device, graphs=False).run(inputs_for(plan))
    assert {call[-1] for call in device.calls if call[0] in WORK} == {"stream0"}
    assert not [c for c in device.calls if c[0] in ("wait_event", "record_event")]


@needs_ptxas
def test_a_graph_is_captured_once_and_replayed_with_one_launch_per_call():
    program = compile_text(TWO_DOTS)
    device = FakeCudaDevice()
    executable = Executable(program.executable, device)
    inputs = inputs_for(program.executable.plan)
    executable.run(inputs)
    first = list(device.calls)
    executable.run(inputs)
    executable.run(inputs)
    later = device.calls[len(first):]
    assert executable.execution() == {"streams": program.executable.plan["streams"], "graph": True, "graph_reason": None}
    assert [c[0] for c in device.calls].count("begin_capture") == 1
    assert [c[0] for c in device.calls].count("instantiate_graph") == 1
    captured = [c for c in first if c[0] in WORK]
    assert captured and all(c[-1] == "captured" for c in captured)
    assert first.index(["begin_capture", "stream0"]) < first.index(["end_capture", "stream0"]) < first.index(
        ["launch_graph", "graph_exec", "stream0"])
    # later calls: arguments copied into the slab, one graph launch, outputs copied out; no thunk run on its own
    assert [c[0] for c in later if c[0] not in ("copy_to_device",)] == ["launch_graph", "synchronize", "copy_to_host"] * 2
    assert not [c for c in later if c[0] in WORK]


@needs_ptxas
def test_graphs_turned_off_by_the_variable(monkeypatch):
    monkeypatch.setenv("MLIRXLA_CUDA_GRAPHS", "0")
    program = compile_text(TWO_DOTS)
    device = FakeCudaDevice()
    executable = Executable(program.executable, device)
    executable.run(inputs_for(program.executable.plan))
    executable.run(inputs_for(program.executable.plan))
    assert executable.execution()["graph_reason"] == "turned off (MLIRXLA_CUDA_GRAPHS=0)"
    assert not [c for c in device.calls if "graph" in c[0] or "capture" in c[0]]
    assert len([c for c in device.calls if c[0] == "matmul"]) == 4


@needs_ptxas
def test_a_plan_with_host_work_runs_without_a_graph_and_says_why():
    program = compile_text(UNTIL_BOUND_LOOP)
    assert [t["trip_count"] for t in program.executable.plan["thunks"] if t["kind"] == "while"] == [None]
    device = FakeCudaDevice()
    executable = Executable(program.executable, device)
    executable.run([np.ones(8, np.float32), np.array(3, np.int32)])
    assert executable.execution()["graph_reason"].startswith("host work: while ")
    assert not [c for c in device.calls if "capture" in c[0]]


@needs_ptxas
def test_a_loop_of_known_trip_count_runs_its_body_that_many_times_inside_the_graph():
    program = compile_text(COUNTING_LOOP)
    (loop,) = [t for t in program.executable.plan["thunks"] if t["kind"] == "while"]
    assert loop["trip_count"] == 3
    body_launches = [t["kernel"] for t in loop["body"] if t["kind"] == "launch"]
    device = FakeCudaDevice()
    executable = Executable(program.executable, device)
    plan_inputs = inputs_for(program.executable.plan)
    executable.run(plan_inputs)
    executable.run(plan_inputs)
    assert executable.execution()["graph"]
    captured = [c for c in device.calls if c[-1] == "captured"]
    assert [c[1] for c in captured if c[0] == "launch" and c[1] in body_launches] == body_launches * 3
    assert not [c for c in captured if c[0] == "copy_to_host"]  # no predicate read back
    assert not [c for c in captured if c[0] == "launch" and c[1] in {t["kernel"] for t in loop["condition"]}]
    assert [c[0] for c in device.calls].count("launch_graph") == 2


SWAPPING_LOOP = """func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:3 = stablehlo.while(%i = %zero, %x = %a, %y = %b) : tensor<i32>, tensor<8xf32>, tensor<8xf32>
  cond {
    %three = stablehlo.constant dense<3> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %y, %x : tensor<i32>, tensor<8xf32>, tensor<8xf32>
  }
  return %0#1, %0#2 : tensor<8xf32>, tensor<8xf32>
}
"""


@pytest.mark.parametrize("graphs", [True, False])
def test_carried_values_swapped_by_a_loop_body_go_through_staging(graphs):
    """The body returns its two carried values swapped: copied one after the other, the
    second copy would read what the first wrote (both results the second value). Staged,
    three swaps leave them swapped, on a device whose copies move the bytes."""
    program = compile_text(SWAPPING_LOOP)
    (loop,) = [t for t in program.executable.plan["thunks"] if t["kind"] == "while"]
    assert [t["name"] for t in loop["body"] if t["kind"] == "memcpy"] == ["carried values (staged)"] * 2 + ["carried values"] * 2
    a, b = np.arange(8, dtype=np.float32), np.arange(8, 16, dtype=np.float32)
    executable = Executable(program.executable, ComputingDevice(), graphs=graphs)
    first, second = executable.run([a, b])
    np.testing.assert_array_equal(first, b)
    np.testing.assert_array_equal(second, a)


def power_loop(steps: int) -> str:
    """h @ w, `steps` times, in a loop of known trip count (w carried unchanged)."""
    return f"""func.func @main(%h: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {{
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:3 = stablehlo.while(%i = %zero, %x = %h, %m = %w) : tensor<i32>, tensor<4x4xf32>, tensor<4x4xf32>
  cond {{
    %n = stablehlo.constant dense<{steps}> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }} do {{
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %y = stablehlo.dot_general %x, %m, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    stablehlo.return %next, %y, %m : tensor<i32>, tensor<4x4xf32>, tensor<4x4xf32>
  }}
  return %0#1 : tensor<4x4xf32>
}}
"""


@pytest.mark.parametrize("steps", [4, 5])
@pytest.mark.parametrize("graphs", [True, False])
def test_a_carried_value_alternates_between_its_state_and_its_new_buffer(steps, graphs):
    """The body's GEMM writes h's new value into a buffer of its own and the copy back into
    the state goes: odd iterations run the body with the two buffers traded, so each reads
    what the one before wrote; after an odd count one copy puts h where the loop's readers
    find it. On the stand-in that computes GEMMs and copies: h0 @ w^steps."""
    program = compile_text(power_loop(steps))
    (loop,) = [t for t in program.executable.plan["thunks"] if t["kind"] == "while"]
    assert [t["kind"] for t in loop["body"]] == ["launch", "gemm"] and len(loop["carried"]) == 1
    generator = np.random.default_rng(0)
    h, w = generator.standard_normal((4, 4)).astype(np.float32), (generator.standard_normal((4, 4)) / 2).astype(np.float32)
    device = ComputingDevice()
    (result,) = Executable(program.executable, device, graphs=graphs).run([h, w])
    np.testing.assert_allclose(result, h @ np.linalg.matrix_power(w, steps), rtol=1e-5, atol=1e-6)
    lhs = [call[2] for call in device.calls if call[0] == "matmul"][:2]
    assert lhs[0] != lhs[1]  # the second iteration reads the first one's new value where it was written
    before_the_loop = sum(1 for t in program.executable.plan["thunks"] if t["kind"] == "memcpy" and t["bytes"])
    assert sum(1 for call in device.calls if call[0] == "copy_on_device") == before_the_loop + steps % 2


class TimedDevice(FakeCudaDevice):
    """The stand-in with CUDA-event timing: every launch, GEMM and copy takes 1 ms."""

    def elapsed_ms(self, work) -> float:
        before = len(self.calls)
        work()
        return float(sum(1 for call in self.calls[before:] if call[0] in WORK))


def test_the_profile_times_every_thunk_within_whole_executions():
    """Each top-level thunk is a row in plan order; a loop of known trip count is unrolled
    into its body's rows (3 calls, 3 ms an execution), whole executions are run (one to warm
    up, then `repeat`), and a launch's row carries its arguments' bytes."""
    program = compile_text(COUNTING_LOOP)
    plan = program.executable.plan
    (loop,) = [t for t in plan["thunks"] if t["kind"] == "while"]
    device = TimedDevice()
    rows = Executable(program.executable, device).profile(4)
    outside = [t for t in plan["thunks"] if t["kind"] != "while"]
    assert [(row["name"], row["calls"], row["ms"]) for row in rows] == (
        [(t["name"], 1, 1.0) for t in outside] + [(t["name"], 3, 3.0) for t in loop["body"]])
    assert sum(1 for call in device.calls if call[0] in WORK) == 5 * (len(outside) + 3 * len(loop["body"]))
    body_launch = next(row for row in rows if row["kind"] == "launch")
    assert body_launch["bytes"] == 36  # the counter read and written once (4 bytes), the vector read and its double written
    copies = [row for row in rows if row["kind"] == "memcpy"]
    assert sorted(row["bytes"] for row in copies) == sorted(2 * t["bytes"] for t in outside)


def test_the_profile_times_a_loop_that_reads_its_predicate_back_whole():
    rows = Executable(compile_text(UNTIL_BOUND_LOOP).executable, TimedDevice()).profile(2)
    assert [row["kind"] for row in rows if row["kind"] != "memcpy"] == ["while"]


def test_a_failed_capture_falls_back_and_says_why():
    class FailingGemm(FakeCudaDevice):
        def matmul(self, *arguments):
            if self.capturing is not None:
                raise RuntimeError("operation not permitted when stream is capturing")
            super().matmul(*arguments)

    plan = {"kernels": [], "slab_bytes": 1024, "constants": [], "parameters": [], "outputs": [], "streams": 1, "events": 0,
            "thunks": [{"kind": "gemm", "name": "g", "operand_dtype": "float32", "out_dtype": "float32", "compute": "32F",
                        "m": 2, "n": 2, "k": 2, "batch": 1,
                        "transpose_lhs": False, "transpose_rhs": False, "lhs": 0, "rhs": 256, "out": 512, "epilogue": "default",
                        "bias": None, "stream": 0}]}
    device = FailingGemm()
    executable = Executable(ExecutableFile(plan, {"ptx": b""}), device)
    executable.run([])
    executable.run([])
    assert executable.execution()["graph_reason"] == "capture failed: operation not permitted when stream is capturing"
    # the failed execution runs again without a graph, and so do the later ones
    sequence = [c[0] for c in device.calls if c[0] in ("begin_capture", "abandon_capture", "matmul")]
    assert sequence == ["begin_capture", "abandon_capture", "matmul", "matmul"]


@needs_ptxas
def test_a_version_1_file_runs_everything_on_stream_0():
    program = compile_text(TWO_DOTS)
    data = program.executable.to_bytes()
    plan = dict(program.executable.plan)
    plan.pop("streams"), plan.pop("events")
    plan["thunks"] = [{k: v for k, v in t.items() if k not in ("stream", "wait", "record")} for t in plan["thunks"]]
    old = ExecutableFile(plan, program.executable.blobs).to_bytes().replace(b'"version": 2', b'"version": 1', 1)
    assert old != data
    device = FakeCudaDevice()
    Executable(ExecutableFile.from_bytes(old), device, graphs=False).run(inputs_for(plan))
    assert {call[-1] for call in device.calls if call[0] in WORK} == {"stream0"}
    assert len([c for c in device.calls if c[0] == "matmul"]) == 2


def test_a_capture_the_driver_refuses_at_its_end_falls_back_and_says_why():
    class InvalidatedCapture(FakeCudaDevice):
        def end_capture(self, stream):
            super().end_capture(stream)
            raise RuntimeError("cuStreamEndCapture failed: operation failed due to a previous error during capture")

    plan = {"kernels": [], "slab_bytes": 1024, "constants": [], "parameters": [], "outputs": [], "streams": 1, "events": 0,
            "thunks": [{"kind": "memcpy", "name": "c", "source": 0, "destination": 512, "bytes": 64, "stream": 0}]}
    device = InvalidatedCapture()
    executable = Executable(ExecutableFile(plan, {"ptx": b""}), device)
    executable.run([])
    assert executable.execution()["graph_reason"] == \
        "capture failed: cuStreamEndCapture failed: operation failed due to a previous error during capture"
    copies = [c for c in device.calls if c[0] == "copy_on_device"]
    assert [c[-1] for c in copies] == ["captured", "stream0"]  # captured, then run for real
