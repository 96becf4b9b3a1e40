"""The algebraic simplifier's rewrites, one function each, grouped by the op they match.

`REWRITES` maps an op name to the rewrites tried on it, in order, after `EVERY_OP`'s; the
first that matches wins. See `common.py` for the contract of a rewrite.
"""

from types import MappingProxyType

from . import convolution, dot, elementwise, reduce, shape
from .common import NO_MATCH

REWRITES = MappingProxyType(
    {
        "xhlo.add": (elementwise.fold_add_zero, shape.add_of_adjacent_pads_as_concatenate),
        "xhlo.subtract": (elementwise.fold_subtract_zero,),
        "xhlo.multiply": (elementwise.fold_multiply_one, elementwise.fold_multiply_zero),
        "xhlo.divide": (elementwise.fold_divide_one, elementwise.divide_by_constant_as_multiply,
                        elementwise.divide_by_power_of_two_as_shift),
        "xhlo.remainder": (elementwise.remainder_by_power_of_two_as_mask,),
        "xhlo.power": (elementwise.power_of_half_as_sqrt,),
        "xhlo.negate": (elementwise.fold_double_negate,),
        "xhlo.not": (elementwise.fold_double_not,),
        "xhlo.compare": (elementwise.fold_compare_same_operand,),
        "xhlo.select": (elementwise.fold_select_constant_predicate, elementwise.fold_select_same_operands),
        "xhlo.reshape": (shape.fold_reshape_identity, shape.fold_reshape_of_reshape, shape.reshape_of_concatenate_as_concatenate,
                         shape.reshape_of_broadcast),
        "xhlo.transpose": (shape.fold_transpose_identity, shape.fold_transpose_of_transpose, dot.fold_transpose_of_dot,
                           shape.transpose_of_concatenate_as_concatenate, shape.transpose_of_broadcast_as_broadcast),
        "xhlo.broadcast": (shape.fold_broadcast_identity, shape.fold_broadcast_of_splat, shape.fold_broadcast_of_broadcast),
        "xhlo.iota": (shape.fold_iota_unit_dimension,),
        "xhlo.slice": (shape.fold_slice_full, shape.fold_slice_of_slice, shape.fold_slice_of_concatenate,
                       shape.fold_slice_of_reverse, shape.slice_of_broadcast_as_broadcast, shape.fold_slice_of_iota,
                       shape.slice_of_unary_as_unary_of_slice),
        "xhlo.dynamic_slice": (shape.fold_dynamic_slice_full,),
        "xhlo.dynamic_update_slice": (shape.fold_update_with_nothing, shape.fold_dynamic_update_slice_full),
        "xhlo.scatter": (shape.fold_update_with_nothing,),
        "xhlo.pad": (shape.fold_pad_zero, shape.pad_with_negative_edges_as_slice),
        "xhlo.concatenate": (shape.fold_concatenate_single, shape.fold_concatenate_empty_inputs,
                              shape.fold_concatenate_of_concatenate),
        "xhlo.convert": (shape.fold_convert_identity, shape.fold_convert_of_convert),
        "xhlo.dot": (convolution.zeros_for_an_empty_operand, dot.fold_dot_unit_contraction),
        "xhlo.convolution": (convolution.zeros_for_an_empty_operand, convolution.reverse_window_into_kernel),
        "xhlo.reduce": (reduce.fold_reduce_empty_dimension, reduce.fold_reduce_unit_dimensions, reduce.unrolled_short_reduce),
        "xhlo.reduce_window": (reduce.unrolled_short_reduce_window,),
    }
)

# tried on every op first
EVERY_OP = (shape.fold_zero_elements,)

__all__ = ["EVERY_OP", "NO_MATCH", "REWRITES"]
