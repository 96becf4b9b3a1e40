"""xhlo-custom-partitioning: jax's `custom_partitioning` calls, each partitioned by its own
Python `partition` callback (XLA calls it from its SPMD partitioner, through the
CustomSPMDPartitioning partitioner jaxlib registers).

jax lowers a `custom_partitioning` function called over several devices to
`custom_call @CustomSPMDPartitioning(args...)`; the backend config is the key of its callbacks
in jax's registry (`jax._src.custom_partitioning._sharding_callbacks`: the user's `partition`,
the mesh, the lowering context; jax keeps them alive with the lowering). Propagation gives the
call's results their shardings from the `sdy.sharding_rule` the user declared
(`sharding_rules.declared_rule`), as Shardy does. Here jax's partition entry point is called
with the shardings propagation chose for the operands and results. It returns the shardings
the operands must have, the ones the results come out with, and the program each device runs
(StableHLO over local shapes, manual over every mesh axis, collectives explicit). The call
becomes that program between the edges of a manual region, the form the front door gives a
shard_map:

    @Sharding(arg) {S_arg} -> @SPMDFullToShardShape {manual} -> the device program {manual}
    -> @Sharding {manual} -> @SPMDShardToFullShape {S_result}

so the SPMD partitioner reshards each operand to S_arg, runs the program on each device's
tiles and hands each result on as S_result (resharded where a user wants another sharding).

A call inside a loop body (a `custom_partitioning` function in a scan over layers) is
partitioned the same way: a carried operand's sharding is the loop's. The device program's
other functions (a `lax.cond`'s branches) join the module, renamed where it has the name. The callbacks are found
only in the process that lowered the program: a module saved and read back, or lowered
elsewhere, is refused in one line. What the user's callback raises ends the compile with its
first line. Runs after propagation, before the partitioner; a program of one partition
has no such call (jax inlines the function at lowering). Changed: any call replaced.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.sharding import parse_attribute
from mlirxla.errors import MlirxlaError, first_line, location_text
from mlirxla.ir_queries import entry_function, ops_where
from mlirxla.mlir import ir

from .erasure import erase, live_ops
from .pass_base import ModulePass

TARGET = "CustomSPMDPartitioning"
SHARDING = "xhlo.sharding"
MANUAL = "{manual}"


def is_custom_partitioning(op: ir.Operation) -> bool:
    return op.name == "xhlo.custom_call" and ir.StringAttr(op.attributes["call_target_name"]).value == TARGET


@dataclass(frozen=True)
class CustomPartitioningPass(ModulePass):
    """Replaces each call by the device program its partition callback returns, between manual edges."""

    name: ClassVar[str] = "xhlo-custom-partitioning"
    summary: ClassVar[str] = "partition jax's custom_partitioning calls with their partition callbacks"

    def run(self, module: ir.Module) -> bool:
        calls = list(live_ops(ops_where(module, is_custom_partitioning)))
        for call in calls:
            replace(module, call, partition(call, location_text(call.location)))
        return bool(calls)


@dataclass(frozen=True)
class Partitioned:
    """What jax's partition callback returned: the device program (StableHLO bytecode), the
    shardings its operands need and those of its results, in XLA's syntax."""

    program: bytes
    operand_shardings: list[str]
    result_shardings: list[str]


def value_sharding(value: ir.Value) -> str:
    """The sharding propagation gave `value`, as XLA's text: its op's (a tuple's element for
    one result of several), a function argument's attribute, or a loop's carried value's, the
    loop's; replicated where it gave none."""
    if isinstance(value, ir.BlockArgument):
        holder, index = value.owner.owner.operation, value.arg_number
        if holder.name == "func.func":
            if "arg_attrs" not in holder.attributes:
                return "{replicated}"
            attributes = ir.DictAttr(ir.ArrayAttr(holder.attributes["arg_attrs"])[index])
            return ir.StringAttr(attributes[SHARDING]).value if SHARDING in attributes else "{replicated}"
    else:
        holder, index = value.owner.operation, ir.OpResult(value).result_number
    if SHARDING not in holder.attributes:
        return "{replicated}"
    sharding = parse_attribute(holder.attributes[SHARDING])
    return str(sharding.elements[index] if sharding.kind == "tuple" else sharding)


def partition(call: ir.Operation, where: str) -> Partitioned:
    """Call jax's partition entry point for `call` with jaxlib's shapes and shardings."""
    try:
        from jax._src import custom_partitioning as jax_custom_partitioning
        from jax._src.lib import xla_client
    except ImportError:
        raise MlirxlaError(f"custom_call @{TARGET}: partitioning it calls jax's callbacks, which needs jax", where) from None
    from mlirxla.runtime.literals import numpy_dtype

    key = ir.StringAttr(call.attributes["backend_config"]).value_bytes if "backend_config" in call.attributes else b""
    if key not in jax_custom_partitioning._sharding_callbacks:
        raise MlirxlaError(f"custom_call @{TARGET}: its callbacks are not alive in this process (the program was lowered "
                           "by jax in another process, or saved and read back)", where)

    def shape_of(value):
        tensor = ir.RankedTensorType(value.type)
        return xla_client.Shape.array_shape(numpy_dtype(tensor.element_type), tuple(tensor.shape))

    operand_shapes = [shape_of(operand) for operand in call.operands]
    result_shapes = [shape_of(result) for result in call.results]
    result_shape = result_shapes[0] if len(result_shapes) == 1 else xla_client.Shape.tuple_shape(result_shapes)
    propagated = ir.StringAttr(call.attributes[SHARDING]).value if SHARDING in call.attributes else "{replicated}"
    try:
        program, operand_shardings, result_sharding = jax_custom_partitioning._custom_partitioning_partition(
            operand_shapes, [xla_client.HloSharding.from_string(value_sharding(operand)) for operand in call.operands],
            result_shape, xla_client.HloSharding.from_string(propagated), key)
    except Exception as error:  # the user's callback: its failure ends the compile, named
        raise MlirxlaError(f"custom_call @{TARGET}: the partition callback raised {type(error).__name__}: "
                           f"{first_line(str(error))}", where) from None
    results = list(result_sharding.tuple_elements()) if len(result_shapes) > 1 else [result_sharding]
    return Partitioned(bytes(program), [str(s) for s in operand_shardings], [str(s) for s in results])


def replace(module: ir.Module, call: ir.Operation, partitioned: Partitioned) -> None:
    """`call` as the device program between a manual region's edges."""
    from mlirxla import frontdoor
    from mlirxla.dialects.xhlo.config import CONFIG
    from mlirxla.frontdoor.load import load_bytes

    location = call.location
    loaded = load_bytes(partitioned.program, f"{TARGET} device program", call.context)
    # the program runs on the devices of the module holding the call (its collectives name them)
    loaded.module.operation.attributes[CONFIG] = module.operation.attributes[CONFIG]
    program = frontdoor.import_loaded(loaded).module
    entry = entry_function(program)
    adopt_functions(module, program, entry)
    body = entry.regions[0].blocks[0]
    if len(body.arguments) != len(call.operands) or len(list(body.operations)[-1].operands) != len(call.results):
        raise MlirxlaError(f"custom_call @{TARGET}: the device program takes {len(body.arguments)} and returns "
                           f"{len(list(body.operations)[-1].operands)} values; the call has {len(call.operands)} and "
                           f"{len(call.results)}", location_text(location))
    with ir.InsertionPoint(call), location:
        for argument, operand, sharding in zip(body.arguments, call.operands, partitioned.operand_shardings):
            constrained = annotation("Sharding", operand, operand.type, sharding)
            argument.replace_all_uses_with(annotation("SPMDFullToShardShape", constrained, argument.type, MANUAL))
    operations = list(body.operations)
    for inner in operations[:-1]:
        inner.move_before(call)
        if len(inner.results):
            inner.attributes[SHARDING] = ir.StringAttr.get(MANUAL if len(inner.results) == 1 else "{" + ", ".join([MANUAL] * len(inner.results)) + "}")
    with ir.InsertionPoint(call), location:
        for result, local, sharding in zip(call.results, operations[-1].operands, partitioned.result_shardings):
            manual = annotation("Sharding", local, local.type, MANUAL)
            result.replace_all_uses_with(annotation("SPMDShardToFullShape", manual, result.type, sharding))
    erase(call)


def adopt_functions(module: ir.Module, program: ir.Module, entry: ir.Operation) -> None:
    """The device program's functions but its entry (a `lax.cond`'s branches) move to
    `module`, renamed where `module` has the name already."""
    def names(holder: ir.Module) -> set[str]:
        return {ir.StringAttr(op.attributes["sym_name"]).value for op in holder.body.operations if "sym_name" in op.attributes}

    taken, program_names = names(module), names(program)
    anchor = list(module.body.operations)[-1]
    for function in [op.operation for op in program.body.operations if op.operation.name == "func.func" and op.operation != entry.operation]:
        name = fresh = ir.StringAttr(function.attributes["sym_name"]).value
        suffix = 0
        while fresh in taken or (fresh != name and fresh in program_names):
            suffix += 1
            fresh = f"{name}.{TARGET}.{suffix}"
        if fresh != name:
            ir.SymbolTable.replace_all_symbol_uses(name, fresh, program.operation)
            function.attributes["sym_name"] = ir.StringAttr.get(fresh)
        taken.add(fresh)
        function.move_after(anchor)
        anchor = function


def annotation(target: str, operand: ir.Value, result_type: ir.Type, sharding: str) -> ir.Value:
    text = ir.StringAttr.get(sharding)
    return create_op("xhlo.custom_call", [operand], [result_type], {
        "call_target_name": ir.StringAttr.get(target), "backend_config": ir.StringAttr.get(""),
        "mhlo.sharding": text, SHARDING: text}).results[0]
