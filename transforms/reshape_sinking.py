"""xhlo-reshape-sinking: an elementwise op between reshapes computes in its operands' shape,
so that the reshapes around it meet and fold (XLA's ReshapeMover, for reshapes).

`xhlo-convolution-1d-to-2d` puts a 1-D convolution between reshapes: its result is reshaped
back to 1-D, and every 1-D convolution reading it reshapes it to 2-D again. An elementwise
op in between (jax's gradient of `sum(y ** 2)` is `2 * y`, read by the input and the kernel
gradients) keeps the reshapes apart: fusion then saw a convolution, a reshape, the product
and a reshape, which output fusion does not take as an epilogue, and batch-slice fusion
merged into loop nests in slices (conv1d_grad's forward layer: 4.0 ms, against 2.1 ms for
its kernel gradient of the same size in blocks of im2col + GEMM).

An elementwise op sinks when every operand is a reshape from one shape, a broadcast of a
scalar or a splat constant, at least one is a reshape, and a reshape (which then folds with
the one sunk) or an elementwise op (which may sink it further) reads its result: it is
rebuilt over the reshapes' operands (the scalars broadcast, the constants splat, to their
shape) and followed by one reshape to its old shape. A reshape of a reshape is then one
reshape of the first operand, or that operand itself when the shapes agree. Reshapes,
broadcasts and constants left without users are erased. An op carrying a sharding (written
for its own shape) stays. Changed: any op sunk or reshape folded.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op, splat_of_type
from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir

from .fusion_legality import is_splat_constant, kind_of
from .rearrange_sinking import RearrangeSinkingPass, rebuild_below, replace_folded


def shape_of(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def is_scalar_broadcast(op: ir.Operation | None) -> bool:
    return op is not None and kind_of(op) == "broadcast" and ir.RankedTensorType(op.operands[0].type).rank == 0


def is_splat(op: ir.Operation | None) -> bool:
    return op is not None and kind_of(op) == "constant" and is_splat_constant(op)


def reshape_source_shape(op: ir.Operation) -> list[int] | None:
    """The one shape the reshapes among `op`'s operands read, when every other operand is a
    scalar broadcast or a splat constant; else None."""
    shapes = []
    for value in op.operands:
        producer = defining_op(value)
        if producer is not None and kind_of(producer) == "reshape":
            shapes.append(shape_of(producer.operands[0]))
        elif not (is_scalar_broadcast(producer) or is_splat(producer)):
            return None
    if not shapes or any(shape != shapes[0] for shape in shapes):
        return None
    return shapes[0]


def reshaped_operand(value: ir.Value, shape: list[int], location: ir.Location) -> ir.Value:
    """`value` (a reshape, a scalar broadcast or a splat constant) in `shape`."""
    producer = defining_op(value)
    element = ir.RankedTensorType(value.type).element_type
    result_type = ir.RankedTensorType.get(shape, element)
    if kind_of(producer) == "reshape":
        return producer.operands[0]
    if kind_of(producer) == "broadcast":
        return create_op("xhlo.broadcast", [producer.operands[0]], [result_type],
                         {"dimensions": ir.DenseI64ArrayAttr.get([])}, location).results[0]
    splat = ir.DenseElementsAttr(producer.attributes["value"]).get_splat_value()
    return create_op("xhlo.constant", [], [result_type], {"value": splat_of_type(splat, result_type)}, location).results[0]


def sink(op: ir.Operation, shape: list[int]) -> None:
    """Rebuild elementwise `op` in `shape`, a reshape after it to its old shape."""
    location = op.location
    rebuild_below(op, lambda value: reshaped_operand(value, shape, location), shape,
                  lambda computed, old_type: create_op("xhlo.reshape", [computed], [old_type], {}, location).results[0])


def fold_reshape_of_reshape(op: ir.Operation) -> None:
    """A reshape of a reshape as one reshape of the first's operand (or that operand)."""
    result_type = op.results[0].type

    def folded(inner: ir.Operation) -> ir.Value:
        source = inner.operands[0]
        if source.type == result_type:
            return source
        return create_op("xhlo.reshape", [source], [result_type], {}, op.location).results[0]
    replace_folded(op, folded)


@dataclass(frozen=True)
class ReshapeSinkingPass(RearrangeSinkingPass):
    """Sinks elementwise ops' operand reshapes below them, folding the reshapes that meet."""

    name: ClassVar[str] = "xhlo-reshape-sinking"
    summary: ClassVar[str] = "elementwise ops between reshapes compute in their operands' shape; reshapes of reshapes fold"
    rearrange: ClassVar[str] = "reshape"

    fold = staticmethod(fold_reshape_of_reshape)
    sunk_form = staticmethod(reshape_source_shape)
    sink = staticmethod(sink)
