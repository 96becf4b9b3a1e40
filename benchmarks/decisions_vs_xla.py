"""The decisions that set the speed, mlirxla vs XLA:CPU, side by side in one process.

For each benchmark program (StableHLO exported from JAX, in ../shared/samples/jax/programs)
it compiles the module with XLA:CPU through jax's CPU client (XLA_FLAGS=--xla_dump_to points
at a scratch directory) and reads XLA's own after-optimizations HLO and buffer assignment;
and it runs mlirxla's cpu pipeline on the same module. It prints, per program, the number of
kernels (entry-computation fusions plus library calls and other real ops; ops inside loop
bodies counted apart), temp bytes, and total allocated bytes (parameters + outputs + temp +
constants: the memory the executable needs at its peak), with ratios, and mlirxla's kernel
scratch: the per-slice working memory its largest batch-slice fusion holds while it runs,
outside the slab (XLA's YNNPACK fusions hold theirs outside XLA's buffer assignment too, so
XLA's figures have no such column).

    python benchmarks/decisions_vs_xla.py [--json] [--programs mlp,softmax]

With --json the last line is one JSON object with a row per program. Not a timed benchmark:
it counts decisions, so it is repeatable.
"""

import argparse
import glob
import json
import os
import re
import sys
import tempfile

DUMP_DIRECTORY = tempfile.mkdtemp(prefix="xla-dump-")
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={DUMP_DIRECTORY}".strip()

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS_DIRECTORY = os.path.join(HERE, "..", "..", "shared", "samples", "jax", "programs")
PROGRAMS = ["mlp", "softmax", "transformer", "convnet", "scan"]
NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
XHLO_NOT_KERNELS = {"xhlo.constant", "xhlo.tuple", "xhlo.get_tuple_element", "xhlo.bitcast", "xhlo.return", "func.return"}
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%[\w.-]+ = .*? (?P<opcode>[a-z-]+)\(")
_ALLOCATION = re.compile(r"^allocation \d+: size (?P<size>\d+)(?P<rest>.*)$")


# ---------------------------------------------------------------- XLA:CPU


def xla_compile(text: str):
    from jax.extend import backend

    client = backend.get_backend("cpu")
    return client.compile_and_load(text, [client.devices()[0]])


def dump_file(module_name: str, suffix: str) -> str:
    matches = sorted(glob.glob(os.path.join(DUMP_DIRECTORY, f"module_*.{module_name}.{suffix}")))
    if not matches:
        raise FileNotFoundError(f"XLA wrote no {suffix} for {module_name} in {DUMP_DIRECTORY}")
    return matches[-1]


def xla_kernels(hlo_text: str) -> tuple[int, int]:
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


def xla_memory(buffer_assignment: str) -> dict:
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


def xla_decisions(name: str, text: str, module_name: str) -> dict:
    xla_compile(text)
    entry, nested = xla_kernels(open(dump_file(module_name, "cpu_after_optimizations.txt")).read())
    memory = xla_memory(open(dump_file(module_name, "cpu_after_optimizations-buffer-assignment.txt")).read())
    return {"kernels": entry, "nested_kernels": nested, "temp_bytes": memory["temp"], "total_bytes": memory["total"]}


# ---------------------------------------------------------------- mlirxla


def mlirxla_kernels(module) -> tuple[int, int]:
    from mlirxla.runtime.reference import entry_function, find_function

    function = find_function(module, entry_function(module))
    entry = [op for op in function.regions[0].blocks[0].operations]
    nested = 0

    kernels = 0
    for op in entry:
        name = op.operation.name
        if name in ("xhlo.while", "xhlo.conditional"):
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        if inner.operation.name not in XHLO_NOT_KERNELS:
                            nested += 1
        elif name not in XHLO_NOT_KERNELS:
            kernels += 1
    return kernels, nested


def mlirxla_decisions(path: str) -> dict:
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.pipelines import named_pipeline
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.transforms.buffer_assignment import memory_summary

    module = frontdoor.import_file(path, new_context()).module
    PipelineRunner(module).run(named_pipeline("cpu"))
    entry, nested = mlirxla_kernels(module)
    summary = memory_summary(module)
    return {"kernels": entry, "nested_kernels": nested, "temp_bytes": summary["temp"], "total_bytes": summary["total"],
            "kernel_scratch_bytes": summary["kernel_scratch"]}


# ---------------------------------------------------------------- report


def ratio(ours, theirs) -> str:
    if ours is None or theirs is None:
        return "n/a"
    if theirs == 0:
        return "=" if ours == 0 else "inf"
    return f"{ours / theirs:.2f}x"


def module_symbol(text: str) -> str:
    match = re.search(r"module @([\w.-]+)", text)
    return match.group(1) if match else "module"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line holding every row")
    parser.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated programs")
    arguments = parser.parse_args(argv)
    rows = {}
    for name in arguments.programs.split(","):
        path = os.path.join(PROGRAMS_DIRECTORY, f"{name}.stablehlo.mlir")
        text = open(path).read()
        rows[name] = {"xla": xla_decisions(name, text, module_symbol(text)), "mlirxla": mlirxla_decisions(path)}
    header = f"{'program':12} {'kernels':>17} {'(in loops)':>12} {'temp bytes':>32} {'total bytes':>36} {'scratch':>9}"
    print(header)
    print(f"{'':12} {'mlirxla  xla  ratio':>17} {'mlirxla xla':>12} {'mlirxla       xla     ratio':>32} {'mlirxla        xla       ratio':>36} {'mlirxla':>9}")
    for name, row in rows.items():
        ours, theirs = row["mlirxla"], row["xla"]
        row["kernel_ratio"] = ours["kernels"] / theirs["kernels"] if theirs["kernels"] else None
        row["temp_ratio"] = (ours["temp_bytes"] / theirs["temp_bytes"]) if ours["temp_bytes"] is not None and theirs["temp_bytes"] else None
        print(
            f"{name:12} {ours['kernels']:>7} {theirs['kernels']:>4} {ratio(ours['kernels'], theirs['kernels']):>5}"
            f" {ours['nested_kernels']:>6} {theirs['nested_kernels']:>4}"
            f" {str(ours['temp_bytes']):>12} {theirs['temp_bytes']:>10} {ratio(ours['temp_bytes'], theirs['temp_bytes']):>8}"
            f" {str(ours['total_bytes']):>12} {theirs['total_bytes']:>10} {ratio(ours['total_bytes'], theirs['total_bytes']):>8}"
            f" {ours['kernel_scratch_bytes']:>9}"
        )
    if arguments.json:
        print(json.dumps({"programs": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
