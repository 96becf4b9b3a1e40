"""Our sharding propagation against XLA's, op by op, on jax's sharded programs (8 CPU devices).

    python benchmarks/sharding_vs_xla.py [--json] [--show-disagreements]

Each program is lowered by jax (Shardy's `sdy` text; `gspmd_*` with Shardy off, so as
`mhlo.sharding`), compiled by XLA:CPU with its per-pass dump on, and XLA's shardings are read
from the module as its partitioner receives it (the dump after `shardy-xla`, or after GSPMD's
`sharding-propagation`). The same StableHLO goes through mlirxla's front door and
`xhlo-sharding-propagation`. Instructions are paired by opcode and shape in program order
(both are topological orders of the same graph; parameters and ops XLA left without a sharding
are not compared). Prints per program the ops compared, how many got the same sharding and
the ones that differ; with `--json` the last line is
`{"programs": {name: {"compared": N, "agree": M, "differ": [...]}}}`.

Runs in its own process: XLA reads its dump flags once per process.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile
from collections import defaultdict

DEVICES = 8
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

jax.config.update("jax_num_cpu_devices", DEVICES)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import jax_programs  # noqa: E402


def spec_tensor(mesh, shape, spec):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))


def mesh_1d():
    return Mesh(np.array(jax.devices("cpu")), ("x",))


def mesh_2d():
    return Mesh(np.array(jax.devices("cpu")).reshape(2, 4), ("data", "model"))


def matmul(a, b):
    return a @ b


def mlp(x, w1, b1, w2, b2):
    return jax.nn.relu(x @ w1 + b1) @ w2 + b2


def transformer(x, p):
    return jax_programs.block(x, p)


def convnet(x, w1, b1, w2, b2, w3, b3):
    return jax_programs.convnet(x, w1, b1, w2, b2, w3, b3)


def rnn(h, w, xs):
    """A scan (a while loop) over a batch sharded on rows."""
    return jax.lax.scan(lambda c, x: (jnp.tanh(c @ w + x), None), h, xs)[0]


def programs():
    """name -> (function, arguments, shardy)."""
    one, two = mesh_1d(), mesh_2d()
    n = 1024
    mlp_arguments = (
        spec_tensor(two, (256, 1024), P("data", None)),
        spec_tensor(two, (1024, 4096), P(None, "model")),
        spec_tensor(two, (4096,), P("model")),
        spec_tensor(two, (4096, 1024), P("model", None)),
        spec_tensor(two, (1024,), P(None)),
    )
    x, parameters = jax_programs.block_arguments()
    megatron = {"w_qkv": P(None, "model"), "b_qkv": P("model"), "w_out": P("model", None), "w_mlp1": P(None, "model"), "b_mlp1": P("model"), "w_mlp2": P("model", None)}
    block_arguments = (
        spec_tensor(two, x.shape, P("data", None)),
        {name: spec_tensor(two, t.shape, megatron.get(name, P(*([None] * len(t.shape))))) for name, t in parameters.items()},
    )
    conv_arguments = [spec_tensor(one, t.shape, P(None, "x", None, None) if i == 0 else P(*([None] * len(t.shape)))) for i, t in enumerate(jax_programs.convnet_arguments())]
    return {
        "matmul_rows": (matmul, (spec_tensor(one, (n, n), P("x", None)), spec_tensor(one, (n, n), P(None, None))), True),
        "matmul_contracting": (matmul, (spec_tensor(one, (n, n), P(None, "x")), spec_tensor(one, (n, n), P("x", None))), True),
        "matmul_2x4": (matmul, (spec_tensor(two, (n, n), P("data", "model")), spec_tensor(two, (n, n), P("model", None))), True),
        "mlp_2x4": (mlp, mlp_arguments, True),
        "transformer_megatron": (transformer, block_arguments, True),
        "convnet_height": (convnet, tuple(conv_arguments), True),
        "gspmd_mlp_2x4": (mlp, mlp_arguments, False),
        "gspmd_transformer_megatron": (transformer, block_arguments, False),
        "rnn_scan_batch": (rnn, (spec_tensor(one, (64, 128), P("x", None)), spec_tensor(one, (128, 128), P(None, None)), spec_tensor(one, (16, 64, 128), P(None, "x", None))), True),
    }


_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\S+?)\[([\d,]*)\]\S* ([\w-]+)\(")
_SHARDING = re.compile(r"sharding=(\{.*?\})(?:, metadata|, backend_config|, frontend_attributes|$)")


def xla_shardings(text: str) -> list[tuple[str, tuple[int, ...], str]]:
    """(opcode, shape, sharding) of every instruction of the entry computation but its
    parameters, in order; one XLA left without a sharding is replicated for its partitioner."""
    entry = text[text.index("\nENTRY ") :]
    rows = []
    for line in entry.splitlines()[1:]:
        match = _INSTRUCTION.match(line)
        if match and match.group(4) != "parameter":
            shape = tuple(int(d) for d in match.group(3).split(",") if d)
            sharding = _SHARDING.search(line)
            rows.append((match.group(4), shape, sharding.group(1) if sharding else "{replicated}"))
    return rows


def xla_dump(directory: str, name: str) -> str:
    """XLA's module as its partitioner gets it: after shardy-xla (or GSPMD's propagation), or
    as it came when that pass changed nothing (XLA dumps only passes that change the module)."""
    after = glob.glob(os.path.join(directory, f"*jit_{name}.*after_shardy-xla*")) + glob.glob(os.path.join(directory, f"*jit_{name}.*after_sharding-propagation*"))
    files = sorted(after) or glob.glob(os.path.join(directory, f"*jit_{name}.before_optimizations.txt"))
    if not files:
        raise SystemExit(f"no XLA dump of jit_{name} in {directory}")
    return open(files[-1]).read()


def opcode_of(op_name: str) -> str:
    return op_name.removeprefix("xhlo.").replace("_", "-")


def ours(stablehlo: str):
    """(opcode, shape, sharding, name) of every entry-function op after our propagation."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.ir_queries import entry_function
    from mlirxla.mlir import ir
    from mlirxla.pipelines.pipeline import Pipeline
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.transforms.sharding_propagation import ShardingPropagationPass

    imported = frontdoor.import_bytes(stablehlo.encode(), "-", new_context())
    runner = PipelineRunner(imported.module)
    runner.run(Pipeline("sharding").add(ShardingPropagationPass()))
    rows = []
    with imported.module.context:
        function = entry_function(imported.module)
        for op in function.regions[0].blocks[0].operations:
            if "xhlo.sharding" not in op.attributes or len(op.results) != 1 or not isinstance(op.results[0].type, ir.RankedTensorType):
                continue
            shape = tuple(ir.RankedTensorType(op.results[0].type).shape)
            rows.append((opcode_of(op.name), shape, ir.StringAttr(op.attributes["xhlo.sharding"]).value, f"{op.name} at {op.location}"))
    return rows, runner.reports.get("xhlo-sharding-propagation")


def compare(name: str, stablehlo: str, xla_text: str) -> dict:
    from mlirxla.dialects.xhlo.sharding import HloSharding

    theirs = defaultdict(list)
    for opcode, shape, sharding in xla_shardings(xla_text):
        theirs[(opcode, shape)].append(str(HloSharding.parse(sharding)))
    mine, _ = ours(stablehlo)
    taken = defaultdict(int)
    compared, agree, differ = 0, 0, []
    for opcode, shape, sharding, where in mine:
        key = (opcode, shape)
        if taken[key] >= len(theirs[key]):
            continue
        expected = theirs[key][taken[key]]
        taken[key] += 1
        compared += 1
        if expected == sharding:
            agree += 1
        else:
            differ.append(f"{opcode} {list(shape)}: ours {sharding}, XLA {expected}")
    return {"compared": compared, "agree": agree, "differ": differ}


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line of every program's comparison")
    parser.add_argument("--show-disagreements", action="store_true", help="list the ops whose shardings differ")
    options = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="sharding_vs_xla_")
    try:
        return report(directory, options)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def report(directory: str, options: argparse.Namespace) -> int:
    # read when XLA:CPU starts, at the first compile below
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={directory} --xla_dump_hlo_pass_re=shardy-xla|sharding-propagation"
    results = {}
    for name, (function, arguments, shardy) in programs().items():
        jax.config.update("jax_use_shardy_partitioner", shardy)
        wrapped = jax.jit(globals_with_name(function, name))
        lowered = wrapped.lower(*arguments)
        lowered.compile()
        results[name] = compare(name, lowered.as_text(), xla_dump(directory, name))
    jax.config.update("jax_use_shardy_partitioner", True)
    for name, result in results.items():
        print(f"{name:28} {result['agree']:3} of {result['compared']:3} ops agree with XLA")
        if options.show_disagreements:
            for line in result["differ"]:
                print(f"    {line}")
    if options.json:
        print(json.dumps({"programs": results}))
    return 0


def globals_with_name(function, name: str):
    """`function` under the name `name`, so that its module is `jit_<name>` in XLA's dump."""

    def named(*args):
        return function(*args)

    named.__name__ = named.__qualname__ = name
    return named


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
