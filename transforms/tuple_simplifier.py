"""xhlo-tuple-simplifier: forward values through tuples that are built and taken apart again
(XLA's TupleSimplifier).

Two rewrites, both exact (a tuple is only a grouping of values, it computes nothing):

    get_tuple_element(tuple(a0, a1, ...), i)          -> ai
    tuple(gte(t, 0), gte(t, 1), ..., gte(t, n-1))     -> t    (t has exactly n elements)

The second needs every element of the same `t`, in order, and `t`'s type equal to the new
tuple's type. The replaced op (the `get_tuple_element` or the `tuple`) is erased; the tuple
it read from is left to xhlo-dce, since it may have other users. Ops inside regions (while
bodies, reducers) are rewritten too. Changed: any op replaced.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.ir_queries import defining_op, ops_named
from mlirxla.mlir import ir

from .erasure import erase, live_ops
from .pass_base import ModulePass


def result_number(value: ir.Value) -> int:
    return ir.OpResult(value).result_number


def tuple_index(gte: ir.Operation) -> int:
    return ir.IntegerAttr(gte.attributes["index"]).value


def forward_element(gte: ir.Operation) -> bool:
    """gte(tuple(a0, a1, ...), i) -> ai"""
    producer = defining_op(gte.operands[0])
    if producer is None or producer.name != "xhlo.tuple":
        return False
    index = tuple_index(gte)
    if not 0 <= index < len(producer.operands):
        return False
    element = producer.operands[index]
    if element.type != gte.results[0].type:
        return False
    gte.results[0].replace_all_uses_with(element)
    erase(gte)
    return True


def forward_tuple(tup: ir.Operation) -> bool:
    """tuple(gte(t, 0), ..., gte(t, n-1)) -> t"""
    elements = list(tup.operands)
    if not elements:
        return False
    source = None
    for position, element in enumerate(elements):
        gte = defining_op(element)
        if gte is None or gte.name != "xhlo.get_tuple_element" or tuple_index(gte) != position:
            return False
        if source is None:
            source = gte.operands[0]
        elif gte.operands[0] != source:
            return False
    # Equal tuple types also mean equal element counts: no element of t is left out.
    if source.type != tup.results[0].type:
        return False
    tup.results[0].replace_all_uses_with(source)
    erase(tup)
    return True


@dataclass(frozen=True)
class TupleSimplifierPass(ModulePass):
    """Forwards tuple elements past get_tuple_element and rebuilt tuples. Changed: any op replaced."""

    name: ClassVar[str] = "xhlo-tuple-simplifier"
    summary: ClassVar[str] = "forward values through tuple / get_tuple_element pairs"

    def run(self, module: ir.Module) -> bool:
        changed = False
        # Element forwarding first: it can leave a rebuilt tuple whose source is visible.
        for gte in live_ops(ops_named(module, "xhlo.get_tuple_element")):
            changed = forward_element(gte) or changed
        for tup in live_ops(ops_named(module, "xhlo.tuple")):
            changed = forward_tuple(tup) or changed
        return changed
