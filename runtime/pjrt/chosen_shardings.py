"""The shardings the partitioner chose, told to jax through the optimized program.

`jax.jit` over a mesh without `out_shardings` (or without `in_shardings` for an argument)
leaves the sharding to the compiler and asks the compiled executable afterwards
(`get_output_shardings` / `get_parameter_shardings`). Over the PJRT C API, jaxlib answers from
the optimized program (PJRT_Executable_OptimizedProgram) turned into an HLO module: the
module attributes `mhlo.spmd_output_sharding` (one HloSharding, a tuple sharding for several
results) and `mhlo.spmd_parameters_shardings` (one per parameter) become that module's
`spmd_output_sharding` / `spmd_parameters_shardings`, which XLA's own compiler sets the same
way after partitioning.

So the program kept for OptimizedProgram is jax's own module with those two attributes added
from the executable's global signature. It is rewritten with jaxlib's MLIR (the plugin only
runs inside jax, and jaxlib's MLIR parses what jaxlib's MLIR prints, sdy ops included; our
toolkit's StableHLO is another version) and kept as text, which jaxlib's parser takes as
it takes bytecode.

jaxlib turns that program into HLO without Shardy's export passes, and refuses every sdy op
but the mesh ("unsupported op for export to XLA"), which would leave jax with no shardings at
all. So the kept program has its sdy ops replaced: a `with_sharding_constraint` or `reshard`
by its operand (what it annotates is in the module attributes already), a region
(`shard_map`'s manual computation, a named computation) by a custom call of its results' types,
an op without results dropped. Only the signature and the attributes are read from it.
"""

import functools
import threading

from mlirxla.runtime.client import LoadedExecutable

JAXLIB_CONTEXT_IN_USE = threading.Lock()
LAYOUT_MODE = "mhlo.layout_mode"  # jax's layout request on an entry argument or result
TRANSPOSE = b"transpose"  # in an op's name, as text, bytecode or a portable artifact spells it

# what stands for a removed sdy region in the program jax reads the shardings from
REGION_STANDIN = "mlirxla.sdy_region"


def tuple_sharding(texts: list[str]) -> str:
    return texts[0] if len(texts) == 1 else "{" + ", ".join(texts) + "}"


def with_chosen_shardings(program: bytes, loaded: LoadedExecutable, partitioned: str | None = None) -> bytes:
    """`program`, or the `partitioned` program each device runs when there is one
    (`partitioned_program.py`), with the module attributes that tell jax the partitioned
    executable's parameter and output shardings (none on one partition: replicas all hold
    whole arrays) and its entry layouts. A program of one partition without a transpose is
    returned as it is: only a transpose gets a layout of its own from HLO's shape inference,
    and the text jaxlib prints of a program holding large constants is twice its bytecode
    (a 64 MB constant: 0.6 s to print, 10 s more for jax to read back)."""
    from jax._src.lib.mlir import ir

    if loaded.executable.plan.partition_count == 1 and TRANSPOSE not in program:
        return program
    with JAXLIB_CONTEXT_IN_USE, jaxlib_context() as context:
        if loaded.executable.plan.partition_count == 1:
            module = jaxlib_module(None, program, context)
        else:
            module = jaxlib_module(partitioned, program, context)
            attributes = module.operation.attributes
            outputs = [str(sharding.hlo) for sharding in loaded.output_shardings]
            parameters = [str(sharding.hlo) for sharding in loaded.parameter_shardings]
            if outputs:
                attributes["mhlo.spmd_output_sharding"] = ir.StringAttr.get(tuple_sharding(outputs))
            attributes["mhlo.spmd_parameters_shardings"] = ir.ArrayAttr.get([ir.StringAttr.get(text) for text in parameters])
            without_sdy_ops(module)
        with_row_major_entry(module)
        return str(module).encode()


@functools.cache
def jaxlib_context():
    """One jaxlib MLIR context for the process: making one registers every dialect jax uses
    (6 ms here), which every compile would pay; the lock keeps it to one user at a time."""
    from jax._src.interpreters import mlir as jax_mlir

    return jax_mlir.make_ir_context()


def with_row_major_entry(module) -> None:
    """The entry's parameter and result layouts said: row-major, as every buffer here is.
    jaxlib reads an executable's layouts off the HLO it makes of this program, and without
    them HLO's shape inference gives a transpose the layout that makes it a bitcast, so a
    returned `x.T` was reported column-major (`compiled.output_formats`) and a user asking
    for the row-major layout was refused. Results are left to that inference where jax
    asked for a layout of its own (`mhlo.layout_mode`: `Layout.AUTO` or a concrete one),
    and a signature holding tokens or tuples keeps HLO's default."""
    from jax._src.lib.mlir import ir

    entry = next((op for op in module.body.operations if op.operation.name == "func.func" and
                  ir.StringAttr(op.attributes["sym_name"]).value == "main"), None)
    if entry is None:
        return
    signature = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value)
    result_attributes = [ir.DictAttr(a) for a in ir.ArrayAttr(entry.attributes["res_attrs"])] if "res_attrs" in entry.attributes else []
    declared = {"mhlo.xla_entry_computation_parameter_layouts": signature.inputs}
    if not any(LAYOUT_MODE in attributes for attributes in result_attributes):
        declared["mhlo.xla_entry_computation_result_layout"] = signature.results
    for key, types in declared.items():
        if all(isinstance(value_type, ir.RankedTensorType) for value_type in types):
            module.operation.attributes[key] = ir.ArrayAttr.get([row_major(ir.RankedTensorType(t).rank) for t in types])


def row_major(rank: int):
    """HLO's minor-to-major order of a row-major array of `rank` dims, as MLIR's HLO export reads it."""
    from jax._src.lib.mlir import ir

    dims = ", ".join(str(d) for d in reversed(range(rank)))
    return ir.Attribute.parse(f"dense<[{dims}]> : tensor<{rank}xindex>" if rank else "dense<> : tensor<0xindex>")


def jaxlib_module(partitioned: str | None, program: bytes, context):
    """The partitioned program parsed by jaxlib's MLIR, or jax's own program where there is
    none or jaxlib cannot read it or make HLO of it (it is printed by this toolkit's MLIR, a
    newer version; jaxlib makes HLO of the kept program for every sharded compile, to read
    the shardings)."""
    from jax._src.lib import xla_client
    from jax._src.lib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    if partitioned is not None:
        try:
            xla_client._xla.mlir.mlir_module_to_xla_computation(partitioned, use_tuple_args=False, return_tuple=False)
            return ir.Module.parse(partitioned)
        except (ir.MLIRError, xla_client.XlaRuntimeError, ValueError):
            pass
    if program.startswith(b"ML\xefR"):
        return stablehlo.deserialize_portable_artifact(context, program)
    return ir.Module.parse(program)


def sdy_ops(operation) -> list:
    """The outermost sdy ops under `operation`, the mesh declarations left out."""
    found = []
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                if op.operation.name.startswith("sdy.") and op.operation.name != "sdy.mesh":
                    found.append(op.operation)
                else:
                    found.extend(sdy_ops(op.operation))
    return found


def without_sdy_ops(module) -> None:
    """Replaces `module`'s sdy ops (jaxlib's MLIR objects) as the docstring says."""
    from jax._src.lib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    for op in sdy_ops(module.operation):
        results, operands = list(op.results), list(op.operands)
        if not len(op.regions) and [value.type for value in operands] == [value.type for value in results]:
            replacements = operands
        elif results:
            with ir.InsertionPoint(op), op.location:
                stand_in = stablehlo.CustomCallOp([value.type for value in results], operands,
                                                  call_target_name=ir.StringAttr.get(REGION_STANDIN))
            replacements = list(stand_in.results)
        else:
            replacements = []
        for result, replacement in zip(results, replacements):
            result.replace_all_uses_with(replacement)
        op.erase()
