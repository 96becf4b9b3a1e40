"""No allocation inside kernels: what bufferization allocates becomes memory the caller
passes (XLA:CPU's kernels likewise get all their memory from outside).

After one-shot bufferization, a kernel still allocates for values it cannot write into its
destinations: one slice of a batch-slice fusion's convolution, dot or reduce results, a
transposed operand, a padded input. Each `memref.alloc` of the kernel function becomes a new
argument after its results, marked `llvm.noalias`, and is recorded with the fused op it
materializes (`materialization.materialized_op`, read off the allocation's location); the
kernel then calls neither malloc nor free, and the thunk that runs it passes pointers into
a range of the temp slab that buffer assignment planned for it, live while the thunk runs,
one range per concurrent call (`KernelThunk.scratch`, laid out by `scratch_layout`;
`compiler.place_scratch`).

Why arguments and not views of one scratch buffer: LLVM cannot tell views of one pointer
apart inside loops, so it stops vectorizing them (a conv net ran 3x slower that way); as
separate noalias arguments they are as independent as malloc's results were. The ranges do
not overlap: a kernel's allocations are few and short-lived, so reuse would save little.
"""

import math
from dataclasses import dataclass

from mlirxla.dialects.xhlo.types import bit_width
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import func, ir

from .materialization import materialized_op

ALIGNMENT = 64  # bytes: of the temp slab's offsets and of each scratch argument (a cache line, the widest vector)


@dataclass(frozen=True)
class ScratchArgument:
    """One allocation a kernel had: its bytes and what it holds (its memref type and the fused
    op it materializes, or that bufferization made it for a copy)."""

    size: int
    holds: str


def element_bytes(element: ir.Type) -> int:
    """Bytes one element takes in memory once lowered (an i1 takes a whole byte)."""
    bits = 64 if isinstance(element, ir.IndexType) else bit_width(element)
    return max(1, (bits + 7) // 8)


def scratch_arguments(function: func.FuncOp) -> list[ScratchArgument]:
    """Make each of `function`'s allocations a new argument, marked noalias; what each is
    ([]: the function allocates nothing and is left as it is)."""
    allocations = ops_named(function, "memref.alloc")
    entry = function.regions[0].blocks[0]
    existing = len(entry.arguments)
    sizes = []
    for allocation in allocations:
        memref_type = ir.MemRefType(allocation.results[0].type)
        if not memref_type.has_static_shape or allocation.operands:
            raise MlirxlaError(f"a kernel allocates a {memref_type} of dynamic shape")
        op = materialized_op(allocation.location)
        sizes.append(ScratchArgument(math.prod(memref_type.shape) * element_bytes(memref_type.element_type),
                                     f"{memref_type} materializing fused {op}" if op else f"{memref_type}, a copy bufferization made"))
        argument = entry.add_argument(memref_type, allocation.location)
        allocation.results[0].replace_all_uses_with(argument)
        allocation.erase()
    if not allocations:
        return []
    for release in ops_named(function, "memref.dealloc"):
        release.erase()
    function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in entry.arguments], []))
    private = ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()})
    kept = list(ir.ArrayAttr(function.attributes["arg_attrs"])) if "arg_attrs" in function.attributes else [ir.DictAttr.get({})] * existing
    function.attributes["arg_attrs"] = ir.ArrayAttr.get(kept + [private] * len(sizes))
    return sizes


def scratch_layout(sizes: list[int], alignment: int = ALIGNMENT) -> tuple[list[int], int]:
    """Offsets of the scratch arguments in one call's range (each aligned to `alignment`, the
    buffer assignment's when it is coarser: a GPU kernel's pointers are 256-byte aligned), and
    its size."""
    offsets, end = [], 0
    for size in sizes:
        start = -(-end // alignment) * alignment
        offsets.append(start)
        end = start + size
    return offsets, -(-end // alignment) * alignment


def scratch_from_arguments(module: ir.Module) -> dict[str, list[ScratchArgument]]:
    """`scratch_arguments` for every function of a kernel module: symbol -> its scratch."""
    needs = {}
    for op in module.body.operations:
        if op.operation.name == "func.func":
            needs[ir.StringAttr(op.attributes["sym_name"]).value] = scratch_arguments(op)
    return needs
