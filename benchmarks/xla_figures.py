"""XLA:CPU's own decisions on the benchmark programs, read from the dump XLA writes.

Each program (`examples/jax_programs.py`, the ones under `programs/`) is lowered and compiled
by jax on its CPU backend with `--xla_dump_to` pointing at a scratch folder. XLA's
after-optimizations HLO gives the kernels: entry-computation fusions plus library calls and
other real ops, ops inside the entry's loop and branch computations counted apart. Its buffer
assignment gives the bytes: temp, parameters, live-out, constants, thread-local, and their
total (the memory the executable needs at its peak).

    python benchmarks/xla_figures.py [mlp softmax ...]     # one JSON object, a row per program

XLA reads XLA_FLAGS once, when jax starts its CPU backend: import this module first.
"""

import argparse
import atexit
import glob
import json
import os
import re
import shutil
import sys
import tempfile

DUMP_DIRECTORY = tempfile.mkdtemp(prefix="xla-dump-")
atexit.register(shutil.rmtree, DUMP_DIRECTORY, ignore_errors=True)
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={DUMP_DIRECTORY}".strip()
# The installed mlirxla package is a JAX plugin too; these are XLA:CPU's figures.
os.environ["JAX_PLATFORMS"] = "cpu"

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPOSITORY, "examples"))

PROGRAMS = ["mlp", "softmax", "transformer", "convnet", "scan", "mlp_softmax_small"]
NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%[\w.-]+ = .*? (?P<opcode>[a-z-]+)\(")
_ALLOCATION = re.compile(r"^allocation \d+: size (?P<size>\d+)(?P<rest>.*)$")


def kernels(hlo_text: str) -> tuple[int, int]:
    """(entry kernels, kernels inside the entry's loop and branch computations)."""
    computations, current, entry = {}, None, None
    for line in hlo_text.splitlines():
        header = re.match(r"^(ENTRY )?%([\w.-]+) ", line)
        if header and line.rstrip().endswith("{"):
            current = header.group(2)
            computations[current] = []
            entry = current if header.group(1) else entry
            continue
        match = _INSTRUCTION.match(line)
        if match and current is not None:
            computations[current].append((match.group("opcode"), line))
    count = lambda name: sum(1 for opcode, _ in computations.get(name, []) if opcode not in NOT_KERNELS | {"while", "conditional"})
    nested = 0
    for opcode, line in computations.get(entry, []):
        if opcode in ("while", "conditional"):
            for called in re.findall(r"(?:condition|body|branch_computations=\{[^}]*|true_computation|false_computation)=?%([\w.-]+)", line):
                nested += count(called)
    return count(entry), nested


def memory(buffer_assignment: str) -> dict:
    """Bytes per kind of allocation in XLA's buffer assignment, and their total."""
    sizes = {"temp": 0, "parameter": 0, "live_out": 0, "constant": 0, "thread_local": 0}
    for line in buffer_assignment.splitlines():
        match = _ALLOCATION.match(line)
        if not match:
            continue
        size, rest = int(match.group("size")), match.group("rest")
        if "thread-local" in rest:
            sizes["thread_local"] += size
        elif "parameter" in rest:
            sizes["parameter"] += size
        elif "maybe-live-out" in rest or "output shape" in rest:
            sizes["live_out"] += size
        elif "constant" in rest:
            sizes["constant"] += size
        else:
            sizes["temp"] += size
    sizes["total"] = sum(sizes.values())
    return sizes


def dump_file(module_name: str, suffix: str) -> str:
    """The newest module of that name in the dump: the one compiled last."""
    matches = sorted(glob.glob(os.path.join(DUMP_DIRECTORY, f"module_*.{module_name}.{suffix}")))
    if not matches:
        raise FileNotFoundError(f"XLA wrote no {suffix} for {module_name} in {DUMP_DIRECTORY}")
    return matches[-1]


def xla_figures(name: str) -> dict:
    """XLA:CPU's kernels and bytes for the benchmark program `name`."""
    import jax
    from jax_programs import program

    benchmark = program(f"programs/{name}")
    jax.jit(benchmark.function).lower(*benchmark.arguments()).compile()
    module_name = f"jit_{benchmark.function.__name__}"
    entry, nested = kernels(open(dump_file(module_name, "cpu_after_optimizations.txt")).read())
    sizes = memory(open(dump_file(module_name, "cpu_after_optimizations-buffer-assignment.txt")).read())
    return {"kernels": entry, "nested_kernels": nested, "temp_bytes": sizes["temp"], "parameter_bytes": sizes["parameter"],
            "live_out_bytes": sizes["live_out"], "total_bytes": sizes["total"]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", metavar="program",
                        help=f"programs to compile with XLA:CPU (default: all of {', '.join(PROGRAMS)})")
    names = parser.parse_args(argv).programs or PROGRAMS
    if unknown := sorted(set(names) - set(PROGRAMS)):
        parser.error(f"unknown program(s) {', '.join(unknown)} (known: {', '.join(PROGRAMS)})")
    print(json.dumps({name: xla_figures(name) for name in names}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
