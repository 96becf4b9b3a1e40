"""Speed of mlirxla's CPU backend vs XLA:CPU, side by side in one process.

Each workload is a jax function. Its StableHLO (`jax.jit(f).lower(...).as_text()`) is what
mlirxla compiles, and jax.jit runs the same function on XLA:CPU, so both sides run the same
program on the same random inputs (0.1 * standard normal, so the outputs stay well away from
overflow and cancellation). mlp, softmax, transformer and convnet are the benchmark programs
of examples/jax_programs.py (their StableHLO is test/data/jax/programs/*.stablehlo.mlir);
matmul is 1024^3 f32 and chain is ten elementwise ops on 4M f32.

Per workload: each side is warmed up, then run --repeats times, mlirxla and XLA taking turns
so that the machine's noise hits both; it prints the medians, their ratio (mlirxla / XLA;
below 1 is faster), whether the outputs match XLA's (rtol = atol = 1e-4) and the largest
absolute difference, then the geometric mean of the ratios over the workloads that ran.
Then the per-call overhead (a 4-element f32 add, the median of single calls: mlirxla's
execute_numpy vs a jitted call with block_until_ready), and compile times per program:
mlirxla cold (a fresh client and cache directory), mlirxla cached (the median of a few
compiles that hit that cache) and XLA's own compile of the same lowering. A workload mlirxla
fails to compile or run is printed as failed with its reason, and so is one whose program
kills the child process that first compiles and runs it once; the others go on.

When iree.compiler and iree.runtime import (the iree extra), two more columns: "IREE direct"
(jax's StableHLO straight into iree-compile for the host CPU, run on IREE's local-task driver
with its inputs already on the device) and "mlirxla on IREE" (the same program through
mlirxla's front door and simplification, then iree-compile with the same flags: the iree
backend, `Client(backend="iree")`, called through execute_numpy), the latter's ratio to IREE
direct showing what our front door and simplification cost or gain in front of IREE. Beside
them the kernel counts: mlirxla's CPU kernels (kernel, sliced kernel and gemm thunks, loop
bodies once) and IREE's dispatches (iree-compile's static count, loop bodies once) for
both IREE columns.

    python benchmarks/cpu_vs_xla.py [--workloads matmul,mlp] [--repeats 20] [--json]

With --json the last line is one JSON object: "rows" (one per workload), "geomean",
"overhead" and "compile".
"""

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from mlirxla.runtime import thunks
from mlirxla.runtime.client import Client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from jax_programs import program, tensor  # noqa: E402

WORKLOADS = ["matmul", "mlp", "chain", "softmax", "transformer", "convnet"]
RTOL = ATOL = 1e-4
WARMUP = 2
CACHED_COMPILES = 3
OVERHEAD_CALLS = 1000

# A native crash in mlirxla's code would end the whole run, so each program first runs once in
# a child; one that dies there is reported failed and never runs here.
PROBE = """
import sys
import numpy as np
from mlirxla.runtime.client import Client
executable = Client().compile(sys.stdin.read())
generator = np.random.default_rng(0)
executable.execute_numpy([(0.1 * generator.standard_normal(p.shape)).astype(p.dtype) for p in executable.executable.plan.parameters])
"""


# ---------------------------------------------------------------- the workloads


def matmul(x, w):
    return x @ w


def chain(x, y):
    a = x + y
    a = a * x
    a = jnp.tanh(a)
    a = a - y
    a = jnp.exp(a)
    a = jnp.maximum(a, x)
    a = a * 0.5
    a = jnp.abs(a)
    a = jnp.sqrt(a)
    return a + y


def add(x, y):
    return x + y


BENCHMARK_PROGRAMS = {"mlp", "softmax", "transformer", "convnet"}


def example(name: str):
    """(function, abstract arguments as a pytree of jax.ShapeDtypeStruct) for a workload."""
    if name in BENCHMARK_PROGRAMS:
        benchmark = program(f"programs/{name}")
        return benchmark.function, benchmark.arguments()
    return {
        "matmul": (matmul, (tensor(1024, 1024), tensor(1024, 1024))),
        "chain": (chain, (tensor(4 * 1024 * 1024),) * 2),
        "add": (add, (tensor(4), tensor(4))),
    }[name]


def random_arguments(abstract, generator):
    return jax.tree_util.tree_map(lambda value: (0.1 * generator.standard_normal(value.shape)).astype(value.dtype), abstract)


# ---------------------------------------------------------------- the three sides


class Side:
    """One compiled program: `run()` runs it once on its prepared inputs, to completion."""

    def __init__(self, run, outputs):
        self.run = run
        self.outputs = outputs  # outputs() runs it and returns its outputs as a list of numpy arrays


def mlirxla_side(executable, leaves) -> Side:
    execute = executable.execute_numpy
    return Side(lambda: execute(leaves), lambda: execute(leaves))


def xla_side(function, arguments) -> Side:
    jitted = jax.jit(function)
    on_device = jax.device_put(arguments)
    run = lambda: jax.block_until_ready(jitted(*on_device))
    return Side(run, lambda: [np.asarray(output) for output in jax.tree_util.tree_leaves(run())])


def iree_available() -> bool:
    try:
        import iree.compiler  # noqa: F401
        import iree.runtime  # noqa: F401
    except ImportError:
        return False
    return True


def iree_direct_side(text: str, leaves) -> tuple[Side, int]:
    """IREE alone on jax's StableHLO, compiled with the flags the iree backend uses; the side
    and IREE's dispatch count."""
    import iree.runtime

    from mlirxla.backends.iree import iree_compile, toolchain

    compiled = iree_compile.compile_text(text, toolchain.target())
    config = iree.runtime.Config(toolchain.target().driver)
    context = iree.runtime.SystemContext(config=config)
    module = iree.runtime.VmModule.copy_buffer(config.vm_instance, compiled.vmfb)
    context.add_vm_module(module)
    main = context.modules[module.name]["main"]
    on_device = [iree.runtime.asdevicearray(config.device, leaf) for leaf in leaves]
    # to_host waits for the results, as block_until_ready does for XLA
    as_list = lambda results: list(results) if isinstance(results, (tuple, list)) else [results]
    outputs = lambda: [np.asarray(result.to_host()) for result in as_list(main(*on_device))]
    return Side(outputs, outputs), compiled.dispatch_count


def mlirxla_on_iree_side(text: str, leaves) -> tuple[Side, int]:
    """The iree backend: the side and the dispatch count of the module IREE made of it."""
    executable = Client(backend="iree").compile(text)
    dispatches = sum(t.attributes["dispatches"] for t in plan_thunks(executable.executable.plan.thunks) if t.kind == "function")
    return mlirxla_side(executable, leaves), dispatches


KERNEL_THUNKS = {"kernel", "sliced_kernel", "gemm"}


def plan_thunks(sequence: list):
    """Every thunk of a sequence, those inside loops and conditionals once."""
    for thunk in sequence:
        yield thunk
        if isinstance(thunk, thunks.WhileThunk):
            yield from plan_thunks(thunk.condition + thunk.body)
        elif isinstance(thunk, thunks.ConditionalThunk):
            for branch in thunk.branches:
                yield from plan_thunks(branch)


def kernel_count(executable) -> int:
    """The CPU backend's kernels: the thunks that run generated code or a gemm."""
    return sum(thunk.kind in KERNEL_THUNKS for thunk in plan_thunks(executable.executable.plan.thunks))


# ---------------------------------------------------------------- measuring


def one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def medians(sides: dict, repeats: int) -> dict:
    """Median seconds per side, the sides taking turns run by run."""
    for side in sides.values():
        for _ in range(WARMUP):
            side.run()
    times = {name: [] for name in sides}
    for _ in range(repeats):
        for name, side in sides.items():
            times[name].append(timed(side.run))
    return {name: statistics.median(values) for name, values in times.items()}


def compare(ours: list, theirs: list) -> tuple[bool, float]:
    """(whether every output matches XLA's within the tolerance, the largest absolute
    difference; None when the outputs' count or shapes differ)."""
    if len(ours) != len(theirs) or any(a.shape != b.shape for a, b in zip(ours, theirs)):
        return False, None
    difference = max((float(np.max(np.abs(a.astype(np.float64) - b))) for a, b in zip(ours, theirs) if a.size), default=0.0)
    return all(np.allclose(a, b, rtol=RTOL, atol=ATOL) for a, b in zip(ours, theirs)), difference


def crash_in_child(text: str) -> str | None:
    """Why mlirxla's compile-and-run of `text` killed a child process, or None if it did not."""
    done = subprocess.run([sys.executable, "-c", PROBE], input=text, capture_output=True, text=True)
    if done.returncode >= 0:
        return None  # an ordinary failure shows up again, as an exception, in this process
    return f"mlirxla crashed with {signal.Signals(-done.returncode).name} (compiling and running it once in a child process)"


def compile_times(text: str):
    """(the cold-compiled executable, {mlirxla's cold and cached compile seconds})."""
    directory = tempfile.mkdtemp(prefix="mlirxla-cache-")
    try:
        client = Client(cache_dir=directory)
        start = time.perf_counter()
        executable = client.compile(text)
        cold = time.perf_counter() - start
        cached = statistics.median(timed(lambda: client.compile(text)) for _ in range(CACHED_COMPILES))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return executable, {"mlirxla_cold_s": cold, "mlirxla_cached_s": cached}


def workload(name: str, repeats: int, with_iree: bool, generator) -> dict:
    function, abstract = example(name)
    arguments = random_arguments(abstract, generator)
    leaves = jax.tree_util.tree_leaves(arguments)
    lowered = jax.jit(function).lower(*arguments)
    text = lowered.as_text()
    # before the first jitted call, which would put the executable in jax's compilation cache
    xla_compile_s = timed(lowered.compile)
    row = {"workload": name}
    crash = crash_in_child(text)
    if crash:
        row["error"] = crash
        return row
    sides = {"xla": xla_side(function, arguments)}
    try:
        executable, row["compile"] = compile_times(text)
        sides["mlirxla"] = mlirxla_side(executable, leaves)
        row["kernels"] = kernel_count(executable)
        row["ok"], row["max_abs_diff"] = compare(sides["mlirxla"].outputs(), sides["xla"].outputs())
    except Exception as error:  # a failing workload is a result to report, not the end of the run
        row["error"] = one_line(error)
        return row
    row["compile"]["xla_s"] = xla_compile_s
    if with_iree:
        for side, make in (("iree", iree_direct_side), ("mlirxla_iree", mlirxla_on_iree_side)):
            try:
                sides[side], row[f"{side}_dispatches"] = make(text, leaves)
                row[f"{side}_ok"], row[f"{side}_max_abs_diff"] = compare(sides[side].outputs(), sides["xla"].outputs())
            except Exception as error:
                sides.pop(side, None)
                row[f"{side}_error"] = one_line(error)
    seconds = medians(sides, repeats)
    row.update({f"{side}_ms": value * 1e3 for side, value in seconds.items()})
    row["ratio"] = seconds["mlirxla"] / seconds["xla"]
    if "iree" in seconds:
        row["iree_ratio"] = seconds["iree"] / seconds["xla"]
    if "mlirxla_iree" in seconds:
        row["mlirxla_iree_ratio"] = seconds["mlirxla_iree"] / seconds["xla"]
        if "iree" in seconds:
            row["mlirxla_iree_vs_iree"] = seconds["mlirxla_iree"] / seconds["iree"]
    return row


def overhead(generator) -> dict:
    """Median microseconds of one call to a 4-element add, calls alternating between the sides."""
    function, abstract = example("add")
    arguments = random_arguments(abstract, generator)
    executable = Client().compile(jax.jit(function).lower(*arguments).as_text())
    sides = {"mlirxla": mlirxla_side(executable, arguments),
             "xla": xla_side(function, arguments)}
    seconds = medians(sides, OVERHEAD_CALLS)
    return {"mlirxla_us": seconds["mlirxla"] * 1e6, "xla_us": seconds["xla"] * 1e6, "ratio": seconds["mlirxla"] / seconds["xla"]}


# ---------------------------------------------------------------- report


IREE_COLUMNS = (("iree", "IREE direct"), ("mlirxla_iree", "mlirxla on IREE"))


def print_table(rows: list, with_iree: bool) -> None:
    iree_header = (f" {'IREE direct ms':>14} {'/xla':>6} {'dispatches':>10} {'mlirxla on IREE ms':>18} {'/xla':>6}"
                   f" {'/direct':>7} {'dispatches':>10} {'match':>5}") if with_iree else ""
    print(f"{'workload':12} {'mlirxla ms':>10} {'xla ms':>9} {'ratio':>7} {'match':>5} {'max abs diff':>12} {'kernels':>7}{iree_header}")
    for row in rows:
        if "error" in row:
            print(f"{row['workload']:12} FAILED: {row['error']}")
            continue
        iree = ""
        if with_iree:
            direct = (f" {'failed':>14} {'':>6} {'':>10}" if "iree_error" in row else
                      f" {row['iree_ms']:14.2f} {row['iree_ratio']:5.2f}x {row['iree_dispatches']:10}")
            ours = (f" {'failed':>18} {'':>6} {'':>7} {'':>10} {'':>5}" if "mlirxla_iree_error" in row else
                    f" {row['mlirxla_iree_ms']:18.2f} {row['mlirxla_iree_ratio']:5.2f}x"
                    f" {ratio_text(row.get('mlirxla_iree_vs_iree')):>7} {row['mlirxla_iree_dispatches']:10}"
                    f" {'ok' if row['mlirxla_iree_ok'] else 'NO':>5}")
            iree = direct + ours
        difference = "shapes differ" if row["max_abs_diff"] is None else f"{row['max_abs_diff']:.2e}"
        print(f"{row['workload']:12} {row['mlirxla_ms']:10.2f} {row['xla_ms']:9.2f} {row['ratio']:6.2f}x"
              f" {'ok' if row['ok'] else 'NO':>5} {difference:>12} {row['kernels']:7}{iree}")
    for row in rows:
        for side, title in IREE_COLUMNS:
            if f"{side}_error" in row:
                print(f"{title} failed on {row['workload']}: {row[f'{side}_error']}")


def ratio_text(value) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def geometric_mean(rows: list) -> dict:
    ratios = [row["ratio"] for row in rows if "ratio" in row]
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    return {"ratio": mean, "workloads": len(ratios), "of": len(rows)}


def print_compile_times(rows: list) -> None:
    print(f"{'compile':12} {'mlirxla cold s':>14} {'cached ms':>10} {'xla s':>7}")
    for row in rows:
        if "compile" in row:
            times = row["compile"]
            print(f"{row['workload']:12} {times['mlirxla_cold_s']:14.2f} {times['mlirxla_cached_s'] * 1e3:10.1f} {times['xla_s']:7.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line holding every row")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated workloads")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per side per workload")
    arguments = parser.parse_args(argv)
    names = arguments.workloads.split(",")
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {','.join(unknown)} (known: {','.join(WORKLOADS)})")
    with_iree = iree_available()
    if not with_iree:
        print("iree: not installed (pip install 'mlirxla[iree]': the IREE columns need the iree extra)")
    generator = np.random.default_rng(0)
    # first, so that the one-time costs (imports, LLVM's start) land in no workload's compile time
    per_call = overhead(generator)
    rows = [workload(name, arguments.repeats, with_iree, generator) for name in names]
    print_table(rows, with_iree)
    mean = geometric_mean(rows)
    geomean = "n/a" if mean["ratio"] is None else f"{mean['ratio']:.2f}x"
    print(f"geomean mlirxla/xla: {geomean} over {mean['workloads']} of {mean['of']} workloads")
    print(f"overhead (f32[4] add, median of {OVERHEAD_CALLS} calls): mlirxla {per_call['mlirxla_us']:.1f} us,"
          f" xla {per_call['xla_us']:.1f} us, ratio {per_call['ratio']:.2f}x")
    print_compile_times(rows)
    if arguments.json:
        print(json.dumps({"rows": [{key: value for key, value in row.items() if key != "compile"} for row in rows],
                          "geomean": mean, "overhead": per_call,
                          "compile": {row["workload"]: row["compile"] for row in rows if "compile" in row}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
