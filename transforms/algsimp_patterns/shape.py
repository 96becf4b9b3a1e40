"""Rewrites of data-movement ops: reshape, transpose, broadcast, slice, pad, concatenate,
convert, iota. They only move or re-type elements, so each is exact once its shapes and
indices are right; converts are folded only when no value can change (see `lossless`).
"""

import math

from mlirxla.dialects.xhlo.builder import create_op, dense_splat
from mlirxla.dialects.xhlo.ops import WIDE
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.mlir import ir

from .common import (
    NO_MATCH,
    broadcast,
    int_list,
    int_width,
    is_float,
    is_integer,
    is_unsigned,
    produced_by,
    reshape,
    splat_attribute,
    splat_constant,
    splat_number,
)


def _same_type(a: ir.Type, b: ir.Type) -> bool:
    return str(a) == str(b)


def _i64s(values) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


# ---------------------------------------------------------------- reshape


def fold_reshape_identity(op: ir.Operation, options):
    """reshape(x) -> x when the result type is x's type."""
    operand = op.operands[0]
    if not _same_type(operand.type, op.result.type):
        return NO_MATCH
    return operand


def fold_reshape_of_reshape(op: ir.Operation, options):
    """reshape(reshape(x)) -> reshape(x) (row-major order is kept by both)."""
    inner = produced_by(op.operands[0], "reshape")
    if inner is None:
        return NO_MATCH
    source = inner.operands[0]
    if _same_type(source.type, op.result.type):
        return source
    return create_op("xhlo.reshape", [source], [op.result.type], {}, op.location).results[0]


def reshape_of_concatenate_as_concatenate(op: ir.Operation, options):
    """reshape(concatenate(a, b, d)) -> concatenate(reshape(a), reshape(b)) when the reshape
    only adds or drops dimensions of size 1, d not among them, and is the concatenate's only
    reader: the concatenate then reaches a transpose after the reshape
    (`transpose_of_concatenate_as_concatenate`), or the kernel result it is written to."""
    concatenate = produced_by(op.operands[0], "concatenate")
    if concatenate is None or _read_elsewhere(concatenate):
        return NO_MATCH
    dimension = ir.IntegerAttr(concatenate.attributes["dimension"]).value
    moved = _unit_dimensions_only(op, [dimension])
    if moved is None:
        return NO_MATCH
    parts = [_reshaped_alike(operand, op, {moved[dimension]: shape_of(operand.type)[dimension]})
             for operand in concatenate.operands]
    return _concatenate(parts, moved[dimension], op)


def _unit_dimensions_only(reshape: ir.Operation, dimensions: list[int]) -> dict[int, int] | None:
    """Where each dimension of the reshape's operand other than size 1 goes in its result,
    when the reshape only adds or drops dimensions of size 1 and none of `dimensions` is
    dropped; else None."""
    source_shape, result_shape = shape_of(reshape.operands[0].type), shape_of(reshape.result.type)
    source_kept = [axis for axis, size in enumerate(source_shape) if size != 1]
    result_kept = [axis for axis, size in enumerate(result_shape) if size != 1]
    if any(source_shape[axis] == 1 for axis in dimensions) \
            or [source_shape[axis] for axis in source_kept] != [result_shape[axis] for axis in result_kept]:
        return None
    return dict(zip(source_kept, result_kept))


def _reshaped_alike(value: ir.Value, reshape: ir.Operation, sizes: dict[int, int]) -> ir.Value:
    """`value` reshaped to `reshape`'s result shape with the dimensions of `sizes` resized."""
    shape = shape_of(reshape.result.type)
    for axis, size in sizes.items():
        shape[axis] = size
    result_type = ir.RankedTensorType.get(shape, element_of(value.type))
    return create_op("xhlo.reshape", [value], [result_type], {}, reshape.location).results[0]


# ---------------------------------------------------------------- transpose


def fold_transpose_identity(op: ir.Operation, options):
    """transpose(x, [0, 1, ..., n-1]) -> x."""
    permutation = int_list(op, "permutation")
    if permutation != list(range(len(permutation))):
        return NO_MATCH
    return op.operands[0]


def fold_transpose_of_transpose(op: ir.Operation, options):
    """transpose(transpose(x, p), q) -> transpose(x, [p[q[i]]]), or x when that is the identity."""
    inner = produced_by(op.operands[0], "transpose")
    if inner is None:
        return NO_MATCH
    p, q = int_list(inner, "permutation"), int_list(op, "permutation")
    composed = [p[q[i]] for i in range(len(q))]
    source = inner.operands[0]
    if composed == list(range(len(composed))):
        return source
    return create_op("xhlo.transpose", [source], [op.result.type], {"permutation": _i64s(composed)}, op.location).results[0]


def transpose_of_concatenate_as_concatenate(op: ir.Operation, options):
    """transpose(concatenate(a, b, d), p) -> concatenate(transpose(a, p), transpose(b, p)) along
    the dimension d moves to, when the transpose is the concatenate's only reader. A kernel
    writes a concatenate into its result slice by slice, each part's loop nest reading its
    operands transposed; a transposed concatenate went through scratch first (jax's weight
    gradient of a convolution over a gated activation's two halves: 8 MiB a layer)."""
    concatenate = produced_by(op.operands[0], "concatenate")
    if concatenate is None or _read_elsewhere(concatenate):
        return NO_MATCH
    permutation = int_list(op, "permutation")
    dimension = ir.IntegerAttr(concatenate.attributes["dimension"]).value
    parts = []
    for operand in concatenate.operands:
        shape = shape_of(operand.type)
        part_type = ir.RankedTensorType.get([shape[axis] for axis in permutation], element_of(operand.type))
        parts.append(create_op("xhlo.transpose", [operand], [part_type], {"permutation": op.attributes["permutation"]},
                               op.location).results[0])
    return _concatenate(parts, permutation.index(dimension), op)


def _read_elsewhere(op: ir.Operation) -> bool:
    return len(list(op.results[0].uses)) != 1


def _concatenate(parts: list[ir.Value], dimension: int, like: ir.Operation) -> ir.Value:
    attrs = {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dimension)}
    return create_op("xhlo.concatenate", parts, [like.result.type], attrs, like.location).results[0]


# ---------------------------------------------------------------- broadcast


def fold_broadcast_identity(op: ir.Operation, options):
    """broadcast(x, dimensions = [0, ..., n-1]) to x's own shape -> x."""
    operand = op.operands[0]
    dimensions = int_list(op, "dimensions")
    if dimensions != list(range(len(dimensions))) or not _same_type(operand.type, op.result.type):
        return NO_MATCH
    return operand


def fold_broadcast_of_broadcast(op: ir.Operation, options):
    """broadcast(broadcast(x, d1), d2) -> broadcast(x, [d2[d1[i]]])."""
    inner = produced_by(op.operands[0], "broadcast")
    if inner is None:
        return NO_MATCH
    d1, d2 = int_list(inner, "dimensions"), int_list(op, "dimensions")
    composed = [d2[d] for d in d1]
    attrs = {"dimensions": _i64s(composed)}
    return create_op("xhlo.broadcast", [inner.operands[0]], [op.result.type], attrs, op.location).results[0]


def fold_broadcast_of_splat(op: ir.Operation, options):
    """broadcast(splat constant c) -> splat constant c of the result type, for small results
    only: a constant is a buffer, a broadcast costs nothing once fused (XLA keeps them)."""
    if not options.fold_splats or math.prod(shape_of(op.result.type)) > options.max_splat_constant_elements:
        return NO_MATCH
    attr = splat_attribute(op.operands[0])
    if attr is None:
        return NO_MATCH
    return splat_constant(attr, op.result.type, op.location)


def transpose_of_broadcast_as_broadcast(op: ir.Operation, options):
    """transpose(broadcast(x, d), p) -> broadcast(x, [p^-1[d_i]]) when those stay increasing:
    the transpose only moves copies (jax's `polyval` with coefficients broadcast against x
    transposes a [n, k] broadcast of k constants, a 100000 x 10 copy per coefficient)."""
    inner = produced_by(op.operands[0], "broadcast")
    if inner is None:
        return NO_MATCH
    inverse = [0] * len(int_list(op, "permutation"))
    for position, source in enumerate(int_list(op, "permutation")):
        inverse[source] = position
    dimensions = [inverse[d] for d in int_list(inner, "dimensions")]
    if dimensions != sorted(dimensions):
        return NO_MATCH
    return broadcast(inner.operands[0], dimensions, op.result.type, op.location)


def reshape_of_broadcast(op: ir.Operation, options):
    """reshape(broadcast(x)) -> reshape(x) when the broadcast only adds dimensions of size 1
    (in order); -> broadcast(x as a scalar) when x holds one element."""
    inner = produced_by(op.operands[0], "broadcast")
    if inner is None:
        return NO_MATCH
    operand = inner.operands[0]
    elements = math.prod(shape_of(operand.type))
    if elements == 1:
        return broadcast(reshape(operand, [], op.location), [], op.result.type, op.location)
    dimensions = int_list(inner, "dimensions")
    if elements == math.prod(shape_of(op.result.type)) and dimensions == sorted(dimensions):
        return reshape(operand, shape_of(op.result.type), op.location)
    return NO_MATCH


def fold_iota_unit_dimension(op: ir.Operation, options):
    """iota along a dimension of size 1 -> splat 0 (every index along it is 0)."""
    if not options.fold_splats:
        return NO_MATCH
    dimension = ir.IntegerAttr(op.attributes["iota_dimension"]).value
    element = element_of(op.result.type)
    if shape_of(op.result.type)[dimension] != 1 or not (is_integer(element) or is_float(element)):
        return NO_MATCH
    value = dense_splat(0, op.result.type)
    return create_op("xhlo.constant", [], [op.result.type], {"value": value}, op.location).results[0]


# ---------------------------------------------------------------- slice


def fold_slice_full(op: ir.Operation, options):
    """slice(x, start = 0, limit = shape, strides = 1) -> x."""
    operand = op.operands[0]
    starts, limits, strides = int_list(op, "start_indices"), int_list(op, "limit_indices"), int_list(op, "strides")
    if any(s != 0 for s in starts) or any(t != 1 for t in strides) or limits != shape_of(operand.type):
        return NO_MATCH
    return operand


def fold_dynamic_slice_full(op: ir.Operation, options):
    """dynamic_slice(x, starts, sizes = shape of x) -> x: every start clamps to 0 (XLA's rule;
    a 0-d one, jax's `lax.dynamic_slice(x, [], [])`, crashed the kernel lowering)."""
    operand = op.operands[0]
    if int_list(op, "slice_sizes") != shape_of(operand.type):
        return NO_MATCH
    return operand


def fold_dynamic_update_slice_full(op: ir.Operation, options):
    """dynamic_update_slice(x, u, starts) -> u when u is as large as x: every start clamps to 0."""
    operand, update = op.operands[0], op.operands[1]
    if not _same_type(operand.type, update.type):
        return NO_MATCH
    return update


def fold_update_with_nothing(op: ir.Operation, options):
    """dynamic_update_slice(x, u, ...) or a one-operand scatter(x, i, u) -> x when the update u
    has no elements (XLA's rule for empty updates): nothing is written, and a scatter kernel over
    zero updates does not lower (vmap of a dynamic_update_slice with an empty update)."""
    if op.name == "xhlo.scatter" and len(op.operands) != 3:
        return NO_MATCH
    update = op.operands[2] if op.name == "xhlo.scatter" else op.operands[1]
    if 0 not in shape_of(update.type):
        return NO_MATCH
    return op.operands[0]


def fold_slice_of_slice(op: ir.Operation, options):
    """slice(slice(x, a, _, s), b, _, t) -> slice(x, a + b*s, ..., s*t), limits from the result size."""
    inner = produced_by(op.operands[0], "slice")
    if inner is None:
        return NO_MATCH
    starts, limits, strides = [], [], []
    outer_starts, outer_strides = int_list(op, "start_indices"), int_list(op, "strides")
    inner_starts, inner_strides = int_list(inner, "start_indices"), int_list(inner, "strides")
    for a, s, b, t, size in zip(inner_starts, inner_strides, outer_starts, outer_strides, shape_of(op.result.type)):
        start, stride = a + b * s, s * t
        starts.append(start)
        strides.append(stride)
        limits.append(start + (size - 1) * stride + 1 if size > 0 else start)
    attrs = {"start_indices": _i64s(starts), "limit_indices": _i64s(limits), "strides": _i64s(strides)}
    return create_op("xhlo.slice", [inner.operands[0]], [op.result.type], attrs, op.location).results[0]


def slice_of_broadcast_as_broadcast(op: ir.Operation, options):
    """slice(broadcast(x, d)) -> broadcast(slice(x), d): each dimension of x cut as the result
    dimension it maps to, one of size 1 the broadcast expands kept whole (XLA's algebraic
    simplifier does the same)."""
    inner = produced_by(op.operands[0], "broadcast")
    if inner is None:
        return NO_MATCH
    operand, dimensions = inner.operands[0], int_list(inner, "dimensions")
    operand_shape, expanded_shape = shape_of(operand.type), shape_of(inner.result.type)
    starts, limits, strides = int_list(op, "start_indices"), int_list(op, "limit_indices"), int_list(op, "strides")
    cuts = [(starts[d], limits[d], strides[d]) if size == expanded_shape[d] else (0, 1, 1)
            for size, d in zip(operand_shape, dimensions)]
    if cuts == [(0, size, 1) for size in operand_shape]:
        sliced = operand
    else:
        sizes = [-(-(limit - start) // stride) for start, limit, stride in cuts]
        attrs = {"start_indices": _i64s(c[0] for c in cuts), "limit_indices": _i64s(c[1] for c in cuts),
                 "strides": _i64s(c[2] for c in cuts)}
        sliced_type = ir.RankedTensorType.get(sizes, element_of(operand.type))
        sliced = create_op("xhlo.slice", [operand], [sliced_type], attrs, op.location).results[0]
    return broadcast(sliced, dimensions, op.result.type, op.location)


UNARY_ELEMENTWISE = ("convert", "negate", "not", "abs", "bitcast_convert")


def slice_of_unary_as_unary_of_slice(op: ir.Operation, options):
    """slice(u(x)) -> u(slice(x)) for a unary elementwise u (a convert, a negation) whose
    readers are all slices: each computes only the part it keeps, and the slice reaches what
    u reads (jax's piecewise converts its stacked [3, n] conditions to i32 and slices the rows
    of its cumulative sum back out: through the convert, each row is the condition it was)."""
    inner = op.operands[0].owner
    if isinstance(inner, ir.Block) or not inner.name.startswith("xhlo.") or inner.name[len("xhlo."):] not in UNARY_ELEMENTWISE:
        return NO_MATCH
    if shape_of(inner.operands[0].type) != shape_of(inner.results[0].type):
        return NO_MATCH
    if any(use.owner.name != "xhlo.slice" for use in inner.results[0].uses):
        return NO_MATCH
    source = inner.operands[0]
    sliced_type = ir.RankedTensorType.get(shape_of(op.result.type), element_of(source.type))
    attrs = {name: op.attributes[name] for name in ("start_indices", "limit_indices", "strides")}
    sliced = create_op("xhlo.slice", [source], [sliced_type], attrs, op.location).results[0]
    kept = {name: inner.attributes[name] for name in inner.attributes if name != "result_layouts"}
    return create_op(inner.name, [sliced], [op.result.type], kept, op.location).results[0]


def fold_slice_of_iota(op: ir.Operation, options):
    """slice(iota along d) keeping one index i of d -> broadcast(i) (the rows of an argmax
    over a short dimension, unrolled, each compare with their index)."""
    inner = produced_by(op.operands[0], "iota")
    dimension = ir.IntegerAttr(inner.attributes["iota_dimension"]).value if inner is not None else None
    element = element_of(op.result.type)
    if inner is None or shape_of(op.result.type)[dimension] != 1 or not (is_integer(element) or is_float(element)):
        return NO_MATCH
    scalar_type = ir.RankedTensorType.get([], element)
    value = dense_splat(int_list(op, "start_indices")[dimension], scalar_type)
    scalar = create_op("xhlo.constant", [], [scalar_type], {"value": value}, op.location).results[0]
    return broadcast(scalar, [], op.result.type, op.location)


def fold_slice_of_concatenate(op: ir.Operation, options):
    """slice(concatenate(a, b, ...)) -> the slices of the inputs it reads, concatenated; the
    one slice when it reads one input (XLA's HandleSlice). jax's threefry builds its key
    schedule by concatenating scalars and slicing them out again; left in, each random-bits
    kernel held a concatenate, which kept multi-output fusion from merging the rounds'
    kernels. A slice across inputs reads values a kernel computes no more than once either
    way, and a slice of a computed value goes through kernel scratch where a concatenate of
    views does not: `jnp.pad(mode="reflect")` slices its own concatenates twice per padded
    dimension, and `jnp.roll` slices the result again (8 x 64 x 64 x 16: 25 MiB of scratch
    for a 2.5 MiB result)."""
    concatenate = produced_by(op.operands[0], "concatenate")
    if concatenate is None:
        return NO_MATCH
    dimension = ir.IntegerAttr(concatenate.attributes["dimension"]).value
    starts, strides = int_list(op, "start_indices"), int_list(op, "strides")
    start, stride, count = starts[dimension], strides[dimension], shape_of(op.result.type)[dimension]
    last = start + (count - 1) * stride
    pieces, offset = [], 0
    for operand in concatenate.operands:
        size = shape_of(operand.type)[dimension]
        first = start + max(0, -(-(offset - start) // stride)) * stride  # the slice's first index at or after offset
        if first < offset + size and first <= last:
            taken = (min(last, offset + size - 1) - first) // stride + 1
            pieces.append(_slice_along(op, operand, dimension, first - offset, taken))
        offset += size
    return pieces[0] if len(pieces) == 1 else _concatenate(pieces, dimension, op)


def _slice_along(op: ir.Operation, operand: ir.Value, dimension: int, start: int, count: int) -> ir.Value:
    """`operand` sliced as slice `op` slices, but along `dimension` `count` elements from
    `start` (`op`'s stride)."""
    starts, limits, strides = int_list(op, "start_indices"), int_list(op, "limit_indices"), int_list(op, "strides")
    starts[dimension], limits[dimension] = start, start + (count - 1) * strides[dimension] + 1
    shape = shape_of(op.result.type)
    shape[dimension] = count
    result_type = ir.RankedTensorType.get(shape, element_of(op.result.type))
    attrs = {"start_indices": _i64s(starts), "limit_indices": _i64s(limits), "strides": _i64s(strides)}
    return create_op("xhlo.slice", [operand], [result_type], attrs, op.location).results[0]


def fold_slice_of_reverse(op: ir.Operation, options):
    """slice(reverse(x)) -> reverse(slice(x)), the slice mirrored along the reversed dimensions
    (XLA's TryToReorderSliceAndReverse): the reverse reads a view of `x`, not a computed value
    a slice would put in memory first."""
    reverse = produced_by(op.operands[0], "reverse")
    if reverse is None:
        return NO_MATCH
    source = reverse.operands[0]
    sizes, counts = shape_of(source.type), shape_of(op.result.type)
    starts, limits, strides = int_list(op, "start_indices"), int_list(op, "limit_indices"), int_list(op, "strides")
    for dimension in int_list(reverse, "dimensions"):
        first_taken = sizes[dimension] - 1 - starts[dimension]  # in x, the element the slice takes first
        starts[dimension] = first_taken - (counts[dimension] - 1) * strides[dimension]
        limits[dimension] = first_taken + 1
    attrs = {"start_indices": _i64s(starts), "limit_indices": _i64s(limits), "strides": _i64s(strides)}
    sliced = create_op("xhlo.slice", [source], [op.result.type], attrs, op.location).results[0]
    attrs = {"dimensions": reverse.attributes["dimensions"]}
    return create_op("xhlo.reverse", [sliced], [op.result.type], attrs, op.location).results[0]


# ---------------------------------------------------------------- pad, concatenate


def add_of_adjacent_pads_as_concatenate(op: ir.Operation, options):
    """add(pad(a, z), pad(b, w)) -> pad(concatenate(a + w, z + b), z + w), z and w zeros,
    when the two pad along one dimension only and a's place ends where b's begins (or b's
    where a's): jax's gradient of slices of one value (a gated activation's halves, an LSTM's
    gates) adds one zero-padded gradient per slice, and each padded value went through memory
    before the add, where a concatenate writes each part where it goes. The adds of the other
    pad's zero stay (-0.0 + 0.0 is +0.0), elementwise work in the concatenate's loops; the
    outer pad goes when the two cover the dimension."""
    pads = [_zero_pad_along_one_dimension(value) for value in op.operands]
    if None in pads or pads[0][0] != pads[1][0]:
        return NO_MATCH
    dimension = pads[0][0]
    (_, first_low, first, first_zero), (_, second_low, second, second_zero) = pads
    first_size, second_size = shape_of(first.type)[dimension], shape_of(second.type)[dimension]
    if first_low + first_size != second_low and second_low + second_size != first_low:
        return NO_MATCH
    first_parts = _parts_plus_zero(first, second_zero, dimension, op.location)
    second_parts = _parts_plus_zero(second, first_zero, dimension, op.location)
    if first_low + first_size == second_low:
        low, parts = first_low, first_parts + second_parts
    else:
        low, parts = second_low, second_parts + first_parts
    shape = shape_of(op.result.type)
    joined_shape = list(shape)
    joined_shape[dimension] = first_size + second_size
    joined_type = ir.RankedTensorType.get(joined_shape, element_of(op.result.type))
    dimension_attr = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dimension)
    joined = create_op("xhlo.concatenate", parts, [joined_type], {"dimension": dimension_attr}, op.location).results[0]
    if joined_shape == list(shape):
        return joined
    low_padding, high_padding = [0] * len(shape), [0] * len(shape)
    low_padding[dimension], high_padding[dimension] = low, shape[dimension] - low - joined_shape[dimension]
    attrs = {"edge_padding_low": _i64s(low_padding), "edge_padding_high": _i64s(high_padding),
             "interior_padding": _i64s([0] * len(shape))}
    return create_op("xhlo.pad", [joined, _sum_of_zeros(first_zero, second_zero)], [op.result.type], attrs, op.location).results[0]


def _parts_plus_zero(value: ir.Value, zero: ir.Value, dimension: int, location) -> list[ir.Value]:
    """What `value`, one pad's operand, puts in the concatenate that replaces an add of pads,
    the other pad's `zero` added: the parts of a concatenate along `dimension` (an earlier
    rewrite's, in a chain of adds) each plus the zero, so that a chain gives one flat
    concatenate with one add a part (64 slices nested 64 deep: 9,000 lines of LLVM IR and
    0.7 s of LLVM), else `value` plus the zero."""
    concatenate = produced_by(value, "concatenate")
    nested = concatenate is not None and ir.IntegerAttr(concatenate.attributes["dimension"]).value == dimension
    return [_plus_zero(part, zero, location) for part in (concatenate.operands if nested else [value])]


def _plus_zero(value: ir.Value, zero: ir.Value, location) -> ir.Value:
    """value + `zero` (a scalar zero constant) broadcast, as one add: a value that is already
    something plus a broadcast zero takes the sum of the two zeros instead, which is exact
    ((y + z0) + z1 == y + (z0 + z1) for zeros z0, z1 of either sign), and is itself when that
    sum is its own zero (no op made again for each part a chain's next add keeps)."""
    add = produced_by(value, "add")
    for index in (0, 1) if add is not None else ():
        earlier = _broadcast_scalar_zero(add.operands[index])
        if earlier is not None:
            total = _sum_of_zeros(earlier, zero)
            if total == earlier:
                return value
            return _elementwise("add", [add.operands[1 - index], _broadcast_scalar(total, value.type, location)], location)
    return _elementwise("add", [value, _broadcast_scalar(zero, value.type, location)], location)


def _broadcast_scalar_zero(value: ir.Value) -> ir.Value | None:
    """The scalar zero constant `value` broadcasts, else None."""
    broadcast = produced_by(value, "broadcast")
    if broadcast is None or shape_of(broadcast.operands[0].type) or splat_number(broadcast.operands[0]) != 0:
        return None
    return broadcast.operands[0]


def _sum_of_zeros(first: ir.Value, second: ir.Value) -> ir.Value:
    """first + second, two splat zero constants, as the one of them that is the sum (+0.0
    unless both are -0.0): a constant, so that the add of the next pad in a chain of them
    (jax's gradient of a stack's slices: one zero-padded gradient per slice) matches in the
    same sweep. An add made here waited for constant folding and CSE: one pad more per
    round of the simplification pipeline, which gave up on 64 slices."""
    return first if math.copysign(1.0, splat_number(first)) > 0 or math.copysign(1.0, splat_number(second)) < 0 else second


def _zero_pad_along_one_dimension(value: ir.Value):
    """(dimension, low, operand, padding value) when `value` is its operand padded with a zero
    (no interior, nothing cut off) along that dimension only; else None."""
    pad = produced_by(value, "pad")
    if pad is None or splat_number(pad.operands[1]) != 0:
        return None
    lows, highs = int_list(pad, "edge_padding_low"), int_list(pad, "edge_padding_high")
    if any(int_list(pad, "interior_padding")) or min(lows + highs) < 0:
        return None
    padded = [d for d, (low, high) in enumerate(zip(lows, highs)) if low or high]
    if len(padded) != 1:
        return None
    return padded[0], lows[padded[0]], pad.operands[0], pad.operands[1]


def _broadcast_scalar(scalar: ir.Value, result_type: ir.Type, location) -> ir.Value:
    return create_op("xhlo.broadcast", [scalar], [result_type], {"dimensions": _i64s([])}, location).results[0]


def _elementwise(name: str, operands: list[ir.Value], location) -> ir.Value:
    return create_op(f"xhlo.{name}", operands, [operands[0].type], {}, location).results[0]


def fold_pad_zero(op: ir.Operation, options):
    """pad(x, v, low = 0, high = 0, interior = 0) -> x."""
    names = ("edge_padding_low", "edge_padding_high", "interior_padding")
    if any(p != 0 for name in names for p in int_list(op, name)):
        return NO_MATCH
    return op.operands[0]


def pad_with_negative_edges_as_slice(op: ir.Operation, options):
    """pad(x, low, high) with a negative edge -> slice(pad(x, max(low, 0), max(high, 0))), the
    inner pad gone when nothing is left of it (XLA's HandlePad). jax's gradient of a padded
    value (a causal convolution's left pad) is a pad cutting the edges off; the lowering
    builds a pad in a new buffer, where a slice of a kernel input is a view of it."""
    lows, highs = int_list(op, "edge_padding_low"), int_list(op, "edge_padding_high")
    interiors = int_list(op, "interior_padding")
    if min(lows + highs) >= 0:
        return NO_MATCH
    kept_lows, kept_highs = [max(low, 0) for low in lows], [max(high, 0) for high in highs]
    padded = op.operands[0]
    if any(kept_lows + kept_highs + interiors):
        shape = [size + max(size - 1, 0) * interior + low + high
                 for size, interior, low, high in zip(shape_of(padded.type), interiors, kept_lows, kept_highs)]
        attrs = {"edge_padding_low": _i64s(kept_lows), "edge_padding_high": _i64s(kept_highs),
                 "interior_padding": op.attributes["interior_padding"]}
        padded_type = ir.RankedTensorType.get(shape, element_of(op.result.type))
        padded = create_op("xhlo.pad", [padded, op.operands[1]], [padded_type], attrs, op.location).results[0]
    starts = [max(-low, 0) for low in lows]
    limits = [size - max(-high, 0) for size, high in zip(shape_of(padded.type), highs)]
    attrs = {"start_indices": _i64s(starts), "limit_indices": _i64s(limits), "strides": _i64s([1] * len(starts))}
    return create_op("xhlo.slice", [padded], [op.result.type], attrs, op.location).results[0]


def fold_concatenate_single(op: ir.Operation, options):
    """concatenate(x) -> x."""
    if len(op.operands) != 1:
        return NO_MATCH
    return op.operands[0]


def fold_concatenate_of_concatenate(op: ir.Operation, options):
    """concatenate(a, concatenate(b, c), d) -> concatenate(a, b, c, d) along one dimension
    (XLA's HandleConcatenate): one loop nest choosing among the parts, where the inner one fed
    the outer one's choice; not past xhlo's `WIDE` input slots."""
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    inputs = []
    for value in op.operands:
        inner = produced_by(value, "concatenate")
        flattened = inner is not None and ir.IntegerAttr(inner.attributes["dimension"]).value == dimension
        inputs.extend(inner.operands if flattened else [value])
    if len(inputs) == len(op.operands) or len(inputs) > WIDE:
        return NO_MATCH
    return _concatenate(inputs, dimension, op)


def fold_concatenate_empty_inputs(op: ir.Operation, options):
    """concatenate(x, empty, y) -> concatenate(x, y): inputs of size 0 along the dimension add nothing."""
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    inputs = list(op.operands)
    kept = [v for v in inputs if shape_of(v.type)[dimension] != 0]
    if len(kept) == len(inputs):
        return NO_MATCH
    if len(kept) <= 1:  # all empty: the first input already has the result's type
        return kept[0] if kept else inputs[0]
    attrs = {"dimension": op.attributes["dimension"]}
    return create_op("xhlo.concatenate", kept, [op.result.type], attrs, op.location).results[0]


# ---------------------------------------------------------------- any op

# ops whose result may be empty while they still do something (effects, control flow)
KEEP_WHEN_EMPTY = frozenset({"xhlo.constant", "xhlo.custom_call", "xhlo.while", "xhlo.conditional", "xhlo.call", "xhlo.rng",
                             "xhlo.rng_bit_generator", "xhlo.infeed", "xhlo.outfeed", "xhlo.send", "xhlo.recv"})


def fold_zero_elements(op: ir.Operation, options):
    """op(...) -> dense<> when its one result has no elements (XLA's zero-element-array rule):
    nothing is left to compute, and kernels over empty operands need not be generated."""
    if op.name in KEEP_WHEN_EMPTY or len(op.results) != 1 or "channel_handle" in op.attributes:
        return NO_MATCH
    result_type = op.results[0].type
    if not isinstance(result_type, ir.RankedTensorType) or 0 not in shape_of(result_type):
        return NO_MATCH
    return create_op("xhlo.constant", [], [result_type], {"value": ir.Attribute.parse(f"dense<> : {result_type}")}, op.location).results[0]


# ---------------------------------------------------------------- convert

# float types whose every value another float type holds exactly
FLOAT_SUBSETS = {("f16", "f32"), ("f16", "f64"), ("bf16", "f32"), ("bf16", "f64"), ("f32", "f64")}
# significand bits (implicit bit included): integers of up to this many magnitude bits are exact
FLOAT_PRECISION = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}


def _magnitude_bits(element: ir.Type) -> int:
    """Bits of magnitude an integer type holds: all of them unsigned (i1 as 0/1), one less signed."""
    width = int_width(element)
    return width if is_unsigned(element) or width == 1 else width - 1


def lossless(source: ir.Type, target: ir.Type) -> bool:
    """Every value of element type `source` converts to `target` exactly (so it converts back)."""
    if str(source) == str(target):
        return True
    if is_integer(source) and is_integer(target):
        source_signed = not is_unsigned(source) and int_width(source) > 1
        target_signed = not is_unsigned(target) and int_width(target) > 1
        if source_signed and not target_signed:
            return False
        return _magnitude_bits(source) <= _magnitude_bits(target)
    if is_float(source) and is_float(target):
        return (str(source), str(target)) in FLOAT_SUBSETS
    if is_integer(source) and str(target) in FLOAT_PRECISION:
        return _magnitude_bits(source) <= FLOAT_PRECISION[str(target)]
    return False


def fold_convert_identity(op: ir.Operation, options):
    """convert(x) -> x when the element type does not change."""
    operand = op.operands[0]
    if not _same_type(operand.type, op.result.type):
        return NO_MATCH
    return operand


def fold_convert_of_convert(op: ir.Operation, options):
    """convert(convert(x: A -> B) -> C): x when C = A, convert(x -> C) when A -> B -> C both widen exactly."""
    inner = produced_by(op.operands[0], "convert")
    if inner is None:
        return NO_MATCH
    source = inner.operands[0]
    a, b, c = element_of(source.type), element_of(inner.result.type), element_of(op.result.type)
    if not lossless(a, b):
        return NO_MATCH
    if _same_type(source.type, op.result.type):
        return source
    if not lossless(b, c):
        return NO_MATCH
    return create_op("xhlo.convert", [source], [op.result.type], {}, op.location).results[0]
