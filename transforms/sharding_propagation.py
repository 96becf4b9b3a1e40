"""xhlo-sharding-propagation: give every value of a module for several partitions a sharding,
from the few the user wrote (Shardy's propagation, `shardy/dialect/sdy/transforms/propagation/`,
which is what jax 0.10 asks XLA for; GSPMD's `mhlo.sharding` input is read the same way).

What it decides, and why:

* **The mesh.** Shardings are reasoned about as mesh axes per dimension
  (`dialects/xhlo/mesh_sharding.py`), over the sdy mesh the front door recorded
  (`xhlo.meshes`, with the user's axis names) or, for GSPMD input, a mesh of the partition
  count's prime factors named `_0`, `_1`, ... A user sharding no order of the mesh axes
  produces (an arbitrary device list) stays where it is and propagates nothing.
* **Seeds win.** Entry arguments, results and ops that carry `xhlo.sharding`, and the
  `@Sharding` custom calls that `with_sharding_constraint` and `sdy.sharding_constraint`
  become, are fixed: propagation never changes them, and where an inferred sharding would
  conflict with one, the user's wins. A constraint's open dims (Shardy's `{?}` and
  `{"x", ?}`, jax's unconstrained dims and automatic axes: `xhlo.open_dims`) stay open: they
  keep the user's axes as a prefix and grow like inferred dims. Entry arguments without a
  sharding are replicated and fixed, as XLA does with
  `allow_spmd_sharding_propagation_to_parameters=false`, but for those the module config
  opens (`xhlo.config`'s `open_parameters`: jax's unspecified `in_shardings`, an argument
  not yet placed): propagation chooses theirs like any inferred value's, and the caller
  shards the argument as chosen (`shard_alike(x, numpy_array)` shards the numpy array like
  `x`). Unannotated entry results are open (`..._to_output=true`).
* **Factor rules** (`transforms/sharding_rules.py`): each op maps its operand and result
  dims to factors; a factor sharded on some axes in one tensor is proposed to every tensor that
  has it. Per factor, the proposal is the longest axis list every tensor's axes are a prefix
  of (Shardy's compatible major axes); tensors that disagree keep the common prefix (a
  conflict, reported); a fixed tensor's axes are taken first and inferred ones that disagree
  with them are ignored. An axis already sharding another factor of the same tensor is cut;
  an axis offered to two factors of one tensor goes to the factor whose proposal comes from
  the larger tensor, ties to the lower factor (Shardy's aggressive propagation: `a @ b` of
  `P("x", "y")` by `P("y", "x")` is rows on "x"), and is cut from the other; the axes must divide the
  factor and the dimension (no padding is introduced by propagation); a factor that needs
  replication (a sort dimension, a dynamic_slice's sliced dims, gather index dims) never
  propagates. Shardings only grow: an inferred dim's axes can be extended, never changed, so
  the iteration ends.
* **Order.** Sweeps over the ops, forward in program order then backward, until nothing
  changes; first without reduction factors, then with them. A contracting dim carries a
  sharding from one operand to the other only once nothing else propagates: the attention
  probabilities of a transformer otherwise take the sequence axis on the key dimension from
  `v`, where XLA puts it on the query dimension (from the residual add, backward). Shardy's
  user priorities `p0..` are not modelled (the import drops them).
* **Sharding groups** (`shard_alike`, `sdy.sharding_group`, which the front door puts on the
  values' defining ops or arguments as `xhlo.sharding_group`): the members share one sharding
  (identity links from the first), followed after every change anywhere, so that a member's
  new axes reach the others before their own ops offer them other axes.
* **Control flow.** A while's operand, body and cond arguments, body results and results
  share one sharding (identity links); a conditional's operands and its branch functions'
  arguments, and the branches' returned values and its results, likewise; so do calls that
  the front door did not inline.
* **shard_map stays manual.** Values between `@SPMDFullToShardShape` and
  `@SPMDShardToFullShape` (and constants only they use) are manual on the region's manual
  axes; propagation does not enter the region, and the edges keep their user shardings.
* **Output for the partitioner.** Every op with tensor results in the entry function, while
  bodies and branch functions gets `xhlo.sharding` in XLA's syntax (a tuple sharding for
  several results); unannotated entry results get it in `res_attrs`. A value propagation
  reached with nothing is `{replicated}`. Dims a dot or reduce contracts over sharded
  operands leave partial sums: the report says which axes, the partitioner all-reduces them.

Every seed, every growth of a value's sharding (which op, forward or backward, from which
tensor, and the seed it came from through which ops), every conflict and every op without a
rule go to the report, dumped as `sharding-propagation.txt`; `explain(report, query)` answers
`mlirxla-opt --explain-sharding=OP` from it. The pass does nothing on one partition or
without any sharding annotation. Changed: any `xhlo.sharding` written.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import ClassVar

from mlirxla.dialects.xhlo.config import read_config
from mlirxla.dialects.xhlo.mesh_sharding import DeviceMesh, MeshSharding, from_hlo, meshes_of, prime_factors, to_hlo
from mlirxla.dialects.xhlo.sharding import HloSharding, parse_attribute
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import entry_function, function_name, module_functions
from mlirxla.mlir import ir

from .erasure import processing
from .pass_base import ModulePass, PassReport, PassResult
from .sharding_rules import Factor, OpRule, rule_for

SHARDING = "xhlo.sharding"
SHARDING_GROUP = "xhlo.sharding_group"  # the front door's form of `sdy.sharding_group`
OPEN_DIMS = "xhlo.open_dims"  # the front door's form of a constraint's open dims (`{?}`)
ANNOTATION = "Sharding"
INSPECTION = "InspectSharding"  # returns its operand, whose sharding `inspect_sharding.py` reports
TO_SHARD, TO_FULL = "SPMDFullToShardShape", "SPMDShardToFullShape"
CUSTOM_CALLS = ("xhlo.custom_call", "stablehlo.custom_call")


# ---------------------------------------------------------------- the state of one tensor


@dataclass(frozen=True)
class Hop:
    site: str  # the op, as the report names it
    direction: str  # forward | backward | sideways (operand to operand)


@dataclass(frozen=True)
class Origin:
    """Where a dimension's axes came from: a seed, then the ops they crossed."""

    seed: str
    hops: tuple[Hop, ...] = ()

    def then(self, hop: Hop) -> "Origin":
        return Origin(self.seed, self.hops + (hop,))

    def text(self) -> str:
        path = "".join(f" -> {h.site} ({h.direction})" for h in self.hops)
        return f"{self.seed}{path}"


@dataclass
class Tensor:
    """A value (or an entry result slot) and its sharding as propagation builds it."""

    name: str
    shape: tuple[int, ...]
    dims: list[tuple[int, ...]]
    fixed: bool = False
    seed: str | None = None  # why it is fixed
    open: frozenset[int] = frozenset()  # a fixed tensor's dims propagation may still shard further
    manual: tuple[int, ...] | None = None  # inside shard_map: manual on these axes
    hlo: HloSharding | None = None  # a fixed sharding with no mesh form
    origins: list[Origin | None] = field(default_factory=list)

    def sharding(self) -> MeshSharding:
        return MeshSharding(tuple(self.dims), self.manual or ())


@dataclass
class Site:
    """One op (or identity link) propagation runs through."""

    label: str
    operands: list[Tensor]
    results: list[Tensor]
    rule: OpRule


# ---------------------------------------------------------------- the report


@dataclass
class ShardingReport(PassReport):
    """Everything propagation decided, as text lines grouped by section, and per value its
    final sharding and the origin of each dimension (what `explain` reads)."""

    mesh: str
    seeds: list[str]
    events: list[str]
    conflicts: list[str]
    unsupported: list[str]
    values: dict[str, list[str]]  # value name -> lines: sharding, then one per dim
    partial_sums: list[str] = field(default_factory=list)
    rounds: int = 0

    def text(self) -> str:
        lines = [f"sharding propagation over mesh {self.mesh} ({self.rounds} rounds)", "", "seeds (user shardings, fixed):"]
        lines += [f"  {s}" for s in self.seeds] or ["  none"]
        lines += ["", "propagation steps (in order):"]
        lines += [f"  {e}" for e in self.events] or ["  none"]
        lines += ["", "conflicts:"]
        lines += [f"  {c}" for c in self.conflicts] or ["  none"]
        lines += ["", "partial sums (reductions over sharded dims, for the partitioner to combine):"]
        lines += [f"  {p}" for p in self.partial_sums] or ["  none"]
        lines += ["", "ops without a sharding rule (their results are replicated):"]
        lines += [f"  {u}" for u in self.unsupported] or ["  none"]
        lines += ["", "final shardings:"]
        for name, entry in self.values.items():
            lines.append(f"  {name}: {entry[0]}")
            lines += [f"    {line}" for line in entry[1:]]
        return "\n".join(lines) + "\n"

    def dump_files(self) -> dict[str, str]:
        return {"sharding-propagation.txt": self.text()}


def explain(report: ShardingReport, query: str) -> str:
    """Where the sharding of the values matching `query` (a value name such as `%3` or
    `@main result #0`, an op kind such as `dot`, a location) came from."""
    hits = [name for name in report.values if _matches(name, query)]
    if not hits:
        return f"no value matches '{query}' (values are named as in sharding-propagation.txt, e.g. '%3 = xhlo.dot at file:4:10')"
    lines = []
    for name in hits:
        lines.append(f"{name}: {report.values[name][0]}")
        lines += [f"  {line}" for line in report.values[name][1:]]
        short = name.split(" at ")[0]
        steps = [e for e in report.events if short in e]
        clashes = [c for c in report.conflicts if short in c]
        lines += [f"  step: {e}" for e in steps]
        lines += [f"  conflict: {c}" for c in clashes]
        lines += [f"  partial sum: {p}" for p in report.partial_sums if short in p]
    return "\n".join(lines)


def fixed_for(tensor: Tensor, dims, factor: int) -> bool:
    """Whether `factor` sits on a dim of `tensor` that propagation must not change: a fixed
    tensor's dims, but for its open ones."""
    return tensor.fixed and not any(factor in dims[d] for d in tensor.open)


def _matches(name: str, query: str) -> bool:
    head = name.split(" at ")[0]
    value = head.split(" = ")[0]
    if query in (value, head, name) or query in value.split(", "):
        return True
    kind = head.split(" = ")[1] if " = " in head else ""
    if query in (kind, kind.removeprefix("xhlo.")):
        return True
    return " at " in name and query in name.split(" at ", 1)[1]


# ---------------------------------------------------------------- the pass


@dataclass(frozen=True)
class ShardingPropagationPass(ModulePass):
    """Propagates user shardings to every value (see the module docstring)."""

    name: ClassVar[str] = "xhlo-sharding-propagation"
    summary: ClassVar[str] = "give every value a sharding from the user's, by Shardy's factor rules"

    def run(self, module: ir.Module) -> bool | PassResult:
        if read_config(module).partition_count == 1 or not _has_shardings(module):
            return False
        propagation = _Propagation(module)
        propagation.run()
        changed = propagation.write()
        return PassResult(changed, propagation.report())


def _has_shardings(module: ir.Module) -> bool:
    found = False

    def visit(op):
        nonlocal found
        if SHARDING in op.attributes or (op.name == "func.func" and any(key in op.attributes and SHARDING in str(op.attributes[key]) for key in ("arg_attrs", "res_attrs"))):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _target(op) -> str | None:
    if op.name in CUSTOM_CALLS:
        return ir.StringAttr(op.attributes["call_target_name"]).value
    return None


def _parse(attr, where: str) -> HloSharding:
    try:
        return parse_attribute(attr)
    except (TypeError, ValueError) as error:
        raise MlirxlaError(f"{where}: {error}") from None


def _identity(dims_shape) -> OpRule:
    """One operand, one result, the same factor per dimension."""
    dims = tuple((d,) for d in range(len(dims_shape)))
    return OpRule(tuple(Factor(s) for s in dims_shape), (dims,), (dims,))


class _Propagation:
    def __init__(self, module: ir.Module):
        self.module = module
        self.config = read_config(module)
        self.mesh = self.choose_mesh()
        self.tensors: dict[object, Tensor] = {}  # ir.Value or ("result", function, index)
        self.sites: list[Site] = []
        self.seeds: list[str] = []
        self.events: list[str] = []
        self.conflicts: dict[tuple[str, int], str] = {}
        self.unsupported: list[str] = []
        self.annotated: list[tuple[ir.Operation, list[Tensor]]] = []
        self.groups: dict[int, list[Tensor]] = defaultdict(list)  # shard_alike's sharding groups
        self.open_arguments: dict[int, Tensor] = {}  # unannotated entry arguments propagation shards
        self.group_sites: list[Site] = []  # sharding groups' links, followed after every change
        self.entry = entry_function(module)
        self.functions = {function_name(f): f for f in module_functions(module)}
        self.names: dict[str, ir.AsmState] = {}
        self.rounds = 0
        self.walked: set[str] = set()
        self.partial: dict[tuple, str] = {}
        self.build()

    # ------------------------------------------------------------ mesh

    def choose_mesh(self) -> DeviceMesh:
        """The recorded sdy mesh of the partition count, else its prime factors as axes."""
        for mesh in meshes_of(self.module.operation.attributes).values():
            if mesh.size == self.config.partition_count:
                return mesh
        primes = prime_factors(self.config.partition_count)
        return DeviceMesh.of([(f"_{i}", p) for i, p in enumerate(primes)])

    # ------------------------------------------------------------ naming

    def value_name(self, value: ir.Value, function) -> str:
        key = function_name(function)
        if key not in self.names:
            self.names[key] = ir.AsmState(function)
        name = value.get_name(self.names[key])
        return name if function == self.entry else f"@{key} {name}"

    def op_label(self, op, function) -> str:
        results = ", ".join(self.value_name(r, function) for r in op.results)
        where = location_text(op.location)
        head = f"{results} = {op.name}" if results else op.name
        return f"{head} at {where}"

    # ------------------------------------------------------------ building the graph

    def tensor(self, key, name: str, value_type) -> Tensor | None:
        if key in self.tensors:
            return self.tensors[key]
        if not isinstance(value_type, ir.RankedTensorType):
            return None
        dims_shape = tuple(ir.RankedTensorType(value_type).shape)
        tensor = Tensor(name, dims_shape, [() for _ in dims_shape], origins=[None for _ in dims_shape])
        self.tensors[key] = tensor
        return tensor

    def value_tensor(self, value: ir.Value, function, label: str | None = None) -> Tensor | None:
        return self.tensor(value, label or self.value_name(value, function), value.type)

    def fix(self, tensor: Tensor, hlo: HloSharding, seed: str) -> None:
        tensor.fixed, tensor.seed = True, seed
        sharding = from_hlo(hlo, self.mesh, len(tensor.shape))
        if sharding is None:
            tensor.hlo = hlo
            self.seeds.append(f"{seed}: {hlo} (no form on the mesh: kept, not propagated)")
            return
        tensor.dims = list(sharding.dims)
        if sharding.manual:
            tensor.manual = sharding.manual
        tensor.origins = [Origin(seed) if axes else None for axes in tensor.dims]
        self.seeds.append(f"{seed}: {sharding.text(self.mesh)} = {hlo}")

    def build(self) -> None:
        if self.entry is None:
            return
        function = self.entry
        block = function.regions[0].blocks[0]
        arg_attrs = list(ir.ArrayAttr(function.attributes["arg_attrs"])) if "arg_attrs" in function.attributes else []
        for index, argument in enumerate(block.arguments):
            tensor = self.value_tensor(argument, function)
            if tensor is None:
                continue
            attributes = ir.DictAttr(arg_attrs[index]) if index < len(arg_attrs) else None
            if attributes is not None and SHARDING in attributes:
                self.fix(tensor, _parse(attributes[SHARDING], f"argument #{index}"), f"argument #{index} {tensor.name} of @{function_name(function)} (user)")
            elif index in self.config.open_parameters:
                self.open_arguments[index] = tensor
            else:
                self.fix(tensor, HloSharding.replicated(), f"argument #{index} {tensor.name} of @{function_name(function)} (unannotated: replicated, as XLA for jax)")
            if attributes is not None and SHARDING_GROUP in attributes:
                self.groups[ir.IntegerAttr(attributes[SHARDING_GROUP]).value].append(tensor)
        self.walk_block(block, function, entry=True)
        for group, members in sorted(self.groups.items()):
            for member in members[1:]:
                self.link(f"sharding group {group}", members[0], member, into=self.group_sites)
        self.mark_manual()

    def walk_block(self, block, function, entry: bool = False) -> None:
        for op in block.operations:
            processing(op)
            self.visit(op, function, entry)

    def visit(self, op, function, entry: bool) -> None:
        name = op.name
        label = self.op_label(op, function)
        where = location_text(op.location)
        results = [self.value_tensor(r, function, f"{self.value_name(r, function)} = {name} at {where}") for r in op.results]
        if name == "func.return":
            if entry:
                self.link_entry_results(op, function)
            return
        if name == "xhlo.return":
            return
        if any(r is not None for r in results):
            self.annotated.append((op, results))
        if SHARDING_GROUP in op.attributes:
            for result, group in zip(results, ir.DenseI64ArrayAttr(op.attributes[SHARDING_GROUP])):
                if result is not None and group >= 0:
                    self.groups[group].append(result)
        target = _target(op)
        operands = [self.value_tensor(v, function) for v in op.operands]
        if SHARDING in op.attributes and target not in (TO_SHARD,):
            self.fix_op(op, results, label)
        if target in (ANNOTATION, INSPECTION) and operands[0] is not None and results[0] is not None:
            self.sites.append(Site(label, [operands[0]], [results[0]], _identity(operands[0].shape)))
            return
        if target in (TO_SHARD, TO_FULL):
            if target == TO_SHARD and results[0] is not None:
                self.fix_op(op, results, label)
                if results[0].manual is None:
                    results[0].manual = tuple(range(len(self.mesh.axes)))
            return
        if name == "xhlo.while":
            self.link_while(op, function, label, operands, results)
            return
        if name == "xhlo.conditional":
            self.link_conditional(op, function, label, operands, results)
            return
        if name in ("xhlo.call", "func.call"):
            self.link_call(op, function, label, operands, results)
            return
        if name == "xhlo.optimization_barrier":
            for operand, result in zip(operands, results):
                if operand is not None and result is not None:
                    self.sites.append(Site(label, [operand], [result], _identity(operand.shape)))
            return
        if name == "xhlo.constant" or not any(r is not None for r in results):
            return
        rule = rule_for(op)
        if rule is None:
            self.unsupported.append(label)
            return
        self.sites.append(Site(label, [t for t in operands], [t for t in results], rule))

    def fix_op(self, op, results: list[Tensor | None], label: str) -> None:
        hlo = _parse(op.attributes[SHARDING], label)
        leaves = hlo.elements if hlo.kind == "tuple" else tuple(hlo for _ in results)
        for result, leaf in zip(results, leaves):
            if result is not None:
                self.fix(result, leaf, f"{label} (user)")
        if OPEN_DIMS in op.attributes and len(results) == 1 and results[0] is not None and results[0].hlo is None:
            results[0].open = frozenset(d for d in ir.DenseI64ArrayAttr(op.attributes[OPEN_DIMS]) if 0 <= d < len(results[0].shape))
            self.seeds[-1] += f" (dims {', '.join(map(str, sorted(results[0].open)))} open)"

    def link_entry_results(self, op, function) -> None:
        res_attrs = list(ir.ArrayAttr(function.attributes["res_attrs"])) if "res_attrs" in function.attributes else []
        for index, value in enumerate(op.operands):
            slot = self.tensor(("result", index), f"@{function_name(function)} result #{index}", value.type)
            returned = self.value_tensor(value, function)
            if slot is None or returned is None:
                continue
            attributes = ir.DictAttr(res_attrs[index]) if index < len(res_attrs) else None
            if attributes is not None and SHARDING in attributes:
                self.fix(slot, _parse(attributes[SHARDING], f"result #{index}"), f"result #{index} of @{function_name(function)} (user)")
            self.sites.append(Site(f"return #{index} of @{function_name(function)}", [returned], [slot], _identity(slot.shape)))

    def link(self, label: str, source: Tensor | None, target: Tensor | None, into: list[Site] | None = None) -> None:
        if source is not None and target is not None and source.shape == target.shape:
            (self.sites if into is None else into).append(Site(label, [source], [target], _identity(source.shape)))

    def link_while(self, op, function, label, operands, results) -> None:
        cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
        for index, operand in enumerate(operands):
            body_argument = self.value_tensor(body.arguments[index], function)
            cond_argument = self.value_tensor(cond.arguments[index], function)
            self.link(label, operand, results[index])
            self.link(label, operand, body_argument)
            self.link(label, operand, cond_argument)
        self.walk_block(cond, function)
        self.walk_block(body, function)
        terminator = list(body.operations)[-1]
        for index, value in enumerate(terminator.operands):
            self.link(label, self.value_tensor(value, function), results[index])
            self.link(label, self.value_tensor(value, function), self.value_tensor(body.arguments[index], function))

    def callee_link(self, label, callee_name: str, operands, results) -> None:
        callee = self.functions.get(callee_name)
        if callee is None:
            return
        block = callee.regions[0].blocks[0]
        for operand, argument in zip(operands, block.arguments):
            self.link(label, operand, self.value_tensor(argument, callee))
        if callee_name not in self.walked:
            self.walked.add(callee_name)
            self.walk_block(block, callee)
        terminator = list(block.operations)[-1]
        for value, result in zip(terminator.operands, results):
            self.link(label, self.value_tensor(value, callee), result)

    def link_conditional(self, op, function, label, operands, results) -> None:
        branches = [ir.FlatSymbolRefAttr(b).value for b in ir.ArrayAttr(op.attributes["branch_computations"])]
        counts = list(ir.DenseI64ArrayAttr(op.attributes["branch_operand_counts"]))
        start = 1
        for branch, count in zip(branches, counts):
            self.callee_link(label, branch, operands[start:start + count], results)
            start += count

    def link_call(self, op, function, label, operands, results) -> None:
        attr = op.attributes["callee"]
        self.callee_link(label, ir.FlatSymbolRefAttr(attr).value, operands, results)

    # ------------------------------------------------------------ shard_map

    def mark_manual(self) -> None:
        """Manual: what the manual edges' results flow into, then what only manual ops read
        (a constant of the body); ops touching a manual value drop out of propagation."""
        if not any(t.manual is not None for t in self.tensors.values()):
            return
        users: dict[int, list[Site]] = defaultdict(list)
        for site in self.sites:
            for t in site.operands:
                if t is not None:
                    users[id(t)].append(site)
        changed = True
        while changed:
            changed = False
            for site in self.sites:
                inside = [t for t in site.operands if t is not None and t.manual is not None]
                for t in site.results if inside else ():
                    if t is not None and t.manual is None and not t.fixed:
                        t.manual, changed = inside[0].manual, True
            for t in self.tensors.values():
                sites = users.get(id(t), [])
                if t.manual is None and not t.fixed and sites and all(any(r is not None and r.manual is not None for r in s.results) for s in sites):
                    t.manual = next(r.manual for r in sites[0].results if r is not None and r.manual is not None)
                    changed = True
        self.sites = [s for s in self.sites if not any(t is not None and t.manual is not None for t in s.operands + s.results)]

    # ------------------------------------------------------------ propagation

    def run(self) -> None:
        for skipped in (("replication", "reduction"), ("replication",)):
            changed = True
            while changed:
                self.rounds += 1
                changed = self.follow_groups(skipped)
                for site in self.sites:
                    changed |= self.propagate_then_groups(site, skipped)
                for site in reversed(self.sites):
                    changed |= self.propagate_then_groups(site, skipped)

    def propagate_then_groups(self, site: Site, skipped: tuple[str, ...]) -> bool:
        """`site`, and when it changed a sharding, the sharding groups at once: a member's
        new axes reach the others before their own ops offer them any (Shardy keeps a group
        as one sharding), so `shard_alike(y, z)` gives z y's sharding where z's dot alone
        would have put y's minor axis on another dim."""
        if not self.propagate(site, skipped):
            return False
        self.follow_groups(skipped)
        return True

    def follow_groups(self, skipped: tuple[str, ...]) -> bool:
        changed = False
        while any([self.propagate(link, skipped) for link in self.group_sites]):
            changed = True
        return changed

    def factor_axes(self, tensor: Tensor, dims_factors, rule: OpRule) -> dict[int, tuple[int, ...]] | None:
        """The tensor's axes per factor: each dim's axes dealt to its factors, major first; None
        when a dim's axes do not split along its factors."""
        result: dict[int, tuple[int, ...]] = {}
        for dim, factors in enumerate(dims_factors):
            axes = list(tensor.dims[dim])
            for position, f in enumerate(factors):
                size, taken, product = rule.factors[f].size, [], 1
                while axes and size % (product * self.mesh.axes[axes[0]].size) == 0:
                    product *= self.mesh.axes[axes[0]].size
                    taken.append(axes.pop(0))
                result[f] = tuple(taken)
                if product != size and axes:
                    return None
            if axes:
                return None
        return result

    def propagate(self, site: Site, skipped: tuple[str, ...]) -> bool:
        rule = site.rule
        tensors = [(t, dims, "operand", i) for i, (t, dims) in enumerate(zip(site.operands, rule.operands)) if t is not None]
        tensors += [(t, dims, "result", i) for i, (t, dims) in enumerate(zip(site.results, rule.results)) if t is not None]
        projected = []
        for t, dims, side, index in tensors:
            if t.hlo is not None:
                continue
            axes = self.factor_axes(t, dims, rule)
            if axes is not None:
                projected.append((t, dims, side, index, axes))
        proposals: dict[int, tuple[tuple[int, ...], tuple]] = {}
        for f, factor in enumerate(rule.factors):
            if factor.kind in skipped:
                continue
            entries = [(t, side, index, axes[f], fixed_for(t, dims, f)) for t, dims, side, index, axes in projected if f in axes]
            chosen = self.compatible(site, f, entries)
            if chosen is None:
                continue
            axes, contributor = chosen
            product = 1
            kept = []
            for a in axes:
                product *= self.mesh.axes[a].size
                if factor.size % product:
                    break
                kept.append(a)
            if kept:
                proposals[f] = (tuple(kept), contributor)
        if not proposals:
            return False
        # factors that offer one tensor the same axis: the one from the largest tensor takes it,
        # ties to the lower factor (Shardy's aggressive propagation orders factors so)
        order = sorted(proposals, key=lambda f: (-math.prod(proposals[f][1][0].shape), f))
        rank = {f: position for position, f in enumerate(order)}
        for t, dims, side, index, axes in projected:
            mine = {f for dim in dims for f in dim}
            for f in order:
                if f not in mine:
                    continue
                others = set()
                for g in mine - {f}:
                    others |= set(axes.get(g, ()))
                    if g in rank and rank[g] < rank[f]:
                        others |= set(proposals[g][0])
                cut = []
                for a in proposals[f][0]:
                    if a in others:
                        break
                    cut.append(a)
                if len(cut) < len(proposals[f][0]) and not fixed_for(t, dims, f) and (site.label, -1 - f) not in self.conflicts:
                    self.conflicts[(site.label, -1 - f)] = (
                        f"{site.label}: factor {f} would take {self.axes(proposals[f][0])} but {t.name.split(' at ')[0]} "
                        f"has (or is offered) {self.axes(sorted(others & set(proposals[f][0])))} on another dim: it propagates {self.axes(cut)}"
                    )
                proposals[f] = (tuple(cut), proposals[f][1])
        changed = False
        for t, dims, side, index, axes in projected:
            if (t.fixed and not t.open) or t.manual is not None:
                continue
            changed |= self.update(site, t, dims, side, index, axes, proposals, rule)
        self.note_partial_sums(site, projected)
        return changed

    def note_partial_sums(self, site: Site, projected) -> None:
        """A reduction factor sharded on an operand leaves partial sums over its axes."""
        if not site.results:
            return
        for f, factor in enumerate(site.rule.factors):
            if factor.kind != "reduction" or (site.label, "partial", f) in self.partial:
                continue
            axes = next((axes[f] for t, dims, side, index, axes in projected if side == "operand" and axes.get(f)), ())
            if axes:
                self.partial[(site.label, "partial", f)] = f"{site.label}: reduces over factor {f} sharded {self.axes(axes)}: the result is a partial sum over {self.axes(axes)} (all-reduce, or reduce-scatter)"

    def compatible(self, site: Site, factor: int, entries):
        """The longest axes every entry agrees with, fixed entries first; (axes, contributor)."""
        ordered = [e for e in entries if e[4]] + [e for e in entries if not e[4]]
        chain: tuple[int, ...] = ()
        contributor = None
        fixed_chain = False
        for t, side, index, axes, fixed in ordered:
            if not axes:
                continue
            if axes[: len(chain)] == chain:
                if len(axes) > len(chain):
                    chain, contributor = axes, (t, side, index)
                    fixed_chain = fixed
                continue
            if chain[: len(axes)] == axes:
                continue
            key = (site.label, factor)
            if key not in self.conflicts:
                held = contributor[0].name if contributor else "?"
                if fixed_chain and not fixed:
                    verdict = f"kept {self.axes(chain)} from {held} (user sharding wins); {t.name} is resharded"
                    self.conflicts[key] = f"{site.label}: factor {factor} is {self.axes(chain)} on {held} but {self.axes(axes)} on {t.name}: {verdict}"
                else:
                    common = self.common(chain, axes)
                    self.conflicts[key] = (
                        f"{site.label}: factor {factor} is {self.axes(chain)} on {held} but {self.axes(axes)} on {t.name}: "
                        f"only the common prefix {self.axes(common)} propagates; the partitioner reshards the rest"
                    )
            if not (fixed_chain and not fixed):
                chain = self.common(chain, axes)
                if not chain:
                    contributor = None
        if not chain or contributor is None:
            return None
        return chain, contributor

    @staticmethod
    def common(a, b) -> tuple[int, ...]:
        out = []
        for x, y in zip(a, b):
            if x != y:
                break
            out.append(x)
        return tuple(out)

    def axes(self, axes) -> str:
        return "{" + self.mesh.axes_text(axes) + "}"

    def update(self, site, t: Tensor, dims, side, index, current, proposals, rule) -> bool:
        used_elsewhere = lambda dim: {a for d, axes in enumerate(t.dims) if d != dim for a in axes}
        changed = False
        for dim, factors in enumerate(dims):
            if t.fixed and dim not in t.open:
                continue
            new_axes: list[int] = []
            source = None
            for f in factors:
                have = current.get(f, ())
                want, contributor = proposals.get(f, (have, None))
                axes = want if want[: len(have)] == have and len(want) >= len(have) else have
                if axes != have and source is None:
                    source = contributor
                new_axes.extend(axes)
                if self.mesh.axis_size(axes) != rule.factors[f].size:
                    break
            new_axes_t = tuple(new_axes)
            old = t.dims[dim]
            if new_axes_t == old or new_axes_t[: len(old)] != old:
                continue
            while new_axes_t and (t.shape[dim] % self.mesh.axis_size(new_axes_t) or set(new_axes_t) & used_elsewhere(dim)):
                new_axes_t = new_axes_t[:-1]
            if len(new_axes_t) <= len(old) or source is None:
                continue
            contributor, from_side, from_index = source
            direction = "forward" if from_side == "operand" and side == "result" else "backward" if from_side == "result" and side == "operand" else "sideways"
            from_dim = self.dim_of(contributor, site, from_side, from_index, factors)
            base = contributor.origins[from_dim] if from_dim is not None and contributor.origins[from_dim] else Origin(contributor.seed or contributor.name)
            t.dims[dim] = new_axes_t
            t.origins[dim] = base.then(Hop(site.label.split(" at ")[0], direction))
            self.events.append(
                f"{site.label}: {side} #{index} {t.name.split(' at ')[0]} dim {dim} {self.axes(old)} -> {self.axes(new_axes_t)} "
                f"({direction}, from {from_side} #{from_index} {contributor.name.split(' at ')[0]}; origin {t.origins[dim].seed})"
            )
            changed = True
        return changed

    @staticmethod
    def dim_of(tensor: Tensor, site: Site, side: str, index: int, factors) -> int | None:
        dims = (site.rule.operands if side == "operand" else site.rule.results)[index]
        for d, fs in enumerate(dims):
            if set(fs) & set(factors):
                return d
        return None

    # ------------------------------------------------------------ output

    def final(self, tensor: Tensor) -> HloSharding:
        if tensor.hlo is not None:
            return tensor.hlo
        return to_hlo(tensor.sharding(), self.mesh)

    def write(self) -> bool:
        changed = False
        for op, results in self.annotated:
            if any(r is not None and r.fixed and not r.open for r in results) and SHARDING in op.attributes:
                continue
            leaves = [self.final(r) if r is not None else HloSharding.replicated() for r in results]
            sharding = leaves[0] if len(leaves) == 1 else HloSharding.tuple_of(leaves)
            text = str(sharding)
            if SHARDING not in op.attributes or ir.StringAttr(op.attributes[SHARDING]).value != text:
                op.attributes[SHARDING] = ir.StringAttr.get(text)
                changed = True
        changed |= self.write_results()
        changed |= self.write_arguments()
        return changed

    def write_arguments(self) -> bool:
        """The shardings chosen for open entry arguments, in `arg_attrs`; a replicated one is
        written too, so that the entry says what the caller must pass."""
        if not self.open_arguments:
            return False
        count = len(self.entry.regions[0].blocks[0].arguments)
        self.write_entry("arg_attrs", count, self.open_arguments)
        return True

    def write_results(self) -> bool:
        function = self.entry
        if function is None:
            return False
        count = len(ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).results)
        chosen = {index: slot for index in range(count) if (slot := self.tensors.get(("result", index))) is not None and not slot.fixed}
        if chosen:
            self.write_entry("res_attrs", count, chosen)
        return bool(chosen)

    def write_entry(self, key: str, count: int, chosen: dict[int, Tensor]) -> None:
        """The entry's `arg_attrs` or `res_attrs` with the final sharding of each `chosen` slot."""
        function = self.entry
        entries = list(ir.ArrayAttr(function.attributes[key])) if key in function.attributes else [ir.DictAttr.get({}) for _ in range(count)]
        for index, tensor in chosen.items():
            names = {named.name: named.attr for named in ir.DictAttr(entries[index])}
            names[SHARDING] = ir.StringAttr.get(str(self.final(tensor)))
            entries[index] = ir.DictAttr.get(names)
        function.attributes[key] = ir.ArrayAttr.get(entries)

    def report(self) -> ShardingReport:
        values = {}
        for tensor in self.tensors.values():
            sharding = self.final(tensor)
            head = f"{sharding}" if tensor.hlo is not None else f"{tensor.sharding().text(self.mesh)} = {sharding}"
            if tensor.manual is not None and not tensor.fixed:
                head += " (inside shard_map: manual)"
            lines = [head]
            if tensor.fixed:
                lines.append(f"fixed: {tensor.seed}")
            for dim, origin in enumerate(tensor.origins):
                if origin is not None and tensor.dims[dim] and not tensor.fixed:
                    lines.append(f"dim {dim} {self.axes(tensor.dims[dim])}: {origin.text()}")
            values[tensor.name] = lines
        return ShardingReport(str(self.mesh), self.seeds, self.events, list(self.conflicts.values()), self.unsupported, values, list(self.partial.values()), self.rounds)
