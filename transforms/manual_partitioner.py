"""xhlo-manual-partitioner: a program that is manual over every device becomes each device's
program, its parameters and results local (what XLA's SPMD partitioner does at the edges of
a fully manual computation, and all it does there).

jax 0.10 lowers `jax.pmap` and `jax.shard_map` as one `sdy.manual_computation` in `main`:
`main` takes and returns global arrays, and the body, written per device with local shapes
and explicit collectives, sits between XLA's shard-shape calls (as the front door exports
it, `frontdoor/shardings.py`):

    %s = @Sharding(%arg) {S_in}   %l = @SPMDFullToShardShape(%s) {manual}    (global -> local)
    ... the body, on %l ...
    %m = @Sharding(%v) {manual}   %g = @SPMDShardToFullShape(%m) {S_out}     (local -> global)
    return %g

When every annotation is part of such an edge, the manual sharding covers every device
(`{manual}`: no mesh axis left automatic) and `main` does nothing but hand its arguments to
the body and return its results, nothing needs partitioning but the edges: each parameter
takes the local type of its shard and is the body's value, each result is the body's
value. The device the runtime hands shard d of an argument runs partition d, so the tile
arithmetic stays with the caller (jax, or the runtime's sharded arrays, splits and
assembles the global arrays). The sharding attributes of the entry's parameters and results
go: they describe the global arrays, which the rewritten program no longer sees; they stay
on the module as `xhlo.global_entry` (`dialects/xhlo/global_entry.py`) for that caller. A
parameter or result that jit left to the compiler takes the sharding of its edge.

A value computed in `main` outside the body enters it unchanged only when its sharding is
replicated (every device holds it whole); sharded, it would need slicing per device, as
would an argument also used outside the body: those programs, and every program merely
partially manual, are left to the SPMD partitioner (`manual_program` says why). Changed:
the edges rewritten.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo import global_entry
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.dialects.xhlo.sharding import HloSharding, ShardingSyntaxError
from mlirxla.errors import location_text
from mlirxla.ir_queries import defining_op, entry_function, ops_where
from mlirxla.mlir import ir

from .erasure import erase
from .pass_base import ModulePass

CUSTOM_CALLS = frozenset({"xhlo.custom_call", "stablehlo.custom_call"})
TO_SHARD, TO_FULL, SHARDING_CALL = "SPMDFullToShardShape", "SPMDShardToFullShape", "Sharding"
ANNOTATIONS = frozenset({SHARDING_CALL, TO_SHARD, TO_FULL})
SHARDING_KEYS = ("xhlo.sharding", "mhlo.sharding")


def call_target(op: ir.Operation) -> str | None:
    return ir.StringAttr(op.attributes["call_target_name"]).value if op.name in CUSTOM_CALLS else None


def sharding_of(op: ir.Operation) -> HloSharding | None:
    if "xhlo.sharding" not in op.attributes:
        return None
    try:
        return HloSharding.parse(ir.StringAttr(op.attributes["xhlo.sharding"]).value)
    except ShardingSyntaxError:
        return None


def sole_user(value: ir.Value) -> ir.Operation | None:
    users = [use.owner for use in value.uses]
    return users[0].operation if len(users) == 1 else None


@dataclass(frozen=True)
class Entry:
    """One operand of the body: `to_shard` gives it its local type; `annotation` is the
    `@Sharding` before it; `argument` the entry parameter it comes from, if one."""

    to_shard: ir.Operation
    annotation: ir.Operation
    argument: int | None


@dataclass(frozen=True)
class Exit:
    """One result of the body: `to_full` gives it its global type; `annotation` the manual
    `@Sharding` before it."""

    to_full: ir.Operation
    annotation: ir.Operation


@dataclass(frozen=True)
class ManualProgram:
    """The edges of a fully manual `main`."""

    function: ir.Operation
    entries: tuple[Entry, ...]
    exits: tuple[Exit, ...]


def local_shape_problem(sharding: HloSharding, global_type: ir.Type, local_type: ir.Type) -> str | None:
    """Why `local_type` is not the shard of `global_type` under `sharding` (None: it is)."""
    if not isinstance(global_type, ir.RankedTensorType):  # a token passes through whole
        return None if global_type == local_type else f"{local_type} is not {global_type}"
    global_shape, local_shape = list(ir.RankedTensorType(global_type).shape), list(ir.RankedTensorType(local_type).shape)
    if sharding.kind in ("replicated", "manual"):
        tiles = [1] * len(global_shape)
    elif sharding.kind == "tiled" and not sharding.subgroup_types:
        tiles = list(sharding.tile_dims[:sharding.data_rank])
    else:
        return f"its sharding {sharding} is neither tiled over every device nor replicated"
    if len(tiles) != len(global_shape) or any(g != l * t for g, l, t in zip(global_shape, local_shape, tiles)):
        return f"{local_type} is not a shard of {global_type} under {sharding}"
    return None


def manual_program(module: ir.Module) -> ManualProgram | str:
    """The edges of `module`'s entry when it is manual over every device; else why not."""
    function = entry_function(module)
    if function is None:
        return "the module has no function"
    block = function.regions[0].blocks[0]
    arguments = {arg: index for index, arg in enumerate(block.arguments)}
    entries, exits, edge_ops = [], [], set()
    for to_shard in ops_where(module, lambda op: call_target(op) == TO_SHARD):
        where = location_text(to_shard.location)
        if sharding_of(to_shard) != HloSharding.manual():
            return f"the manual computation at {where} is manual over some mesh axes only"
        annotation = defining_op(to_shard.operands[0])
        if annotation is None or call_target(annotation) != SHARDING_CALL or sole_user(annotation.results[0]) != to_shard:
            return f"the operand of @{TO_SHARD} at {where} has no @Sharding of its own"
        if annotation.parent.operation != function:
            return f"the manual computation at {where} is nested in another computation"
        source = annotation.operands[0]
        argument = arguments.get(source) if isinstance(source.owner, ir.Block) else None
        if problem := local_shape_problem(sharding_of(annotation) or HloSharding.replicated(), source.type, to_shard.results[0].type):
            return f"operand of the manual computation at {where}: {problem}"
        declared = edge_sharding(function, "arg_attrs", argument) if argument is not None else None
        if declared is not None and str(declared) != str(sharding_of(annotation)):
            return f"argument #{argument} of @main is sharded {declared} but enters the manual computation at {where} as {sharding_of(annotation)}"
        if argument is None and source.type != to_shard.results[0].type:
            return f"a sharded operand of the manual computation at {where} is computed outside it"
        entries.append(Entry(to_shard, annotation, argument))
        edge_ops |= {to_shard, annotation}
    for to_full in ops_where(module, lambda op: call_target(op) == TO_FULL):
        where = location_text(to_full.location)
        annotation = defining_op(to_full.operands[0])
        if (annotation is None or call_target(annotation) != SHARDING_CALL or sharding_of(annotation) != HloSharding.manual()
                or sole_user(annotation.results[0]) != to_full):
            return f"the operand of @{TO_FULL} at {where} has no manual @Sharding of its own"
        if problem := local_shape_problem(sharding_of(to_full) or HloSharding.replicated(), to_full.results[0].type,
                                          annotation.operands[0].type):
            return f"result of the manual computation at {where}: {problem}"
        if to_full.results[0].type != annotation.operands[0].type and any(
                use.owner.operation.name != "func.return" for use in to_full.results[0].uses):
            return f"a sharded result of the manual computation at {where} is used outside it"
        exits.append(Exit(to_full, annotation))
        edge_ops |= {to_full, annotation}
    if not entries and not exits:
        return "it has no manual computation"
    if stray := next((op for op in ops_where(module, lambda op: call_target(op) in ANNOTATIONS) if op not in edge_ops), None):
        return f"its @{call_target(stray)} annotation at {location_text(stray.location)} is outside the manual computation"
    if tiled := next((op for op in ops_where(module, lambda op: is_tiled(sharding_of(op))) if op not in edge_ops), None):
        return f"{tiled.name} at {location_text(tiled.location)} is sharded {sharding_of(tiled)} outside the manual computation"
    rewritten = {entry.argument for entry in entries if entry.argument is not None}
    for index, argument in enumerate(block.arguments):
        local_types = {str(entry.to_shard.results[0].type) for entry in entries if entry.argument == index}
        if index in rewritten and (len(local_types) > 1 or any(call_target(use.owner.operation) != SHARDING_CALL
                                                               for use in argument.uses)):
            return f"argument #{index} of @main is used outside the manual computation"
        if index not in rewritten and is_tiled(edge_sharding(function, "arg_attrs", index)):
            return f"argument #{index} of @main is sharded but does not enter the manual computation"
    returned = block.operations[len(block.operations) - 1].operands
    exit_values = {exit_.to_full.results[0] for exit_ in exits}
    for index, value in enumerate(returned):
        declared = edge_sharding(function, "res_attrs", index)
        if value not in exit_values and is_tiled(declared):
            return f"result #{index} of @main is sharded but does not come out of the manual computation"
    return ManualProgram(function, tuple(entries), tuple(exits))


def is_tiled(sharding: HloSharding | None) -> bool:
    return sharding is not None and any(leaf.kind == "tiled" for leaf in sharding.leaves())


def edge_sharding(function: ir.Operation, key: str, index: int) -> HloSharding | None:
    """The sharding of the entry's parameter or result `index` (`key`: arg_attrs, res_attrs)."""
    if key not in function.attributes:
        return None
    attributes = ir.DictAttr(ir.ArrayAttr(function.attributes[key])[index])
    if "xhlo.sharding" not in attributes:
        return None
    try:
        return HloSharding.parse(ir.StringAttr(attributes["xhlo.sharding"]).value)
    except ShardingSyntaxError:
        return None


def is_manual_program(module: ir.Module) -> bool:
    return read_config(module).partition_count > 1 and isinstance(manual_program(module), ManualProgram)


def declare_edge_shardings(program: ManualProgram) -> None:
    """Gives each entry parameter and result that the manual computation reads or returns and
    that has no sharding of its own (jit left it to the compiler) the one the computation's
    edge gives it, as XLA's propagation would; jax reads it back from the executable."""
    function = program.function
    block = function.regions[0].blocks[0]
    for entry in program.entries:
        if entry.argument is not None and edge_sharding(function, "arg_attrs", entry.argument) is None:
            declare(function, "arg_attrs", entry.argument, len(block.arguments), sharding_of(entry.annotation))
    returned = list(block.operations[len(block.operations) - 1].operands)
    for exit_ in program.exits:
        for index, value in enumerate(returned):
            if value == exit_.to_full.results[0] and edge_sharding(function, "res_attrs", index) is None:
                declare(function, "res_attrs", index, len(returned), sharding_of(exit_.to_full))


def declare(function: ir.Operation, key: str, index: int, count: int, sharding: HloSharding | None) -> None:
    entries = list(ir.ArrayAttr(function.attributes[key])) if key in function.attributes else [ir.DictAttr.get({})] * count
    attributes = {named.name: named.attr for named in ir.DictAttr(entries[index])}
    attributes["xhlo.sharding"] = ir.StringAttr.get(str(sharding or HloSharding.replicated()))
    entries[index] = ir.DictAttr.get(attributes)
    function.attributes[key] = ir.ArrayAttr.get(entries)


def rewrite(module: ir.Module, program: ManualProgram) -> None:
    function = program.function
    declare_edge_shardings(program)
    global_entry.record(module, function)
    block = function.regions[0].blocks[0]
    for entry in program.entries:
        local = entry.to_shard.results[0]
        source = entry.annotation.operands[0]
        if entry.argument is not None:
            block.arguments[entry.argument].set_type(local.type)
        local.replace_all_uses_with(source)
        erase(entry.to_shard)
        erase(entry.annotation)
    for exit_ in program.exits:
        exit_.to_full.results[0].replace_all_uses_with(exit_.annotation.operands[0])
        erase(exit_.to_full)
        erase(exit_.annotation)
    returned = [value.type for value in block.operations[len(block.operations) - 1].operands]
    function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([arg.type for arg in block.arguments], returned))
    for key in ("arg_attrs", "res_attrs"):
        if key in function.attributes:
            function.attributes[key] = ir.ArrayAttr.get([
                ir.DictAttr.get({named.name: named.attr for named in ir.DictAttr(entry) if named.name not in SHARDING_KEYS})
                for entry in ir.ArrayAttr(function.attributes[key])])


@dataclass(frozen=True)
class ManualPartitionerPass(ModulePass):
    """Gives a program manual over every device its per-device parameters and results."""

    name: ClassVar[str] = "xhlo-manual-partitioner"
    summary: ClassVar[str] = "a program manual over every device (pmap, shard_map) becomes each device's program"

    def run(self, module: ir.Module) -> bool:
        if read_config(module).partition_count == 1:
            return False
        program = manual_program(module)
        if not isinstance(program, ManualProgram):
            return False
        with module.context, ir.Location.unknown():
            rewrite(module, program)
        return True
