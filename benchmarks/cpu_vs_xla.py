"""Speed of mlirxla's CPU backend vs XLA:CPU, side by side in one process.

Each workload is a jax function (examples/benchmark_workloads.py: dense layers f32 and bf16,
elementwise chains, softmax, layer and batch norm, attention, convolutions, scan loops,
embeddings and their gradient, sort, top-k, Adam, backward passes, cross-entropy, small-batch
inference). Its StableHLO (`jax.jit(f).lower(...).as_text()`) is what mlirxla compiles, and
jax.jit runs the same function on XLA:CPU, so both sides run the same program on the same
random inputs (floats 0.1 * standard normal, so the outputs stay well away from overflow and
cancellation; integers below the workload's bound).

OpenBLAS, whose GEMMs mlirxla calls and numpy's matmul measures the peak with, takes its
kernels when it is loaded, from the CPU or from `OPENBLAS_CORETYPE`: a machine that sets it
to an older core (`Haswell` on an AVX-512 CPU) runs mlirxla's GEMMs at that core's speed
while XLA:CPU's own are unaffected. The machine line names the kernels; the figures in
`docs/` were taken with `OPENBLAS_CORETYPE` unset.

The machine's limits are measured first: copy bandwidth by STREAM's triad (a = b + s * c over
float64 arrays far larger than the caches, split over the cores; bytes counted as STREAM
counts them) and peak flops by a large f32 matmul in numpy's BLAS. Each workload's flops
(transcendentals counted as one) and bytes are XLA's cost analysis of the program; its
arithmetic intensity against the machine's balance (peak flops / triad bandwidth) says
whether it is memory-bound or compute-bound, and each side's achieved bandwidth or flop rate
is given as a fraction of that limit. The cost analysis counts a loop's body once, so the
fractions of the scan workloads are lower bounds; a workload whose data fit in the last-level
cache (batch norm's 16 MiB on a large-L3 server) can pass 100% of the triad, which streams
from memory.

Per workload: each side runs --repeats times, mlirxla and XLA taking turns in blocks of a
few runs so that the machine's noise hits both, each block started after a pause that lets
the other side's spinning threads sleep, and its first run not timed; it prints the medians, their ratio (mlirxla / XLA;
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

    python benchmarks/cpu_vs_xla.py [--workloads matmul,mlp] [--repeats 20] [--no-iree] [--json]

With --json the last line is one JSON object: "machine" (triad GB/s, peak GFLOP/s, CPU
model), "rows" (one per workload, with "bound", "intensity", "fraction" and "xla_fraction"),
"geomean", "overhead" and "compile".
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
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

from mlirxla.backends.cpu import kernel_cache
from mlirxla.runtime import blas, thunks
from mlirxla.runtime.client import Client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from benchmark_workloads import WORKLOADS, Workload, workload as named_workload  # noqa: E402

WARMUP = 2
# The sides' thread pools keep spinning after a run before they sleep: OpenBLAS's workers
# (mlirxla's GEMMs) for 2^28 cycles (OPENBLAS_THREAD_TIMEOUT's default), about 0.1 s. Runs
# taking turns one by one had each XLA run share a core with mlirxla's spinning workers (on 2
# cores: XLA's mlp 8.4 ms that way, 5.8 ms with the workers sleeping at once), so the sides
# take turns in blocks, each begun after the other side's threads went to sleep (the
# per-call overhead's 4-element add runs no GEMM: its calls alternate one by one).
SETTLE_S = 0.25
BLOCK_RUNS = 5
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


# ---------------------------------------------------------------- the machine's limits


TRIAD_ELEMENTS = 1 << 24  # float64: three arrays of 128 MiB, far past any cache
TRIAD_BLOCK = 1 << 14  # s * c goes through a buffer of this many elements, which stays in cache
TRIAD_TRIALS = 5
GEMM_SIZE = 2048
GEMM_TRIALS = 3


def triad_bandwidth() -> float:
    """Bytes per second of STREAM's triad a = b + s * c, split over the cores (numpy's ufuncs
    release the GIL), block by block so that s * c never goes to memory; 24 bytes per element
    as STREAM counts them; the best of a few trials."""
    a, b, c = (np.full(TRIAD_ELEMENTS, value) for value in (0.0, 1.0, 2.0))
    cores = os.cpu_count() or 1
    bounds = [TRIAD_ELEMENTS * i // cores for i in range(cores + 1)]

    def part(index):
        scratch = np.empty(TRIAD_BLOCK)
        for first in range(bounds[index], bounds[index + 1], TRIAD_BLOCK):
            last = min(first + TRIAD_BLOCK, bounds[index + 1])
            np.multiply(c[first:last], 3.0, out=scratch[: last - first])
            np.add(b[first:last], scratch[: last - first], out=a[first:last])

    with ThreadPoolExecutor(max_workers=cores) as pool:
        run = lambda: list(pool.map(part, range(cores)))
        run()
        seconds = min(timed(run) for _ in range(TRIAD_TRIALS))
    return 3 * 8 * TRIAD_ELEMENTS / seconds


def peak_flops() -> float:
    """Flops per second of a large f32 matmul in numpy's BLAS, the best of a few."""
    x = np.random.default_rng(0).standard_normal((GEMM_SIZE, GEMM_SIZE)).astype(np.float32)
    x @ x
    return 2 * GEMM_SIZE**3 / min(timed(lambda: x @ x) for _ in range(GEMM_TRIALS))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "unknown")
    except OSError:
        return "unknown"


def machine_limits() -> dict:
    triad = triad_bandwidth()
    peak = peak_flops()
    return {"triad_gbps": triad / 1e9, "peak_gflops": peak / 1e9, "balance_flops_per_byte": peak / triad, "cpu": cpu_model(),
            "cores": os.cpu_count(), "openblas_kernels": blas.core_name()}


def roofline(cost: dict, io_bytes: int, seconds: dict, machine: dict) -> dict:
    """Whether the program is memory- or compute-bound on this machine, and the fraction of
    that limit each side reaches. Where XLA's cost analysis knows nothing (it says -1 for a
    custom call such as top-k), the program moves its arguments and results and computes
    nothing counted."""
    flops = max(cost.get("flops", 0.0), 0.0) + max(cost.get("transcendentals", 0.0), 0.0)
    moved = cost.get("bytes accessed", 0.0)
    if moved <= 0:
        moved = float(io_bytes)
    intensity = flops / moved if moved else math.inf
    memory_bound = intensity < machine["balance_flops_per_byte"]
    rate, limit = (moved, machine["triad_gbps"] * 1e9) if memory_bound else (flops, machine["peak_gflops"] * 1e9)
    return {"bound": "memory" if memory_bound else "compute", "intensity": intensity, "flops": flops, "bytes": moved,
            **{("fraction" if side == "mlirxla" else f"{side}_fraction"): rate / value / limit for side, value in seconds.items()}}


def add(x, y):
    return x + y


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
    jitted = jax.jit(function, keep_unused=True)
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


def medians(runs: dict, repeats: int, block_runs: int = 1, settle_s: float = 0.0) -> dict:
    """Median seconds of each of `runs` (name -> a function running a side once), the sides
    taking turns in blocks of `block_runs` timed runs, each block begun after `settle_s`
    seconds of rest (so that the other side's threads have gone to sleep, `SETTLE_S`) and
    with one run not timed."""
    times = {name: [] for name in runs}
    while len(times[next(iter(runs))]) < repeats:
        for name, run in runs.items():
            time.sleep(settle_s)
            run()
            for _ in range(min(block_runs, repeats - len(times[name]))):
                times[name].append(timed(run))
    return {name: statistics.median(values) for name, values in times.items()}


def compare(ours: list, theirs: list, tolerance: Workload) -> tuple[bool, float]:
    """(whether every output matches XLA's within the workload's tolerance, the largest
    absolute difference; None when the outputs' count or shapes differ)."""
    if len(ours) != len(theirs) or any(a.shape != b.shape for a, b in zip(ours, theirs)):
        return False, None
    pairs = [(a.astype(np.float64), b.astype(np.float64)) for a, b in zip(ours, theirs)]
    difference = max((float(np.max(np.abs(a - b))) for a, b in pairs if a.size), default=0.0)
    return all(np.allclose(a, b, rtol=tolerance.rtol, atol=tolerance.atol) for a, b in pairs), difference


def crash_in_child(text: str) -> str | None:
    """Why mlirxla's compile-and-run of `text` killed a child process, or None if it did not."""
    done = subprocess.run([sys.executable, "-c", PROBE], input=text, capture_output=True, text=True)
    if done.returncode >= 0:
        return None  # an ordinary failure shows up again, as an exception, in this process
    return f"mlirxla crashed with {signal.Signals(-done.returncode).name} (compiling and running it once in a child process)"


def compile_times(text: str):
    """(the cold-compiled executable, {mlirxla's cold and cached compile seconds}); cold: no
    kernel of it kept from an earlier compile of this process (`backends/cpu/kernel_cache.py`)."""
    directory = tempfile.mkdtemp(prefix="mlirxla-cache-")
    kernel_cache.KERNELS.clear()
    try:
        client = Client(cache_dir=directory)
        start = time.perf_counter()
        executable = client.compile(text)
        cold = time.perf_counter() - start
        cached = statistics.median(timed(lambda: client.compile(text)) for _ in range(CACHED_COMPILES))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return executable, {"mlirxla_cold_s": cold, "mlirxla_cached_s": cached}


def measure(name: str, repeats: int, with_iree: bool, machine: dict, generator) -> dict:
    workload = named_workload(name)
    function = workload.function
    arguments = workload.random_arguments(generator)
    leaves = jax.tree_util.tree_leaves(arguments)
    lowered = jax.jit(function, keep_unused=True).lower(*arguments)
    text = lowered.as_text()
    # before the first jitted call, which would put the executable in jax's compilation cache
    start = time.perf_counter()
    cost = lowered.compile().cost_analysis()
    xla_compile_s = time.perf_counter() - start
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
        row["ok"], row["max_abs_diff"] = compare(sides["mlirxla"].outputs(), sides["xla"].outputs(), workload)
    except Exception as error:  # a failing workload is a result to report, not the end of the run
        row["error"] = one_line(error)
        return row
    row["compile"]["xla_s"] = xla_compile_s
    if with_iree:
        for side, make in (("iree", iree_direct_side), ("mlirxla_iree", mlirxla_on_iree_side)):
            try:
                sides[side], row[f"{side}_dispatches"] = make(text, leaves)
                row[f"{side}_ok"], row[f"{side}_max_abs_diff"] = compare(sides[side].outputs(), sides["xla"].outputs(), workload)
            except Exception as error:
                sides.pop(side, None)
                row[f"{side}_error"] = one_line(error)
    seconds = medians({name: side.run for name, side in sides.items()}, repeats, BLOCK_RUNS, SETTLE_S)
    row.update({f"{side}_ms": value * 1e3 for side, value in seconds.items()})
    row["ratio"] = seconds["mlirxla"] / seconds["xla"]
    results = jax.tree_util.tree_leaves(jax.eval_shape(function, *arguments))
    io_bytes = sum(leaf.nbytes for leaf in leaves) + sum(math.prod(r.shape) * np.dtype(r.dtype).itemsize for r in results)
    row.update(roofline(cost, io_bytes, seconds, machine))
    if "iree" in seconds:
        row["iree_ratio"] = seconds["iree"] / seconds["xla"]
    if "mlirxla_iree" in seconds:
        row["mlirxla_iree_ratio"] = seconds["mlirxla_iree"] / seconds["xla"]
        if "iree" in seconds:
            row["mlirxla_iree_vs_iree"] = seconds["mlirxla_iree"] / seconds["iree"]
    return row


def overhead(generator) -> dict:
    """Median microseconds of one call to a 4-element add, calls alternating between the sides."""
    function = add
    arguments = tuple((0.1 * generator.standard_normal(4)).astype(np.float32) for _ in range(2))
    executable = Client().compile(jax.jit(function).lower(*arguments).as_text())
    sides = {"mlirxla": mlirxla_side(executable, arguments),
             "xla": xla_side(function, arguments)}
    seconds = medians({name: side.run for name, side in sides.items()}, OVERHEAD_CALLS)
    return {"mlirxla_us": seconds["mlirxla"] * 1e6, "xla_us": seconds["xla"] * 1e6, "ratio": seconds["mlirxla"] / seconds["xla"]}


# ---------------------------------------------------------------- report


IREE_COLUMNS = (("iree", "IREE direct"), ("mlirxla_iree", "mlirxla on IREE"))


def print_table(rows: list, with_iree: bool) -> None:
    iree_header = (f" {'IREE direct ms':>14} {'/xla':>6} {'dispatches':>10} {'mlirxla on IREE ms':>18} {'/xla':>6}"
                   f" {'/direct':>7} {'dispatches':>10} {'match':>5}") if with_iree else ""
    print(f"{'workload':16} {'mlirxla ms':>10} {'xla ms':>9} {'ratio':>7} {'match':>5} {'max abs diff':>12} {'kernels':>7}"
          f" {'bound':>7} {'flop/B':>7} {'achieved':>13} {'of limit':>8} {'xla':>5}{iree_header}")
    for row in rows:
        if "error" in row:
            print(f"{row['workload']:16} FAILED: {row['error']}")
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
        print(f"{row['workload']:16} {row['mlirxla_ms']:10.2f} {row['xla_ms']:9.2f} {row['ratio']:6.2f}x"
              f" {'ok' if row['ok'] else 'NO':>5} {difference:>12} {row['kernels']:7} {row['bound']:>7} {row['intensity']:7.2f}"
              f" {achieved(row):>13} {row['fraction']:7.0%} {row['xla_fraction']:5.0%}{iree}")
    for row in rows:
        for side, title in IREE_COLUMNS:
            if f"{side}_error" in row:
                print(f"{title} failed on {row['workload']}: {row[f'{side}_error']}")


def achieved(row: dict) -> str:
    """mlirxla's rate in the unit of the row's limit."""
    seconds = row["mlirxla_ms"] / 1e3
    if row["bound"] == "memory":
        return f"{row['bytes'] / seconds / 1e9:.1f} GB/s"
    return f"{row['flops'] / seconds / 1e9:.1f} GFLOP/s"


def memory_bound_fraction(rows: list) -> dict:
    """The memory-bound rows' fractions of the triad bandwidth: the geometric mean and the least."""
    fractions = [row["fraction"] for row in rows if row.get("bound") == "memory"]
    if not fractions:
        return {"geomean": None, "least": None, "workloads": 0}
    return {"geomean": math.exp(sum(map(math.log, fractions)) / len(fractions)), "least": min(fractions), "workloads": len(fractions)}


def ratio_text(value) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def geometric_mean(rows: list) -> dict:
    ratios = [row["ratio"] for row in rows if "ratio" in row]
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    return {"ratio": mean, "workloads": len(ratios), "of": len(rows)}


def print_compile_times(rows: list) -> None:
    print(f"{'compile':16} {'mlirxla cold s':>14} {'cached ms':>10} {'xla s':>7}")
    for row in rows:
        if "compile" in row:
            times = row["compile"]
            print(f"{row['workload']:16} {times['mlirxla_cold_s']:14.2f} {times['mlirxla_cached_s'] * 1e3:10.1f} {times['xla_s']:7.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line holding every row")
    known = [workload.name for workload in WORKLOADS]
    parser.add_argument("--workloads", default=",".join(known), help="comma-separated workloads")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per side per workload")
    parser.add_argument("--no-iree", action="store_true", help="leave the IREE columns out even when the iree extra is installed")
    arguments = parser.parse_args(argv)
    names = arguments.workloads.split(",")
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown workloads {','.join(unknown)} (known: {','.join(known)})")
    with_iree = iree_available() and not arguments.no_iree
    if not with_iree and not arguments.no_iree:
        print("iree: not installed (pip install 'mlirxla[iree]': the IREE columns need the iree extra)")
    generator = np.random.default_rng(0)
    # first, so that the one-time costs (imports, LLVM's start) land in no workload's compile time
    per_call = overhead(generator)
    machine = machine_limits()
    print(f"machine: {machine['cpu']}, {machine['cores']} cores; triad {machine['triad_gbps']:.1f} GB/s,"
          f" f32 GEMM {machine['peak_gflops']:.1f} GFLOP/s (balance {machine['balance_flops_per_byte']:.1f} flop/B);"
          f" OpenBLAS kernels {machine['openblas_kernels']}")
    rows = [measure(name, arguments.repeats, with_iree, machine, generator) for name in names]
    print_table(rows, with_iree)
    mean = geometric_mean(rows)
    geomean = "n/a" if mean["ratio"] is None else f"{mean['ratio']:.2f}x"
    print(f"geomean mlirxla/xla: {geomean} over {mean['workloads']} of {mean['of']} workloads")
    print(f"overhead (f32[4] add, median of {OVERHEAD_CALLS} calls): mlirxla {per_call['mlirxla_us']:.1f} us,"
          f" xla {per_call['xla_us']:.1f} us, ratio {per_call['ratio']:.2f}x")
    bandwidth = memory_bound_fraction(rows)
    if bandwidth["workloads"]:
        print(f"memory-bound workloads: {bandwidth['workloads']}, fraction of the triad bandwidth: geomean {bandwidth['geomean']:.0%},"
              f" least {bandwidth['least']:.0%}")
    print_compile_times(rows)
    if arguments.json:
        print(json.dumps({"machine": machine, "rows": [{key: value for key, value in row.items() if key != "compile"} for row in rows],
                          "geomean": mean, "memory_bound": bandwidth, "overhead": per_call,
                          "compile": {row["workload"]: row["compile"] for row in rows if "compile" in row}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
