"""Whether a kernel runs split over the threads, and in how many slices: where the time the
split saves exceeds what starting the other threads costs.

A kernel alone on one core takes about max(bytes it moves / one core's bandwidth, its work /
one core's vector throughput) (a roofline for one core; bytes and work as
`transforms/cost_analysis.py` counts them: operands read and results written, transcendentals
weighted by what their polynomial approximations cost). Split over p threads it takes 1/p of
that plus (p - 1) hand-offs to pool workers. A split pays when

    time * (1 - 1/p) > (p - 1) * THREAD_START_S

(about 800 KB moved on two threads), instead of the fixed "writes 1 MiB" rule it replaces,
which left large reductions (they read much, write little) and transcendental-heavy kernels
on one thread. A kernel splits into p slices (the pool hands each worker one contiguous
range, so more slices only add calls), or the smallest multiple of p that divides its
leading dimension.
"""

from dataclasses import dataclass

from mlirxla.mlir import ir
from mlirxla.transforms.cost_analysis import kernel_cost

# handing one range to a split helper and waiting for it, GIL hand-offs included: a no-op split
# takes 7-15 us (min-median), but an elementwise kernel of 0.2-3 MiB split over 2 threads took
# 17-40 us more than half its whole time (2 shared cores, 2026-12-02; docs/decisions.md)
THREAD_START_S = 50e-6
CORE_BANDWIDTH_BYTES_PER_S = 8e9  # what one core streams from memory
# a kernel reading operands transposed moves them in 8x8 vector blocks (`tiling.py`) mostly
# from the caches (its operand was just written): 15-25 GB/s on one core, best of 300 calls
# of 1-8 MiB transposes; at 8 GB/s a 1.5 MiB one split and ran 1.7x slower
TRANSPOSED_CORE_BANDWIDTH_BYTES_PER_S = 20e9
CORE_FLOPS_PER_S = 16e9  # one core's vectorized elementwise arithmetic
TRANSCENDENTAL_FLOPS = 20  # an exp, log or tanh polynomial, in flops
SLICE_MULTIPLES = (1, 2, 4, 8)


@dataclass(frozen=True)
class SplitEstimate:
    single_thread_s: float
    split_s: float

    @property
    def pays(self) -> bool:
        return self.split_s < self.single_thread_s


def estimate(op: ir.Operation, threads: int, bandwidth: float = CORE_BANDWIDTH_BYTES_PER_S) -> SplitEstimate:
    cost = kernel_cost(op)
    return estimate_moving(cost.bytes_accessed, cost.flops + TRANSCENDENTAL_FLOPS * cost.transcendentals, threads, bandwidth)


def estimate_moving(bytes_moved: float, work: float, threads: int, bandwidth: float = CORE_BANDWIDTH_BYTES_PER_S) -> SplitEstimate:
    """The estimate for a kernel moving `bytes_moved` at `bandwidth` and doing `work` flops."""
    alone = max(bytes_moved / bandwidth, work / CORE_FLOPS_PER_S)
    return SplitEstimate(alone, alone / threads + (threads - 1) * THREAD_START_S)


def slice_count(leading: int, threads: int) -> int | None:
    """The slices a kernel of `leading` rows splits into over `threads`, or None."""
    return next((threads * m for m in SLICE_MULTIPLES if leading % (threads * m) == 0), None)
