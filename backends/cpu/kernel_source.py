"""One kernel as a function in destination-passing style, StableHLO inside.

`kernel_function(module, kernel, symbol)` adds to `module` a function

    func.func @symbol(%in0: memref<...>, ..., %out0: memref<...>, ...) {
      %t0 = bufferization.to_tensor %in0 restrict      // one per operand
      ... the kernel's computation, in StableHLO ...
      bufferization.materialize_in_destination %r0 in restrict writable %out0
    }

so that bufferization makes the kernel write its results straight into buffers the caller
owns (slices of the buffer-assigned slab, parameters, outputs): the lowering allocates
nothing for results. A fusion's fused computation is inlined; a single op is cloned.

An output fusion whose dot runs as a library call passes its own operand and result lists:
the dot's result becomes one more operand of the epilogue kernel.

Slices: `slice_plan` retypes a kernel that keeps the rows of dimension 0 apart (a batch-slice
fusion, an elementwise or row-reduction kernel) so that every value computed slice by slice
has `rows` rows: the kernel then computes one slice, and the thunk calls it once per slice
with its pointers moved along (spreading the slices over the threads). A kernel counting rows
(an iota along dimension 0) takes one more operand, its slice's first row, which the thunk
points into a table of them (`SlicePlan.positions`).
"""

from dataclasses import dataclass, field

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.dialects.xhlo.builder import create_op, splat_of_type
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import func, ir
from mlirxla.transforms.batch_slice_fusion import RECOMPUTED_WHOLE_BYTES, SliceCheck, body_of, counts_rows, leading_size, slice_problem
from mlirxla.transforms.xhlo_to_stablehlo import lower_module

from . import materialization
from .elemental_math import rewrite_elemental_math
from .lane_reductions import reduce_rows_in_lanes


def signless(tensor_type: ir.Type) -> ir.Type:
    """The type with a signless element type (`ui8` -> `i8`): what buffers hold, and what the
    linalg lowering computes on."""
    ranked = ir.RankedTensorType(tensor_type)
    element = ranked.element_type
    if isinstance(element, ir.IntegerType) and not ir.IntegerType(element).is_signless:
        element = ir.IntegerType.get_signless(ir.IntegerType(element).width)
    return ir.RankedTensorType.get(list(ranked.shape), element)


def memref_of(tensor_type: ir.Type) -> ir.Type:
    ranked = ir.RankedTensorType(signless(tensor_type))
    return ir.MemRefType.get(list(ranked.shape), ranked.element_type)


def cast(value: ir.Value, target: ir.Type) -> ir.Value:
    """`value` as `target` (a signed or unsigned twin of its signless type); the casts meet the
    lowering's own and cancel out."""
    if value.type == target:
        return value
    return ir.Operation.create("builtin.unrealized_conversion_cast", results=[target], operands=[value]).result


@dataclass(frozen=True)
class SlicePlan:
    """How a kernel runs slice by slice along dimension 0 (or its columns): `count` slices of `rows` rows each;
    which operands it reads slice by slice (the others whole); the one-slice type of every
    value computed per slice."""

    count: int
    rows: int
    sliced_operands: tuple[bool, ...]
    types: dict = field(default_factory=dict, compare=False)
    read_across: tuple[int, ...] = ()  # per operand read slice by slice, the dimension it is sliced along (a transposed read: not 0)
    positions: bool = False  # the kernel counts rows (an iota along dimension 0): it is given its slice's first row
    columns: bool = False  # cut along every value's last dimension instead, `rows` wide (`column_blocks.py`)

    def across(self, operand: int) -> int:
        return self.read_across[operand] if self.read_across else 0

    def result_across(self, result_type: ir.Type) -> int:
        """The dimension a result is cut along."""
        return ir.RankedTensorType(result_type).rank - 1 if self.columns else 0

    def result_slice_type(self, result_type: ir.Type) -> ir.Type:
        return one_slice(result_type, self.rows, self.result_across(result_type))


def slice_plan(kernel: ir.Operation, rows: int = 1, recomputed_whole_bytes: int = RECOMPUTED_WHOLE_BYTES) -> SlicePlan:
    """The plan to run `kernel` (a fusion or a single op) `rows` rows of dimension 0 at a time,
    each slice computing again the values on whole operands of up to `recomputed_whole_bytes`."""
    problem, check = slice_problem(kernel, leading_size(kernel.results[0]), [], batched_dots=True, transposed_reads=True,
                                   recomputed_whole_bytes=recomputed_whole_bytes)
    if problem:
        raise MlirxlaError(problem, location_text(kernel.location))
    return plan_of_check(kernel, rows, check)


def plan_of_check(kernel: ir.Operation, rows: int, check: SliceCheck) -> SlicePlan:
    """The plan to run `kernel` `rows` rows at a time, from the slice check that accepted it."""
    n = leading_size(kernel.results[0])
    inputs = list(kernel.regions[0].blocks[0].arguments) if kernel.name == "xhlo.fusion" else list(kernel.operands)
    types = {value: one_slice(value.type, rows) for value in check.sliced | check.read_sliced}
    types.update({value: one_slice(value.type, rows, across) for value, across in check.read_across.items()})
    sliced = tuple(value in check.read_sliced or value in check.read_across for value in inputs)
    return SlicePlan(n // rows, rows, sliced, types, tuple(check.read_across.get(value, 0) for value in inputs), check.positions)


def one_slice(tensor_type: ir.Type, rows: int = 1, across: int = 0) -> ir.Type:
    """The type of one slice of `rows` rows of dimension `across`."""
    ranked = ir.RankedTensorType(tensor_type)
    shape = list(ranked.shape)
    shape[across] = rows
    return ir.RankedTensorType.get(shape, ranked.element_type)


def strided_view_of(slice_type: ir.Type, whole_type: ir.Type) -> ir.Type:
    """The memref of one slice of a value read in blocks of a dimension other than 0: the
    slice's shape with the whole value's row-major strides."""
    whole = ir.RankedTensorType(signless(whole_type))
    strides, stride = [], 1
    for extent in reversed(whole.shape):
        strides.insert(0, stride)
        stride *= extent
    return ir.MemRefType.get(list(ir.RankedTensorType(slice_type).shape), whole.element_type,
                             layout=ir.StridedLayoutAttr.get(0, strides))


def kernel_function(module: ir.Module, kernel: ir.Operation, symbol: str, plan: SlicePlan | None = None,
                    library_result: ir.Value | None = None, in_place: tuple[tuple[int, int], ...] = (),
                    private_results: tuple[int, ...] = ()) -> func.FuncOp:
    """Add the destination-passing function computing `kernel` (one slice of it with `plan`)
    to `module`, xhlo inside: call `finish` once all kernels are in. With `library_result`
    (the result of an output fusion's dot, computed by a library call), the function is the
    epilogue alone: that value is its last operand. Each (operand, result) pair of `in_place`
    is one buffer: the operand is read through the result's argument, writable, so that
    bufferization updates it where it lies instead of copying it over itself. The results in
    `private_results` (no other argument's memory overlaps theirs) are marked `llvm.noalias`."""
    types = plan.types if plan else {}
    inner_arguments = list(kernel.regions[0].blocks[0].arguments) if kernel.name == "xhlo.fusion" else list(kernel.operands)
    operand_types = [types.get(inner, inner.type) for inner in inner_arguments]
    if library_result is not None:
        operand_types.append(types.get(library_result, library_result.type))
    if plan and plan.positions:
        operand_types.append(first_row_type())
    result_types = [plan.result_slice_type(r.type) if plan else r.type for r in kernel.results]
    for value_type in operand_types + result_types:
        if not isinstance(value_type, ir.RankedTensorType):
            raise MlirxlaError(f"the cpu backend cannot pass a {value_type} to a kernel", location_text(kernel.location))
    memrefs = [memref_of(t) for t in operand_types + result_types]
    for index, inner in enumerate(inner_arguments):
        if plan and plan.across(index):
            memrefs[index] = strided_view_of(operand_types[index], inner.type)
    for index, result in enumerate(kernel.results):
        if plan and plan.result_across(result.type):
            memrefs[len(operand_types) + index] = strided_view_of(result_types[index], result.type)
    with ir.InsertionPoint(module.body), kernel.location:
        function = func.FuncOp(symbol, ir.FunctionType.get(memrefs, []))
        mark_private_results(function, len(operand_types), private_results)
        entry = function.add_entry_block()
    with ir.InsertionPoint(entry), kernel.location:
        through_result = {operand: len(operand_types) + result for operand, result in in_place}
        tensors = []
        for index, tensor_type in enumerate(operand_types):
            argument = entry.arguments[through_result.get(index, index)]
            attributes = {"restrict": ir.UnitAttr.get()}
            if index in through_result:
                attributes["writable"] = ir.UnitAttr.get()
            loaded = ir.Operation.create("bufferization.to_tensor", results=[signless(tensor_type)], operands=[argument],
                                         attributes=attributes).result
            tensors.append(cast(loaded, tensor_type))
        first_row = tensors.pop() if plan and plan.positions else None
        values = clone_kernel(kernel, tensors, types, library_result, first_row)
        for value, destination in zip(values, list(entry.arguments)[len(operand_types):]):
            value, destination = materialization.unreshaped_result(value, destination, memref_of, values)
            ir.Operation.create("bufferization.materialize_in_destination", operands=[cast(value, signless(value.type)), destination],
                                attributes={"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()})
        func.ReturnOp([])
    return function


def mark_private_results(function: ir.Operation, operand_count: int, private_results: tuple[int, ...]) -> None:
    """Mark the arguments of `private_results` (after `operand_count` operands) `llvm.noalias`."""
    if not private_results:
        return
    private = {operand_count + result for result in private_results}
    count = len(ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).inputs)
    function.attributes["arg_attrs"] = ir.ArrayAttr.get(
        [ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()} if index in private else {}) for index in range(count)])


def clone_kernel(kernel: ir.Operation, operands: list[ir.Value], types: dict, library_result: ir.Value | None = None,
                 first_row: ir.Value | None = None) -> list[ir.Value]:
    """Clone `kernel` at the insertion point reading `operands`, giving the values in `types`
    their new (one-slice) types; `library_result` is not computed but read from the last
    operand; an iota along dimension 0 of one slice counts from `first_row`
    (`first_row_type`). Returns the kernel's results."""
    if kernel.name != "xhlo.fusion":
        return list(cloned(kernel, operands, types, first_row).results)
    ops, returned, _ = body_of(kernel)
    mapping = dict(zip(kernel.regions[0].blocks[0].arguments, operands))
    if library_result is not None:
        mapping[library_result] = operands[-1]
    for op in ops:
        if library_result is not None and library_result in op.results:
            continue
        clone = cloned(op, [mapping[v] for v in op.operands], types, first_row)
        for old, new in zip(op.results, clone.results):
            mapping[old] = new
    return [mapping[v] for v in returned]


def cloned(op: ir.Operation, operands: list[ir.Value], types: dict, first_row: ir.Value | None = None) -> ir.Operation:
    """`op` at the insertion point reading `operands`, its results retyped as `types` says,
    its location naming the fused op it is (what the dump says a kernel's scratch holds)."""
    if first_row is not None and op.name == "xhlo.iota" and op.results[0] in types and counts_rows(op):
        return counted_from(op, types[op.results[0]], first_row)
    if any(r in types for r in op.results):
        clone = retyped_clone(op, operands, [types.get(r, r.type) for r in op.results])
    else:
        clone = op.clone()
        for index, value in enumerate(operands):
            clone.operands[index] = value
    clone.location = materialization.describe(op)
    return clone


def first_row_type() -> ir.Type:
    """A sliced kernel's first row, its last operand when it counts rows (`SlicePlan.positions`)."""
    return ir.RankedTensorType.get([1], ir.IntegerType.get_signless(64))


def counted_from(iota: ir.Operation, slice_type: ir.Type, first_row: ir.Value) -> ir.Operation:
    """The iota along dimension 0 of one slice, counting from `first_row`: in i64, then
    converted to its own type."""
    i64 = ir.IntegerType.get_signless(64)
    wide = ir.RankedTensorType.get(list(ir.RankedTensorType(slice_type).shape), i64)
    local = create_op("xhlo.iota", [], [wide], {"iota_dimension": iota.attributes["iota_dimension"]}, iota.location)
    start = create_op("xhlo.reshape", [first_row], [ir.RankedTensorType.get([], i64)], {}, iota.location)
    start = create_op("xhlo.broadcast", [start.results[0]], [wide], {"dimensions": ir.DenseI64ArrayAttr.get([])}, iota.location)
    counted = create_op("xhlo.add", [local.results[0], start.results[0]], [wide], {}, iota.location)
    if ir.RankedTensorType(slice_type).element_type == i64:
        return counted
    return create_op("xhlo.convert", [counted.results[0]], [slice_type], {}, iota.location)


def retyped_clone(op: ir.Operation, operands: list[ir.Value], result_types: list[ir.Type]) -> ir.Operation:
    attributes = {name: op.attributes[name] for name in op.attributes}
    if op.name == "xhlo.constant":
        value = ir.DenseElementsAttr(attributes["value"])
        if not value.is_splat:
            raise MlirxlaError("the cpu backend cannot slice a constant that is not a splat", location_text(op.location))
        attributes["value"] = splat_of_type(value.get_splat_value(), result_types[0])
    if op.name == "xhlo.slice":  # one keeping the cut dimension whole (`SliceCheck`, `ColumnCheck`): it keeps the block
        limits = list(ir.DenseI64ArrayAttr(attributes["limit_indices"]))
        old_shape, new_shape = ir.RankedTensorType(op.results[0].type).shape, ir.RankedTensorType(result_types[0]).shape
        attributes["limit_indices"] = ir.DenseI64ArrayAttr.get(
            [new if new != old else limit for limit, old, new in zip(limits, old_shape, new_shape)])
    clone = create_op(op.name, operands, result_types, attributes, op.location, region_count=len(op.regions))
    for source, target in zip(op.regions, clone.regions):
        _copy_block(source.blocks[0], target)
    return clone


def _copy_block(source: ir.Block, target: ir.Region) -> None:
    block = ir.Block.create_at_start(target, [a.type for a in source.arguments], [a.location for a in source.arguments])
    mapping = dict(zip(source.arguments, block.arguments))
    with ir.InsertionPoint(block):
        for nested in source.operations:
            copied = nested.operation.clone()
            for index, value in enumerate(nested.operation.operands):
                if value in mapping:
                    copied.operands[index] = mapping[value]
            for old, new in zip(nested.operation.results, copied.results):
                mapping[old] = new


def finish(module: ir.Module, lanes: bool = True) -> None:
    """Rewrite the elementwise math the lowering gets wrong as XLA computes it
    (`elemental_math.py`: real expm1 and log1p, complex expm1, log1p, log, sqrt, rsqrt, tan and tanh), lower the
    xhlo inside the kernel functions to StableHLO, then give boolean `add` its StableHLO
    meaning (logical or) before the linalg lowering turns it into an integer add (which is xor
    on i1), and complex maximum and minimum their lexicographic order. `lanes`: variadic row
    reductions in lanes (`lane_reductions.py`, for the CPU's vectors; a GPU's row emitter
    splits a row over threads itself)."""
    materialization.sink_slices(module)
    materialization.concatenates_moved_below(module)
    rewrite_elemental_math(module)
    lower_module(module)
    materialization.merge_materialized_duplicates(module)
    if lanes:
        reduce_rows_in_lanes(module)
    for op in ops_named(module, "stablehlo.add"):
        if str(ir.RankedTensorType(op.results[0].type).element_type) == "i1":
            with ir.InsertionPoint(op), op.location:
                boolean_or = ir.Operation.create("stablehlo.or", results=[op.results[0].type], operands=list(op.operands))
            op.results[0].replace_all_uses_with(boolean_or.result)
            op.erase()
    for op in ops_named(module, "stablehlo.maximum", "stablehlo.minimum"):
        if "complex" in str(op.results[0].type):
            with ir.InsertionPoint(op), op.location:
                chosen = lexicographic_choice(op.operands[0], op.operands[1], "GT" if op.name == "stablehlo.maximum" else "LT")
            op.results[0].replace_all_uses_with(chosen)
            op.erase()


def lexicographic_choice(a: ir.Value, b: ir.Value, direction: str) -> ir.Value:
    """StableHLO's complex maximum (GT) or minimum (LT): `a` when it comes first comparing the
    real parts, then the imaginary parts (the linalg lowering compares otherwise)."""
    def stablehlo(name, operands, result_type, attributes=None):
        return ir.Operation.create(f"stablehlo.{name}", results=[result_type], operands=operands, attributes=attributes or {}).result

    ranked = ir.RankedTensorType(a.type)
    part = ir.RankedTensorType.get(list(ranked.shape), ir.ComplexType(ranked.element_type).element_type)
    boolean = ir.RankedTensorType.get(list(ranked.shape), ir.IntegerType.get_signless(1))

    def compare(x, y, how):
        return stablehlo("compare", [x, y], boolean, {"comparison_direction": ir.Attribute.parse(f"#stablehlo<comparison_direction {how}>")})

    real_a, real_b = stablehlo("real", [a], part), stablehlo("real", [b], part)
    imag_a, imag_b = stablehlo("imag", [a], part), stablehlo("imag", [b], part)
    first = stablehlo("or", [compare(real_a, real_b, direction),
                             stablehlo("and", [compare(real_a, real_b, "EQ"), compare(imag_a, imag_b, direction)], boolean)], boolean)
    return stablehlo("select", [first, a, b], a.type)
