"""Compile time: mlirxla's cold compile next to XLA:CPU's compile of the same lowering, as the
program grows, and where mlirxla's time goes.

Three tables. The first is the curve of a residual MLP of N layers (`x = tanh(x @ w[i]) * 0.5 +
x`, f32[8,64] through 64x64 weights; issue 18) for N = 4 ... 256: its StableHLO op count,
mlirxla's cold compile (a fresh `Client` with an empty compile cache and no kernel kept from
an earlier compile: import, the cpu pipeline,
thunk emission, every kernel through LLVM, the native object), XLA's
`jax.jit(f).lower(...).compile()` timed in the same process, their ratio, and each side's
milliseconds per op (flat when time grows linearly with the program). The second is the
curve of the same MLP's training step for `--gradient-layers` N: the gradient of a squared
loss with respect to the stacked weights, as `jax.grad` writes it (transposed dots, each
layer's weight gradient zero-padded to the stack's shape and the pads added up). The third is
the same for the benchmark programs of `examples/jax_programs.py` (mlp, softmax, transformer block,
conv net, scan RNN, the small MLP), and with `--workloads` for those of
`benchmarks/cpu_vs_xla.py` (`examples/benchmark_workloads.py`: layernorm, attention_mask, ...). Each time is the fastest of `--repeats` compiles.

The last column says how XLA:CPU made each program's kernels: generated (LLVM code, as all of
mlirxla's) or library (fusions handed to YNNPACK or XNNPACK, custom calls into its runtime such
as TopK), which compile no code: softmax and layer norm, one YNNPACK fusion each, compile in
about 10 ms, while the same softmax at 2048 rows (no YNNPACK fusion) takes XLA about 40 ms.
mlirxla's runtime library (`backends/cpu/runtime_library.py`: im2col, f32 TopK, softmax, the
row engine) is compiled once per host into a persistent cache (`scripts/setup` fills it) and
read once per process; the warm-up reads (or builds) it, as XLA's is built into its binary.

`--profile` adds, per program, where mlirxla's cold compile went: the front door, every pass
(its runs in the fixed-point loop summed; what `mlirxla-opt --print-ledger` shows per run),
thunk emission, the kernels' lowering (summed, with how many there were; their LLVM work runs
on the compile threads, `MLIRXLA_COMPILE_THREADS`, and what of it did not overlap the lowering
shows as the wait for them), the native drivers, the shared object, and the rest (the plan,
loading the objects, the cache), largest first.

`--kernels` adds, per program, each kernel's LLVM work in one cold compile, timed again one
kernel at a time on the main thread (the compile threads overlap them): its LLVM IR's lines,
parsing and O3 (`llvm_jit.optimize`), code generation, and the optimized IR's lines.

    python benchmarks/compile_time.py [--layers 4,8,...] [--gradient-layers 4,16,...] [--programs transformer,...]
                                      [--workloads layernorm,...]
                                      [--repeats N] [--profile] [--kernels] [--json]

Times taken on a shared machine are noisy: quote the ratios, and say what else ran.
"""

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections import defaultdict

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # XLA's side is jax's own cpu backend, not the plugin

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import llvmlite.binding as llvm  # noqa: E402

from mlirxla import phases  # noqa: E402
from mlirxla.backends.cpu import kernel_cache, llvm_jit, runtime_library  # noqa: E402
from mlirxla.runtime.client import Client  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from benchmark_workloads import WORKLOADS, workload  # noqa: E402
from jax_programs import program  # noqa: E402

LAYERS = (4, 8, 16, 32, 64, 128, 256)
GRADIENT_LAYERS = (4, 16, 64)
PROGRAMS = ("mlp", "softmax", "transformer", "convnet", "scan", "mlp_softmax_small")
WIDTH, BATCH = 64, 8
STABLEHLO_OP = re.compile(r"^\s*(?:%[^=]*=\s*)?\"?(?:stablehlo|chlo)\.", re.MULTILINE)
FUSION = re.compile(r"\bfusion\(")
LIBRARY_FUSION = re.compile(r'"kind":"__(?:ynn|xnn)_fusion"')
CUSTOM_CALL = re.compile(r"\bcustom-call\(")


def residual_mlp(layers: int):
    """The N-layer residual MLP and its abstract arguments (x, the stacked weights)."""

    def function(x, weights):
        for index in range(layers):
            x = jnp.tanh(x @ weights[index]) * 0.5 + x
        return x

    arguments = (jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32), jax.ShapeDtypeStruct((layers, WIDTH, WIDTH), jnp.float32))
    return function, arguments


def residual_mlp_gradient(layers: int):
    """The gradient of the N-layer residual MLP's squared output with respect to its stacked
    weights, and its abstract arguments."""
    function, arguments = residual_mlp(layers)
    return jax.grad(lambda x, weights: jnp.sum(function(x, weights) ** 2), argnums=1), arguments


def op_count(text: str) -> int:
    return len(STABLEHLO_OP.findall(text))


class PhaseTimes(phases.Listener):
    """Seconds of the phases announced on the compiling thread: per pass and per top-level
    phase (a pipeline, the front door, each kernel; the backend's by name), runs summed."""

    def __init__(self):
        self.thread = threading.get_ident()
        self.depth = 0
        self.passes: dict = defaultdict(float)
        self.top: dict = defaultdict(float)
        self.backend: dict = defaultdict(float)
        self.kernels = 0

    def started(self, phase: phases.Phase) -> None:
        if phase.thread == self.thread:
            self.depth += 1

    def finished(self, phase: phases.Phase, end_ns: int) -> None:
        if phase.thread != self.thread:
            return
        self.depth -= 1
        seconds = (end_ns - phase.start_ns) / 1e9
        if phase.category == "pass":
            self.passes[phase.name] += seconds
        if self.depth == 0:
            self.top[phase.category] += seconds
            self.kernels += phase.category == "kernel"
            if phase.category == "backend":
                self.backend[phase.name] += seconds


def mlirxla_cold(text: str, profile: bool) -> tuple[float, dict | None]:
    """Seconds of one cold compile of `text`, and with `profile` where they went: no kernel of
    it is kept from an earlier compile of this process (`backends/cpu/kernel_cache.py`)."""
    listener = PhaseTimes() if profile else None
    kernel_cache.KERNELS.clear()
    with tempfile.TemporaryDirectory(prefix="mlirxla-cache-") as directory:
        client = Client(cache_dir=directory)
        if listener:
            phases.add_listener(listener)
        try:
            start = time.perf_counter()
            client.compile(text)
            seconds = time.perf_counter() - start
        finally:
            if listener:
                phases.remove_listener(listener)
    return seconds, (breakdown(listener, seconds) if listener else None)


def breakdown(listener: PhaseTimes, total: float) -> dict:
    """Seconds per part of a compile: the front door, each pass, the pipeline runner's own
    work (the invariant check after the pipeline, or after each changing pass with
    MLIRXLA_VERIFY_EACH=1; counting ops, the ledger), thunk emission,
    the kernels on the compiling thread (lowering; and their LLVM work with one compile
    thread), the wait for the compile threads (LLVM's O3 and code generation beyond what
    overlapped the lowering), the drivers, the shared object, and what no phase covers."""
    parts = dict(listener.passes)
    parts["pipeline runner (the invariant check, the ledger)"] = listener.top["pipeline"] - sum(listener.passes.values())
    parts["front door"] = listener.top["frontdoor"]
    parts["thunk emission"] = listener.backend["thunk emission"]
    parts[f"{listener.kernels} kernels: lowering (and LLVM when compiled on one thread)"] = listener.top["kernel"]
    parts["waiting for the compile threads (LLVM O3 and code generation)"] = listener.backend["kernels' native code"]
    parts["native drivers"] = listener.backend["native drivers"]
    parts["shared object (forwarders, helpers) and the archive"] = listener.backend["shared object"]
    parts["other (the plan, loading the objects, the cache)"] = max(total - sum(listener.top.values()), 0.0)
    return dict(sorted(parts.items(), key=lambda item: -item[1]))


def kernel_llvm_times(text: str) -> list[dict]:
    """Each kernel's LLVM work in a cold compile of `text` (its IR captured as the compile
    hands it to `llvm_jit.compile_native`), timed one at a time here, largest first."""
    captured = []
    compile_native = llvm_jit.compile_native

    def capturing(name, ir_text, linked=frozenset(), keep_ir=False):
        captured.append((name, ir_text, linked))
        return compile_native(name, ir_text, linked, keep_ir)

    llvm_jit.compile_native = capturing
    try:
        mlirxla_cold(text, False)
    finally:
        llvm_jit.compile_native = compile_native
    times = []
    for name, ir_text, linked in captured:
        machine = llvm_jit.target_machine()
        start = time.perf_counter()
        module = llvm_jit.optimize(name, ir_text, linked, llvm.create_context(), machine)
        optimized = time.perf_counter()
        optimized_lines = str(module).count("\n")
        generating = time.perf_counter()
        llvm_jit.emit_object(machine, module)
        times.append({"kernel": name, "ir_lines": ir_text.count("\n"), "optimize_s": optimized - start,
                      "codegen_s": time.perf_counter() - generating, "optimized_lines": optimized_lines})
    return sorted(times, key=lambda kernel: -(kernel["optimize_s"] + kernel["codegen_s"]))


def xla_compile(function, arguments) -> tuple[float, str]:
    """Seconds of one cold XLA compile of a fresh lowering (a lowering keeps the executable it
    compiled, and jax caches compiles, so a repeat on the same one measures a look-up), and
    the optimized HLO it compiled."""
    jax.clear_caches()
    lowered = jax.jit(function).lower(*arguments)
    start = time.perf_counter()
    compiled = lowered.compile()
    return time.perf_counter() - start, compiled.as_text()


def xla_kernels(hlo: str) -> tuple[int, int]:
    """How many of XLA's kernels generate code and how many are library code: fusions XLA:CPU
    hands to YNNPACK or XNNPACK (`__ynn_fusion`, `__xnn_fusion`) and custom calls into its
    runtime (TopK) compile no code, which makes a program of only those compile in a few ms."""
    library_fusions = len(LIBRARY_FUSION.findall(hlo))
    return len(FUSION.findall(hlo)) - library_fusions, library_fusions + len(CUSTOM_CALL.findall(hlo))


def measure(name: str, function, arguments, repeats: int, profile: bool, kernels: bool = False) -> dict:
    text = jax.jit(function).lower(*arguments).as_text()
    xla, hlo = min((xla_compile(function, arguments) for _ in range(repeats)), key=lambda run: run[0])
    generated, library = xla_kernels(hlo)
    runs = [mlirxla_cold(text, profile) for _ in range(repeats)]
    mlirxla, parts = min(runs, key=lambda run: run[0])
    ops = op_count(text)
    row = {"program": name, "ops": ops, "mlirxla_s": mlirxla, "xla_s": xla, "ratio": mlirxla / xla,
           "mlirxla_ms_per_op": mlirxla * 1e3 / ops, "xla_ms_per_op": xla * 1e3 / ops,
           "xla_generated_kernels": generated, "xla_library_kernels": library}
    if parts:
        row["profile"] = parts
    if kernels:
        row["kernels"] = kernel_llvm_times(text)
    return row


def print_rows(title: str, rows: list) -> None:
    print(f"\n{title}")
    print(f"{'program':26} {'ops':>6} {'mlirxla s':>10} {'xla s':>8} {'ratio':>7} {'mlirxla ms/op':>14} {'xla ms/op':>10}"
          f"  {'xla kernels: generated + library':>32}")
    for row in rows:
        print(f"{row['program']:26} {row['ops']:6d} {row['mlirxla_s']:10.2f} {row['xla_s']:8.2f} {row['ratio']:6.1f}x"
              f" {row['mlirxla_ms_per_op']:14.2f} {row['xla_ms_per_op']:10.2f}"
              f"  {row['xla_generated_kernels']:>25d} + {row['xla_library_kernels']:<4d}")


def print_profiles(rows: list) -> None:
    for row in rows:
        if "profile" not in row:
            continue
        print(f"\n{row['program']}: mlirxla cold compile {row['mlirxla_s']:.2f} s")
        for label, seconds in row["profile"].items():
            if seconds >= 0.005:
                print(f"  {seconds * 1e3:9.1f} ms  {seconds / row['mlirxla_s']:6.1%}  {label}")


def print_kernels(rows: list) -> None:
    for row in rows:
        if "kernels" not in row:
            continue
        print(f"\n{row['program']}: each kernel's LLVM work, one at a time on this thread")
        print(f"  {'kernel':40} {'IR lines':>9} {'parse+O3 ms':>12} {'codegen ms':>11} {'optimized lines':>16}")
        for kernel in row["kernels"]:
            print(f"  {kernel['kernel']:40} {kernel['ir_lines']:9d} {kernel['optimize_s'] * 1e3:12.1f} {kernel['codegen_s'] * 1e3:11.1f}"
                  f" {kernel['optimized_lines']:16d}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default=",".join(map(str, LAYERS)), help="comma-separated layer counts of the residual MLP ('' for none)")
    parser.add_argument("--gradient-layers", default=",".join(map(str, GRADIENT_LAYERS)),
                        help="comma-separated layer counts of the residual MLP's gradient ('' for none)")
    parser.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated benchmark programs ('' for none)")
    parser.add_argument("--workloads", default="", help="comma-separated workloads of cpu_vs_xla.py ('all' for every one)")
    parser.add_argument("--repeats", type=int, default=1, help="compiles per side; the fastest is kept")
    parser.add_argument("--profile", action="store_true", help="where each mlirxla compile's time went")
    parser.add_argument("--kernels", action="store_true", help="each kernel's LLVM work, timed one kernel at a time")
    parser.add_argument("--json", action="store_true", help="end with one JSON line holding every row")
    arguments = parser.parse_args(argv)
    layers = [int(n) for n in arguments.layers.split(",") if n]
    gradient_layers = [int(n) for n in arguments.gradient_layers.split(",") if n]
    names = [name for name in arguments.programs.split(",") if name]
    unknown = sorted(set(names) - set(PROGRAMS))
    if unknown:
        parser.error(f"unknown programs {','.join(unknown)} (known: {','.join(PROGRAMS)})")
    known_workloads = [candidate.name for candidate in WORKLOADS]
    workloads = known_workloads if arguments.workloads == "all" else [name for name in arguments.workloads.split(",") if name]
    unknown = sorted(set(workloads) - set(known_workloads))
    if unknown:
        parser.error(f"unknown workloads {','.join(unknown)} (known: {','.join(known_workloads)})")
    # first, so that the one-time costs (imports, LLVM's start, the runtime library's
    # functions, which XLA has built into its binary) land in no row
    measure("warm-up", *residual_mlp(2), repeats=1, profile=False)
    for function in runtime_library.host_functions():
        llvm_jit.library_object(function)
    curve = [measure(f"residual MLP N={n}", *residual_mlp(n), arguments.repeats, arguments.profile, arguments.kernels)
             for n in layers]
    gradients = [measure(f"MLP gradient N={n}", *residual_mlp_gradient(n), arguments.repeats, arguments.profile, arguments.kernels)
                 for n in gradient_layers]
    programs = []
    for name in names:
        chosen = program(f"programs/{name}")
        programs.append(measure(name, chosen.function, chosen.arguments(), arguments.repeats, arguments.profile, arguments.kernels))
    for name in workloads:
        chosen = workload(name)
        programs.append(measure(f"workload {name}", chosen.function, chosen.arguments(), arguments.repeats, arguments.profile,
                                arguments.kernels))
    if curve:
        print_rows("residual MLP of N layers (64x64, batch 8): cold compile", curve)
    if gradients:
        print_rows("gradient of the residual MLP with respect to its stacked weights: cold compile", gradients)
    if programs:
        print_rows("benchmark programs: cold compile", programs)
    print_profiles(curve + gradients + programs)
    print_kernels(curve + gradients + programs)
    if arguments.json:
        print(json.dumps({"curve": curve, "gradients": gradients, "programs": programs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
