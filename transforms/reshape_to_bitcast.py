"""xhlo-reshape-to-bitcast: a reshape that fusion left on its own becomes a bitcast, which
moves no data: buffer assignment gives it its operand's buffer (XLA's layout-sensitive
algebraic simplifier does the same with ReshapeIsBitcast).

A reshape inside a fusion costs nothing: the kernel reads its operand at the reshaped index.
One that fusion left alone (it feeds a library call, a loop or an output, or it reads an
entry parameter) was a copy kernel of its own: the 1-D convolution rewrite's reshapes of a
layer's weights, say. After layout assignment every reshape reads and writes row-major
buffers (`layout_assignment.py`), and a row-major reshape keeps every element at its byte
offset. Copy insertion, run after this pass, sees parameters, constants and values returned
twice through bitcasts. A broadcast that only adds unit dimensions, in order, is such a
reshape too (jax's `segment_max` widens its 2^20 indices to [2^20, 1] for the scatter: a
4 MB copy kernel before the scatter); XLA's algebraic simplifier makes it one before fusion,
but here the broadcast fuses into its consumers as a broadcast, where a reshape would stand
between a reduction and the ops after it. Changed: any reshape replaced.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import shape_of
from mlirxla.mlir import ir

from .layout_assignment import layout_of, rank_of, row_major
from .pass_base import ModulePass, PassResult

CONTROL_FLOW = ("xhlo.while", "xhlo.conditional")


def is_reshape(op: ir.Operation) -> bool:
    """A reshape, or a broadcast that only adds unit dimensions and keeps its operand's
    dimensions in order."""
    if op.name == "xhlo.reshape":
        return True
    if op.name != "xhlo.broadcast":
        return False
    dimensions = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    return dimensions == sorted(dimensions) and math.prod(shape_of(op.operands[0].type)) == math.prod(shape_of(op.results[0].type))


def unfused_reshapes(block: ir.Block) -> list[ir.Operation]:
    """The reshapes of `block` and of the loop and branch bodies in it, fusions left out."""
    found = []
    for op in block.operations:
        if is_reshape(op.operation):
            found.append(op.operation)
        elif op.operation.name in CONTROL_FLOW:
            for region in op.regions:
                for inner in region.blocks:
                    found.extend(unfused_reshapes(inner))
    return found


def moves_no_data(reshape: ir.Operation) -> bool:
    operand, result = reshape.operands[0], reshape.results[0]
    return layout_of(operand) == row_major(rank_of(operand)) and layout_of(result) == row_major(rank_of(result))


def replace_with_bitcast(reshape: ir.Operation) -> None:
    attributes = {"result_layouts": reshape.attributes["result_layouts"]} if "result_layouts" in reshape.attributes else {}
    with ir.InsertionPoint(reshape):
        bitcast = create_op("xhlo.bitcast", [reshape.operands[0]], [reshape.results[0].type], attributes, reshape.location)
    reshape.results[0].replace_all_uses_with(bitcast.results[0])
    reshape.erase()


@dataclass(frozen=True)
class ReshapeToBitcastPass(ModulePass):
    """Replaces the reshapes (and unit-dimension broadcasts) no fusion took in with bitcasts."""

    name: ClassVar[str] = "xhlo-reshape-to-bitcast"
    summary: ClassVar[str] = "reshape to bitcast: an unfused row-major reshape (or unit-dimension broadcast) shares its operand's buffer"

    def run(self, module: ir.Module) -> PassResult:
        reshapes = [reshape for func in module.body.operations if func.operation.name == "func.func"
                    for reshape in unfused_reshapes(func.regions[0].blocks[0]) if moves_no_data(reshape)]
        for reshape in reshapes:
            replace_with_bitcast(reshape)
        return PassResult(bool(reshapes))
