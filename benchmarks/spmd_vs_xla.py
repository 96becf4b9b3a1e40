"""The SPMD partitioner against XLA's on jax's sharded programs over 8 CPU devices.

    python benchmarks/spmd_vs_xla.py [--json] [--size N] [--names a,b]

The programs are `examples/spmd_programs.py`'s (matmul sharded three ways, the MLP on a 2x4
mesh, elementwise + reduce, the Megatron transformer block, a scan, the conv net sharded on
height, whose shapes are fixed), lowered and run by jax in a child process at size N (default
1024). XLA's columns come from its after-optimizations HLO (`compiled.as_text()`): its
collectives by kind, with their bytes; its temp bytes per device from `memory_analysis`, its
time per call the median of 5. mlirxla's come from the
partitioner's report on the same StableHLO (`xhlo-sharding-propagation`, then
`xhlo-spmd-partitioner`), counted once the collective combiners have run
(`xhlo-all-reduce-combiner`, `xhlo-all-gather-combiner`: a combined op is one collective, as
XLA's tuple all-reduce is one instruction; the counts before combining are
`collectives_before_combining`), its temp bytes the executable's temp and scratch allocations, its
time the median of 5 calls of the compiled program on 8 devices, and `matches` says whether
its result equals jax's within rtol 1e-4.

Bytes moved per device: the sum over collectives of the bytes each device sends (an
all-gather its shard to every other member, an all-reduce 2(n-1)/n of its buffer as a ring,
a reduce-scatter and an all-to-all (n-1)/n of their input, a collective-permute its buffer).
With `--json` the last line is `{"programs": {name: {"xla": {...}, "mlirxla": {...}}}}`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "s64": 8, "u64": 8, "pred": 1, "s8": 1, "u8": 1}
INSTRUCTION = re.compile(r"=\s*(\(.*?\)|\w+\[[\d,]*\](?:\{[\d,]*\})?)\s+(" + "|".join(KINDS) + r")(?:-start)?\((.*)$")


def shape_bytes(text: str) -> int:
    return sum(BYTES.get(kind, 4) * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))
               for kind, dims in re.findall(r"(\w+)\[([\d,]*)\]", text))


def group_size(line: str) -> int:
    if m := re.search(r"replica_groups=\{\{([\d,]*)\}", line):
        return len(m.group(1).split(","))
    if m := re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", line):
        sizes = dict(re.findall(r"'(\w+)'=(\d+)", m.group(1)))
        return int(np.prod([int(sizes[a]) for a in re.findall(r"'(\w+)'", m.group(2))]))
    if m := re.search(r"replica_groups=\[(\d+),(\d+)\]<=", line):
        return int(m.group(2))
    return 8


def xla_collectives(hlo: str) -> list[tuple[str, int]]:
    """(kind, bytes each device sends) per collective of XLA's optimized module."""
    found = []
    for line in hlo.splitlines():
        m = INSTRUCTION.search(line)
        if not m:
            continue
        result, kind = shape_bytes(m.group(1)), m.group(2)
        n = group_size(line)
        sent = {"all-reduce": 2 * (n - 1) / n * result, "all-gather": result / n * (n - 1), "reduce-scatter": result * (n - 1),
                "all-to-all": (n - 1) / n * result, "collective-permute": result}[kind]
        found.append((kind, int(sent)))
    return found


def columns(collectives: list[tuple[str, int]], temp: int, seconds: float) -> dict:
    counts = Counter(kind for kind, _ in collectives)
    return {"collectives": dict(sorted(counts.items())), "bytes_moved_per_device": int(sum(b for _, b in collectives)),
            "temp_bytes_per_device": int(temp), "seconds_per_call": float(seconds)}


def mlirxla_columns(path: str, data) -> dict:
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.mlir import ir
    from mlirxla.runtime.driver import load_sharded
    from mlirxla.ir_queries import nested_ops
    from mlirxla.transforms.all_gather_combiner import AllGatherCombinerPass
    from mlirxla.transforms.all_reduce_combiner import AllReduceCombinerPass
    from mlirxla.transforms.sharding_propagation import ShardingPropagationPass
    from mlirxla.transforms.spmd_partitioner import SpmdPartitionerPass

    context = new_context()
    text = open(path, "rb").read()
    module = frontdoor.import_bytes(text, path, context).module
    probe = frontdoor.import_bytes(text, path, context).module
    with context, ir.Location.unknown():
        ShardingPropagationPass().run(probe)
        report = SpmdPartitionerPass().run(probe).report
        AllReduceCombinerPass().run(probe)
        AllGatherCombinerPass().run(probe)
    collectives = [(c.kind, c.bytes_per_device) for c in report.collectives()]
    combined = Counter(op.name.removeprefix("xhlo.").replace("_", "-") for op in nested_ops(probe.operation))
    program = load_sharded(module)
    arguments = [data[f"arg{i}"] for i in range(sum(key.startswith("arg") for key in data))]
    result = program.execute_numpy(arguments)[0]
    seconds = []
    for _ in range(5):
        start = time.perf_counter()
        program.execute_numpy(arguments)
        seconds.append(time.perf_counter() - start)
    plan = program.executable.plan
    temp = sum(size for size, kind in zip(plan.allocation_sizes, plan.allocation_kinds) if kind in ("temp", "scratch"))
    out = columns(collectives, temp, float(np.median(seconds)))
    out["collectives_before_combining"] = out["collectives"]
    out["collectives"] = {kind: combined[kind] for kind in KINDS if combined[kind]}
    out["matches"] = bool(np.allclose(result, data["out0"], rtol=1e-4, atol=1e-5))
    out["fallbacks"] = [r.label for r in report.records if r.fallback]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--names", default="")
    options = parser.parse_args()
    programs = {}
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, os.path.join(HERE, "..", "examples", "spmd_programs.py"), out, "--size", str(options.size)]
        done = subprocess.run(command + (["--names", options.names] if options.names else []), capture_output=True, text=True)
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return 1
        names = sorted({f[:-5] for f in os.listdir(out) if f.endswith(".mlir")})
        for name in names:
            data = np.load(os.path.join(out, f"{name}.npz"))
            xla = columns(xla_collectives(open(os.path.join(out, f"{name}.xla.txt")).read()), int(data["xla_temp_bytes"]), float(data["xla_seconds"]))
            programs[name] = {"xla": xla, "mlirxla": mlirxla_columns(os.path.join(out, f"{name}.mlir"), data)}
    print(f"{'program':20} {'':8} {'collectives':40} {'bytes/device':>13} {'temp bytes':>12} {'ms/call':>9}")
    for name, both in programs.items():
        for side in ("xla", "mlirxla"):
            c = both[side]
            kinds = ", ".join(f"{k} x{v}" for k, v in c["collectives"].items()) or "none"
            extra = "" if side == "xla" else ("  matches jax" if c["matches"] else "  DIFFERS from jax") + (f", fallbacks {len(c['fallbacks'])}" if c["fallbacks"] else "")
            if side == "mlirxla" and c["collectives_before_combining"] != c["collectives"]:
                extra += ", before combining " + (", ".join(f"{k} x{v}" for k, v in c["collectives_before_combining"].items()))
            print(f"{name if side == 'xla' else '':20} {side:8} {kinds:40} {c['bytes_moved_per_device']:>13} {c['temp_bytes_per_device']:>12} "
                  f"{1000 * c['seconds_per_call']:>9.2f}{extra}")
    if options.json:
        print(json.dumps({"programs": programs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
