"""What a lent GPU machine runs: a folder (under 64 MiB) with the cuda backend's executables
of the benchmark programs and a slice of the interpreter suite, what to feed them, what they
must give, the runtime and `gpu-check` (`scripts/gpu-pack` writes it, `scripts/gpu-check`
runs there with that machine's `python3`, which has jax 0.11.2 with XLA:GPU, numpy and the
CUDA libraries, and no MLIR toolkit).

    pack/
      manifest.json            per workload: file, kind, inputs (seed, shapes, dtypes), tolerances
      <workload>.mlirxla       the executable
      <workload>.expected.npz  the expected outputs
      jax_programs.py          the JAX functions, for the XLA:GPU peer (benchmarks)
      benchmark_workloads.py   the cpu benchmark's workloads (`workload_<name>`), for their inputs and the peer
      tuning.json              the emitters' kernels, each compiled per candidate tiling (`gpu-check --tune`)
      <benchmark>.iree-cuda.vmfb, iree_base_runtime-*.whl   the benchmarks on IREE (`pack_iree.py`)
      mlirxla_cuda_runtime/    a copy of runtime/cuda
      gpu-check                the check

Inputs are not shipped: both sides draw them from numpy's PCG64 with the seed of the
manifest (standard normal times the parameter's scale, 1/sqrt(fan-in) for a benchmark's
weights: `initializer_scales`; integers 0..9), which gives the same arrays on every machine.
A benchmark whose f32 GEMMs use TF32 (jax's default precision, as on XLA:GPU) is packed a
second time as `<name>_highest`, its GEMMs in full f32 and XLA:GPU run at "highest" beside it.
Expected outputs: for the benchmark programs, this machine's cpu backend (itself checked
against the StableHLO interpreter by the test suite; the interpreter takes minutes on the
large ones); for the suite slice, the reference interpreter.

The cpu benchmark's workloads (`examples/benchmark_workloads.py`, when jax is installed here:
it lowers them) are packed as `workload_<name>`, their GEMMs in full f32: gpu-check draws
their inputs as `benchmarks/cpu_vs_xla.py` does (the workload's own `random_arguments`),
runs the same jax function on XLA:GPU at "highest" precision and compares the outputs with
XLA's at the workload's tolerance (no expected files: several of their outputs are tens of
megabytes), timing both as for the benchmark programs. Their ratios have a geomean of their
own; the benchmark programs' is the issue's bar.
"""

import argparse
import contextlib
import json
import math
import os
import shutil
import sys

import numpy as np

from . import pack_iree

BENCHMARKS = ["mlp", "softmax", "transformer", "convnet", "scan", "mlp_softmax_small"]
# the jax function of each benchmark program (examples/jax_programs.py) for the XLA:GPU peer
JAX_FUNCTIONS = {"mlp": "mlp3", "softmax": "softmax", "transformer": "block", "convnet": "convnet", "scan": "rnn_scan",
                 "mlp_softmax_small": "mlp"}
MEMORY_BOUND = {"softmax"}  # workloads whose HBM bandwidth fraction gpu-check reports
# the cpu benchmark's workloads that are all elementwise work and reductions (no GEMM, no loop)
MEMORY_BOUND_WORKLOADS = {"chain", "softmax", "layernorm", "batchnorm", "adam", "cross_entropy"}
SUITE_SLICE = ["add.mlir", "exponential.mlir", "reduce.mlir", "transpose.mlir", "broadcast_in_dim.mlir", "concatenate.mlir",
               "select.mlir", "dynamic_slice.mlir", "iota.mlir", "compare.mlir", "dot_general.mlir", "while.mlir",
               # the GPU kernels of what the CPU runs as host calls, and LLVM's bit-count intrinsics
               "triangular_solve.mlir", "fft.mlir", "sort.mlir", "popcnt.mlir", "count_leading_zeros.mlir"]
LIMIT_BYTES = 64 * 1024 * 1024
TF32_RTOL = 1e-2
REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def draw_inputs(seed: int, parameters: list[dict]) -> list[np.ndarray]:
    """The inputs of a workload, the same on every machine (gpu-check draws them alike)."""
    generator = np.random.default_rng(seed)
    arrays = []
    for parameter in parameters:
        dtype = np.dtype(parameter["dtype"])
        if dtype.kind == "f":
            arrays.append((generator.standard_normal(parameter["shape"]) * parameter.get("scale", 1.0)).astype(dtype))
        else:
            arrays.append(generator.integers(0, 10, parameter["shape"]).astype(dtype))
    return arrays


def initializer_scales(parameters: list[dict]) -> list[dict]:
    """The parameters with the standard deviation their values are drawn with: a matrix or
    kernel (a floating parameter of rank 2 or more) after the first parameter gets
    1/sqrt(fan-in), its size over the last dimension, as a network's initializer gives it;
    the rest 1. Unit weights make these programs chaotic (a 64-step tanh RNN with a 128 x 128
    unit-variance matrix flips signs on a change in the last bit, the transformer's logits
    reach 1e4), so that two correct implementations summing in different orders, or TF32,
    disagree; scaled, they are as well conditioned as a trained network."""
    scaled = []
    for index, parameter in enumerate(parameters):
        shape = parameter["shape"]
        matrix = index > 0 and len(shape) >= 2 and np.dtype(parameter["dtype"]).kind == "f"
        scaled.append({**parameter, "scale": 1 / math.sqrt(math.prod(shape[:-1])) if matrix else 1.0})
    return scaled


@contextlib.contextmanager
def gemm_precision(precision: str | None):
    """The cuda backend's GEMM precision for the compiles inside (jax's default when None)."""
    from .gemm_epilogues import PRECISION_VARIABLE

    saved = os.environ.get(PRECISION_VARIABLE)
    if precision is not None:
        os.environ[PRECISION_VARIABLE] = precision
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(PRECISION_VARIABLE, None)
        else:
            os.environ[PRECISION_VARIABLE] = saved


def benchmark(name: str, seed: int, precision: str | None = None) -> tuple[bytes, dict, list[np.ndarray]]:
    """A benchmark program compiled by the cuda backend; with `precision` "highest", its f32
    GEMMs in full f32 (the workload `<name>_highest`, XLA:GPU then run at that precision too)."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.pipelines.runner import RunOptions
    from mlirxla.runtime.client import Client

    from . import compiler

    path = program_path(name)
    with open(path, "rb") as handle:
        data = handle.read()
    with gemm_precision(precision):
        program = compiler.compile_program(frontdoor.import_bytes(data, path, new_context()).module, RunOptions(backend="cuda"))
    parameters = initializer_scales(program.executable.plan["parameters"])
    inputs = draw_inputs(seed, parameters)
    expected = [np.asarray(e) for e in Client(backend="cpu").compile(data).execute_numpy(inputs)]
    key = f"{name}_{precision}" if precision else name
    entry = {"kind": "benchmark", "file": f"{key}.mlirxla", "seed": seed, "parameters": parameters,
             "jax_function": JAX_FUNCTIONS[name], "memory_bound": name in MEMORY_BOUND, "expected_from": "mlirxla cpu backend"}
    if precision:
        entry["precision"] = precision
    else:
        entry["tf32"] = uses_tf32(program.executable.plan["thunks"])
    entry.update(tolerances(program.executable.plan, expected, 1e-3, f32_atol(expected)))
    return program.executable.to_bytes(), entry, expected


def cpu_workloads():
    """The cpu benchmark's workloads, or None when jax (which lowers them) is not installed."""
    try:
        import jax  # noqa: F401
    except ImportError:
        return None
    sys.path.insert(0, os.path.join(REPOSITORY, "examples"))
    try:
        import benchmark_workloads
    finally:
        sys.path.remove(os.path.join(REPOSITORY, "examples"))
    return benchmark_workloads.WORKLOADS


def workload(spec, seed: int) -> tuple[bytes, dict, None]:
    """A cpu benchmark workload lowered by jax (on this machine's CPU platform) and compiled by
    the cuda backend, its GEMMs in full f32."""
    from mlirxla.pipelines.runner import RunOptions

    from . import compiler

    with gemm_precision("highest"):
        program = compiler.compile_program(workload_module(spec), RunOptions(backend="cuda"))
    entry = {"kind": "workload", "workload": spec.name, "file": f"workload_{spec.name}.mlirxla", "seed": seed,
             "parameters": program.executable.plan["parameters"], "precision": "highest", "rtol": spec.rtol, "atol": spec.atol,
             "memory_bound": spec.name in MEMORY_BOUND_WORKLOADS, "expected_from": "jax on XLA:GPU, at the workload's tolerance"}
    return program.executable.to_bytes(), entry, None


def workload_module(spec):
    """A cpu benchmark workload lowered by jax (on this machine's CPU platform), imported."""
    import jax

    from mlirxla import frontdoor
    from mlirxla.context import new_context

    text = jax.jit(spec.function, keep_unused=True).lower(*spec.abstract()).as_text()
    return frontdoor.import_text(text, spec.name, new_context()).module


def suite_cases(directory: str, limit: int) -> list:
    from mlirxla.conformance import collect

    by_file: dict[str, list] = {}
    for case in collect(directory):
        if case.file in SUITE_SLICE and not case.run_parallel:
            by_file.setdefault(case.file, []).append(case)
    spread = []  # the files' first functions, then their second ones, ...: every file in a small slice
    for depth in range(max((len(cases) for cases in by_file.values()), default=0)):
        spread += [cases[depth] for cases in by_file.values() if depth < len(cases)]
    return spread[:limit]


def suite_case(case, seed: int) -> tuple[bytes, dict, list[np.ndarray]]:
    """A suite function compiled by the cuda backend with its checks turned into results; the
    expected outputs are the reference interpreter's for the same function."""
    from mlirxla import frontdoor
    from mlirxla.conformance import suite_options
    from mlirxla.context import new_context
    from mlirxla.mlir import ir
    from mlirxla.runtime import driver
    from mlirxla.runtime.reference import extract_checks, find_function, trim_to_entry

    from . import compiler

    context = new_context()
    imported = frontdoor.import_text(case.text, case.file, context)
    with context, ir.Location.unknown():
        executable, _, _ = driver.compile_entry(imported.module, case.function, suite_options("reference"), backend="reference")
        expected = executable.execute([])
        extract_checks(find_function(imported.module, case.function).operation)
        trim_to_entry(imported.module, case.function)
    program = compiler.compile_program(imported.module, suite_options("cuda"))
    expected = [np.asarray(e) for e in expected]
    entry = {"kind": "suite", "file": f"{safe_name(case.name)}.mlirxla", "seed": seed, "parameters": program.executable.plan["parameters"],
             "expected_from": "StableHLO reference interpreter", "function": case.name}
    entry.update(tolerances(program.executable.plan, expected, 1e-4, 1e-5))
    return program.executable.to_bytes(), entry, expected


def uses_tf32(thunks: list) -> bool:
    for thunk in thunks:
        if thunk["kind"] == "gemm" and thunk["compute"] == "32F_FAST_TF32":
            return True
        if any(uses_tf32(nested) for nested in [thunk.get("condition", []), thunk.get("body", []), *thunk.get("branches", [])]):
            return True
    return False


def tolerances(plan: dict, expected: list[np.ndarray], rtol: float, atol: float) -> dict:
    """The manifest's tolerances: as asked, or, when a GEMM computes with TF32 (jax's DEFAULT
    precision, as XLA:GPU does), TF32's: its 10-bit mantissa errs by about 1e-3 of a dot
    product's scale, a few GEMMs deep, so 1e-2 relative and 1e-2 of the output's largest
    magnitude absolute (an output near zero carries the error of its terms, not of itself)."""
    if not uses_tf32(plan["thunks"]):
        return {"rtol": rtol, "atol": atol}
    scale = output_scale(expected)
    return {"rtol": max(rtol, TF32_RTOL), "atol": max(atol, TF32_RTOL * scale),
            "tolerance_from": "TF32 GEMMs (jax's DEFAULT precision): 1e-2 relative, 1e-2 of the largest output magnitude"}


def program_path(name: str) -> str:
    return os.path.join(REPOSITORY, "test", "data", "jax", "programs", f"{name}.stablehlo.mlir")


def f32_atol(expected: list[np.ndarray]) -> float:
    """The absolute tolerance of a benchmark computed in full f32: 1e-4 of its largest output."""
    return 1e-4 * max(1.0, output_scale(expected))


def output_scale(expected: list[np.ndarray]) -> float:
    """The largest magnitude among the floating outputs (1 when there are none)."""
    return max((float(np.max(np.abs(e))) for e in expected if e.dtype.kind == "f" and e.size), default=1.0)


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name).strip("_")


def write_tuning(output: str, programs: list[str], log=print, workloads: list = ()) -> None:
    """The tuning jobs of the emitter kernels (`tuning.py`), one per fingerprint: the
    benchmark programs' first (the tuner on the GPU takes them in order), then those of the
    cpu benchmark's `workloads` (their specs)."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context

    from . import tuning

    def program_module(name):
        path = program_path(name)
        with open(path, "rb") as handle:
            return frontdoor.import_bytes(handle.read(), path, new_context()).module

    jobs: dict[str, dict] = {}
    sources = [lambda name=name: program_module(name) for name in programs] + [lambda spec=spec: workload_module(spec) for spec in workloads]
    for source in sources:
        for job in tuning.tuning_jobs(source()):
            jobs.setdefault(job.fingerprint, job.as_json())
    with open(os.path.join(output, "tuning.json"), "w") as handle:
        json.dump({"format": "mlirxla-cuda-tuning", "version": 1, "kernels": list(jobs.values())}, handle)
    log(f"  tuning: {len(jobs)} emitter kernel(s), {sum(len(j['candidates']) for j in jobs.values())} candidate(s)")


def write_pack(output: str, suite_directory: str | None, suite_limit: int, programs: list[str] = BENCHMARKS, log=print,
               tune: bool = True, iree: bool = False, iree_wheel: str | None = None, workloads: list[str] = ()) -> dict:
    """The pack at `output`; with `iree`, each benchmark also as an IREE cuda module
    (`pack_iree.py`) and IREE's runtime wheel; `workloads`, the cpu benchmark's workloads of
    those names (`workload`)."""
    if os.path.exists(output):
        shutil.rmtree(output)
    os.makedirs(output)
    manifest = {"format": "mlirxla-gpu-pack", "version": 1, "workloads": {}, "refused": {}}
    jobs = [(name, lambda name=name, seed=index: benchmark(name, seed)) for index, name in enumerate(programs)]
    if suite_directory and os.path.isdir(suite_directory):
        for index, case in enumerate(suite_cases(suite_directory, suite_limit)):
            jobs.append((case.name, lambda case=case, seed=100 + index: suite_case(case, seed)))
    specs = {spec.name: spec for spec in cpu_workloads() or []} if workloads else {}
    for index, name in enumerate(workloads):
        jobs.append((f"workload_{name}", lambda spec=specs[name], seed=200 + index: workload(spec, seed)))
    from mlirxla.errors import MlirxlaError

    position = 0
    while position < len(jobs):  # a benchmark's full-f32 twin (TF32 GEMMs) and IREE module follow it
        name, job = jobs[position]
        position += 1
        try:
            executable, entry, expected = job()
        except MlirxlaError as error:
            manifest["refused"][name] = str(error)
            log(f"  {name}: refused: {error}")
            continue
        key = safe_name(name)
        with open(os.path.join(output, entry["file"]), "wb") as handle:
            handle.write(executable)
        if expected is not None and "expected" not in entry:  # an IREE module shares its benchmark's; XLA:GPU gives a workload's
            np.savez(os.path.join(output, f"{key}.expected.npz"), *expected)
            entry["expected"] = f"{key}.expected.npz"
        manifest["workloads"][key] = entry
        log(f"  {name}: {len(executable)} bytes")
        following = []
        if entry.get("tf32"):
            following.append((f"{name}_highest", lambda name=name, seed=entry["seed"]: benchmark(name, seed, "highest")))
        if iree and entry["kind"] == "benchmark" and "precision" not in entry:
            following.append((f"{name}_iree", lambda name=name, entry=entry, atol=f32_atol(expected):
                              (*pack_iree.iree_workload(name, program_path(name), entry, atol), None)))
        jobs[position:position] = following
    if iree:
        manifest["iree_runtime_wheel"] = pack_iree.runtime_wheel(output, iree_wheel, log)
    if tune:
        write_tuning(output, programs, log, [specs[name] for name in workloads])
    shutil.copytree(os.path.join(REPOSITORY, "runtime", "cuda"), os.path.join(output, "mlirxla_cuda_runtime"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPOSITORY, "examples", "jax_programs.py"), output)
    if workloads:
        shutil.copy(os.path.join(REPOSITORY, "examples", "benchmark_workloads.py"), output)
    shutil.copy(os.path.join(REPOSITORY, "scripts", "gpu-check"), os.path.join(output, "gpu-check"))
    with open(os.path.join(output, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=1)
    total = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(output) for f in files)
    if total > LIMIT_BYTES:
        raise MlirxlaError(f"the pack is {total} bytes, over the {LIMIT_BYTES} a GPU machine takes")
    manifest["bytes"] = total
    return manifest


def main(argv=None) -> int:
    from mlirxla.tools.conformance import DEFAULT_DIRECTORY

    parser = argparse.ArgumentParser(prog="scripts/gpu-pack", description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", default="gpu-pack")
    parser.add_argument("--suite", default=DEFAULT_DIRECTORY, help="the interpreter suite (its slice is packed when present)")
    parser.add_argument("--suite-limit", type=int, default=64, help="at most this many suite functions")
    parser.add_argument("--programs", default=",".join(BENCHMARKS), help="the benchmark programs to pack (comma-separated)")
    parser.add_argument("--workloads", default="all",
                        help="the cpu benchmark's workloads to pack (comma-separated; all, or none; they need jax here)")
    parser.add_argument("--no-iree", action="store_true",
                        help="leave out the benchmarks as IREE cuda modules (packed when the iree extra is installed)")
    parser.add_argument("--iree-wheel", help="IREE's runtime wheel for the GPU machine's Python 3.12 (else pip fetches it)")
    arguments = parser.parse_args(argv)
    programs = [name for name in arguments.programs.split(",") if name]
    unknown = sorted(set(programs) - set(BENCHMARKS))
    if unknown:
        print(f"gpu-pack: error: unknown program '{unknown[0]}' (known: {', '.join(BENCHMARKS)})", file=sys.stderr)
        return 2
    specs = cpu_workloads()
    known = [spec.name for spec in specs or []]
    workloads = known if arguments.workloads == "all" else [] if arguments.workloads == "none" else arguments.workloads.split(",")
    if specs is None and arguments.workloads != "none":
        print("gpu-pack: the cpu benchmark's workloads are left out: jax, which lowers them, is not installed (the jax extra)")
    elif unknown := sorted(set(workloads) - set(known)):
        print(f"gpu-pack: error: unknown workload '{unknown[0]}' (known: {', '.join(known)})", file=sys.stderr)
        return 2
    from mlirxla.backends.iree import toolchain

    iree = not arguments.no_iree and toolchain.unavailable() is None
    manifest = write_pack(arguments.output, arguments.suite, arguments.suite_limit, programs, iree=iree,
                          iree_wheel=arguments.iree_wheel, workloads=workloads if specs is not None else [])
    print(f"wrote {arguments.output}: {len(manifest['workloads'])} workload(s), {len(manifest['refused'])} refused, "
          f"{manifest['bytes']} bytes; on the GPU machine: python3 {arguments.output}/gpu-check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
