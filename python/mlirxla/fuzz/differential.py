"""Differential fuzzing: random programs (`programs.py`) compiled for the host CPU and run
against the StableHLO reference interpreter on the same arguments.

Each seed is checked in a worker process (`python -m mlirxla.fuzz.differential --worker`,
seeds on stdin, one JSON outcome per line on stdout), so that a crash or a hang costs one
seed, not the run. A seed fails when the native result differs (integers and booleans
exactly; floats within a tolerance of their precision, scaled to the result's magnitude, NaNs
equal), when native compilation or execution raises while the interpreter runs the program,
or when the worker dies or hangs on it. Programs the interpreter itself cannot run are
counted apart. A failing program is minimized to the first value that differs and the ops it
needs, and kept with its seed under `test/data/fuzz-regressions/`, which the default suite
replays (`replay`).
"""

import json
import os
import re
import select
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import ml_dtypes
import numpy as np

from .programs import COMPLEX, FLOATS, SIGNED, Program, Value, draw_program

TOLERANCE = {"f64": 1e-9, "f32": 1e-4, "f16": 1e-2, "bf16": 5e-2, "complex<f32>": 1e-4, "complex<f64>": 1e-9}
DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64, "i1": np.bool_, "i4": ml_dtypes.int4,
          "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32,
          "ui64": np.uint64, "complex<f32>": np.complex64, "complex<f64>": np.complex128}
SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30]
REGRESSIONS = os.path.join("test", "data", "fuzz-regressions")


@dataclass
class Outcome:
    seed: int
    status: str  # ok, mismatch, native-error, crash, timeout, reference-refused
    detail: str = ""
    program: str = ""  # the minimized failing program
    signature: dict | None = None  # its arguments [name, shape, element] and results [shape, element]

    @property
    def failed(self) -> bool:
        return self.status in ("mismatch", "native-error", "plugin-error", "crash", "timeout")


def argument_values(seed: int, arguments: list) -> list[np.ndarray]:
    """Values for `arguments` (Values named %argK): argument K's values depend only on the seed
    and K, so a minimized program keeps the values of the arguments it kept."""
    return [argument_value(np.random.default_rng([seed, int(a.name.removeprefix("%arg"))]), a.shape, a.element) for a in arguments]


def argument_value(rng: np.random.Generator, shape, element: str) -> np.ndarray:
    dtype = DTYPES[element]
    if element in COMPLEX:  # no infinities: BLAS and the interpreter multiply them differently
        return (rng.standard_normal(shape) * 2 + 1j * rng.standard_normal(shape)).astype(dtype)
    if element in FLOATS:
        values = rng.standard_normal(shape) * 2
        special = rng.random(shape) < 0.05
        return np.where(special, rng.choice(SPECIAL_FLOATS, size=shape), values).astype(dtype)
    if element == "i1":
        return rng.random(shape) < 0.5
    info = np.iinfo(np.int8) if element == "i4" else np.iinfo(dtype)
    low, high = (-8, 7) if element == "i4" else (-8 if element in SIGNED else 0, 16)
    values = rng.integers(low, high + 1, shape)
    extremes = rng.random(shape) < 0.05
    values = np.where(extremes, rng.choice([low, high] if element == "i4" else [info.min, info.max], size=shape), values)
    return np.asarray(values).astype(dtype)


def loosest_tolerance(text: str) -> float:
    """The tolerance of the least precise float type the program computes in: a value is only
    as exact as the roundings it went through."""
    types = set(re.findall(r"[x<](f16|bf16|f32|f64|complex<f32>|complex<f64>)>", text))
    return max((TOLERANCE[t] for t in types), default=0.0)


def difference(actual: np.ndarray, expected: np.ndarray, element: str, tolerance: float) -> str | None:
    """Why `actual` is not `expected` for a value of `element` (floats within `tolerance`), or None."""
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if element not in TOLERANCE:
        if np.array_equal(actual.astype(np.int64) if actual.dtype.kind == "V" else actual,
                          expected.astype(np.int64) if expected.dtype.kind == "V" else expected):
            return None
        index = np.argwhere(actual != expected)[0]
        return f"element {list(index)}: {actual[tuple(index)]} vs {expected[tuple(index)]}"
    wide = np.complex128 if element in COMPLEX else np.float64
    a, e = actual.astype(wide), expected.astype(wide)
    if element in COMPLEX:  # part by part: numpy's isclose of (x - inf j) and (y - inf j) subtracts the infinities
        a, e = np.stack([a.real, a.imag], -1), np.stack([e.real, e.imag], -1)
    finite = np.isfinite(e)
    scale = max(1.0, float(np.max(np.abs(e[finite])))) if finite.any() else 1.0
    close = np.isclose(a, e, rtol=tolerance, atol=tolerance * scale, equal_nan=True)
    if close.all():
        return None
    index = tuple(np.argwhere(~close)[0])
    return f"element {list(index)}: {a[index]} vs {e[index]} (tolerance {tolerance})"


def run_both(text: str, arguments: list[np.ndarray]) -> tuple[list | None, list | str, str | None]:
    """(reference outputs or None when the interpreter cannot run it, native outputs or the
    native error, the reference's refusal)."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.errors import MlirxlaError
    from mlirxla.mlir import ir
    from mlirxla.runtime import literals, reference
    from mlirxla.runtime.client import Client, CompileOptions

    context = new_context()
    module = frontdoor.import_text(text, "fuzz.mlir", context).module
    try:
        with context, ir.Location.unknown():
            expected = [literals.to_numpy(v) for v in reference.execute(module, arguments).outputs]
    except MlirxlaError as error:
        return None, [], str(error)
    try:
        # rounding every bf16 op as the interpreter does: with excess precision a remainder, a
        # floor or a compare of an unrounded value may land across a step from it (seed 9384);
        # and keeping denormals, as it does (XLA:CPU's flushing reads them as zero)
        options = CompileOptions(allow_excess_precision=False, flush_denormals=False)
        actual = Client().compile(text, options).execute_numpy(arguments)
    except Exception as error:  # noqa: BLE001 - every native failure is a finding
        return expected, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}", None
    return expected, actual, None


def verdict(text: str, arguments: list[np.ndarray], results: list) -> tuple[str, str]:
    expected, actual, refused = run_both(text, arguments)
    if refused is not None:
        return "reference-refused", refused
    if isinstance(actual, str):
        return "native-error", actual
    tolerance = loosest_tolerance(text)
    for index, (a, e, value) in enumerate(zip(actual, expected, results)):
        why = difference(np.asarray(a), np.asarray(e), value.element, tolerance)
        if why:
            return "mismatch", f"result {index} ({value.type}): {why}"
    return "ok", ""


def check_seed(seed: int, steps: int) -> Outcome:
    program, results = draw_program(seed, steps)
    status, detail = verdict(program.text(results), argument_values(seed, program.used_arguments(results)), results)
    if status in ("mismatch", "native-error"):
        return minimized(program, results, seed, status, detail)
    return Outcome(seed, status, detail)


def minimized(program: Program, results: list, seed: int, status: str, detail: str) -> Outcome:
    """The failure shrunk to the first value (in program order) that fails by itself."""
    for step in program.steps:
        candidate = [step.value]
        if not returnable(program, step.value):
            continue
        try:
            found, why = verdict(program.text(candidate), argument_values(seed, program.used_arguments(candidate)), candidate)
        except Exception:  # noqa: BLE001 - a value that does not even import is not the culprit
            continue
        if found in ("mismatch", "native-error"):
            return Outcome(seed, found, why, program.text(candidate), signature(program, candidate))
    return Outcome(seed, status, detail, program.text(results), signature(program, results))


def signature(program: Program, results: list) -> dict:
    return {"arguments": [[a.name, list(a.shape), a.element] for a in program.used_arguments(results)],
            "results": [[list(r.shape), r.element] for r in results]}


def returnable(program: Program, value: Value) -> bool:
    return not any(f"{value.name}#" in line for step in program.steps for line in step.lines)


# --- workers -----------------------------------------------------------------------------------


def worker(steps: int, jax_mode: bool) -> int:
    for line in sys.stdin:
        seed = int(line)
        try:
            if jax_mode:
                from . import jax_functions

                outcome = Outcome(seed, *jax_functions.check_seed(seed))
            else:
                outcome = check_seed(seed, steps)
        except Exception as error:  # noqa: BLE001 - reported as the seed's finding
            outcome = Outcome(seed, "native-error", f"{type(error).__name__}: {error}")
        print(json.dumps(asdict(outcome)), flush=True)
    return 0


class Worker:
    """One worker process; `check(seed)` gives its outcome, a crash or a timeout included."""

    def __init__(self, steps: int, jax_mode: bool):
        self.command = [sys.executable, "-m", "mlirxla.fuzz", "--worker", "--steps", str(steps)] + (["--jax"] if jax_mode else [])
        self.process = None

    def start(self):
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def check(self, seed: int, timeout: float) -> Outcome:
        if self.process is None or self.process.poll() is not None:
            self.start()
        self.process.stdin.write(f"{seed}\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if line:
            return Outcome(**json.loads(line))
        status = "timeout" if self.process.poll() is None else "crash"
        self.stop()
        return Outcome(seed, status, f"the worker {'hung' if status == 'timeout' else 'died'} on this seed")

    def stop(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def save_regression(outcome: Outcome, directory: str = REGRESSIONS) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"seed-{outcome.seed}.mlir")
    with open(path, "w") as stream:
        stream.write(f"// fuzz seed {outcome.seed}: {outcome.status}: {' '.join(outcome.detail.split())}\n")
        stream.write(f"// {json.dumps(outcome.signature)}\n")
        stream.write(outcome.program)
    return path


def replay(path: str) -> tuple[str, str]:
    """(status, detail) of a kept regression: its program on its seed's argument values."""
    with open(path) as stream:
        text = stream.read()
    seed = int(re.search(r"fuzz seed (\d+)", text).group(1))
    signature = json.loads(text.splitlines()[1].removeprefix("// "))
    arguments = [Value(name, tuple(shape), element) for name, shape, element in signature["arguments"]]
    results = [Value("", tuple(shape), element) for shape, element in signature["results"]]
    return verdict(text, argument_values(seed, arguments), results)


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="scripts/fuzz", description="differential fuzzing: random StableHLO programs natively "
                                     "against the reference interpreter, or (--jax) random JAX functions on the plugin against "
                                     "jax's cpu backend")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="first seed; seeds seed .. seed+count-1 run")
    parser.add_argument("--steps", type=int, default=8, help="ops per program")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1)))
    parser.add_argument("--timeout", type=float, default=300, help="seconds one seed may take")
    parser.add_argument("--save", action="store_true", help=f"keep each failing program (minimized) under {REGRESSIONS}/")
    parser.add_argument("--jax", action="store_true", help="random JAX functions through the plugin against jax's cpu backend")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.worker:
        return worker(arguments.steps, arguments.jax)
    return run(arguments)


def run(arguments) -> int:
    from concurrent.futures import ThreadPoolExecutor

    start = time.perf_counter()
    seeds = list(range(arguments.seed, arguments.seed + arguments.count))
    workers = [Worker(arguments.steps, arguments.jax) for _ in range(arguments.jobs)]
    counts: dict[str, int] = {}

    def drain(worker_seeds):
        worker, chunk = worker_seeds
        return [worker.check(seed, arguments.timeout) for seed in chunk]

    chunks = [seeds[index:: arguments.jobs] for index in range(arguments.jobs)]
    with ThreadPoolExecutor(arguments.jobs) as pool:
        outcomes = [o for part in pool.map(drain, zip(workers, chunks)) for o in part]
    for worker in workers:
        worker.stop()
    for outcome in sorted(outcomes, key=lambda o: o.seed):
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
        if outcome.failed:
            kept = f" -> {save_regression(outcome)}" if arguments.save and outcome.program else ""
            print(f"seed {outcome.seed}: {outcome.status}: {outcome.detail}{kept}")
    took = time.perf_counter() - start
    summary = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    what = "JAX functions" if arguments.jax else f"programs of {arguments.steps} steps"
    print(f"{len(seeds)} {what} (seeds {seeds[0]}..{seeds[-1]}): {summary}; {took:.0f} s")
    return 1 if any(o.failed for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
