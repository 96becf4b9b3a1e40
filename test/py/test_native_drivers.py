"""Native drivers: while loops and conditionals run as one compiled function each
(`backends/cpu/driver_emitter.py`, `runtime/native_drivers.py`). Results against the reference
interpreter (and jax's CPU backend for the jax programs), and the thunk sequence and the
decisions saying which control flow runs natively and what calls back into Python."""

import os
import random

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu.driver_emitter import copy_order
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.runtime import thunks
from mlirxla.runtime.client import Client, CompileOptions
from mlirxla.runtime.thunks import ConditionalThunk, HostThunk, WhileThunk, every_thunk

from .conftest import JAX_PROGRAMS, random_arguments, reference_outputs

# a loop whose body sorts (a host call, rows longer than the sort kernel takes: called back
# into Python) and adds to the counter
SORT_IN_LOOP = """func.func @main(%v: tensor<80xf32>) -> (tensor<80xf32>, tensor<i32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %zero, %x = %v) : tensor<i32>, tensor<80xf32>
  cond {
    %three = stablehlo.constant dense<3> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %neg = stablehlo.negate %x : tensor<80xf32>
    %sorted = "stablehlo.sort"(%neg) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) {dimension = 0 : i64, is_stable = true} : (tensor<80xf32>) -> tensor<80xf32>
    stablehlo.return %next, %sorted : tensor<i32>, tensor<80xf32>
  }
  return %0#1, %0#0 : tensor<80xf32>, tensor<i32>
}
"""

# carried values swapped each iteration (a parallel copy whose copies form a cycle)
SWAP = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<i32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:3 = stablehlo.while(%i = %zero, %x = %a, %y = %b) : tensor<i32>, tensor<4xf32>, tensor<4xf32>
  cond {
    %five = stablehlo.constant dense<5> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %five, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %y, %x : tensor<i32>, tensor<4xf32>, tensor<4xf32>
  }
  return %0#1, %0#2, %0#0 : tensor<4xf32>, tensor<4xf32>, tensor<i32>
}
"""

# a value computed from one carried value replaces it while the old one moves to the next
# position (jax's inverse iteration keeps `(new_norm, norm)`), and the loop runs on while the
# new one grew: the stop depends on the old value surviving the body
ROTATE = """func.func @main(%v: tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %ones = stablehlo.constant dense<1.0> : tensor<4xf32>
  %zeros = stablehlo.constant dense<0.0> : tensor<4xf32>
  %0:3 = stablehlo.while(%i = %zero, %n = %ones, %old = %zeros) : tensor<i32>, tensor<4xf32>, tensor<4xf32>
  cond {
    %grew = stablehlo.compare GT, %n, %old, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %false = stablehlo.constant dense<false> : tensor<i1>
    %any = stablehlo.reduce(%grew init: %false) applies stablehlo.or across dimensions = [0] : (tensor<4xi1>, tensor<i1>) -> tensor<i1>
    stablehlo.return %any : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %scaled = stablehlo.multiply %n, %v : tensor<4xf32>
    %root = stablehlo.sqrt %scaled : tensor<4xf32>
    stablehlo.return %next, %root, %n : tensor<i32>, tensor<4xf32>, tensor<4xf32>
  }
  return %0#0, %0#1, %0#2 : tensor<i32>, tensor<4xf32>, tensor<4xf32>
}
"""

# a predicate `if` at the top level: its driver branches on a byte
IF = """func.func @main(%p: tensor<i1>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.if"(%p) ({
    %s = stablehlo.add %x, %y : tensor<4xf32>
    stablehlo.return %s : tensor<4xf32>
  }, {
    %m = stablehlo.multiply %x, %y : tensor<4xf32>
    stablehlo.return %m : tensor<4xf32>
  }) : (tensor<i1>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

# a loop inside a loop, the inner trip count read from the data
NESTED = """func.func @main(%v: tensor<16xf32>, %n: tensor<i32>) -> (tensor<16xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %zero, %x = %v) : tensor<i32>, tensor<16xf32>
  cond {
    %four = stablehlo.constant dense<4> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %four, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %1:2 = stablehlo.while(%j = %zero, %y = %x) : tensor<i32>, tensor<16xf32>
    cond {
      %lt = stablehlo.compare LT, %j, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %jn = stablehlo.add %j, %one : tensor<i32>
      %s = stablehlo.sine %y : tensor<16xf32>
      %t = stablehlo.add %y, %s : tensor<16xf32>
      stablehlo.return %jn, %t : tensor<i32>, tensor<16xf32>
    }
    stablehlo.return %next, %1#1 : tensor<i32>, tensor<16xf32>
  }
  return %0#1 : tensor<16xf32>
}
"""


def drivers(executable) -> list:
    """The executable's native drivers: the whole sequence's, then the control-flow thunks'."""
    plan = executable.executable.plan
    return ([plan.driver] if plan.driver is not None else []) + [
        t.driver for t in every_thunk(plan.thunks) if isinstance(t, (WhileThunk, ConditionalThunk)) and t.driver is not None]


def thunks_of(executable, kind) -> list:
    return [t for t in every_thunk(executable.executable.plan.thunks) if isinstance(t, kind)]


def matches_reference(executable, text: str, arguments: list) -> None:
    module = frontdoor.import_text(text, "-", new_context()).module
    for got, expected in zip(executable.execute_numpy(arguments), reference_outputs(module, arguments)):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_loop_with_a_host_call_runs_natively_and_calls_the_sort_back():
    executable = Client().compile(SORT_IN_LOOP)
    sequence = executable.thunk_sequence()
    assert "every thunk below runs in native driver driver_executable; back into Python for sort" in sequence
    (driver,) = drivers(executable)
    (called_back,) = driver.called_back
    assert isinstance(called_back, HostThunk) and called_back.call == "sort"
    matches_reference(executable, SORT_IN_LOOP, [np.tile(np.array([3, -1, 4, 1, -5, 9, 2, -6], np.float32), 10)])


def test_swapped_carried_values_match_the_reference():
    executable = Client().compile(SWAP)
    (driver,) = drivers(executable)
    (swap,) = thunks_of(executable, thunks.ParallelCopyThunk)
    assert copy_order(swap.copies)[1], "the swap's copies form a cycle, saved on the driver's stack"
    assert driver.python_thunks == ()
    matches_reference(executable, SWAP, [np.arange(1, 5, dtype=np.float32), np.full(4, 0.5, np.float32)])


def test_a_carried_value_moved_to_the_next_position_survives_the_body():
    executable = Client().compile(ROTATE)
    v = np.full(4, 16.0, np.float32)
    count, last, before = executable.execute_numpy([v])
    matches_reference(executable, ROTATE, [v])
    assert count > 1 and last[0] <= before[0]


def shuffled_loop(seed: int) -> tuple[str, int]:
    """A three-step loop over 2-5 carried values whose body returns, in each position, a
    carried value from any position, a function of one, or the sum of two: swaps, rotations,
    duplicates and values moved while their buffer is rewritten, in random mixes."""
    rng = random.Random(seed)
    count = rng.randrange(2, 6)
    lines, results = [], []
    for position in range(count):
        source, other, choice = rng.randrange(count), rng.randrange(count), rng.random()
        if choice < 0.4:
            results.append(f"%c{source}")
            continue
        unary = f"stablehlo.{rng.choice(['negate', 'sine', 'cosine', 'abs'])} %c{source}"
        lines.append(f"    %u{position} = {unary if choice < 0.8 else f'stablehlo.add %c{source}, %c{other}'} : tensor<4xf32>")
        results.append(f"%u{position}")
    vector = "tensor<4xf32>"
    types = ", ".join(["tensor<i32>"] + [vector] * count)
    body = "\n".join(lines)
    return f"""func.func @main({", ".join(f"%a{j}: {vector}" for j in range(count))}) -> ({", ".join([vector] * count)}) {{
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:{count + 1} = stablehlo.while(%i = %zero, {", ".join(f"%c{j} = %a{j}" for j in range(count))}) : {types}
  cond {{
    %three = stablehlo.constant dense<3> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }} do {{
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
{body}
    stablehlo.return %next, {", ".join(results)} : {types}
  }}
  return {", ".join(f"%r#{j + 1}" for j in range(count))} : {", ".join([vector] * count)}
}}
""", count


@pytest.mark.parametrize("seeds", [range(0, 30), range(30, 60)], ids=["0-29", "30-59"])
def test_shuffled_carried_values_match_the_reference(seeds):
    for seed in seeds:
        text, count = shuffled_loop(seed)
        arguments = [np.linspace(0.1 * (j + 1), 1 + j, 4).astype(np.float32) for j in range(count)]
        matches_reference(Client().compile(text), text, arguments)


# two loops whose bodies return an iota: the first runs once and is inlined, CSE then gives the
# second loop's body the first one's iota, defined outside it and returned by the program too
def iota_loop(result: str, trips: int) -> str:
    return f"""  {result}:2 = stablehlo.while(%i = %zero, %a = %x) : tensor<i32>, tensor<64xf32>
  cond {{
    %trips = stablehlo.constant dense<{trips}> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %trips, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }} do {{
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %iota = stablehlo.iota dim = 0 : tensor<64xf32>
    stablehlo.return %next, %iota : tensor<i32>, tensor<64xf32>
  }}
"""


OUTER_VALUE = f"""func.func @main(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {{
  %zero = stablehlo.constant dense<0> : tensor<i32>
{iota_loop("%0", 1)}{iota_loop("%1", 2)}  %square = stablehlo.multiply %1#1, %1#1 : tensor<64xf32>
  return %square, %0#1 : tensor<64xf32>, tensor<64xf32>
}}
"""


def test_a_loop_returning_a_value_from_outside_keeps_that_value():
    """The random-DAG fuzzer's seed 2190: the loop's init was copied over the iota's buffer."""
    x = np.linspace(-1, 1, 64).astype(np.float32)
    square, iota = Client().compile(OUTER_VALUE).execute_numpy([x])
    np.testing.assert_array_equal(iota, np.arange(64, dtype=np.float32))
    np.testing.assert_array_equal(square, np.arange(64, dtype=np.float32) ** 2)


def test_a_swap_too_large_for_the_stack_is_called_back():
    text = SWAP.replace("tensor<4xf32>", "tensor<16384xf32>")
    executable = Client().compile(text)
    (driver,) = drivers(executable)
    (swap,) = thunks_of(executable, thunks.ParallelCopyThunk)
    assert driver.called_back == [swap] and "bytes of stack" in driver.python_reasons[0]
    rng = np.random.default_rng(1)
    matches_reference(executable, text, [rng.standard_normal(16384).astype(np.float32) for _ in range(2)])


@pytest.mark.parametrize("predicate", [True, False])
def test_predicate_if_matches_the_reference(predicate):
    executable = Client().compile(IF)
    assert drivers(executable)
    (conditional,) = thunks_of(executable, ConditionalThunk)
    assert conditional.is_predicate
    matches_reference(executable, IF, [np.bool_(predicate), np.arange(1, 5, dtype=np.float32), np.full(4, 3, np.float32)])


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_nested_loop_with_a_data_dependent_trip_count_matches_the_reference(trips):
    executable = Client().compile(NESTED)
    assert drivers(executable) and len(thunks_of(executable, WhileThunk)) == 2
    matches_reference(executable, NESTED, [np.linspace(-1, 1, 16, dtype=np.float32), np.int32(trips)])


def test_an_error_in_a_called_back_thunk_is_raised_by_the_execution(monkeypatch):
    """The driver stops at the failed call back, and the error reaches the caller."""
    executable = Client().compile(SORT_IN_LOOP)
    (called_back,) = drivers(executable)[0].called_back

    def fail(bases, pool):
        raise MlirxlaError("the sort failed")

    monkeypatch.setattr(called_back, "run", fail)
    with pytest.raises(MlirxlaError, match="the sort failed"):
        executable.execute_numpy([np.zeros(80, np.float32)])


def test_while_a_profile_records_the_loop_is_walked_from_python(monkeypatch):
    """A profile times every thunk inside: the driver stands aside while one observes."""
    executable = Client().compile(NESTED)
    (driver,) = drivers(executable)
    ran = []

    class Counting:
        def run(self, thunk, bases, pool):
            ran.append(thunk.kind)
            thunk.run(bases, pool)

        def execution(self, sequence, run):
            run()

    monkeypatch.setattr(driver, "run", lambda bases, pool: pytest.fail("the driver ran under a profile"))
    thunks.observe(Counting())
    try:
        matches_reference(executable, NESTED, [np.linspace(-1, 1, 16, dtype=np.float32), np.int32(2)])
    finally:
        thunks.observe(None)
    assert ran.count("while") == 1 + 4  # the outer loop, then the inner one per outer iteration


def independent_sorts_and_a_loop(count: int, length: int) -> str:
    """`count` sorts of independent arguments (kernels the executor can run side by side)
    of `length` elements beside a loop: a sequence the executor runs as a dependency graph
    when it moves enough bytes (`executor.SEQUENTIAL_BYTES_BELOW`)."""
    parameters = ", ".join(f"%a{i}: tensor<{length}xf32>" for i in range(count))
    sorts = "".join(f"""  %s{i} = "stablehlo.sort"(%a{i}) ({{
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %c = stablehlo.compare LT, %l, %r, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}) {{dimension = 0 : i64, is_stable = true}} : (tensor<{length}xf32>) -> tensor<{length}xf32>
""" for i in range(count))
    results = ", ".join(f"%s{i}" for i in range(count))
    types = ", ".join([f"tensor<{length}xf32>"] * count)
    return f"""func.func @main({parameters}, %n: tensor<i32>) -> ({types}, tensor<{length}xf32>) {{
{sorts}  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%j = %zero, %y = %a0) : tensor<i32>, tensor<{length}xf32>
  cond {{
    %lt = stablehlo.compare LT, %j, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }} do {{
    %one = stablehlo.constant dense<1> : tensor<i32>
    %jn = stablehlo.add %j, %one : tensor<i32>
    %t = stablehlo.sine %y : tensor<{length}xf32>
    stablehlo.return %jn, %t : tensor<i32>, tensor<{length}xf32>
  }}
  return {results}, %0#1 : {types}, tensor<{length}xf32>
}}
"""


def test_in_a_sequence_run_as_a_graph_each_loop_gets_its_own_driver():
    """Eight sorts of 256 KiB and a loop move enough bytes for the graph, and no kernel of
    theirs is worth splitting over the threads (a thunk spanning the pool would keep the
    sequence in order)."""
    text = independent_sorts_and_a_loop(8, 1 << 16)
    executable = Client().compile(text)
    assert executable.executable.graph is not None and executable.executable.plan.driver is None
    (loop,) = [t for t in executable.executable.plan.thunks if isinstance(t, WhileThunk)]
    assert loop.driver is not None and "in native driver driver_while" in executable.thunk_sequence()
    rng = np.random.default_rng(0)
    arguments = [rng.standard_normal(1 << 16).astype(np.float32) for _ in range(8)] + [np.int32(2)]
    matches_reference(executable, text, arguments)


def test_a_sequence_moving_few_bytes_runs_in_order_by_one_driver():
    """The same program on 8 elements moves a few KiB: hand-offs to the pool's workers would
    cost more than its thunks take side by side, so one native driver runs it in order."""
    text = independent_sorts_and_a_loop(8, 8)
    executable = Client().compile(text)
    assert executable.executable.graph is None and executable.executable.plan.driver is not None
    rng = np.random.default_rng(0)
    arguments = [rng.standard_normal(8).astype(np.float32) for _ in range(8)] + [np.int32(2)]
    matches_reference(executable, text, arguments)


def test_cached_plan_keeps_its_driver(tmp_path):
    first = Client(cache_dir=str(tmp_path)).compile(SWAP)
    second = Client(cache_dir=str(tmp_path)).compile(SWAP)
    assert second.executable is not first.executable
    assert [d.symbol for d in drivers(second)] == [d.symbol for d in drivers(first)] != []
    matches_reference(second, SWAP, [np.arange(4, dtype=np.float32), np.ones(4, np.float32)])


def test_dump_says_which_control_flow_runs_natively(tmp_path):
    Client().compile(SORT_IN_LOOP, CompileOptions(dump_to=str(tmp_path)))
    (sequence,) = [name for name in os.listdir(tmp_path) if name.endswith("thunk-sequence.txt")]
    text = open(os.path.join(tmp_path, sequence)).read()
    assert "executable: native driver driver_executable runs the whole thunk sequence" in text
    assert any(name.endswith("driver_executable.ir-with-opt.ll") for name in os.listdir(tmp_path))


def test_scan_program_matches_the_reference():
    path = os.path.join(JAX_PROGRAMS, "programs", "scan.stablehlo.mlir")
    text = open(path).read()
    executable = Client().compile(text)
    (driver,) = drivers(executable)
    assert driver.python_thunks == ()
    module = frontdoor.import_text(text, path, new_context()).module
    arguments = [a * np.float32(0.1) for a in random_arguments(module, 1)]
    for got, expected in zip(executable.execute_numpy(arguments), reference_outputs(module, arguments)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


# a scan stacking each step's value: the body updates the carried stack in place
STACKING_SCAN = """func.func @main(%h0: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<16x4x8xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %empty = stablehlo.constant dense<0.0> : tensor<16x4x8xf32>
  %0:3 = stablehlo.while(%i = %zero, %h = %h0, %stack = %empty) : tensor<i32>, tensor<4x8xf32>, tensor<16x4x8xf32>
  cond {
    %n = stablehlo.constant dense<16> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %t = stablehlo.tanh %h : tensor<4x8xf32>
    %row = stablehlo.reshape %t : (tensor<4x8xf32>) -> tensor<1x4x8xf32>
    %z = stablehlo.constant dense<0> : tensor<i32>
    %updated = stablehlo.dynamic_update_slice %stack, %row, %i, %z, %z : (tensor<16x4x8xf32>, tensor<1x4x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<16x4x8xf32>
    stablehlo.return %next, %t, %updated : tensor<i32>, tensor<4x8xf32>, tensor<16x4x8xf32>
  }
  return %0#1, %0#2 : tensor<4x8xf32>, tensor<16x4x8xf32>
}
"""


def test_stacked_scan_output_is_updated_in_place_and_never_copied():
    executable = Client().compile(STACKING_SCAN)
    (update,) = [t for t in thunks_of(executable, thunks.KernelThunk) if "dynamic_update_slice" in t.symbol]
    assert update.results[0] in update.reads and update.scratch is None
    (loop,) = thunks_of(executable, WhileThunk)
    body = list(every_thunk(loop.body))
    copies = [t for t in body if isinstance(t, thunks.CopyThunk)] + [
        c for t in body if isinstance(t, thunks.ParallelCopyThunk) for c in t.copies]
    assert 16 * 4 * 8 * 4 not in [copy.source.size for copy in copies]  # the stack's bytes
    matches_reference(executable, STACKING_SCAN, [np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)])


@pytest.mark.jax
@pytest.mark.parametrize("name", ["rnn_scan", "fori", "collatz", "cond_scan"])
def test_loop_benchmark_programs_match_jax_cpu(name):
    """The programs of benchmarks/loops_vs_xla.py, each loop in a native driver, as XLA:CPU computes them."""
    import sys

    jax = pytest.importorskip("jax")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from loops_vs_xla import programs

    function, arguments = programs(np.random.default_rng(2))[name]
    executable = Client().compile(jax.jit(function).lower(*arguments).as_text())
    assert drivers(executable)
    cpu = jax.devices("cpu")[0]
    expected = jax.tree_util.tree_leaves(jax.jit(function)(*jax.device_put(arguments, cpu)))
    got = executable.execute_numpy([np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(arguments)])
    for actual, wanted in zip(got, expected):
        np.testing.assert_allclose(actual, np.asarray(wanted), rtol=1e-4, atol=1e-5)


@pytest.mark.jax
def test_callbacks_inside_a_loop_run_in_order_and_their_errors_reach_the_caller(monkeypatch):
    """An ordered io_callback inside a fori_loop on the plugin: the driver calls it back once
    per iteration, in order; one that raises stops the loop and the error reaches jax."""
    jax = pytest.importorskip("jax")
    from jax.experimental import io_callback

    from mlirxla.runtime.native_drivers import NativeDriver

    device = jax.devices("mlirxla")[0]
    seen, drivers_run = [], []
    run = NativeDriver.run
    monkeypatch.setattr(NativeDriver, "run", lambda driver, bases, pool: (drivers_run.append(driver.python_reasons),
                                                                          run(driver, bases, pool)))

    def program(x):
        def step(i, total):
            io_callback(lambda value: seen.append(int(value)), None, i, ordered=True)
            return total * 2 + i
        return jax.lax.fori_loop(0, 5, step, x)

    with jax.default_device(device):
        assert int(jax.jit(program)(np.int32(1))) == ((((1 * 2 + 0) * 2 + 1) * 2 + 2) * 2 + 3) * 2 + 4
    assert seen == [0, 1, 2, 3, 4]
    assert len(drivers_run) == 1 and len(drivers_run[0]) == 1 and "host thunk" in drivers_run[0][0]

    def refuse(i):
        if int(i) == 2:
            raise ValueError("no third step")

    def failing(x):
        def step(i, total):
            io_callback(refuse, None, i, ordered=True)
            return total + i
        return jax.lax.fori_loop(0, 5, step, x)

    with jax.default_device(device), pytest.raises(jax.errors.JaxRuntimeError, match="no third step"):
        jax.jit(failing)(np.int32(0)).block_until_ready()


EXPONENTIAL_LOOP = """func.func @main(%x: tensor<1024x512xf32>) -> tensor<1024x512xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %zero, %a = %x) : tensor<i32>, tensor<1024x512xf32>
  cond {
    %trips = stablehlo.constant dense<3> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %trips, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %half = stablehlo.constant dense<0.5> : tensor<1024x512xf32>
    %e = stablehlo.exponential %a : tensor<1024x512xf32>
    %scaled = stablehlo.multiply %e, %half : tensor<1024x512xf32>
    stablehlo.return %next, %scaled : tensor<i32>, tensor<1024x512xf32>
  }
  return %0#1 : tensor<1024x512xf32>
}
"""


@pytest.mark.parametrize("threads", ["1", "2"])
def test_a_single_devices_sliced_kernel_runs_on_the_native_pool_from_its_driver(monkeypatch, threads):
    """A large exponential in a loop, split over two threads: its driver runs the slices on the
    native pool itself, with nothing called back into Python; on one thread nothing is split."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
    executable = Client().compile(EXPONENTIAL_LOOP)
    (driver,) = drivers(executable)
    assert len(thunks_of(executable, thunks.SlicedKernelThunk)) == (threads == "2")
    assert driver.python_thunks == ()
    x = np.random.default_rng(4).uniform(-2, 1, (1024, 512)).astype(np.float32)
    want = x
    for _ in range(3):
        want = np.exp(want) * np.float32(0.5)
    np.testing.assert_allclose(executable.execute_numpy([x])[0], want, rtol=1e-5)


# `count` solves of a diagonally dominant system in a loop, as jax's cpu lowering calls LAPACK:
# getrf, then trsm with the unit lower factor, then with the upper one (no row exchanges
# happen: the diagonal leads every column)
SOLVES_IN_LOOP = """func.func @main(%a: tensor<3x4x4x{t}>, %b: tensor<3x4x2x{t}>, %count: tensor<i32>) -> (tensor<3x4x2x{t}>, tensor<3x4xi32>) {{
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %pivots0 = stablehlo.constant dense<0> : tensor<3x4xi32>
  %0:3 = stablehlo.while(%i = %zero, %x = %b, %p = %pivots0) : tensor<i32>, tensor<3x4x2x{t}>, tensor<3x4xi32>
  cond {{
    %lt = stablehlo.compare LT, %i, %count, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }} do {{
    %lu:3 = stablehlo.custom_call @lapack_{letter}getrf_ffi(%a) {{mhlo.backend_config = {{}}, api_version = 4 : i32,
        operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
        result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]}}
        : (tensor<3x4x4x{t}>) -> (tensor<3x4x4x{t}>, tensor<3x4xi32>, tensor<3xi32>)
    %y = stablehlo.custom_call @lapack_{letter}trsm_ffi(%lu#0, %x) {{mhlo.backend_config = {{diag = 85 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}},
        operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 2, 0]> : tensor<3xindex>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>]}}
        : (tensor<3x4x4x{t}>, tensor<3x4x2x{t}>) -> tensor<3x4x2x{t}>
    %z = stablehlo.custom_call @lapack_{letter}trsm_ffi(%lu#0, %y) {{mhlo.backend_config = {{diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 85 : ui8}},
        operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 2, 0]> : tensor<3xindex>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>]}}
        : (tensor<3x4x4x{t}>, tensor<3x4x2x{t}>) -> tensor<3x4x2x{t}>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %z, %lu#1 : tensor<i32>, tensor<3x4x2x{t}>, tensor<3x4xi32>
  }}
  return %0#1, %0#2 : tensor<3x4x2x{t}>, tensor<3x4xi32>
}}"""


@pytest.mark.parametrize("element, letter, dtype", [("f32", "s", np.float32), ("f64", "d", np.float64),
                                                    ("complex<f32>", "c", np.complex64), ("complex<f64>", "z", np.complex128)])
def test_lapack_solves_in_a_loop_run_in_the_driver(element, letter, dtype, monkeypatch):
    """getrf and trsm inside a loop are called by the driver itself (scipy's routines, by
    address; a complex trsm's alpha a complex one), not back into Python (120 us a call):
    the loop has no Python thunk left, and its results are the Python path's bit for bit,
    and A^-count b."""
    from mlirxla.backends.cpu import driver_emitter

    text = SOLVES_IN_LOOP.format(t=element, letter=letter)
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((3, 4, 4)) + 8 * np.eye(4)).astype(dtype)
    b = rng.standard_normal((3, 4, 2)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((3, 4, 4)).astype(dtype)
        b = b + 1j * rng.standard_normal((3, 4, 2)).astype(dtype)
    arguments = [a, b, np.int32(3)]
    executable = Client().compile(text)
    assert "back into Python" not in executable.thunk_sequence(), executable.thunk_sequence()
    solved, pivots = executable.execute_numpy(arguments)
    monkeypatch.setattr(driver_emitter, "NATIVE_LAPACK", ())
    called_back = Client().compile(text)
    assert "back into Python for custom_call" in called_back.thunk_sequence()
    for native, python in zip((solved, pivots), called_back.execute_numpy(arguments)):
        np.testing.assert_array_equal(native, python)
    np.testing.assert_array_equal(pivots, np.tile(np.arange(1, 5, dtype=np.int32), (3, 1)))
    expected = b
    for _ in range(3):
        expected = np.linalg.solve(a, expected)
    np.testing.assert_allclose(solved, expected, rtol=1e-4 if dtype in (np.float32, np.complex64) else 1e-12)


# jnp.linalg.eigh of a batch as jax's cpu lowering writes it, the values and vectors read by
# two more kernels
EIGH = """func.func @main(%a: tensor<3x8x8x{t}>) -> (tensor<3x8x8x{t}>, tensor<3x8x{r}>, tensor<3xi32>) {{
  %e:3 = stablehlo.custom_call @lapack_{target}_ffi(%a) {{mhlo.backend_config = {{mode = 86 : ui8, uplo = 76 : ui8}},
      api_version = 4 : i32, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]}}
      : (tensor<3x8x8x{t}>) -> (tensor<3x8x8x{t}>, tensor<3x8x{r}>, tensor<3xi32>)
  %two = stablehlo.constant dense<2.0> : tensor<3x8x{r}>
  %w = stablehlo.multiply %e#1, %two : tensor<3x8x{r}>
  %v = stablehlo.negate %e#0 : tensor<3x8x8x{t}>
  return %v, %w, %e#2 : tensor<3x8x8x{t}>, tensor<3x8x{r}>, tensor<3xi32>
}}"""


@pytest.mark.parametrize("element, target, dtype, real", [("f32", "ssyevd", np.float32, "f32"), ("f64", "dsyevd", np.float64, "f64"),
                                                          ("complex<f32>", "cheevd", np.complex64, "f32")])
def test_eigh_runs_in_the_driver_in_jaxlibs_workspaces(element, target, dtype, real, monkeypatch):
    """syevd (heevd for complex matrices) is called by the driver itself, its workspaces on
    the driver's stack: results the Python path's bit for bit, the eigenvalues numpy's; past
    the stack budget it is called back, and the thunk sequence says why."""
    from mlirxla.backends.cpu import driver_emitter

    text = EIGH.format(t=element, target=target, r=real)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 8, 8)).astype(dtype)
    if np.iscomplexobj(a):
        a += 1j * rng.standard_normal((3, 8, 8)).astype(dtype)
    a = a + np.swapaxes(a, -1, -2).conj()
    executable = Client().compile(text)
    assert "back into Python" not in executable.thunk_sequence(), executable.thunk_sequence()
    native = executable.execute_numpy([a])
    monkeypatch.setattr(driver_emitter, "WORKSPACE_BYTES", 256)
    called_back = Client().compile(text)
    assert "LAPACK workspaces over the driver's 256 bytes of stack" in called_back.thunk_sequence()
    for ours, python in zip(native, called_back.execute_numpy([a])):
        np.testing.assert_array_equal(ours, python)
    np.testing.assert_array_equal(native[2], np.zeros(3, np.int32))
    np.testing.assert_allclose(native[1], 2 * np.linalg.eigvalsh(a), rtol=1e-5, atol=1e-5)


# a batch of 40 LU factorizations: more matrices than the driver unrolls
BATCHED_LU = """func.func @main(%a: tensor<40x4x4xf64>) -> (tensor<40x4x4xf64>, tensor<40x4xi32>, tensor<40xi32>) {
  %lu:3 = stablehlo.custom_call @lapack_dgetrf_ffi(%a) {mhlo.backend_config = {}, api_version = 4 : i32,
      operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]}
      : (tensor<40x4x4xf64>) -> (tensor<40x4x4xf64>, tensor<40x4xi32>, tensor<40xi32>)
  %two = stablehlo.constant dense<2.0> : tensor<40x4x4xf64>
  %doubled = stablehlo.multiply %lu#0, %two : tensor<40x4x4xf64>
  %one = stablehlo.constant dense<1> : tensor<40x4xi32>
  %pivots = stablehlo.subtract %lu#1, %one : tensor<40x4xi32>
  return %doubled, %pivots, %lu#2 : tensor<40x4x4xf64>, tensor<40x4xi32>, tensor<40xi32>
}"""


def test_a_batch_past_the_unrolled_calls_loops_in_the_driver(monkeypatch):
    """40 matrices, too little work to split over the threads: the driver loops over them,
    results the Python path's bit for bit, each factor P A = L U."""
    from mlirxla.backends.cpu import driver_emitter

    a = np.random.default_rng(8).standard_normal((40, 4, 4))
    executable = Client().compile(BATCHED_LU)
    assert "back into Python" not in executable.thunk_sequence(), executable.thunk_sequence()
    native = executable.execute_numpy([a])
    monkeypatch.setattr(driver_emitter, "NATIVE_LAPACK", ())
    for ours, python in zip(native, Client().compile(BATCHED_LU).execute_numpy([a])):
        np.testing.assert_array_equal(ours, python)
    factors, pivots = native[0] / 2, native[1]
    for matrix, lu, swaps in zip(a, factors, pivots):
        permuted = matrix.copy()
        for row, other in enumerate(swaps):
            permuted[[row, other]] = permuted[[other, row]]
        np.testing.assert_allclose((np.tril(lu, -1) + np.eye(4)) @ np.triu(lu), permuted, atol=1e-12)


# jnp.linalg.qr of a batch as jax's cpu lowering writes it: geqrf, then orgqr (ungqr for
# complex) making Q of the reflectors and their scalars
QR = """func.func @main(%a: tensor<3x6x4x{t}>) -> (tensor<3x6x4x{t}>, tensor<3x6x4x{t}>) {{
  %0:2 = stablehlo.custom_call @lapack_{letter}geqrf_ffi(%a) {{mhlo.backend_config = {{}}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>]}} : (tensor<3x6x4x{t}>) -> (tensor<3x6x4x{t}>, tensor<3x4x{t}>)
  %1 = stablehlo.custom_call @lapack_{letter}{orgqr}_ffi(%0#0, %0#1) {{mhlo.backend_config = {{}}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>]}} : (tensor<3x6x4x{t}>, tensor<3x4x{t}>) -> tensor<3x6x4x{t}>
  return %1, %0#0 : tensor<3x6x4x{t}>, tensor<3x6x4x{t}>
}}"""


@pytest.mark.parametrize("element, letter, dtype", [("f32", "s", np.float32), ("f64", "d", np.float64), ("complex<f32>", "c", np.complex64)])
def test_qr_runs_in_the_driver_in_the_workspace_lapack_asks_for(element, letter, dtype, monkeypatch):
    """geqrf and orgqr (ungqr) are called by the driver in the optimal workspace LAPACK's
    query reports at compile time, as the Python path queries it at run time (the blocked
    algorithm LAPACK takes depends on it): the Python path's bits, and Q R = A."""
    from mlirxla.backends.cpu import driver_emitter

    text = QR.format(t=element, letter=letter, orgqr="ungqr" if letter == "c" else "orgqr")
    rng = np.random.default_rng(9)
    a = rng.standard_normal((3, 6, 4)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((3, 6, 4)).astype(dtype)
    executable = Client().compile(text)
    assert "back into Python" not in executable.thunk_sequence(), executable.thunk_sequence()
    q, factored = executable.execute_numpy([a])
    monkeypatch.setattr(driver_emitter, "NATIVE_LAPACK", ())
    called_back = Client().compile(text)
    assert "back into Python for custom_call" in called_back.thunk_sequence()
    for native, python in zip((q, factored), called_back.execute_numpy([a])):
        np.testing.assert_array_equal(native, python)
    r = np.triu(factored[:, :4, :])
    np.testing.assert_allclose(q @ r, a, atol=1e-5 if dtype in (np.float32, np.complex64) else 1e-12)


def svd_text(element: str, letter: str, mode: str, m: int, n: int) -> str:
    """jnp.linalg.svd of a batch of m x n as jax's cpu lowering calls gesdd: mode A (full
    matrices), S (thin) or N (values only, u and vt declared m x m and n x n as in mode A and
    left zero)."""
    k = min(m, n)
    u, vt = {"A": (f"{m}x{m}", f"{n}x{n}"), "S": (f"{m}x{k}", f"{k}x{n}"), "N": (f"{m}x{m}", f"{n}x{n}")}[mode]
    real = {"complex<f32>": "f32", "complex<f64>": "f64"}.get(element, element)
    results = f"tensor<3x{m}x{n}x{element}>, tensor<3x{k}x{real}>, tensor<3x{u}x{element}>, tensor<3x{vt}x{element}>, tensor<3xi32>"
    return f"""func.func @main(%a: tensor<3x{m}x{n}x{element}>) -> ({results}) {{
  %0:5 = stablehlo.custom_call @lapack_{letter}gesdd_ffi(%a) {{mhlo.backend_config = {{mode = {ord(mode)} : ui8}}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 2, 0]> : tensor<3xindex>, dense<0> : tensor<1xindex>]}}
      : (tensor<3x{m}x{n}x{element}>) -> ({results})
  return %0#0, %0#1, %0#2, %0#3, %0#4 : {results}
}}"""


@pytest.mark.parametrize("m, n", [(6, 4), (4, 9)])
@pytest.mark.parametrize("mode", ["A", "S", "N"])
@pytest.mark.parametrize("element, letter, dtype", [("f32", "s", np.float32), ("complex<f32>", "c", np.complex64)])
def test_svd_runs_in_the_driver(element, letter, dtype, mode, m, n, monkeypatch):
    """gesdd is called by the driver in the workspace LAPACK's query reports at compile time
    (and a complex one's real workspace), u and vt zeroed first (mode N writes none), vt's
    leading dimension its rows (a wide matrix's vt is k x n; with n it wrote past vt: jax's
    `pinv` of 2 x 400000 crashed): the Python path's bits, and the singular values numpy's."""
    from mlirxla.backends.cpu import driver_emitter

    text = svd_text(element, letter, mode, m, n)
    rng = np.random.default_rng(10)
    a = rng.standard_normal((3, m, n)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((3, m, n)).astype(dtype)
    executable = Client().compile(text)
    assert "back into Python" not in executable.thunk_sequence(), executable.thunk_sequence()
    native = executable.execute_numpy([a])
    monkeypatch.setattr(driver_emitter, "NATIVE_LAPACK", ())
    for ours, python in zip(native, Client().compile(text).execute_numpy([a])):
        np.testing.assert_array_equal(ours, python)
    np.testing.assert_allclose(native[1], np.linalg.svd(a, compute_uv=False), rtol=1e-5)


# jax's tridiagonal solve of a batch as its cpu lowering writes it: gtsv on the three
# diagonals (the sub-diagonal's first element padding) and column-major right-hand sides
TRIDIAGONAL = """func.func @main(%dl: tensor<{b}x6x{t}>, %d: tensor<{b}x6x{t}>, %du: tensor<{b}x6x{t}>, %rhs: tensor<{b}x6x3x{t}>) -> (tensor<{b}x6x3x{t}>, tensor<{b}xi32>) {{
  %0:5 = stablehlo.custom_call @lapack_{letter}gtsv_ffi(%dl, %d, %du, %rhs) {{mhlo.backend_config = {{}},
      operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[1, 2, 0]> : tensor<3xindex>],
      result_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[1, 2, 0]> : tensor<3xindex>, dense<0> : tensor<1xindex>]}}
      : (tensor<{b}x6x{t}>, tensor<{b}x6x{t}>, tensor<{b}x6x{t}>, tensor<{b}x6x3x{t}>) -> (tensor<{b}x6x{t}>, tensor<{b}x6x{t}>, tensor<{b}x6x{t}>, tensor<{b}x6x3x{t}>, tensor<{b}xi32>)
  return %0#3, %0#4 : tensor<{b}x6x3x{t}>, tensor<{b}xi32>
}}"""


@pytest.mark.parametrize("batch", [3, 20])
@pytest.mark.parametrize("element, letter, dtype", [("f32", "s", np.float32), ("f64", "d", np.float64), ("complex<f32>", "c", np.complex64)])
def test_tridiagonal_solves_run_in_the_driver(batch, element, letter, dtype, monkeypatch):
    """gtsv is called by the driver on each system (unrolled, or in a loop past 16), LAPACK
    handed the sub-diagonal from its second element: results the Python path's bit for bit,
    each the solution of its system."""
    rng = np.random.default_rng(9)
    dl, d, du = (rng.standard_normal((batch, 6)).astype(dtype) for _ in range(3))
    d += 4
    rhs = rng.standard_normal((batch, 6, 3)).astype(dtype)
    native = native_and_python(TRIDIAGONAL.format(b=batch, t=element, letter=letter), [dl, d, du, rhs], monkeypatch)
    np.testing.assert_array_equal(native[1], np.zeros(batch, np.int32))
    for k in range(batch):
        matrix = np.diag(d[k]) + np.diag(dl[k, 1:], -1) + np.diag(du[k, :-1], 1)
        np.testing.assert_allclose(matrix @ native[0][k], rhs[k], rtol=1e-4, atol=1e-4)


# jnp.linalg.eig of a batch as jax's cpu lowering writes it: geev (without or with the left
# and right vectors, N or V), then kernels reading its results, so that the sequence gets a driver
GEEV = """func.func @main(%a: tensor<{b}x7x7x{t}>) -> ({values}, tensor<{b}x7x7x{c}>, tensor<{b}x7x7x{c}>, tensor<{b}x7x{t}>, tensor<{b}xi32>) {{
  %0:{count} = stablehlo.custom_call @lapack_{letter}geev_ffi(%a) {{mhlo.backend_config = {{compute_left = {left} : ui8, compute_right = {right} : ui8}},
      operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
      result_layouts = [{value_layouts}dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 2, 0]> : tensor<3xindex>, dense<0> : tensor<1xindex>]}}
      : (tensor<{b}x7x7x{t}>) -> ({values}, tensor<{b}x7x7x{c}>, tensor<{b}x7x7x{c}>, tensor<{b}xi32>)
  %one = stablehlo.constant dense<1> : tensor<{b}xi32>
  %info = stablehlo.add %0#{info}, %one : tensor<{b}xi32>
  %negated = stablehlo.negate %0#0 : tensor<{b}x7x{t}>
  return {returned}, %negated, %info : {values}, tensor<{b}x7x7x{c}>, tensor<{b}x7x7x{c}>, tensor<{b}x7x{t}>, tensor<{b}xi32>
}}"""


def geev_text(batch: int, element: str, letter: str, left: str = "N", right: str = "N") -> str:
    complex_type = element.startswith("complex")
    count = 1 if complex_type else 2  # a real geev's eigenvalues come as real and imaginary parts
    return GEEV.format(b=batch, t=element, letter=letter, c=element if complex_type else f"complex<{element}>",
                       values=", ".join([f"tensor<{batch}x7x{element}>"] * count), count=count + 3,
                       value_layouts="dense<[1, 0]> : tensor<2xindex>, " * count, left=ord(left), right=ord(right),
                       returned=", ".join(f"%0#{k}" for k in range(count + 2)), info=count + 2)


def native_and_python(text: str, arguments: list, monkeypatch) -> list[np.ndarray]:
    """The outputs of `text` with every thunk in its native driver, checked equal bit for bit
    to the Python path's (the driver calling no LAPACK routine itself)."""
    from mlirxla.backends.cpu import driver_emitter

    executable = Client().compile(text)
    assert "back into Python" not in executable.thunk_sequence(), executable.thunk_sequence()
    native = executable.execute_numpy(arguments)
    with monkeypatch.context() as patched:
        patched.setattr(driver_emitter, "NATIVE_LAPACK", ())
        for ours, python in zip(native, Client().compile(text).execute_numpy(arguments)):
            np.testing.assert_array_equal(ours, python)
    return native


def random_matrices(dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((3, 7, 7)).astype(dtype)
    if np.iscomplexobj(a):
        a += 1j * rng.standard_normal((3, 7, 7)).astype(dtype)
    return a


GEEV_TYPES = [("f32", "s", np.float32), ("f64", "d", np.float64), ("complex<f32>", "c", np.complex64)]


@pytest.mark.parametrize("element, letter, dtype", GEEV_TYPES)
def test_eigenvalues_run_in_the_driver_and_skip_non_finite_matrices(element, letter, dtype, monkeypatch):
    """geev without vectors is called by the driver on a copy of each matrix (its operand is
    not one of its results): results the Python path's bit for bit, numpy's eigenvalues, and a
    matrix holding a NaN left out with info -4 and zeros, as jaxlib does."""
    a = random_matrices(dtype, 12)
    a[1, 2, 3] = np.nan
    kept = a.copy()
    native = native_and_python(geev_text(3, element, letter), [a], monkeypatch)
    np.testing.assert_array_equal(a, kept)
    np.testing.assert_array_equal(native[-1], [1, -3, 1])
    np.testing.assert_array_equal(native[-2], -native[0])
    values = native[0] if np.iscomplexobj(a) else native[0] + 1j * native[1]
    assert not values[1].any() and not native[-3].any() and not native[-4].any()
    for k in (0, 2):
        np.testing.assert_allclose(np.sort_complex(values[k]), np.sort_complex(np.linalg.eigvals(a[k])), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("left, right", [("V", "V"), ("N", "V"), ("V", "N")])
@pytest.mark.parametrize("element, letter, dtype", GEEV_TYPES)
def test_eigenvectors_run_in_the_driver_unpacked_as_jaxlib_does(left, right, element, letter, dtype, monkeypatch):
    """With vectors a real geev's come packed and are unpacked in the driver: each result the
    Python path's bit for bit (complex pairs, real eigenvalues, a matrix holding an infinity
    left zero), and A v = lambda v for the right ones."""
    a = random_matrices(dtype, 13)
    a[1, 0, 0] = np.inf
    native = native_and_python(geev_text(3, element, letter, left, right), [a], monkeypatch)
    eigenvalues = native[0] if np.iscomplexobj(a) else native[0] + 1j * native[1]
    left_vectors, right_vectors = native[-4], native[-3]
    assert not left_vectors[1].any() and not right_vectors[1].any()
    assert np.iscomplexobj(a) or (eigenvalues[0].imag != 0).any()
    if right == "V":
        for k in (0, 2):
            np.testing.assert_allclose(a[k] @ right_vectors[k], right_vectors[k] * eigenvalues[k], rtol=1e-3, atol=1e-3)


def test_eigenvalue_batches_past_the_unrolled_calls_are_left_to_python():
    from mlirxla.backends.cpu import driver_emitter

    (geev,) = [t for t in Client().compile(geev_text(20, "f32", "s")).executable.plan.thunks if t.kind == "host"]
    assert driver_emitter.lapack_problem(geev) == "a batch of 20 matrices, past the 16 a driver unrolls"


@pytest.mark.parametrize("text", [SWAP, SORT_IN_LOOP])
def test_a_loop_of_proved_trip_count_runs_its_body_that_many_times_without_its_condition(text, tmp_path):
    """The loop's count is on its thunk (`xhlo-while-loop-trip-count-annotator`); the driver
    counts the iterations on its stack and never calls the condition's kernel (the driver's
    IR calls only the body's), and the results are the reference's."""
    executable = Client().compile(text, CompileOptions(dump_to=str(tmp_path)))
    (loop,) = thunks_of(executable, WhileThunk)
    assert loop.trip_count in (3, 5)
    (ir_file,) = [name for name in os.listdir(tmp_path) if name.endswith("driver_executable.ir-no-opt.ll")]
    driver_ir = open(os.path.join(tmp_path, ir_file)).read()
    condition_kernels = {t.symbol for t in every_thunk(loop.condition) if hasattr(t, "symbol")}
    assert condition_kernels and not any(f"@{symbol}(" in driver_ir for symbol in condition_kernels)
    assert f"store i64 {loop.trip_count}, ptr" in driver_ir
    arguments = [np.arange(80, dtype=np.float32)] if text is SORT_IN_LOOP else [np.arange(1, 5, dtype=np.float32), np.full(4, 0.5, np.float32)]
    matches_reference(executable, text, arguments)
