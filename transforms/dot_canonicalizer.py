"""xhlo-dot-canonicalizer: a float dot whose dimension numbers no GEMM takes becomes the same
dot between transposes that put each operand in GEMM form (XLA's DotDecomposer).

A library GEMM (BLAS on the CPU, cuBLAS on CUDA) takes a dot over row-major buffers whose
batch dimensions lead both operands in one order and whose contracting dimensions lie
together, in one order, first or last among each operand's other dimensions (`gemm_shape`). Any other dot was a
generated loop nest: jax's `dot_product_attention` over (batch, sequence, heads, depth)
arrays batches over dimensions 0 and 2, and its second dot ran at 0.9 GFLOP/s, 1.2 s of a
call XLA:CPU finishes in 50 ms. Each operand is transposed to
[batch..., free..., contracting...] (the lhs) or [batch..., contracting..., free...] (the
rhs), several contracting dimensions reshaped into one; the result, [batch..., lhs free...,
rhs free...], is the dot's result as it was, so nothing follows the dot. The transposes are
ordinary ops: layout assignment and fusion take them in (a transpose of a parameter is one
copy kernel, one of an elementwise producer fuses into it).

Only dots of float elements with a contracting dimension and a free dimension on each side
change (the others, a matrix times a vector or an integer dot, stay generated kernels); a dot
carrying a sharding keeps its own, and one carrying a precision algorithm stays the kernel
that rounds its operands to the algorithm's type (`backends/cpu/dot_algorithms.py`: a GEMM
would not). Runs before layout assignment. Changed: any dot rewritten.
"""

from dataclasses import dataclass
from math import prod
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op, transposed
from mlirxla.dialects.xhlo.types import shape_of
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .pass_base import ModulePass, PassResult
from .sharding_remover import SHARDING


@dataclass(frozen=True)
class DotNumbers:
    lhs_batch: list[int]
    rhs_batch: list[int]
    lhs_contracting: list[int]
    rhs_contracting: list[int]

    @staticmethod
    def of(dot: ir.Operation) -> "DotNumbers":
        numbers = ir.DictAttr(dot.attributes["dot_dimension_numbers"])

        def dims(name):
            return list(ir.DenseI64ArrayAttr(numbers[name])) if name in numbers else []

        return DotNumbers(dims("lhs_batching_dimensions"), dims("rhs_batching_dimensions"),
                          dims("lhs_contracting_dimensions"), dims("rhs_contracting_dimensions"))


def gemm_shape(dot: ir.Operation) -> tuple[int, int, int, int, bool, bool] | None:
    """(batch, m, n, k, transpose lhs, transpose rhs) when the dot is a (batched) GEMM over
    row-major buffers, else None. An operand's free dimensions may be several when they lie
    together on one side of its contracting dimensions: row-major, they are one dimension of
    their product (a [2,64,128] x [128,32] dot is a 128x32x128 GEMM), as XLA's dot
    decomposition reshapes them, and the result [batch, lhs free, rhs free] is the [batch, m,
    n] matrix. Several contracting dimensions are one likewise when they lie together and in
    the same order on both sides (a layer's weight gradient over [batch, sequence, features]
    activations contracts the batch and the sequence: h^T dy is one GEMM with the lhs
    transposed, where transposing h into [features, batch * sequence] first cost a copy as
    large as h). Batch dimensions leading both operands likewise are one batch of their
    product (attention's [batch, heads, ...] dots)."""
    numbers = DotNumbers.of(dot)
    lhs_shape, rhs_shape = shape_of(dot.operands[0].type), shape_of(dot.operands[1].type)
    contracting = len(numbers.lhs_contracting)
    if not contracting or contracting != len(numbers.rhs_contracting):
        return None
    if not (together(numbers.lhs_contracting) and together(numbers.rhs_contracting)):
        return None
    batched = len(numbers.lhs_batch)
    if numbers.lhs_batch != numbers.rhs_batch or numbers.lhs_batch != list(range(batched)):
        return None
    if len(lhs_shape) < 1 + batched + contracting or len(rhs_shape) < 1 + batched + contracting:
        return None
    # contracting first among the non-batch dimensions: the operand is [k, free] (transposed
    # for the lhs); last: [free, k] (transposed for the rhs); elsewhere the free ones are apart
    lhs_first, rhs_first = numbers.lhs_contracting[0], numbers.rhs_contracting[0]
    lhs_last, rhs_last = numbers.lhs_contracting[-1], numbers.rhs_contracting[-1]
    if lhs_first != batched and lhs_last != len(lhs_shape) - 1 or rhs_first != batched and rhs_last != len(rhs_shape) - 1:
        return None
    batch = prod(lhs_shape[:batched])
    k = prod(lhs_shape[d] for d in numbers.lhs_contracting)
    m = prod(size for d, size in enumerate(lhs_shape) if d >= batched and d not in numbers.lhs_contracting)
    n = prod(size for d, size in enumerate(rhs_shape) if d >= batched and d not in numbers.rhs_contracting)
    return batch, m, n, k, lhs_first == batched, rhs_last == len(rhs_shape) - 1


def together(dimensions: list[int]) -> bool:
    """Whether `dimensions` are adjacent and in increasing order."""
    return dimensions == list(range(dimensions[0], dimensions[0] + len(dimensions)))


def free_dimensions(rank: int, batch: list[int], contracting: list[int]) -> list[int]:
    return [d for d in range(rank) if d not in batch and d not in contracting]


def wants_canonical_form(dot: ir.Operation) -> bool:
    if SHARDING in dot.attributes or "algorithm" in dot.attributes or gemm_shape(dot) is not None:
        return False
    if not isinstance(ir.RankedTensorType(dot.results[0].type).element_type, ir.FloatType):
        return False
    numbers = DotNumbers.of(dot)
    lhs_rank, rhs_rank = len(shape_of(dot.operands[0].type)), len(shape_of(dot.operands[1].type))
    return bool(numbers.lhs_contracting and free_dimensions(lhs_rank, numbers.lhs_batch, numbers.lhs_contracting)
                and free_dimensions(rhs_rank, numbers.rhs_batch, numbers.rhs_contracting))


def collapsed(value: ir.Value, first: int, count: int, location: ir.Location) -> ir.Value:
    """`value` with its `count` dimensions from `first` on reshaped into one."""
    if count == 1:
        return value
    shape = shape_of(value.type)
    merged = shape[:first] + [prod(shape[first:first + count])] + shape[first + count:]
    result_type = ir.RankedTensorType.get(merged, ir.RankedTensorType(value.type).element_type)
    return create_op("xhlo.reshape", [value], [result_type], {}, location).results[0]


def canonical_numbers(batched: int, lhs_rank: int) -> ir.Attribute:
    def array(values):
        return ir.DenseI64ArrayAttr.get(list(values))

    return ir.DictAttr.get({
        "lhs_batching_dimensions": array(range(batched)), "rhs_batching_dimensions": array(range(batched)),
        "lhs_contracting_dimensions": array([lhs_rank - 1]), "rhs_contracting_dimensions": array([batched]),
    })


def canonicalize(dot: ir.Operation) -> None:
    """Replace `dot` by the GEMM-form dot of transposed (and reshaped) operands."""
    numbers = DotNumbers.of(dot)
    lhs, rhs = dot.operands
    lhs_free = free_dimensions(len(shape_of(lhs.type)), numbers.lhs_batch, numbers.lhs_contracting)
    rhs_free = free_dimensions(len(shape_of(rhs.type)), numbers.rhs_batch, numbers.rhs_contracting)
    batched, contracting = len(numbers.lhs_batch), len(numbers.lhs_contracting)
    location = dot.location
    with ir.InsertionPoint(dot):
        lhs = collapsed(transposed(lhs, numbers.lhs_batch + lhs_free + numbers.lhs_contracting, location),
                        batched + len(lhs_free), contracting, location)
        rhs = collapsed(transposed(rhs, numbers.rhs_batch + numbers.rhs_contracting + rhs_free, location),
                        batched, contracting, location)
        attributes = {name: dot.attributes[name] for name in dot.attributes if name != "dot_dimension_numbers"}
        attributes["dot_dimension_numbers"] = canonical_numbers(batched, len(shape_of(lhs.type)))
        replacement = create_op("xhlo.dot", [lhs, rhs], [dot.results[0].type], attributes, location)
    dot.results[0].replace_all_uses_with(replacement.results[0])
    dot.erase()


@dataclass(frozen=True)
class DotCanonicalizerPass(ModulePass):
    """Puts the float dots no GEMM takes in GEMM form between transposes."""

    name: ClassVar[str] = "xhlo-dot-canonicalizer"
    summary: ClassVar[str] = "dot canonicalization: batch dimensions first, one contracting dimension at an end (XLA's DotDecomposer)"

    def run(self, module: ir.Module) -> PassResult:
        dots = [dot for dot in ops_named(module.operation, "xhlo.dot") if wants_canonical_form(dot)]
        for dot in dots:
            canonicalize(dot)
        return PassResult(bool(dots))
