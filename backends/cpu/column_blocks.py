"""Kernels that reduce over their rows (a column sum, a softmax along axis 0, the statistics of
a batch norm over NHWC) run in blocks of columns over the threads.

A kernel spreads over the threads in blocks of dimension 0 (`kernels.parallel_rows`) only when
its rows stay apart, which a reduce over dimension 0 breaks: jax's column softmax, two kernels
of a reduce over dimension 0 and an elementwise tail each, ran on one thread, 2.5x XLA:CPU's
time. Such a kernel keeps its columns apart instead when every value it computes ends in
the same last dimension C, column j of it depending only on column j of what it reads:

- elementwise ops read column values;
- a broadcast maps its operand's last dimension onto its own last one (a column vector
  repeated down the rows), or repeats a scalar;
- a reduce keeps the last dimension of its inputs, its inits scalars;
- a reshape keeps the last dimension (row-major, it moves whole rows of C);
- a slice, pad, concatenate, reverse or transpose leaves the last dimension as it is (jax's
  associative scan down the rows: strided slices, interleaved again by interior padding);
- an iota counts along another dimension; a constant is a scalar or a splat;
- the kernel's operands are column values or scalars, its results column values.

Then each of p threads computes C/p columns of every value, reading and writing strided views
of the whole buffers (rows of C/p elements, C apart). Each column is reduced in the same
order as on one thread, so the results are the whole kernel's bit for bit. A block narrower
than `MIN_BLOCK_BYTES` is refused: two threads would read parts of the same cache lines.
"""

import math

from mlirxla.mlir import ir
from mlirxla.runtime.threads import cpu_threads
from mlirxla.transforms.batch_slice_fusion import body_of
from mlirxla.transforms.fusion_legality import ELEMENTWISE, kind_of
from mlirxla.transforms.scheduling import type_bytes

from . import thread_split
from .kernel_source import SlicePlan, one_slice

MIN_BLOCK_BYTES = 128


def last_size(value: ir.Value) -> int | None:
    value_type = value.type
    if not isinstance(value_type, ir.RankedTensorType) or ir.RankedTensorType(value_type).rank == 0:
        return None
    return ir.RankedTensorType(value_type).shape[-1]


def rank(value: ir.Value) -> int:
    return ir.RankedTensorType(value.type).rank


class ColumnCheck:
    """Which values of a kernel are computed in column blocks (last dimension of size `columns`)."""

    def __init__(self, columns: int, inputs: list[ir.Value]):
        self.columns = columns
        self.inputs = set(inputs)
        self.computed: set = set()  # values the kernel computes in column blocks
        self.read: set = set()  # operands read in column blocks

    def column_value(self, value: ir.Value) -> bool:
        """Can `value` be read in column blocks? (Operands are then read so.)"""
        if value in self.computed or value in self.read:
            return True
        if value in self.inputs and last_size(value) == self.columns:
            self.read.add(value)
            return True
        return False

    def problem(self, op: ir.Operation) -> str | None:
        """None when `op` keeps the columns apart (its results join the column values)."""
        kind = kind_of(op)
        if all(last_size(result) is None for result in op.results):
            if all(last_size(value) is None for value in op.operands):
                return None  # scalar work, done again in every block
            return f"xhlo.{kind} reduces the last dimension"
        if any(last_size(result) != self.columns for result in op.results):
            return f"xhlo.{kind} computes a value whose last dimension is not {self.columns}"
        reason = self.operand_problem(op, kind, list(op.operands))
        if reason is None:
            self.computed.update(op.results)
        return reason

    def operand_problem(self, op: ir.Operation, kind: str, operands: list[ir.Value]) -> str | None:
        if kind == "constant":
            return None if ir.DenseElementsAttr(op.attributes["value"]).is_splat else "a constant is not a splat"
        if kind == "iota":
            counted = ir.IntegerAttr(op.attributes["iota_dimension"]).value
            return "an iota counts along the last dimension" if counted == rank(op.results[0]) - 1 else None
        if kind in ELEMENTWISE or kind == "reshape":
            return None if all(self.column_value(value) for value in operands) else f"xhlo.{kind} reads a value it cannot cut in columns"
        if kind == "broadcast":
            if last_size(operands[0]) is None:
                return None
            dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
            if dims[-1] == rank(op.results[0]) - 1 and self.column_value(operands[0]):
                return None
            return "a broadcast moves or repeats the last dimension"
        if kind in ("slice", "pad", "concatenate", "reverse", "transpose"):
            return self.reshaping_problem(op, kind, operands)
        if kind == "reduce":
            inputs, inits = operands[:len(operands) // 2], operands[len(operands) // 2:]
            if rank(inputs[0]) - 1 in ir.DenseI64ArrayAttr(op.attributes["dimensions"]):
                return "the reduce reduces the last dimension"
            if not all(self.column_value(value) for value in inputs):
                return "the reduce reads an input it cannot cut in columns"
            return None if all(last_size(value) is None for value in inits) else "the reduce's init is not a scalar"
        return f"xhlo.{kind} mixes columns"


    def reshaping_problem(self, op: ir.Operation, kind: str, operands: list[ir.Value]) -> str | None:
        """Slices, pads, concatenates, reverses and transposes that leave the last dimension
        as it is keep the columns apart (jax's associative scans: strided slices of the rows,
        interleaved again by interior padding)."""
        last = rank(op.results[0]) - 1

        def array(name: str) -> list[int]:
            return list(ir.DenseI64ArrayAttr(op.attributes[name]))

        if kind == "slice":
            kept = (array("start_indices")[last], array("limit_indices")[last], array("strides")[last]) == (0, self.columns, 1)
        elif kind == "pad":
            kept = not any(array(name)[last] for name in ("edge_padding_low", "edge_padding_high", "interior_padding"))
            operands = operands[:1]
        elif kind == "concatenate":
            kept = ir.IntegerAttr(op.attributes["dimension"]).value != last
        elif kind == "reverse":
            kept = last not in array("dimensions")
        else:
            kept = array("permutation")[last] == last
        if not kept:
            return f"xhlo.{kind} moves elements along the last dimension"
        return None if all(self.column_value(value) for value in operands) else f"xhlo.{kind} reads a value it cannot cut in columns"


def column_problem(kernel: ir.Operation, columns: int) -> tuple[str | None, ColumnCheck]:
    """(None when `kernel` keeps its blocks of `columns` columns apart, else why not; the check)."""
    ops, returned, bound = body_of(kernel)
    check = ColumnCheck(columns, list(bound))
    for op in ops:
        reason = check.problem(op)
        if reason:
            return reason, check
    if not all(value in check.computed or check.column_value(value) for value in returned):
        return f"a result's last dimension is not {columns}", check
    if any(value not in check.read and last_size(value) is not None for value in bound):
        return "an operand is read neither in column blocks nor as a scalar", check
    return None, check


def column_plan(kernel: ir.Operation, count: int, check: ColumnCheck) -> SlicePlan:
    """The plan to run `kernel` in `count` blocks of columns, from the check that accepted it."""
    width = check.columns // count
    inputs = list(kernel.regions[0].blocks[0].arguments) if kernel.name == "xhlo.fusion" else list(kernel.operands)
    types = {value: one_slice(value.type, width, rank(value) - 1) for value in check.computed | check.read}
    return SlicePlan(count, width, tuple(value in check.read for value in inputs), types,
                     tuple(rank(value) - 1 if value in check.read else 0 for value in inputs), columns=True)


def parallel_columns(op: ir.Operation) -> SlicePlan | None:
    """The plan spreading `op` over the threads in blocks of its columns, when that pays
    (`thread_split.py`) and it keeps them apart, else None."""
    if not thread_split.splittable(op):
        return None
    threads = cpu_threads()
    columns = last_size(op.results[0])
    if threads < 2 or not columns or columns % threads:
        return None
    result_type = ir.RankedTensorType(op.results[0].type)
    width_bytes = columns // threads * type_bytes(result_type) // max(1, math.prod(result_type.shape))
    if width_bytes < MIN_BLOCK_BYTES or not thread_split.estimate(op, threads).pays:
        return None
    problem, check = column_problem(op, columns)
    return None if problem else column_plan(op, threads, check)
