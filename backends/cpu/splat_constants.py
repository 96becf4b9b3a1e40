"""A splat constant tensor in a kernel (`jnp.ones` written to an output, a broadcast of a
constant that `generated_broadcasts.py` or the canonicalizer made a constant of the larger
shape) becomes its one value filled into the tensor (`linalg.fill`), before bufferization.

Bufferized as it was, a splat constant became a global holding every element, copied into
the destination: LLVM IR spells such a global's elements out one by one, so a 2.2 GB
`jnp.ones` (jax's `testSizeOverflow`) made gigabytes of LLVM IR text and exhausted memory
before the kernel compiled, where XLA emits a loop storing the value. A fill writes the
value where the tensor lives (empty-tensor elimination puts it into the destination) and
becomes a loop LLVM turns into a memset. A single element stays a constant: its global is
one scalar, and the canonicalizer folds it into the ops reading it.
"""

import math

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir, linalg
from mlirxla.transforms import erasure


def fill_splat_constants(module: ir.Module) -> int:
    """Rewrite every splat constant tensor of more than one element in `module` as a fill;
    how many were rewritten."""
    rewritten = 0
    for constant in erasure.live_ops(ops_named(module, "arith.constant")):
        value = constant.attributes["value"]
        result_type = constant.results[0].type
        if not isinstance(value, ir.DenseElementsAttr) or not value.is_splat or not isinstance(result_type, ir.RankedTensorType):
            continue
        tensor_type = ir.RankedTensorType(result_type)
        if not tensor_type.has_static_shape or tensor_type.rank == 0 or math.prod(tensor_type.shape) == 1 \
                or not isinstance(tensor_type.element_type, (ir.IntegerType, ir.FloatType, ir.IndexType)):
            continue
        with ir.InsertionPoint(constant), constant.location:
            element = ir.Operation.create("arith.constant", results=[tensor_type.element_type],
                                          attributes={"value": value.get_splat_value()}).result
            empty = ir.Operation.create("tensor.empty", results=[tensor_type], operands=[]).result
            filled = linalg.fill(element, outs=[empty])
        constant.results[0].replace_all_uses_with(filled)
        erasure.erase(constant)
        rewritten += 1
    return rewritten
