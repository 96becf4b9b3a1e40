"""xhlo-bf16-accumulation-in-f32: a bf16 reduce, reduce_window, scatter or select_and_scatter
computes in f32, between converts of its bf16 operands to f32 and of its results back.

XLA:CPU has no bf16 arithmetic: its `FloatNormalization` (cpu_compiler.cc, with a
`FloatSupport` for bf16) runs every bf16 op that computes in f32 between converts, and an op
with a computation (a reduce's reducer, a scatter's update) has that computation cloned in
f32, so the accumulator is an f32 value rounded to bf16 once, at the end. Ours rounded the
accumulator to bf16 after every element: jax's `lax.reduce_sum` of 512 x 1024 bf16 values
down their columns was off by 3.9 where XLA's is off by 0.89 (the last rounding), and the
gradient of a bf16 RMS norm's scale (a sum over the batch of bf16 products) came out with a
normwise error of 0.12 where XLA's has 0.011. Elementwise bf16 ops already compute in f32 and
round their result (`backends/cpu`), as XLA's converts around each op do; what is left to
normalize is the ops that carry values from element to element.

Every bf16 tensor type in the op's computations becomes f32 (their block arguments, the
results of the ops in them, a bf16 constant's value); other element types (a reduce's i32
indices beside its bf16 values) stay. Collectives keep their bf16 (what goes between devices
is the program's type), and sorts and maps are left as they are (a comparator or an
elementwise computation rounds nothing along the way). Changed: any op widened.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.ir_queries import defining_op, ops_named
from mlirxla.mlir import ir
from mlirxla.runtime.literals import to_numpy

from .pass_base import ModulePass, PassResult

ACCUMULATING = ("xhlo.reduce", "xhlo.reduce_window", "xhlo.scatter", "xhlo.select_and_scatter")


def is_bf16_tensor(value_type: ir.Type) -> bool:
    return isinstance(value_type, ir.RankedTensorType) and isinstance(ir.RankedTensorType(value_type).element_type, ir.BF16Type)


def as_f32(value_type: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(ir.RankedTensorType(value_type).shape, ir.F32Type.get())


def accumulates_in_bf16(op: ir.Operation) -> bool:
    return op.name in ACCUMULATING and any(is_bf16_tensor(result.type) for result in op.results)


def converted(value: ir.Value, target: ir.Type) -> ir.Value:
    return create_op("xhlo.convert", [value], [target], {}).result


def widened_operand(value: ir.Value) -> ir.Value:
    """`value` in f32: a scalar constant (a reduce's init value) as an f32 constant of the same
    value (bf16 widens exactly), which a kernel reads as a number rather than as a value it
    converts first (on a GPU such a convert was a launch of its own); anything else converted."""
    producer = defining_op(value)
    if producer is not None and producer.name == "xhlo.constant" and not ir.RankedTensorType(value.type).shape:
        widened = to_numpy(producer.attributes["value"]).astype(np.float32)
        return create_op("xhlo.constant", [], [as_f32(value.type)],
                         {"value": ir.DenseElementsAttr.get(widened, type=as_f32(value.type))}).result
    return converted(value, as_f32(value.type))


def widen_computation(region: ir.Region) -> None:
    """Every bf16 tensor of `region` an f32 one: block arguments, results, constants' values."""
    for block in region.blocks:
        for argument in block.arguments:
            if is_bf16_tensor(argument.type):
                argument.set_type(as_f32(argument.type))
        for inner in block.operations:
            for result in inner.results:
                if is_bf16_tensor(result.type):
                    result.set_type(as_f32(result.type))
                    if inner.name == "xhlo.constant":
                        inner.attributes["value"] = ir.DenseElementsAttr.get(
                            to_numpy(inner.attributes["value"]).astype(np.float32), type=result.type)
            for nested in inner.regions:
                widen_computation(nested)


def widen(op: ir.Operation) -> None:
    """`op` computing in f32: its bf16 operands converted before it, its computations
    widened, its bf16 results f32 values converted back for their readers."""
    with ir.InsertionPoint(op), op.location:
        for index, operand in enumerate(op.operands):
            if is_bf16_tensor(operand.type):
                op.operands[index] = widened_operand(operand)
    for region in op.regions:
        widen_computation(region)
    with ir.InsertionPoint.after(op), op.location:
        for result in op.results:
            if not is_bf16_tensor(result.type):
                continue
            readers = [(use.owner, use.operand_number) for use in result.uses]
            narrow_type = result.type
            result.set_type(as_f32(narrow_type))
            back = converted(result, narrow_type)
            for reader, position in readers:
                reader.operands[position] = back


@dataclass(frozen=True)
class Bf16AccumulationInF32Pass(ModulePass):
    """Widens every bf16 reduce, reduce_window, scatter and select_and_scatter to f32."""

    name: ClassVar[str] = "xhlo-bf16-accumulation-in-f32"
    summary: ClassVar[str] = "bf16 reductions and scatters accumulate in f32 between converts (XLA:CPU's float normalization)"

    def run(self, module: ir.Module) -> PassResult:
        chosen = [op for op in ops_named(module, *ACCUMULATING) if accumulates_in_bf16(op)]
        with module.context:
            for op in chosen:
                widen(op)
        return PassResult(bool(chosen))
