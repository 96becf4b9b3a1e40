"""Import shardings into the xhlo sharding attribute (XLA's HloSharding text, canonical).

GSPMD: `mhlo.sharding` strings (on function arguments/results through `arg_attrs` /
`res_attrs`, and on ops such as `stablehlo.custom_call @Sharding`) are already in XLA's
grammar; they are parsed, validated and printed canonically into `xhlo.sharding`
(`mhlo.sharding` stays, so that the way back to StableHLO keeps it).

Shardy (sdy), which arrives as opaque attributes and unregistered ops (jaxlib prints it in
generic form for us):

* `sdy.mesh @m = <["x"=2, "y"=2], device_ids=[...]>` gives the axis names and sizes and the
  devices (iota when `device_ids` is absent); the op is erased once everything is converted,
  and the meshes stay as the module attribute `xhlo.meshes` for sharding propagation.
* `#sdy.sharding<@m, [{"x"}, {}], replicated={"y"}>` on an argument, result or op becomes a
  tiled HloSharding over the mesh's devices: the device array reshaped to the axis sizes
  (sub-axes `"x":(k)n` split an axis) is transposed so that the axes of dimension 0 come
  first, then those of dimension 1, ..., then manual axes, then unreduced axes, then every
  unused axis, and reshaped to the tile dims; unused axes of size > 1 form the
  `last_tile_dim_replicate` dim (`last_tile_dims={manual, unreduced, replicated}` with
  manual or unreduced axes: `unreduced={"y"}` says the devices along "y" hold partial sums
  whose total is the value, XLA's UNREDUCED subgroup). An iota mesh gives
  `<=[sizes]T(perm)`, canonicalized like XLA (`<=[4]` when no transpose is left). A sharding
  that tiles nothing is `{replicated}`; a mesh of one device `{maximal device=d}`.
* `sdy.sharding_constraint %v <@m, ...>` becomes `stablehlo.custom_call @Sharding(%v)`
  carrying the sharding, as XLA's own Shardy export does (and then `xhlo.custom_call`); its
  open dims (`{?}`, `{"x", ?}`: jax's unconstrained dims and its automatic mesh axes) are
  listed in `xhlo.open_dims`, for propagation to shard further, as are GSPMD's
  (`backend_config = "unspecified_dims=[...]"` on a `@Sharding` call).
  Choice: a separate op rather than the sharding put on %v's producer, because %v may be a
  block argument or have other users that the constraint must not re-shard. `sdy.reshard`
  is imported the same way.
* `sdy.manual_computation` is inlined the way XLA exports it: each operand goes through
  `@Sharding` (its in-sharding) and `@SPMDFullToShardShape` (manual sharding, the body's
  local type); each returned value through `@Sharding` (manual) and `@SPMDShardToFullShape`
  (its out-sharding, the global type). The manual sharding is `{manual}` when every axis of
  size > 1 is manual, else a tiled sharding with a `manual` subgroup.
  `sdy.manual_computation` has a region, and MLIR's inliner crashes on unregistered ops with
  regions: `prepare` inlines them and must run before `func.call` inlining.

Any other sdy op is left for the front door to refuse by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from mlirxla.dialects.xhlo import SHARDING
from mlirxla.dialects.xhlo.mesh_sharding import tiled_over_axes
from mlirxla.dialects.xhlo.sharding import HloSharding, ShardingSyntaxError
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import ops_named, ops_where
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase, live_ops

from .jaxlib_bridge import IN_REGION, attributes_of

MHLO_SHARDING = "mhlo.sharding"
SHARDING_GROUP = "xhlo.sharding_group"
# a constraint's dims that propagation may shard further (Shardy's open dims, `{?}`)
OPEN_DIMS = "xhlo.open_dims"
SDY_SHARDING = "sdy.sharding"
SDY_ATTRIBUTE_PREFIX = "sdy."


# ---------------------------------------------------------------- sdy text


_SDY_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|@[\w.$-]+|-?\d+|[A-Za-z_][\w.]*|.)')


class _Tokens:
    def __init__(self, text: str):
        self.text = text
        self.items = [m.group(1) for m in _SDY_TOKEN.finditer(text) if m.group(1).strip()]
        self.index = 0

    def peek(self) -> str | None:
        return self.items[self.index] if self.index < len(self.items) else None

    def next(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError(f"unexpected end of '{self.text}'")
        self.index += 1
        return token

    def expect(self, token: str) -> None:
        got = self.next()
        if got != token:
            raise ValueError(f"expected '{token}' but got '{got}' in '{self.text}'")

    def accept(self, token: str) -> bool:
        if self.peek() == token:
            self.index += 1
            return True
        return False

    def string(self) -> str:
        token = self.next()
        if not token.startswith('"'):
            raise ValueError(f"expected a quoted name but got '{token}' in '{self.text}'")
        return token[1:-1]

    def integer(self) -> int:
        return int(self.next())


@dataclass(frozen=True)
class Mesh:
    """An sdy mesh: axis names and sizes, and device ids (None: iota)."""

    axes: tuple[tuple[str, int], ...]
    device_ids: tuple[int, ...] | None = None

    @property
    def size(self) -> int:
        return int(np.prod([s for _, s in self.axes], dtype=np.int64)) if self.axes else 1

    def axis_size(self, name: str) -> int:
        for axis, size in self.axes:
            if axis == name:
                return size
        raise ValueError(f"unknown mesh axis \"{name}\"")


@dataclass(frozen=True)
class AxisRef:
    """A mesh axis, or the sub-axis `"name":(pre_size)size` of it."""

    name: str
    pre_size: int | None = None
    size: int | None = None


@dataclass(frozen=True)
class TensorSharding:
    """`<@mesh, [{axes}, ...], replicated={...}, unreduced={...}>`: the unreduced axes are
    those along which the devices hold partial sums of the value."""

    mesh: str | Mesh
    dims: tuple[tuple[AxisRef, ...], ...]
    replicated: tuple[AxisRef, ...] = ()
    unreduced: tuple[AxisRef, ...] = ()
    open_dims: tuple[int, ...] = ()  # dims written `{?}` or `{"x", ?}`: the compiler may shard them further


def _mesh_body(tokens: _Tokens) -> Mesh:
    """`["x"=2, "y"=4], device_ids=[...]` (after the `<` of `#sdy.mesh<` / `mesh<`)."""
    axes = []
    tokens.expect("[")
    while not tokens.accept("]"):
        name = tokens.string()
        tokens.expect("=")
        axes.append((name, tokens.integer()))
        tokens.accept(",")
    device_ids = None
    if tokens.accept(","):
        tokens.expect("device_ids")
        tokens.expect("=")
        tokens.expect("[")
        device_ids = []
        while not tokens.accept("]"):
            device_ids.append(tokens.integer())
            tokens.accept(",")
        device_ids = tuple(device_ids)
    return Mesh(tuple(axes), device_ids)


def parse_mesh(text: str) -> Mesh:
    """`#sdy.mesh<["x"=2], device_ids=[1, 0]>` or the mesh's body alone."""
    tokens = _Tokens(text)
    if tokens.accept("#"):
        tokens.expect("sdy.mesh")
        tokens.expect("<")
        mesh = _mesh_body(tokens)
        tokens.expect(">")
        return mesh
    if tokens.accept("<"):
        mesh = _mesh_body(tokens)
        tokens.expect(">")
        return mesh
    return _mesh_body(tokens)


def _axis_refs(tokens: _Tokens, close: str = "}") -> tuple[tuple[AxisRef, ...], bool]:
    """Axis references up to `close`; also whether the list is open (`?`)."""
    refs, open_ = [], False
    while not tokens.accept(close):
        if tokens.accept("?"):
            open_ = True
        else:
            name = tokens.string()
            if tokens.accept(":"):
                tokens.expect("(")
                pre = tokens.integer()
                tokens.expect(")")
                refs.append(AxisRef(name, pre, tokens.integer()))
            else:
                refs.append(AxisRef(name))
        tokens.accept(",")
    return tuple(refs), open_


def _tensor_sharding(tokens: _Tokens) -> TensorSharding:
    """`<@mesh, [{...}, ...], replicated={...}>` starting at `<`."""
    tokens.expect("<")
    if (token := tokens.next()).startswith("@"):
        mesh: str | Mesh = token[1:]
    elif token == "mesh":
        tokens.expect("<")
        mesh = _mesh_body(tokens)
        tokens.expect(">")
    else:
        raise ValueError(f"expected a mesh but got '{token}' in '{tokens.text}'")
    tokens.expect(",")
    tokens.expect("[")
    dims, open_dims = [], []
    while not tokens.accept("]"):
        tokens.expect("{")
        refs, open_ = _axis_refs(tokens)
        if open_:
            open_dims.append(len(dims))
        dims.append(refs)
        if (priority := tokens.peek()) is not None and re.fullmatch(r"p\d+", priority):
            tokens.next()
        tokens.accept(",")
    lists: dict[str, tuple[AxisRef, ...]] = {}
    while tokens.accept(","):
        key = tokens.next()
        tokens.expect("=")
        tokens.expect("{")
        lists[key], _ = _axis_refs(tokens)
    tokens.expect(">")
    return TensorSharding(mesh, tuple(dims), lists.get("replicated", ()), lists.get("unreduced", ()), tuple(open_dims))


def parse_tensor_sharding(text: str) -> TensorSharding:
    """`#sdy.sharding<@mesh, [{"x"}, {}]>` or its body `<@mesh, [...]>`."""
    tokens = _Tokens(text)
    if tokens.accept("#"):
        tokens.expect("sdy.sharding")
    sharding = _tensor_sharding(tokens)
    if tokens.peek() is not None:
        raise ValueError(f"trailing text in '{text}'")
    return sharding


def parse_sharding_per_value(text: str) -> list[TensorSharding]:
    """`#sdy.sharding_per_value<[<@m, [...]>, ...]>`."""
    tokens = _Tokens(text)
    tokens.expect("#")
    tokens.expect("sdy.sharding_per_value")
    tokens.expect("<")
    tokens.expect("[")
    values = []
    while not tokens.accept("]"):
        values.append(_tensor_sharding(tokens))
        tokens.accept(",")
    tokens.expect(">")
    return values


def parse_manual_axes(text: str) -> list[str]:
    """`#sdy<manual_axes{"x", "y"}>`."""
    return [name for name in re.findall(r'"((?:[^"\\]|\\.)*)"', text)]


# ---------------------------------------------------------------- sdy -> HloSharding


def _factors(mesh: Mesh, refs: list[AxisRef]) -> tuple[list[tuple[str, int, int]], dict[AxisRef, list[int]]]:
    """Split the mesh axes at every sub-axis boundary.

    Returns the factors major to minor as (axis, start, size) and, for each reference, the
    indices of the factors it covers. A sub-axis `(pre)size` covers the part of its axis
    from boundary `pre` to `pre * size` (boundaries count from the major end).
    """
    boundaries: dict[str, set[int]] = {name: {1, size} for name, size in mesh.axes}
    for ref in refs:
        if ref.name not in boundaries:
            raise ValueError(f'unknown mesh axis "{ref.name}"')
        if ref.pre_size is not None:
            full = mesh.axis_size(ref.name)
            end = ref.pre_size * ref.size
            if full % end or ref.size <= 0 or ref.pre_size <= 0:
                raise ValueError(f'sub-axis "{ref.name}":({ref.pre_size}){ref.size} does not divide axis size {full}')
            boundaries[ref.name].update({ref.pre_size, end})
    factors: list[tuple[str, int, int]] = []
    for name, _ in mesh.axes:
        points = sorted(boundaries[name])
        for low, high in zip(points, points[1:]):
            factors.append((name, low, high // low))
    covered: dict[AxisRef, list[int]] = {}
    for ref in refs:
        low = ref.pre_size or 1
        high = low * ref.size if ref.size is not None else mesh.axis_size(ref.name)
        covered[ref] = [i for i, (name, start, size) in enumerate(factors) if name == ref.name and low <= start and start * size <= high]
    return factors, covered


def to_hlo_sharding(sharding: TensorSharding, mesh: Mesh, rank: int | None, manual_axes: tuple[str, ...] = ()) -> HloSharding:
    """The HloSharding of an sdy tensor sharding over `mesh` (see the module docstring).

    Axes in `manual_axes` form a `manual` subgroup and are dropped from the dimensions and
    the unreduced axes (inside shard_map a partial sum over a manual axis is each device's
    own value); the other unreduced axes form an `unreduced` subgroup.
    """
    if rank is not None and len(sharding.dims) != rank:
        raise ValueError(f"sharding has {len(sharding.dims)} dimensions for a value of rank {rank}")
    if mesh.size == 1:
        if mesh.device_ids and not mesh.axes:
            return HloSharding.maximal(mesh.device_ids[0])
        return HloSharding.manual() if manual_axes else HloSharding.replicated()
    manual = [AxisRef(name) for name in manual_axes]
    dims = [[r for r in refs if r.name not in manual_axes] for refs in sharding.dims]
    unreduced = [r for r in sharding.unreduced if r.name not in manual_axes]
    all_refs = [r for refs in dims for r in refs] + manual + unreduced + list(sharding.replicated)
    factors, covered = _factors(mesh, all_refs)
    sizes = [size for _, _, size in factors]
    used: list[int] = []
    tile_dims = []
    for refs in dims:
        indices = [i for r in refs for i in covered[r]]
        used.extend(indices)
        tile_dims.append(int(np.prod([sizes[i] for i in indices], dtype=np.int64)))
    manual_indices = [i for r in manual for i in covered[r] if i not in used]
    unreduced_indices = [i for r in unreduced for i in covered[r]]
    if len(set(used)) != len(used):
        raise ValueError("a mesh axis shards more than one dimension")
    if set(unreduced_indices) & set(used):
        raise ValueError("a mesh axis is both unreduced and sharding a dimension")
    rest = [i for i in range(len(factors)) if i not in used and i not in manual_indices and i not in unreduced_indices]
    return tiled_over_axes(tile_dims, sizes, used, manual_indices, rest, mesh.device_ids, unreduced_indices)


# ---------------------------------------------------------------- the module


def _rank(t: ir.Type) -> int | None:
    return ir.RankedTensorType(t).rank if isinstance(t, ir.RankedTensorType) else None


class _Importer:
    def __init__(self, module: ir.Module):
        self.module = module
        self.meshes: dict[str, Mesh] = {}
        for op in module.body.operations:
            if op.operation.name == "sdy.mesh":
                name = ir.StringAttr(op.attributes["sym_name"]).value
                try:
                    self.meshes[name] = parse_mesh(str(op.attributes["mesh"]))
                except (ValueError, KeyError) as error:
                    raise MlirxlaError(f"sdy.mesh: cannot read mesh @{name}: {error}", location_text(op.location)) from None

    def mesh_of(self, sharding: TensorSharding) -> Mesh:
        if isinstance(sharding.mesh, Mesh):
            return sharding.mesh
        if sharding.mesh not in self.meshes:
            raise ValueError(f"unknown mesh @{sharding.mesh}")
        return self.meshes[sharding.mesh]

    def convert(self, sharding: TensorSharding, t: ir.Type | None, manual_axes=()) -> HloSharding:
        return to_hlo_sharding(sharding, self.mesh_of(sharding), None if t is None else _rank(t), tuple(manual_axes))

    def from_attribute(self, attr: ir.Attribute, types: list[ir.Type]) -> HloSharding:
        """An `sdy.sharding` attribute (tensor sharding or sharding per value)."""
        text = str(attr)
        if text.startswith("#sdy.sharding_per_value"):
            values = parse_sharding_per_value(text)
            if len(values) != len(types):
                raise ValueError(f"{len(values)} shardings for {len(types)} results")
            converted = [self.convert(s, t) for s, t in zip(values, types)]
            return converted[0] if len(converted) == 1 else HloSharding.tuple_of(converted)
        return self.convert(parse_tensor_sharding(text), types[0] if len(types) == 1 else None)


def _fail(op, problem: str) -> MlirxlaError:
    return MlirxlaError(f"{op.operation.name}: {problem}", location_text(op.location))


def _custom_call(target: str, operand: ir.Value, result_type: ir.Type, sharding: HloSharding, location) -> ir.Value:
    text = ir.StringAttr.get(str(sharding))
    op = ir.Operation.create(
        "stablehlo.custom_call",
        results=[result_type],
        operands=[operand],
        attributes={
            "call_target_name": ir.StringAttr.get(target),
            "backend_config": ir.StringAttr.get(""),
            MHLO_SHARDING: text,
            SHARDING: text,
        },
        loc=location,
    )
    return op.results[0]


def inline_manual_computations(module: ir.Module, importer: _Importer | None = None) -> None:
    """Replace every `sdy.manual_computation` by its body between XLA's shard-shape custom calls."""
    ops = ops_named(module, "sdy.manual_computation")
    if not ops:
        return
    importer = importer or _Importer(module)
    for op in live_ops(ops):
        try:
            in_shardings = parse_sharding_per_value(str(op.attributes["in_shardings"]))
            out_shardings = parse_sharding_per_value(str(op.attributes["out_shardings"]))
            manual_axes = tuple(parse_manual_axes(str(op.attributes["manual_axes"]))) if "manual_axes" in op.attributes else ()
        except (ValueError, KeyError) as error:
            raise _fail(op, f"cannot read shardings: {error}") from None
        block = op.regions[0].blocks[0]
        arguments = list(block.arguments)
        if len(in_shardings) != len(op.operands) or len(arguments) != len(op.operands) or len(out_shardings) != len(op.results):
            raise _fail(op, "in/out shardings, operands, block arguments and results do not correspond")
        try:
            with ir.InsertionPoint(op):
                for operand, argument, sharding in zip(op.operands, arguments, in_shardings):
                    full = _custom_call("Sharding", operand, operand.type, importer.convert(sharding, operand.type), op.location)
                    local_sharding = importer.convert(sharding, operand.type, manual_axes)
                    local = _custom_call("SPMDFullToShardShape", full, argument.type, local_sharding, op.location)
                    argument.replace_all_uses_with(local)
                operations = list(block.operations)
                terminator = operations[-1]
                for inner in operations[:-1]:
                    inner.move_before(op)
                returned = list(terminator.operands)
                if len(returned) != len(op.results):
                    raise _fail(op, f"body returns {len(returned)} values for {len(op.results)} results")
            with ir.InsertionPoint(op):
                for value, result, sharding in zip(returned, list(op.results), out_shardings):
                    local = _custom_call("Sharding", value, value.type, importer.convert(sharding, result.type, manual_axes), op.location)
                    full = _custom_call("SPMDShardToFullShape", local, result.type, importer.convert(sharding, result.type), op.location)
                    result.replace_all_uses_with(full)
        except ValueError as error:
            raise _fail(op, str(error)) from None
        erase(terminator)
        erase(op)


def prepare(module: ir.Module) -> None:
    """What must happen before `func.call` inlining: inline `sdy.manual_computation`, and give
    the ops its body held that name functions their names back (`jaxlib_bridge` carried them
    as `mlirxla.in_region.<name>`)."""
    inline_manual_computations(module)
    restore_renamed_ops(module)


def restore_renamed_ops(module: ir.Module) -> None:
    for carried in live_ops(ops_where(module, lambda op: op.name.startswith(IN_REGION))):
        with ir.InsertionPoint(carried), carried.location:
            op = ir.Operation.create(carried.name[len(IN_REGION):], results=[value.type for value in carried.results],
                                     operands=list(carried.operands),
                                     attributes=attributes_of(carried))
        for old, new in zip(carried.results, op.results):
            old.replace_all_uses_with(new)
        erase(carried)


def _mhlo_sharding_text(attributes) -> str | None:
    """The `mhlo.sharding` string of an attribute dictionary; None when absent or empty (older
    exports write `mhlo.sharding = ""` for no sharding, and XLA reads it so)."""
    if MHLO_SHARDING not in attributes or not isinstance(attributes[MHLO_SHARDING], ir.StringAttr):
        return None
    text = ir.StringAttr(attributes[MHLO_SHARDING]).value
    return text if text.strip() else None


def _canonical(text: str, op, what: str) -> HloSharding:
    try:
        return HloSharding.parse(text)
    except ShardingSyntaxError as error:
        raise _fail(op, f"{what}: {error}") from None


def _convert_dict(entries: ir.Attribute, value_type: ir.Type, importer: _Importer, op, what: str) -> ir.Attribute | None:
    """The argument/result dictionary with `xhlo.sharding` from mhlo.sharding or sdy.sharding; None if unchanged."""
    names = {named.name: named.attr for named in ir.DictAttr(entries)}
    sharding = None
    if (text := _mhlo_sharding_text(names)) is not None:
        sharding = _canonical(text, op, what)
    if SDY_SHARDING in names:
        try:
            sharding = importer.from_attribute(names.pop(SDY_SHARDING), [value_type])
        except ValueError as error:
            raise _fail(op, f"{what}: {error}") from None
    if sharding is None:
        return None
    names[SHARDING] = ir.StringAttr.get(str(sharding))
    return ir.DictAttr.get(names)


def _convert_function(function, importer: _Importer) -> None:
    function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    for key, types, what in (("arg_attrs", function_type.inputs, "argument"), ("res_attrs", function_type.results, "result")):
        if key not in function.attributes:
            continue
        entries = list(ir.ArrayAttr(function.attributes[key]))
        changed = False
        for index, (entry, value_type) in enumerate(zip(entries, types)):
            new = _convert_dict(entry, value_type, importer, function, f"{what} #{index}")
            if new is not None:
                entries[index], changed = new, True
        if changed:
            function.attributes[key] = ir.ArrayAttr.get(entries)


def _convert_constraints(module: ir.Module, importer: _Importer) -> None:
    for name in ("sdy.sharding_constraint", "sdy.reshard"):
        for op in live_ops(ops_named(module, name)):
            try:
                parsed = parse_tensor_sharding(str(op.attributes["sharding"]))
                sharding = importer.convert(parsed, op.operands[0].type)
            except (ValueError, KeyError) as error:
                raise _fail(op, str(error)) from None
            with ir.InsertionPoint(op):
                value = _custom_call("Sharding", op.operands[0], op.results[0].type, sharding, op.location)
            if parsed.open_dims and name == "sdy.sharding_constraint":
                value.owner.attributes[OPEN_DIMS] = ir.DenseI64ArrayAttr.get(list(parsed.open_dims))
            op.results[0].replace_all_uses_with(value)
            erase(op)


def _convert_op_attributes(module: ir.Module, importer: _Importer) -> None:
    def visit(op):
        operation = op.operation
        if operation.name == "func.func":
            return ir.WalkResult.ADVANCE
        attributes = operation.attributes
        if (text := _mhlo_sharding_text(attributes)) is not None:
            sharding = _canonical(text, op, MHLO_SHARDING)
            attributes[SHARDING] = ir.StringAttr.get(str(sharding))
            if (unspecified := _unspecified_dims(operation)) is not None:
                attributes[OPEN_DIMS] = ir.DenseI64ArrayAttr.get(unspecified)
        if SDY_SHARDING in attributes:
            try:
                sharding = importer.from_attribute(attributes[SDY_SHARDING], [r.type for r in operation.results])
            except ValueError as error:
                raise _fail(op, str(error)) from None
            attributes[SHARDING] = ir.StringAttr.get(str(sharding))
            del attributes[SDY_SHARDING]
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def _unspecified_dims(op) -> list[int] | None:
    """The dims a GSPMD constraint leaves to propagation: jax writes them in the `@Sharding`
    call's backend config (`unspecified_dims=[0,1]`), Shardy's open dims in GSPMD's form."""
    if op.name != "stablehlo.custom_call" or ir.StringAttr(op.attributes["call_target_name"]).value != "Sharding":
        return None
    config = ir.StringAttr(op.attributes["backend_config"]).value if "backend_config" in op.attributes else ""
    match = re.fullmatch(r"unspecified_dims=\[([\d,\s]*)\]", config.strip())
    return [int(dim) for dim in match[1].split(",") if dim.strip()] if match else None


MESHES = "xhlo.meshes"


def record_meshes(module: ir.Module, meshes: dict[str, Mesh]) -> None:
    """Keep the sdy meshes as the module attribute `xhlo.meshes` = {name: {axis_names,
    axis_sizes[, device_ids]}}: HloSharding text has no axis names, and sharding propagation
    reports in the user's axes (`dialects/xhlo/mesh_sharding.py: meshes_of`)."""
    if not meshes:
        return
    entries = {}
    for name, mesh in meshes.items():
        fields = {
            "axis_names": ir.ArrayAttr.get([ir.StringAttr.get(axis) for axis, _ in mesh.axes]),
            "axis_sizes": ir.DenseI64ArrayAttr.get([size for _, size in mesh.axes]),
        }
        if mesh.device_ids is not None:
            fields["device_ids"] = ir.DenseI64ArrayAttr.get(list(mesh.device_ids))
        entries[name] = ir.DictAttr.get(fields)
    module.operation.attributes[MESHES] = ir.DictAttr.get(entries)


def _convert_sharding_groups(module: ir.Module) -> None:
    """`sdy.sharding_group %v group_id = g` (jax's `shard_alike`) becomes `xhlo.sharding_group`
    on what defines %v: an op's array with one group per result (-1: none), an entry
    argument's attribute; sharding propagation gives a group's members one sharding. A
    member of another kind (a loop's block argument) is left out of its group."""
    for op in live_ops(ops_named(module, "sdy.sharding_group")):
        group = ir.IntegerAttr(op.attributes["group_id"]).value
        value, owner = op.operands[0], op.operands[0].owner
        if not isinstance(owner, ir.Block):
            definer = owner.operation
            groups = list(ir.DenseI64ArrayAttr(definer.attributes[SHARDING_GROUP])) if SHARDING_GROUP in definer.attributes else [-1] * len(definer.results)
            groups[ir.OpResult(value).result_number] = group
            definer.attributes[SHARDING_GROUP] = ir.DenseI64ArrayAttr.get(groups)
        elif owner.owner.operation.name == "func.func":
            _set_argument_attribute(owner.owner.operation, ir.BlockArgument(value).arg_number, SHARDING_GROUP,
                                    ir.IntegerAttr.get(ir.IntegerType.get_signless(64), group))
        erase(op)


def _set_argument_attribute(function, index: int, name: str, attr: ir.Attribute) -> None:
    count = len(function.regions[0].blocks[0].arguments)
    entries = list(ir.ArrayAttr(function.attributes["arg_attrs"])) if "arg_attrs" in function.attributes else [ir.DictAttr.get({})] * count
    attributes = {named.name: named.attr for named in ir.DictAttr(entries[index])}
    attributes[name] = attr
    entries[index] = ir.DictAttr.get(attributes)
    function.attributes["arg_attrs"] = ir.ArrayAttr.get(entries)


def import_shardings(module: ir.Module) -> None:
    """mhlo.sharding and Shardy -> `xhlo.sharding`; sdy ops and meshes removed."""
    importer = _Importer(module)
    inline_manual_computations(module, importer)
    _convert_constraints(module, importer)
    for function in ops_named(module, "func.func"):
        _convert_function(function, importer)
    _convert_op_attributes(module, importer)
    _convert_sharding_groups(module)
    record_meshes(module, importer.meshes)
    for op in live_ops(module.body.operations):
        if op.name == "sdy.mesh":
            erase(op)
