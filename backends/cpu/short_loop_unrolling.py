"""Short innermost loops are unrolled, so that the loop around them is the one LLVM widens.

The LLVM loop vectorizer widens only innermost loops, and LLVM's O3 did not fully unroll a
2-iteration loop with a long body before it. jax's random numbers drawn with one key per
element (`random.gamma`, `beta`, `dirichlet`, a vmapped `random.normal`) run threefry over
(n, 2) arrays, a key's two words: each kernel was a loop over n around a loop of 2, and ran
scalar. Unrolled, the loop over n reads and writes each pair as an interleaved group, which
the vectorizer widens with shuffles: gamma's threefry kernels ran 4x to 7x faster.

An innermost `scf.for` with constant bounds, at most `MAX_TRIPS` iterations, no loop-carried
values and no regions in its body is replaced by its body once per iteration, the induction
variable a constant in each. Only the loops innermost in the kernel as it comes are unrolled:
the loop around an unrolled one is not unrolled in turn, which had unrolled whole nests of
short loops (a vectorized 2x128x4x32 f16 transpose's 512 tile blocks, 5 MB of LLVM IR that
LLVM's SLP vectorizer took two minutes over).
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.fusion_graph import clone_into

from .masked_loop_splitting import constant_index

MAX_TRIPS = 4


def unroll_short_loops(module: ir.Module) -> int:
    """Unroll every short innermost loop of `module`; the number unrolled."""
    short = [(loop, trips) for loop in ops_named(module, "scf.for")
             if (trips := trip_values(loop)) is not None and is_plain_innermost(loop)]
    for loop, trips in short:
        unroll(loop, trips)
    return len(short)


def trip_values(loop: ir.Operation) -> range | None:
    """The induction variable's values, when the bounds and step are constants and they are
    at most `MAX_TRIPS`."""
    bounds = [constant_index(loop.operands[i]) for i in range(3)]
    if None in bounds or bounds[2] <= 0:
        return None
    trips = range(*bounds)
    return trips if len(trips) <= MAX_TRIPS else None


def is_plain_innermost(loop: ir.Operation) -> bool:
    """No loop-carried values, and nothing with a region (a loop, a branch) in its body."""
    body = loop.regions[0].blocks[0]
    return len(loop.results) == 0 and all(len(op.operation.regions) == 0 for op in body.operations)


def unroll(loop: ir.Operation, trips: range) -> None:
    body = loop.regions[0].blocks[0]
    ops = [op.operation for op in body.operations][:-1]  # the scf.yield left out
    index = ir.IndexType.get()
    with ir.InsertionPoint(loop), loop.location:
        for trip in trips:
            position = ir.Operation.create("arith.constant", results=[index], attributes={"value": ir.IntegerAttr.get(index, trip)})
            mapping = {body.arguments[0]: position.result}
            for op in ops:
                clone_into(op, mapping)
    loop.erase()
