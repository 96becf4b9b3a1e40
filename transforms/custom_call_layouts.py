"""xhlo-custom-call-layouts: a custom call's `operand_layouts` and `result_layouts` that are
not row-major become explicit transposes around the call (XLA's layout assignment honours a
custom call's layouts with copies that transpose, which fusion then folds into neighbours).

jax's cpu LAPACK calls (`lapack_sgetrf_ffi`, `lapack_strsm_ffi`, ...) ask for column-major
matrices: layout `{0, 1}` for a matrix, `{1, 2, 0}` for a batch. mlirxla's buffers are
row-major, so before this pass the host call turned every operand into Fortran order with
numpy and every result back (`runtime/lapack_ffi.column_major`): three strided copies for a
512x512 trsm cost 1 ms, more than scipy's trsm itself (0.7 ms). After it the call reads
buffers that already hold its operands in the order the layout asks for, made by transpose
kernels that fuse with the ops around them, and the routine's copies are plain ones.

The call then takes and returns tensors of the physical shape (dimensions major to minor,
the layout reversed), declares row-major layouts for them, and records for each operand
and result the logical dimensions in the order its buffer holds them
(`xhlo.operand_orders`, `xhlo.result_orders`): the host call views its buffers with the
logical shapes again, so the routine computes on the same values and the bits stay
jaxlib's. A call whose layouts are all row-major is left alone; `sdy.sharding_rule` is
dropped from a rewritten call (its factors name the logical dimensions, and sharding has
been resolved before this pass). A result nothing reads gets no transpose (jax's SVD without
vectors still returns gesdd's u and vt: simplification, which would remove a dead transpose,
has run). Runs after simplification, before layout assignment and fusion. Changed: any call
rewritten.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op, transposed
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .pass_base import ModulePass, PassResult

OPERAND_ORDERS = "xhlo.operand_orders"
RESULT_ORDERS = "xhlo.result_orders"
DROPPED_ATTRIBUTES = ("sdy.sharding_rule", "operand_layouts", "result_layouts")


def layouts(op: ir.Operation, name: str) -> list[list[int]] | None:
    """The minor-to-major layouts a custom call declares under `name`, or None."""
    if name not in op.attributes:
        return None
    return [[int(d) for d in ir.DenseIntElementsAttr(layout)] for layout in ir.ArrayAttr(op.attributes[name])]


def orders(values, layouts_: list[list[int]]) -> list[list[int]] | None:
    """Each value's logical dimensions major to minor (its buffer's row-major order: the
    layout reversed); None unless every value is a ranked tensor with a layout of its rank
    (a token or a tuple is left to the call as it is)."""
    values = list(values)
    if len(values) != len(layouts_):
        return None
    for value, layout in zip(values, layouts_):
        if not isinstance(value.type, ir.RankedTensorType) or sorted(layout) != list(range(ir.RankedTensorType(value.type).rank)):
            return None
    return [list(reversed(layout)) for layout in layouts_]


def is_identity(order: list[int]) -> bool:
    return order == list(range(len(order)))


def inverse(order: list[int]) -> list[int]:
    back = [0] * len(order)
    for position, dimension in enumerate(order):
        back[dimension] = position
    return back


def row_major_layout(rank: int) -> ir.Attribute:
    """StableHLO's row-major layout of a tensor of `rank` dimensions."""
    return ir.Attribute.parse(f"dense<{list(range(rank - 1, -1, -1))}> : tensor<{rank}xindex>")


def orders_attribute(orders: list[list[int]]) -> ir.Attribute:
    return ir.ArrayAttr.get([ir.DenseI64ArrayAttr.get(order) for order in orders])


def untransposed(value: ir.Value, order: list[int]) -> ir.Value | None:
    """The operand of `value`'s transpose where transposing `value` by `order` undoes it (a
    rewritten call's result passed to another in the same layout), else None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "xhlo.transpose":
        return None
    permutation = list(ir.DenseI64ArrayAttr(owner.attributes["permutation"]))
    return owner.operands[0] if all(permutation[order[i]] == i for i in range(len(order))) else None


def defining_block(value: ir.Value) -> ir.Block:
    owner = value.owner
    return owner if isinstance(owner, ir.Block) else owner.operation.block


def rewrite(op: ir.Operation, operand_orders: list[list[int]], result_orders: list[list[int]], made: dict) -> None:
    """`op` as a call on physically ordered tensors between transposes. `made`: the transposes
    made so far, by (value, order), shared by the calls of one block (trsm's triangle and
    right-hand sides of one matrix, the two solves after an LU)."""
    location = op.location
    with ir.InsertionPoint(op):
        operands, bypassed = [], []
        for value, order in zip(op.operands, operand_orders):
            key = (value, tuple(order))
            if key not in made or defining_block(made[key]) != op.block:
                made[key] = untransposed(value, order)
                if made[key] is None:
                    made[key] = transposed(value, order, location)
                else:
                    bypassed.append(value)
            operands.append(made[key])
        result_types = []
        for value, order in zip(op.results, result_orders):
            logical = ir.RankedTensorType(value.type)
            result_types.append(ir.RankedTensorType.get([logical.shape[d] for d in order], logical.element_type))
        attributes = {name: op.attributes[name] for name in op.attributes if name not in DROPPED_ATTRIBUTES}
        attributes["operand_layouts"] = ir.ArrayAttr.get([row_major_layout(len(order)) for order in operand_orders])
        attributes["result_layouts"] = ir.ArrayAttr.get([row_major_layout(len(order)) for order in result_orders])
        attributes[OPERAND_ORDERS] = orders_attribute(operand_orders)
        attributes[RESULT_ORDERS] = orders_attribute(result_orders)
        call = create_op("xhlo.custom_call", operands, result_types, attributes, location)
    with ir.InsertionPoint.after(call):
        for old, new, order in zip(op.results, call.results, result_orders):
            if list(old.uses):
                old.replace_all_uses_with(transposed(new, inverse(order), location))
    op.erase()
    for value in bypassed:
        if not list(value.uses):
            for key in [key for key in made if key[0] == value]:
                del made[key]
            value.owner.erase()


@dataclass(frozen=True)
class CustomCallLayoutsPass(ModulePass):
    """Makes custom calls' non-row-major operand and result layouts explicit transposes."""

    name: ClassVar[str] = "xhlo-custom-call-layouts"
    summary: ClassVar[str] = "custom calls' column-major (any non-row-major) layouts become transposes around the call"

    def run(self, module: ir.Module) -> PassResult:
        changed = False
        made: dict[tuple, ir.Value] = {}
        with module.context, ir.Location.unknown():
            for op in list(ops_named(module, "xhlo.custom_call")):
                operand_layouts, result_layouts = layouts(op, "operand_layouts"), layouts(op, "result_layouts")
                if operand_layouts is None or result_layouts is None:
                    continue
                operand_orders, result_orders = orders(op.operands, operand_layouts), orders(op.results, result_layouts)
                if operand_orders is None or result_orders is None:
                    continue
                if all(is_identity(order) for order in operand_orders + result_orders):
                    continue
                rewrite(op, operand_orders, result_orders, made)
                changed = True
        return PassResult(changed)
