"""No allocation inside kernels: what bufferization allocates becomes memory the caller
passes (XLA:CPU's kernels likewise get all their memory from outside).

After one-shot bufferization, a kernel still allocates for values it cannot write into its
destinations: one slice of a batch-slice fusion's convolution, dot or reduce results, a
transposed operand, a padded input. Each `memref.alloc` of the kernel function becomes a new
argument after its results, marked `llvm.noalias`; the kernel then calls neither malloc nor
free, and the thunk that runs it passes pointers into a scratch range it owns, one range
per concurrent call (`KernelThunk.scratch`, laid out by `scratch_layout`).

Why arguments and not views of one scratch buffer: LLVM cannot tell views of one pointer
apart inside loops, so it stops vectorizing them (a conv net ran 3x slower that way); as
separate noalias arguments they are as independent as malloc's results were. The ranges do
not overlap: a kernel's allocations are few and short-lived, so reuse would save little.
"""

import math

from mlirxla.dialects.xhlo.types import bit_width
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import func, ir

ALIGNMENT = 64


def element_bytes(element: ir.Type) -> int:
    """Bytes one element takes in memory once lowered (an i1 takes a whole byte)."""
    bits = 64 if isinstance(element, ir.IndexType) else bit_width(element)
    return max(1, (bits + 7) // 8)


def scratch_arguments(function: func.FuncOp) -> list[int]:
    """Make each of `function`'s allocations a new argument, marked noalias; the bytes of each
    ([]: the function allocates nothing and is left as it is)."""
    allocations = ops_named(function, "memref.alloc")
    entry = function.regions[0].blocks[0]
    existing = len(entry.arguments)
    sizes = []
    for allocation in allocations:
        memref_type = ir.MemRefType(allocation.results[0].type)
        if not memref_type.has_static_shape or allocation.operands:
            raise MlirxlaError(f"a kernel allocates a {memref_type} of dynamic shape")
        sizes.append(math.prod(memref_type.shape) * element_bytes(memref_type.element_type))
        argument = entry.add_argument(memref_type, allocation.location)
        allocation.results[0].replace_all_uses_with(argument)
        allocation.erase()
    if not allocations:
        return []
    for release in ops_named(function, "memref.dealloc"):
        release.erase()
    function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in entry.arguments], []))
    private = ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()})
    function.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get({})] * existing + [private] * len(sizes))
    return sizes


def scratch_layout(sizes: list[int]) -> tuple[list[int], int]:
    """Offsets of the scratch arguments in one call's range (each aligned), and its size."""
    offsets, end = [], 0
    for size in sizes:
        start = -(-end // ALIGNMENT) * ALIGNMENT
        offsets.append(start)
        end = start + size
    return offsets, -(-end // ALIGNMENT) * ALIGNMENT


def scratch_from_arguments(module: ir.Module) -> dict[str, list[int]]:
    """`scratch_arguments` for every function of a kernel module: symbol -> scratch sizes."""
    needs = {}
    for op in module.body.operations:
        if op.operation.name == "func.func":
            needs[ir.StringAttr(op.attributes["sym_name"]).value] = scratch_arguments(op)
    return needs
