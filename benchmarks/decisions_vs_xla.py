"""The decisions that set the speed, mlirxla vs XLA:CPU, side by side in one process.

For each benchmark program (`examples/jax_programs.py`; its StableHLO, written by
scripts/export-programs, in test/data/jax/programs) jax compiles the program with XLA:CPU
and `xla_figures.py` reads XLA's own after-optimizations HLO and buffer assignment from the
dump (XLA_FLAGS=--xla_dump_to points at a scratch directory); and mlirxla's cpu backend
compiles the StableHLO file. It prints, per program, the number of
kernels (entry-computation fusions plus library calls and other real ops; ops inside loop
bodies counted apart), temp bytes, and total allocated bytes (parameters + outputs + temp +
constants: the memory the executable needs at its peak), with ratios. mlirxla's temp is the
slab its executable allocates: the temps plus the kernels' scratch and im2col rows, which
buffer assignment plans in it (the scratch column says how many bytes of scratch intervals
it placed there, sharing memory with temps dead at the time); XLA's temp is its temp
allocation (its YNNPACK fusions' working memory is outside XLA's buffer assignment, so it
is not counted). The scratch of a sliced kernel is one range per concurrent call, as many as
this host has cores (up to its slices), so the figures for softmax, transformer and the
conv net depend on the host's core count, which the header says.

    python benchmarks/decisions_vs_xla.py [--json] [--programs mlp,softmax]

With --json the last line is one JSON object with a row per program. Not a timed benchmark:
it counts decisions, so it is repeatable.
"""

import argparse
import json
import os
import sys

from xla_figures import xla_figures  # first: it sets XLA_FLAGS before jax starts

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS_DIRECTORY = os.path.join(HERE, "..", "test", "data", "jax", "programs")
PROGRAMS = ["mlp", "softmax", "transformer", "convnet", "scan"]
XHLO_NOT_KERNELS = {"xhlo.constant", "xhlo.tuple", "xhlo.get_tuple_element", "xhlo.bitcast", "xhlo.return", "func.return"}


# ---------------------------------------------------------------- mlirxla


def mlirxla_kernels(module) -> tuple[int, int]:
    from mlirxla.ir_queries import public_entry_name
    from mlirxla.runtime.reference import find_function

    function = find_function(module, public_entry_name(module))
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
    """The cpu backend's figures: the assignment its executable runs (the module's
    `xhlo.buffer_assignment` summary, written again once the scratch is placed), checked
    against the executable's own slab."""
    from mlirxla import frontdoor
    from mlirxla.backends.cpu.compiler import compile_module
    from mlirxla.context import new_context
    from mlirxla.mlir import ir

    module = frontdoor.import_file(path, new_context()).module
    plan = compile_module(module).plan
    entry, nested = mlirxla_kernels(module)
    with module.context:
        summary = {k: ir.IntegerAttr(v).value for k, v in
                   ((a.name, a.attr) for a in ir.DictAttr(module.operation.attributes["xhlo.buffer_assignment"]))}
    slab = sum(size for kind, size in zip(plan.allocation_kinds, plan.allocation_sizes) if kind == "temp")
    assert slab == summary["temp_bytes"], (slab, summary)
    return {"kernels": entry, "nested_kernels": nested, "temp_bytes": summary["temp_bytes"], "total_bytes": summary["total_bytes"],
            "kernel_scratch_bytes": summary["kernel_scratch_bytes"]}


# ---------------------------------------------------------------- report


def ratio(ours, theirs) -> str:
    if ours is None or theirs is None:
        return "n/a"
    if theirs == 0:
        return "=" if ours == 0 else "inf"
    return f"{ours / theirs:.2f}x"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line holding every row")
    parser.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated programs")
    arguments = parser.parse_args(argv)
    rows = {}
    for name in arguments.programs.split(","):
        path = os.path.join(PROGRAMS_DIRECTORY, f"{name}.stablehlo.mlir")
        rows[name] = {"xla": xla_figures(name), "mlirxla": mlirxla_decisions(path)}
    print(f"mlirxla's temp = temps + scratch in one slab; sliced kernels' scratch for {os.cpu_count()} concurrent calls (this host's cores)")
    header = f"{'program':12} {'kernels':>17} {'(in loops)':>12} {'temp bytes':>32} {'total bytes':>36} {'scratch':>9}"
    print(header)
    print(f"{'':12} {'mlirxla  xla  ratio':>17} {'mlirxla xla':>12} {'mlirxla       xla     ratio':>32} {'mlirxla        xla       ratio':>36} {'in temp':>9}")
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
