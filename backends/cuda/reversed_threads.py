"""A race probe for the `cuda-host` backend: every loop mapped to blocks or threads runs its
iterations last to first (`MLIRXLA_CUDA_HOST_ORDER=reversed`).

The host check runs a launch's blocks, and each block's threads, one after another in index
order; a GPU runs them in no order it promises. A kernel whose result depends on that order
is racy on the GPU yet passes on the host in index order: two threads storing different
values to one element, a thread reading what another thread of the same launch writes
outside a barrier's phases (a side output read back by a thread other than its writer, the
footprints of merged launches overlapping, a sort step's pairs crossing threads within a
launch). Running a program once in each order and comparing the results catches every such
kernel whose two orders differ on the data given.

What it cannot catch: lost updates (two threads read-modify-writing one element without an
atomic), which one-after-another execution completes in any order; and races between
threads that run at the same time, which a sequential run never interleaves. Atomic float
additions (scatter-adds) may round differently in the two orders, as they do on a GPU.
"""

import os

from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import nested_ops, ops_named
from mlirxla.mlir import arith, ir

from .loop_mapping import constant_index, trip_counts

ENVIRONMENT = "MLIRXLA_CUDA_HOST_ORDER"
ORDERS = ("forward", "reversed")


def order_from_environment() -> str:
    """The host check's order of blocks and threads: `forward` unless the variable says
    `reversed`; anything else is refused, naming the variable."""
    order = os.environ.get(ENVIRONMENT) or "forward"
    if order not in ORDERS:
        raise MlirxlaError(f"{ENVIRONMENT}={order}: the host check's order is one of {', '.join(ORDERS)}")
    return order


def reverse_mapped_loops(module: ir.Module, symbol: str) -> None:
    """Reverse every `scf.parallel` with a gpu mapping in the module's functions."""
    loops = [op for function in ops_named(module, "func.func") for op in nested_ops(function)
             if op.name == "scf.parallel" and "mapping" in op.attributes]
    for loop in loops:
        reverse(loop, symbol)


def reverse(loop: ir.Operation, symbol: str) -> None:
    """Each induction variable `i` over lower, lower + step, ..., last becomes
    `lower + last - i` inside the body: the same iterations, last first."""
    body = loop.regions[0].blocks[0]
    rank = len(body.arguments)
    bounds = [constant_index(value, symbol) for value in loop.operands[:3 * rank]]
    lower, upper, step = bounds[:rank], bounds[rank:2 * rank], bounds[2 * rank:]
    with ir.InsertionPoint.at_block_begin(body), loop.location:
        for argument, first, trips, stride in zip(body.arguments, lower, trip_counts(lower, upper, step), step):
            mirror = arith.ConstantOp(ir.IndexType.get(), 2 * first + (trips - 1) * stride).result
            mirrored = arith.SubIOp(mirror, argument)
            argument.replace_all_uses_except(mirrored.result, mirrored.operation)
