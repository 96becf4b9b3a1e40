"""The module verifier (XLA's HloVerifier): per-op checks plus what spans ops.

Per-op checks run in each op's `verify_invariants` during MLIR verification. This pass adds
the checks that need more than one op or the module config (`xhlo.config`):

* collectives: the ids in `replica_groups` (and `source_target_pairs`) are in range for the
  op's group mode (`dialects/xhlo/process_groups.py`, XLA's `GetCollectiveOpGroupMode`):
  replica ids (< replica_count) without a channel or in cross_replica_and_partition mode,
  partition ids (< partition_count) in cross_partition mode, device ids (< replica_count *
  partition_count) with `use_global_device_ids`, which without a channel is refused. The
  groups of all_gather, reduce_scatter and all_to_all have one size, and their results
  hold one block per member of the process group the mode makes (StableHLO's own verifier
  knows the groups as listed, not the partitions a mode adds); -1 pads a shorter group.
* conditional: each branch computation is a function of the module whose inputs are the
  branch's operand types and whose results are the conditional's result types.
* xhlo.fusion: the fused computation holds only xhlo ops and ends in xhlo.return.
* entry computation layout: a function argument/result attribute `xhlo.layout` is an
  `array<i64>` permutation of the value's rank.
* shardings: `xhlo.sharding` on function arguments/results and on ops parses, fits the
  values' ranks and names devices below the module's device count.

Every refusal is an MlirxlaError `file:line:col: <op name>: <what is wrong>`.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.config import read_config
from mlirxla.dialects.xhlo.dialect import VerificationScope, verifying
from mlirxla.dialects.xhlo.process_groups import GROUP_OPS, channel_id, group_mode, id_count, id_unit, process_groups
from mlirxla.dialects.xhlo.sharding import value_problem
from mlirxla.dialects.xhlo.types import ints
from mlirxla.errors import MlirxlaError, first_line, location_text
from mlirxla.mlir import ir

from .pass_base import ModulePass

SHARDING = "xhlo.sharding"
LAYOUT = "xhlo.layout"
# ops whose result shapes hold one block per group member: their groups have one size
UNIFORM_GROUP_OPS = frozenset({"xhlo.all_gather", "xhlo.reduce_scatter", "xhlo.all_to_all"})


# the ops `ModuleChecks.check_op` looks at whatever their attributes (and any op with a sharding)
MODULE_CHECKED_OPS = frozenset(GROUP_OPS | {"xhlo.collective_permute", "xhlo.conditional", "xhlo.fusion"})


def verify_module(module: ir.Module, source: str = "<module>") -> None:
    """Raise MlirxlaError with the first diagnostic when `module` does not verify. MLIR's
    verifier calls each xhlo op's `verify_invariants`, which hands the scope the ops the module
    checks look at (`dialect.verifying`): they need no walk of their own (a Python call per op,
    about 2 ms on a module of 850 ops, twice a compile)."""
    scope = VerificationScope(module.context, MODULE_CHECKED_OPS)
    with verifying(scope):
        try:
            module.operation.verify()
        except ir.MLIRError as error:
            raise diagnostic_error(error, source) from None
    ModuleChecks(module, source).run(scope.noted)


def diagnostic_error(error: ir.MLIRError, source: str) -> MlirxlaError:
    """`file:line:col: message` of the first diagnostic (the location kept apart for `with_source`)."""
    diagnostics = getattr(error, "error_diagnostics", None) or []
    if diagnostics:
        return MlirxlaError(first_line(diagnostics[0].message), location_text(diagnostics[0].location, source))
    return MlirxlaError(first_line(error), source)


def _shape(attr: ir.Attribute) -> list[int]:
    return list(ir.ShapedType(ir.DenseElementsAttr(attr).type).shape)


class ModuleChecks:
    def __init__(self, module: ir.Module, source: str):
        self.module = module
        self.source = source
        self.config = read_config(module)
        self.functions = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.functions[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation

    def fail(self, op, problem: str) -> MlirxlaError:
        return MlirxlaError(f"{op.name}: {problem}", location_text(op.location, self.source))

    def run(self, noted: list[ir.Operation] | None = None) -> None:
        """The checks; on the ops `noted` when the verifier gathered them (every xhlo op that
        `check_op` looks at), else on every op of a walk. A failure among the noted ops is
        reported as the walk finds it: the first in the walk's order."""
        for function in self.functions.values():
            self.check_function(function)
        if noted is not None:
            try:
                for op in noted:
                    self.check_op(op)
                return
            except MlirxlaError:
                pass
        failures: list[MlirxlaError] = []

        def visit(op):
            op = op.operation
            try:
                self.check_op(op)
            except MlirxlaError as error:
                failures.append(error)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        self.module.operation.walk(visit)
        if failures:
            raise failures[0]

    # ------------------------------------------------------------ functions

    def check_function(self, function: ir.Operation) -> None:
        function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
        for key, types, what in (("arg_attrs", function_type.inputs, "argument"), ("res_attrs", function_type.results, "result")):
            if key not in function.attributes:
                continue
            for index, (entry, value_type) in enumerate(zip(ir.ArrayAttr(function.attributes[key]), types)):
                entries = {named.name: named.attr for named in ir.DictAttr(entry)}
                if LAYOUT in entries:
                    if problem := self.layout_problem(entries[LAYOUT], value_type):
                        raise self.fail(function, f"{what} #{index} {problem}")
                if SHARDING in entries:
                    if problem := value_problem(entries[SHARDING], [value_type], self.config.device_count):
                        raise self.fail(function, f"{what} #{index} sharding: {problem}")

    @staticmethod
    def layout_problem(attr: ir.Attribute, value_type: ir.Type) -> str | None:
        if not isinstance(attr, ir.DenseI64ArrayAttr):
            return f"layout must be an array<i64> minor-to-major permutation, got {attr}"
        if not isinstance(value_type, ir.RankedTensorType):
            return f"has a layout but is not a ranked tensor ({value_type})"
        values = list(ir.DenseI64ArrayAttr(attr))
        rank = ir.RankedTensorType(value_type).rank
        if sorted(values) != list(range(rank)):
            return f"layout {values} is not a permutation of the {rank} dimensions of {value_type}"
        return None

    # ------------------------------------------------------------ ops

    def check_op(self, op: ir.Operation) -> None:
        name = op.name
        if name in GROUP_OPS and "replica_groups" in op.attributes:
            self.check_replica_groups(op)
        elif name == "xhlo.collective_permute":
            self.check_source_target_pairs(op)
        elif name == "xhlo.conditional":
            self.check_conditional(op)
        elif name == "xhlo.fusion":
            self.check_fusion(op)
        if name.startswith("xhlo.") and SHARDING in op.attributes:
            types = [r.type for r in op.results]
            if problem := value_problem(op.attributes[SHARDING], types, self.config.device_count):
                raise self.fail(op, f"sharding: {problem}")

    def check_replica_groups(self, op: ir.Operation) -> None:
        attr = op.attributes["replica_groups"]
        if not isinstance(attr, ir.DenseIntElementsAttr):
            return  # the op's own verifier refuses it
        shape = _shape(attr)
        if len(shape) != 2:
            return
        try:
            mode = group_mode(op)
        except ValueError as error:
            raise self.fail(op, str(error)) from None
        count = id_count(mode, self.config)
        values = ints(attr)
        rows, width = shape
        groups = [[v for v in values[r * width : (r + 1) * width] if v != -1] for r in range(rows)]
        sizes = sorted({len(g) for g in groups})
        if len(sizes) > 1 and op.name in UNIFORM_GROUP_OPS:
            raise self.fail(op, f"replica groups differ in size ({', '.join(map(str, sizes))}): {groups}")
        unit = id_unit(mode)
        for group in groups:
            for member in group:
                if not 0 <= member < count:
                    raise self.fail(
                        op,
                        f"{unit} id {member} in replica_groups is out of range [0, {count}) in {mode} mode "
                        f"(replica_count={self.config.replica_count}, partition_count={self.config.partition_count})",
                    )
        if op.name in UNIFORM_GROUP_OPS and groups:
            self.check_blocks(op, mode, len(process_groups(mode, groups, self.config)[0]))

    def check_blocks(self, op: ir.Operation, mode: str, members: int) -> None:
        """A result holds one block per member of the op's process group, whose size the
        mode decides (in cross_replica_and_partition mode, every partition of each replica
        listed joins)."""
        def refuse(what: str):
            raise self.fail(op, f"{what}, but its process groups have {members} members in {mode} mode "
                                f"(replica_count={self.config.replica_count}, partition_count={self.config.partition_count})")
        if op.name == "xhlo.all_to_all":
            if (count := ir.IntegerAttr(op.attributes["split_count"]).value) != members:
                refuse(f"split_count is {count}")
            return
        key = "all_gather_dim" if op.name == "xhlo.all_gather" else "scatter_dimension"
        dimension = ir.IntegerAttr(op.attributes[key]).value
        for operand, result in zip(op.operands, op.results):
            before, after = ir.ShapedType(operand.type), ir.ShapedType(result.type)
            if not (before.has_static_shape and after.has_static_shape):
                continue
            small, large = (before, after) if op.name == "xhlo.all_gather" else (after, before)
            if large.shape[dimension] != small.shape[dimension] * members:
                refuse(f"dimension {dimension} goes from {before.shape[dimension]} to {after.shape[dimension]}")

    def check_source_target_pairs(self, op: ir.Operation) -> None:
        if "source_target_pairs" not in op.attributes:
            return
        attr = op.attributes["source_target_pairs"]
        if not isinstance(attr, ir.DenseIntElementsAttr):
            return
        channel = channel_id(op)
        count, unit = (self.config.partition_count, "partition") if channel is not None else (self.config.replica_count, "replica")
        values = ints(attr)
        for member in values:
            if not 0 <= member < count:
                raise self.fail(op, f"{unit} id {member} in source_target_pairs is out of range [0, {count})")
        pairs = list(zip(values[0::2], values[1::2]))
        sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
        if len(set(sources)) != len(sources) or len(set(targets)) != len(targets):
            raise self.fail(op, f"source_target_pairs {pairs} repeat a source or a target")

    def check_conditional(self, op: ir.Operation) -> None:
        if "branch_computations" not in op.attributes or "branch_operand_counts" not in op.attributes:
            return
        branches = [ir.FlatSymbolRefAttr(a).value for a in ir.ArrayAttr(op.attributes["branch_computations"])]
        counts = ints(op.attributes["branch_operand_counts"])
        operands = list(op.operands)[1:]
        results = [str(r.type) for r in op.results]
        start = 0
        for index, (branch, count) in enumerate(zip(branches, counts)):
            expected = [str(v.type) for v in operands[start : start + count]]
            start += count
            if branch not in self.functions:
                raise self.fail(op, f"branch computation @{branch} (branch {index}) is not a function of the module")
            function_type = ir.FunctionType(ir.TypeAttr(self.functions[branch].attributes["function_type"]).value)
            inputs = [str(t) for t in function_type.inputs]
            outputs = [str(t) for t in function_type.results]
            if inputs != expected:
                raise self.fail(op, f"branch {index} @{branch} takes ({', '.join(inputs)}) but gets ({', '.join(expected)})")
            if outputs != results:
                raise self.fail(op, f"branch {index} @{branch} returns ({', '.join(outputs)}) but the conditional returns ({', '.join(results)})")

    def check_fusion(self, op: ir.Operation) -> None:
        region = op.regions[0]
        blocks = list(region.blocks)
        if len(blocks) != 1:
            raise self.fail(op, f"fused computation must have exactly one block, has {len(blocks)}")
        operations = list(blocks[0].operations)
        if not operations or operations[-1].operation.name != "xhlo.return":
            last = operations[-1].operation.name if operations else "nothing"
            raise self.fail(op, f"fused computation must end in xhlo.return, ends in {last}")
        foreign: list[ir.Operation] = []

        def visit(inner):
            if not inner.operation.name.startswith("xhlo."):
                foreign.append(inner.operation)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        for inner in operations:
            inner.operation.walk(visit)
            if foreign:
                raise self.fail(op, f"fused computation holds a non-xhlo op '{foreign[0].name}'")


@dataclass(frozen=True)
class VerifierPass(ModulePass):
    """Runs the module verifier as a pass; fails the pipeline with the first diagnostic."""

    name: ClassVar[str] = "xhlo-verify"
    summary: ClassVar[str] = "the xhlo verifier (per-op checks and the module-level checks)"

    def run(self, module: ir.Module) -> bool:
        verify_module(module, "-")
        return False
