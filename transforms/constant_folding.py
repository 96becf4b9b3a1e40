"""xhlo-constant-folding: evaluate ops whose operands are all constants and replace them by
constants (XLA's HloConstantFolding).

What is folded. An xhlo op from `FOLDABLE` (deterministic, no side effect, no called
computation) whose operands are each an `xhlo.constant` or a broadcast of one, with at least
one plain constant among them (XLA's rule: `broadcast(constant)` alone is kept, and it is
not folded into users that only see broadcasts). Ops with regions (reduce, sort, map, ...)
fold only when their regions use nothing defined outside the op. Never folded: `broadcast`
and `iota` (folding them only makes big dense constants; XLA keeps them), `fft` (slow to
evaluate), rng and custom calls (not deterministic or opaque), collectives, control flow
(while, conditional, call, fusion), tuples, `optimization_barrier`, `bitcast` (its meaning
depends on layouts). The fold is refused when the result or the operands together hold more
than `max_result_elements` elements.

How it is evaluated. Pure data movement (reshape, transpose, slice, reverse, concatenate,
copy) is done with numpy, which is exact for it. Everything else runs through the StableHLO
reference interpreter, the same evaluator that runs the module at run time: the op is cloned
alone into a small function that returns it, lowered to StableHLO, checked against the ops
the interpreter can evaluate (it aborts the process on others), and evaluated. So float
results (transcendentals, rounding, float division by zero, integer overflow) are the
runtime's, bit for bit. An op the interpreter refuses, or whose result type comes back
different, is left alone; so is an integer divide or remainder by 0 (or by -1, which
overflows for the smallest signed value): the interpreter dies of SIGFPE on those, so they are
left to run time.

The new constant takes the op's location and its `result_layouts` (and `xhlo.sharding` for
one-result ops); the old constants are left to xhlo-dce. Ops inside regions (while bodies,
branch computations) are folded too; a folded op's results feed later folds in the same run.
Changed: any op replaced by constants.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.ops import ELEMENTWISE_OPS
from mlirxla.ir_queries import defining_op
from mlirxla.mlir import func, ir, stablehlo
from mlirxla.runtime import literals

from .erasure import erase, live_ops
from .pass_base import ModulePass

STRUCTURED = """bitcast_convert reshape transpose slice dynamic_slice dynamic_update_slice concatenate
    pad reverse copy reduce reduce_window select_and_scatter dot convolution gather scatter sort map
    triangular_solve cholesky""".split()
FOLDABLE = ELEMENTWISE_OPS | frozenset("xhlo." + name for name in STRUCTURED)
# ops numpy evaluates exactly (they only move elements)
NUMPY_OPS = frozenset({"xhlo.reshape", "xhlo.transpose", "xhlo.slice", "xhlo.reverse", "xhlo.concatenate", "xhlo.copy"})
# attributes of the folded op that describe its result and carry over to the constant
RESULT_ATTRIBUTES = ("result_layouts", "xhlo.sharding")


def constant_source(value: ir.Value) -> str | None:
    """'constant' for an xhlo.constant, 'broadcast' for a broadcast of one, else None."""
    op = defining_op(value)
    if op is None:
        return None
    if op.name == "xhlo.constant":
        return "constant"
    if op.name == "xhlo.broadcast":
        inner = defining_op(op.operands[0])
        if inner is not None and inner.name == "xhlo.constant":
            return "broadcast"
    return None


def element_count(type_: ir.Type) -> int:
    return int(np.prod(ir.RankedTensorType(type_).shape, dtype=np.int64))


def static_tensor(type_: ir.Type) -> bool:
    return isinstance(type_, ir.RankedTensorType) and ir.RankedTensorType(type_).has_static_shape


def regions_closed(op: ir.Operation) -> bool:
    """Whether every value used inside `op`'s regions is defined inside them."""
    if not len(op.regions):
        return True
    inside: list[ir.Value] = []
    used: list[ir.Value] = []

    def visit(inner):
        for region in inner.regions:
            for block in region.blocks:
                inside.extend(block.arguments)
        if inner.operation != op:
            inside.extend(inner.results)
            used.extend(inner.operands)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return all(any(value == defined for defined in inside) for value in used)


def integer_division_traps(op: ir.Operation) -> bool:
    """Integer divide / remainder by 0 (or INT_MIN by -1) kills the interpreter with SIGFPE."""
    if op.name not in ("xhlo.divide", "xhlo.remainder"):
        return False
    element = ir.RankedTensorType(op.results[0].type).element_type
    if not isinstance(element, ir.IntegerType):
        return False
    divisor = defining_op(op.operands[1])
    if divisor.name == "xhlo.broadcast":
        divisor = defining_op(divisor.operands[0])
    try:
        values = literals.to_numpy(divisor.attributes["value"])
    except Exception:
        return True
    signed = not ir.IntegerType(element).is_unsigned
    return bool(np.any(values == 0) or (signed and np.any(values == -1)))


def foldable(op: ir.Operation, max_elements: int) -> bool:
    if op.name not in FOLDABLE or not len(op.operands) or not len(op.results):
        return False
    sources = [constant_source(v) for v in op.operands]
    if None in sources or "constant" not in sources:
        return False
    if not all(static_tensor(v.type) for v in [*op.operands, *op.results]):
        return False
    if sum(element_count(r.type) for r in op.results) > max_elements:
        return False
    if sum(element_count(v.type) for v in op.operands) > max_elements:
        return False
    return regions_closed(op) and not integer_division_traps(op)


def constant_value(value: ir.Value) -> ir.Attribute:
    return defining_op(value).attributes["value"]


def evaluate_with_numpy(op: ir.Operation) -> list[ir.Attribute] | None:
    """Data movement evaluated in numpy; None when the operands are not all plain constants."""
    if any(constant_source(v) != "constant" for v in op.operands):
        return None
    try:
        arrays = [literals.to_numpy(constant_value(v)) for v in op.operands]
    except Exception:  # an element type numpy cannot hold: let the interpreter do it
        return None
    result_type = op.results[0].type
    shape = list(ir.RankedTensorType(result_type).shape)
    x = arrays[0]
    if op.name == "xhlo.reshape":
        out = x.reshape(shape)
    elif op.name == "xhlo.copy":
        out = x
    elif op.name == "xhlo.transpose":
        out = np.transpose(x, list(ir.DenseI64ArrayAttr(op.attributes["permutation"])))
    elif op.name == "xhlo.reverse":
        out = np.flip(x, axis=tuple(ir.DenseI64ArrayAttr(op.attributes["dimensions"])))
    elif op.name == "xhlo.slice":
        starts = list(ir.DenseI64ArrayAttr(op.attributes["start_indices"]))
        limits = list(ir.DenseI64ArrayAttr(op.attributes["limit_indices"]))
        strides = list(ir.DenseI64ArrayAttr(op.attributes["strides"]))
        out = x[tuple(slice(s, l, t) for s, l, t in zip(starts, limits, strides))]
    elif op.name == "xhlo.concatenate":
        out = np.concatenate(arrays, axis=ir.IntegerAttr(op.attributes["dimension"]).value)
    else:
        return None
    if list(out.shape) != shape:
        return None
    return [literals.to_attribute(np.ascontiguousarray(out), result_type)]


def clone_operand(value: ir.Value) -> ir.Value:
    """Clone the constant (or broadcast of a constant) behind `value` at the insertion point."""
    op = defining_op(value)
    if op.name == "xhlo.constant":
        return op.clone().results[0]
    constant = defining_op(op.operands[0]).clone()
    broadcast = op.clone()
    broadcast.operands[0] = constant.results[0]
    return broadcast.results[0]


def evaluate_with_interpreter(op: ir.Operation) -> list[ir.Attribute] | None:
    """Run `op` alone through the StableHLO reference interpreter (the runtime's evaluator)."""
    from mlirxla.runtime.reference import uninterpretable_op
    from mlirxla.transforms.xhlo_to_stablehlo import lower_module

    result_types = [r.type for r in op.results]
    scratch = ir.Module.create(op.location)
    with ir.InsertionPoint(scratch.body), op.location:
        function = func.FuncOp("main", ([], result_types))
        block = function.add_entry_block()
        with ir.InsertionPoint(block):
            operands = [clone_operand(v) for v in op.operands]
            clone = op.clone()
            for index, value in enumerate(operands):
                clone.operands[index] = value
            func.ReturnOp(list(clone.results))
    try:
        lower_module(scratch)
    except Exception:
        return None
    if uninterpretable_op(scratch) is not None:
        return None
    try:
        values = list(stablehlo.eval_module(scratch, []))
    except Exception:
        return None
    if len(values) != len(result_types) or any(v.type != t for v, t in zip(values, result_types)):
        return None
    return values


def replace_with_constants(op: ir.Operation, values: list[ir.Attribute]) -> None:
    one_result = len(op.results) == 1
    with ir.InsertionPoint(op):
        for index, (result, value) in enumerate(zip(op.results, values)):
            attributes = {"value": value}
            if "result_layouts" in op.attributes:
                attributes["result_layouts"] = ir.ArrayAttr.get([ir.ArrayAttr(op.attributes["result_layouts"])[index]])
            if one_result and "xhlo.sharding" in op.attributes:
                attributes["xhlo.sharding"] = op.attributes["xhlo.sharding"]
            constant = create_op("xhlo.constant", [], [result.type], attributes, op.location)
            result.replace_all_uses_with(constant.results[0])
    erase(op)


@dataclass(frozen=True)
class ConstantFoldingPass(ModulePass):
    """Replaces ops whose operands are all constants by their evaluated results. Changed: any op replaced."""

    name: ClassVar[str] = "xhlo-constant-folding"
    summary: ClassVar[str] = "evaluate ops with constant operands (reference interpreter semantics) into constants"

    max_result_elements: int = 65536  # larger results (or operands) are not folded

    def fold(self, op: ir.Operation) -> bool:
        if not foldable(op, self.max_result_elements):
            return False
        values = evaluate_with_numpy(op) if op.name in NUMPY_OPS else None
        if values is None:
            values = evaluate_with_interpreter(op)
        if values is None:
            return False
        replace_with_constants(op, values)
        return True

    def fold_block(self, block: ir.Block) -> bool:
        changed = False
        for op in live_ops(block.operations):
            if self.fold(op):
                changed = True
                continue
            for region in op.regions:
                for inner in region.blocks:
                    changed = self.fold_block(inner) or changed
        return changed

    def run(self, module: ir.Module) -> bool:
        with module.context, ir.Location.unknown():
            return self.fold_block(module.body)
