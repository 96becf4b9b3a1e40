"""Legalize StableHLO ops to xhlo (the HLO dialect), op by op.

Most StableHLO ops have an HLO opcode of the same meaning and become the xhlo op of the
same name, with attributes re-encoded by `attributes.to_xhlo` and a few renamed
(`broadcast_in_dim` -> `broadcast`, `dot_general` -> `dot`). Three shapes change:
`stablehlo.dot` and `stablehlo.broadcast` become the general `xhlo.dot` / `xhlo.broadcast`,
and `stablehlo.case` / `stablehlo.if` become `xhlo.conditional` whose branches are outlined
into private functions that receive the values they capture, as HLO computations do.
An op with no xhlo equivalent is refused with its name and location.
"""

from mlirxla.dialects.xhlo.builder import create_op, op_classes
from mlirxla.dialects.xhlo.ops import WIDE
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import is_inside, ops_in_dialect, ops_named
from mlirxla.mlir import func, ir
from mlirxla.transforms.erasure import erase, live_ops

from . import attributes, newer_ops

# StableHLO op -> (xhlo op, {stablehlo attribute name: xhlo attribute name})
RENAMED_OPS = {
    "stablehlo.broadcast_in_dim": ("xhlo.broadcast", {"broadcast_dimensions": "dimensions"}),
    "stablehlo.dot_general": ("xhlo.dot", {}),
    "stablehlo.scatter": ("xhlo.scatter", {"scatter_dimension_numbers": "dimension_numbers"}),
    "stablehlo.return": ("xhlo.return", {}),
}
# StableHLO keeps `create_token` as a deprecated spelling of an operand-less after_all
# (jax.lax.create_token lowers to it); not among RENAMED_OPS, whose inverse lowers xhlo back
DEPRECATED_SPELLINGS = {"stablehlo.create_token": "xhlo.after_all"}

DEFAULT_ATTRIBUTES = {
    "xhlo.sort": {"dimension": "-1 : i64", "is_stable": "false"},
    "xhlo.cholesky": {"lower": "false"},
    "xhlo.custom_call": {},
}


def move_regions(source: ir.Operation, target: ir.Operation) -> None:
    for source_region, target_region in zip(source.regions, target.regions):
        for block in list(source_region.blocks):
            block.append_to(target_region)


def replace_op(old: ir.Operation, new: ir.Operation) -> None:
    for old_result, new_result in zip(old.results, new.results):
        old_result.replace_all_uses_with(new_result)
    erase(old)


def converted_attributes(op: ir.Operation, renames: dict[str, str]) -> dict:
    result = {}
    for name in op.attributes:
        attr = op.attributes[name]
        result[renames.get(name, name)] = attributes.to_xhlo(op.name, name, attr)
    return result


def legalize_generic(op: ir.Operation, xhlo_name: str, renames: dict[str, str]) -> None:
    attrs = converted_attributes(op, renames)
    for key, text in DEFAULT_ATTRIBUTES.get(xhlo_name, {}).items():
        attrs.setdefault(key, ir.Attribute.parse(text))
    with ir.InsertionPoint(op):
        new = create_op(
            xhlo_name, op.operands, [r.type for r in op.results], attrs, op.location, len(op.regions)
        )
    move_regions(op, new)
    replace_op(op, new)


def legalize_dot(op: ir.Operation) -> None:
    """stablehlo.dot (vector/matrix product) -> xhlo.dot contracting lhs's last dim with rhs's first."""
    lhs_rank = ir.RankedTensorType(op.operands[0].type).rank
    numbers = ir.DictAttr.get(
        {
            "lhs_batching_dimensions": ir.DenseI64ArrayAttr.get([]),
            "rhs_batching_dimensions": ir.DenseI64ArrayAttr.get([]),
            "lhs_contracting_dimensions": ir.DenseI64ArrayAttr.get([lhs_rank - 1]),
            "rhs_contracting_dimensions": ir.DenseI64ArrayAttr.get([0]),
        }
    )
    attrs = converted_attributes(op, {})
    attrs["dot_dimension_numbers"] = numbers
    with ir.InsertionPoint(op):
        new = create_op("xhlo.dot", op.operands, [op.results[0].type], attrs, op.location)
    replace_op(op, new)


def legalize_broadcast(op: ir.Operation) -> None:
    """stablehlo.broadcast prepends `broadcast_sizes` dims: operand dim i -> result dim len(sizes) + i."""
    added = len(list(ir.DenseI64ArrayAttr(op.attributes["broadcast_sizes"])))
    rank = ir.RankedTensorType(op.operands[0].type).rank
    attrs = {"dimensions": ir.DenseI64ArrayAttr.get([added + i for i in range(rank)])}
    with ir.InsertionPoint(op):
        new = create_op("xhlo.broadcast", op.operands, [op.results[0].type], attrs, op.location)
    replace_op(op, new)


def legalize_concatenate(op: ir.Operation) -> None:
    """A concatenate of more inputs than xhlo's `WIDE` slots (jax's `scan(..., unroll=True)`
    of 300 steps stacks 300 outputs) is a concatenate of concatenates of at most `WIDE` each,
    which joins the same elements in the same order."""
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    with ir.InsertionPoint(op):
        new = joined(list(op.operands), dimension, op.results[0].type, op.location)
    replace_op(op, new)


def joined(inputs: list[ir.Value], dimension: int, result_type: ir.Type, location) -> ir.Operation:
    """The xhlo concatenate of `inputs` along `dimension`, in groups of at most `WIDE`."""
    if len(inputs) > WIDE:
        group = -(-len(inputs) // WIDE)
        parts = [inputs[start:start + group] for start in range(0, len(inputs), group)]
        inputs = [joined(part, dimension, concatenated_type(part, dimension), location).results[0] for part in parts]
    attrs = {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dimension)}
    return create_op("xhlo.concatenate", inputs, [result_type], attrs, location)


def concatenated_type(inputs: list[ir.Value], dimension: int) -> ir.Type:
    first = ir.RankedTensorType(inputs[0].type)
    shape = list(first.shape)
    shape[dimension] = sum(ir.RankedTensorType(value.type).shape[dimension] for value in inputs)
    return ir.RankedTensorType.get(shape, first.element_type)


def captured_values(op: ir.Operation, region: ir.Region) -> list[ir.Value]:
    """Values used inside `region` of `op` but defined outside it, in first-use order."""
    captured: list[ir.Value] = []
    seen: set = set()

    def visit(inner: ir.Operation):
        for value in inner.operands:
            owner = value.owner
            defining = owner.operation if isinstance(owner, ir.OpView) else owner
            if isinstance(defining, ir.Block):
                inside = defining.region is not None and _region_within(defining.region, region, op)
            else:
                inside = is_inside(defining, op)
            if not inside and value not in seen:
                seen.add(value)
                captured.append(value)
        return ir.WalkResult.ADVANCE

    for block in region.blocks:
        for inner in block.operations:
            inner.operation.walk(visit)
    return captured


def _region_within(candidate: ir.Region, region: ir.Region, op: ir.Operation) -> bool:
    if candidate == region:
        return True
    owner = candidate.owner
    return owner == op or is_inside(owner, op)


def outline_region(op: ir.Operation, region: ir.Region, symbol: str, module: ir.Module) -> list[ir.Value]:
    """Move `region`'s block into a new private function `symbol`; return the captured values."""
    captured = captured_values(op, region)
    result_types = [r.type for r in op.results]
    with ir.InsertionPoint(module.body), op.location:
        function = func.FuncOp(symbol, ([v.type for v in captured], result_types), visibility="private")
    block = region.blocks[0]
    block.append_to(function.regions[0])
    arguments = [block.add_argument(v.type, op.location) for v in captured]
    for value, argument in zip(captured, arguments):
        for use in list(value.uses):
            if is_inside(use.owner, function.operation):
                use.owner.operands[use.operand_number] = argument
    terminator = block.operations[len(block.operations) - 1]
    with ir.InsertionPoint(terminator), terminator.location:
        func.ReturnOp(list(terminator.operands))
    erase(terminator)
    return captured


def legalize_conditional(op: ir.Operation, module: ir.Module, symbols: "SymbolNamer") -> None:
    """stablehlo.case / stablehlo.if -> xhlo.conditional over outlined branch computations."""
    branch_names, operands, counts = [], [], []
    for region in op.regions:
        name = symbols.fresh("branch")
        captured = outline_region(op, region, name, module)
        branch_names.append(ir.FlatSymbolRefAttr.get(name))
        operands.extend(captured)
        counts.append(len(captured))
    attrs = {
        "branch_computations": ir.ArrayAttr.get(branch_names),
        "branch_operand_counts": ir.DenseI64ArrayAttr.get(counts),
    }
    with ir.InsertionPoint(op):
        new = create_op(
            "xhlo.conditional", [op.operands[0]] + operands, [r.type for r in op.results], attrs, op.location
        )
    replace_op(op, new)


class SymbolNamer:
    """Fresh function names that do not collide with the module's symbols."""

    def __init__(self, module: ir.Module):
        self.taken = {
            ir.StringAttr(op.attributes["sym_name"]).value for op in module.body.operations if "sym_name" in op.attributes
        }

    def fresh(self, stem: str) -> str:
        index = 0
        while f"{stem}_{index}" in self.taken:
            index += 1
        name = f"{stem}_{index}"
        self.taken.add(name)
        return name


def constant_ints(value: ir.Value) -> list[int] | None:
    """The integers of a value defined by stablehlo.constant (flattened), else None."""
    owner = value.owner if isinstance(value, ir.OpResult) else None
    if owner is None or owner.name != "stablehlo.constant":
        return None
    attr = owner.attributes["value"]
    try:
        values = ir.DenseIntElementsAttr(attr)
    except (TypeError, ValueError):
        return None
    count = 1
    for size in ir.ShapedType(attr.type).shape:
        count *= size
    return [values[0]] * count if values.is_splat else [values[i] for i in range(len(values))]


def static_form(op: ir.Operation) -> tuple[str, list[ir.Value], dict] | None:
    """A dynamic-shape op whose shapes are static (constant shape operands, static result)
    as its static StableHLO equivalent: (op name, operands, attributes), else None."""
    name, operands, result = op.name, list(op.operands), op.results[0].type
    if not ir.RankedTensorType(result).has_static_shape:
        return None
    attrs = {n: op.attributes[n] for n in op.attributes}
    i64_array = ir.DenseI64ArrayAttr.get
    if name == "stablehlo.dynamic_iota":
        return "stablehlo.iota", [], attrs
    if name == "stablehlo.dynamic_reshape":
        return "stablehlo.reshape", operands[:1], {}
    if name == "stablehlo.dynamic_broadcast_in_dim":
        return "stablehlo.broadcast_in_dim", operands[:1], {"broadcast_dimensions": attrs["broadcast_dimensions"]}
    if name == "stablehlo.get_dimension_size":
        operand_type = ir.RankedTensorType(operands[0].type)
        dimension = ir.IntegerAttr(attrs["dimension"]).value
        if operand_type.is_dynamic_dim(dimension):
            return None
        element = ir.RankedTensorType(result).element_type
        value = ir.DenseElementsAttr.get_splat(ir.RankedTensorType(result), ir.IntegerAttr.get(element, operand_type.shape[dimension]))
        return "stablehlo.constant", [], {"value": value}
    if name == "stablehlo.dynamic_pad":
        pads = [constant_ints(v) for v in operands[2:5]]
        if any(p is None for p in pads):
            return None
        low, high, interior = pads
        return "stablehlo.pad", operands[:2], {"edge_padding_low": i64_array(low), "edge_padding_high": i64_array(high), "interior_padding": i64_array(interior)}
    if name == "stablehlo.dynamic_gather":
        sizes = constant_ints(operands[2])
        if sizes is None:
            return None
        return "stablehlo.gather", operands[:2], {**attrs, "slice_sizes": i64_array(sizes)}
    if name == "stablehlo.dynamic_conv":
        padding = constant_ints(operands[2])
        if padding is None:
            return None
        i64 = ir.IntegerType.get_signless(64)
        padding_type = ir.RankedTensorType.get([len(padding) // 2, 2], i64)
        attrs["padding"] = ir.DenseElementsAttr.get(
            [ir.IntegerAttr.get(i64, p) for p in padding], type=padding_type
        ) if padding else ir.DenseElementsAttr.get_splat(padding_type, ir.IntegerAttr.get(i64, 0))
        return "stablehlo.convolution", operands[:2], attrs
    return None


DYNAMIC_OPS = ("stablehlo.dynamic_iota", "stablehlo.dynamic_reshape", "stablehlo.dynamic_broadcast_in_dim",
               "stablehlo.get_dimension_size", "stablehlo.dynamic_pad", "stablehlo.dynamic_gather", "stablehlo.dynamic_conv")


def staticize(module: ir.Module) -> None:
    """Dynamic-shape ops whose shapes are static become their static equivalents, as XLA does."""
    for op in live_ops(ops_named(module, *DYNAMIC_OPS)):
        if (form := static_form(op)) is not None:
            name, operands, attrs = form
            with ir.InsertionPoint(op):
                new = ir.Operation.create(name, results=[op.results[0].type], operands=operands, attributes=attrs, loc=op.location)
            replace_op(op, new)


# ops whose regions are HLO computations: isolated in xhlo, they may use only their arguments
COMPUTATION_OPS = frozenset(f"stablehlo.{name}" for name in
                            "sort reduce reduce_window select_and_scatter scatter map all_reduce reduce_scatter".split())


def sink_captured_constants(module: ir.Module) -> None:
    """Constants a computation region uses from outside are copied into it (jax's canonicalizer
    hoists them out of sort comparators and reducers; HLO computations take only their
    arguments, as XLA's SinkConstantsToControlFlow makes them); any other captured value is
    refused."""
    for op in live_ops(ops_named(module, *COMPUTATION_OPS)):
        for region in op.regions:
            for value in captured_values(op, region):
                owner = value.owner
                if isinstance(owner, ir.Block) or owner.operation.name != "stablehlo.constant":
                    raise MlirxlaError(f"{op.name}: its computation uses a value defined outside it (HLO computations "
                                       "take only their arguments)", location_text(op.location))
                entry = region.blocks[0]
                with ir.InsertionPoint.at_block_begin(entry):
                    copy = owner.operation.clone()
                for use in list(value.uses):
                    if is_inside(use.owner, op):
                        use.owner.operands[use.operand_number] = copy.results[0]


def legalize_newer_ops(module: ir.Module) -> None:
    newer_ops.legalize(module, legalize_generic)


def legalize_module(module: ir.Module) -> None:
    """Rewrite every StableHLO op of `module` in place into xhlo; after `staticize`,
    `sink_captured_constants` and `legalize_newer_ops` (the front door's steps before this one)."""
    known = op_classes()
    symbols = SymbolNamer(module)
    for op in live_ops(ops_in_dialect(module, "stablehlo")):
        name = op.name
        if name in ("stablehlo.case", "stablehlo.if"):
            legalize_conditional(op, module, symbols)
        elif name == "stablehlo.dot":
            legalize_dot(op)
        elif name == "stablehlo.broadcast":
            legalize_broadcast(op)
        elif name == "stablehlo.concatenate":
            legalize_concatenate(op)
        elif name in RENAMED_OPS:
            legalize_generic(op, *RENAMED_OPS[name])
        elif name in DEPRECATED_SPELLINGS:
            legalize_generic(op, DEPRECATED_SPELLINGS[name], {})
        elif "xhlo." + name.removeprefix("stablehlo.") in known:
            legalize_generic(op, "xhlo." + name.removeprefix("stablehlo."), {})
        else:
            raise MlirxlaError(f"unsupported op '{name}': no xhlo equivalent", location_text(op.location))
