"""Whether a kernel runs split over the threads, and in how many slices: where the time the
split saves exceeds what starting the other threads costs.

A kernel alone on one core takes about max(bytes it moves / one core's bandwidth, its work /
one core's vector throughput, which scales with the host's vector width) (a roofline for one core; bytes and work as
`transforms/cost_analysis.py` counts them: operands read and results written, transcendentals
weighted by what their polynomial approximations cost). One core's bandwidth depends on where
the bytes are: a kernel whose bytes fit in half the last-level cache reads operands the kernels
before it have just written, from the cache (a 3 MiB elementwise kernel whole: 85 GB/s on one
core); a larger one streams from memory. Split over p threads its work and its bytes take
1/p of the time, wherever the bytes are, plus (p - 1) hand-offs to pool workers. So a kernel
moving more than about 400 KB from memory or 1 MiB from the cache splits on two threads,
instead of the fixed "writes 1 MiB" rule the model replaced, which left large reductions
(they read much, write little) and transcendental-heavy kernels on one thread.

The cache's bytes were once taken not to divide (the threads sharing its bandwidth, measured
on 2026-12-03: Adam's 7 MiB updates faster whole); on this host, 2026-12-05, every benchmark
kernel of 1 MiB or more ran faster split, forced, than whole (`kernel_bandwidth.py`, 43 of
102 kernels by more than 1.25x, Adam's updates 2x; 3 slower, all under 0.4 MiB), and whole
workloads taking turns with the old model: Adam 6.5 -> 5.4 ms, cross entropy 12.2 -> 10.3,
an MLP gradient 20.2 -> 17.5, none slower beyond the noise. A kernel splits into p slices (the pool hands each worker one contiguous
range, so more slices only add calls), or the smallest multiple of p that divides its
leading dimension.
"""

import functools
import math
import pathlib
from dataclasses import dataclass

import llvmlite.binding as llvm

from mlirxla.mlir import ir
from mlirxla.transforms.cost_analysis import Cost, kernel_cost
from mlirxla.transforms.fusion_legality import fused_ops
from mlirxla.transforms.scheduling import type_bytes

# handing slices to the other threads and waiting for them: on the Python split helpers a no-op
# split took 7-15 us (min-median), and an elementwise kernel of 0.2-3 MiB split over 2 threads
# took 17-40 us more than half its whole time (2 shared cores, 2026-12-02; docs/decisions.md).
# On the native pool (`runtime/native_pool.py`) a no-op split takes about 1 us while its helper
# spins and 12-77 us once it sleeps, as it does at an execution's first split: 50 us kept
# kernels of 1-3 MiB whole that ran 1.3-1.7x faster split (2026-12-05); 20 us splits those
# and keeps those under 0.5 MiB, which ran slower split, whole
THREAD_START_S = 20e-6
CORE_BANDWIDTH_BYTES_PER_S = 8e9  # what one core streams from memory
# what one core reads from the last-level cache and writes back into it: elementwise kernels of
# 1-8 MiB ran whole at 19-24 GB/s on this host (2026-12-05; 34-105 GB/s measured on 2026-12-02)
CACHED_CORE_BANDWIDTH_BYTES_PER_S = 25e9
CACHE_LEVELS = pathlib.Path("/sys/devices/system/cpu/cpu0/cache")
# a kernel reading operands transposed moves them in 8x8 vector blocks (`tiling.py`) mostly
# from the caches (its operand was just written): 15-25 GB/s on one core, best of 300 calls
# of 1-8 MiB transposes; at 8 GB/s a 1.5 MiB one split and ran 1.7x slower
TRANSPOSED_CORE_BANDWIDTH_BYTES_PER_S = 20e9
# one core's vectorized elementwise arithmetic, in the cost model's flops (an exp, log or tanh
# counted as TRANSCENDENTAL_FLOPS), per f32 lane of the host's vectors (`core_flops_per_s`):
# on AVX-512 (Zen 4, 16 lanes) masked exponential kernels of 1-3 MiB ran their 3.5-15 M flops
# at 88-108 G a second on one core (transformer_grad's in 32 us, transformer_bf16's in 169 us).
# The rate this replaces, 16 G a second for every host, took them for 5-7x slower than they
# are, so 1-1.5 MiB exponential kernels and 256K-element tanh epilogues split over two
# threads and lost to the hand-off (docs/decisions.md)
FLOPS_PER_S_PER_LANE = 5e9
TRANSCENDENTAL_FLOPS = 20  # an exp, log or tanh polynomial, in flops
# a float divide's time per f32 element (the cost model counts it as one flop): a vector divide
# issues every 5 cycles or so, however wide (8 lanes a ymm, 16 a zmm at half the rate), where
# adds and multiplies issue twice a cycle. A softmax's 2M divides by column sums took 1.0 ms
# on one core (2026-12-05) where one flop each made them 0.03 ms, and ran whole
DIVIDE_S = 0.2e-9
# a float remainder's time per element: LLVM scalarizes a vector `frem` into one libm `fmodf`
# call per lane; jnp.floor_divide of 100000 floats (one remainder each) took 1.45 ms on one core
# (2026-12-05) where one flop each made it 0.02 ms, and it ran whole
REMAINDER_S = 12e-9
# a gathered row of an operand past a core's own caches is a load at a computed address, its
# latency (tens of ns from the shared cache) partly hidden by the loads in flight: 200K rows of
# 12 bytes from a 12 MiB image took 3 ms on one core (2026-12-05), where the bytes counted
# made it 0.3 ms and the kernel ran whole
GATHERED_ROW_S = 10e-9
GATHERED_FROM_BYTES = 1 << 20
SLICE_MULTIPLES = (1, 2, 4, 8)


def splittable(op: ir.Operation) -> bool:
    """Whether `op` is a kernel generated from its ops that blocks over the threads can take: a
    loop or input fusion, a lone reduce or an op without regions, with ranked tensor results."""
    if op.name == "xhlo.fusion":
        if ir.StringAttr(op.attributes["kind"]).value not in ("loop", "input"):
            return False
    elif op.regions and op.name != "xhlo.reduce":
        return False
    return bool(op.results) and all(isinstance(result.type, ir.RankedTensorType) for result in op.results)


@dataclass(frozen=True)
class SplitEstimate:
    single_thread_s: float
    split_s: float

    @property
    def pays(self) -> bool:
        return self.split_s < self.single_thread_s


def estimate(op: ir.Operation, threads: int, bandwidth: float | None = None) -> SplitEstimate:
    cost = kernel_cost(op)
    return estimate_moving(cost.bytes_accessed, lane_work(op, cost), threads, bandwidth)


def lane_work(op: ir.Operation, cost: Cost) -> float:
    """The kernel's arithmetic in flops of f32 lanes, a float divide as `DIVIDE_S` of them and a
    remainder as `REMAINDER_S`: a vector
    holds half as many f64 lanes, so f64 work counts twice (an f64 tanh of 2^19 elements, 8 MiB, took 1.48 ms whole where its
    work counted once made it 0.13 ms, and it was not split); and its gathers' rows from
    large operands, at `GATHERED_ROW_S` each, in the flops that take as long."""
    widest = max((element_bits(result.type) for result in op.results), default=32)
    flops = cost.flops + (float_elements(op, "xhlo.divide") * DIVIDE_S + float_elements(op, "xhlo.remainder") * REMAINDER_S) * core_flops_per_s()
    arithmetic = (flops + TRANSCENDENTAL_FLOPS * cost.transcendentals) * max(1, widest // 32)
    return arithmetic + gathered_rows(op) * GATHERED_ROW_S * core_flops_per_s()


def float_elements(op: ir.Operation, name: str) -> int:
    """The elements the kernel's float ops `name` (divides, remainders) compute."""
    return sum(math.prod(ir.RankedTensorType(inner.results[0].type).shape) for inner in fused_ops(op)
               if inner.name == name and element_bits(inner.results[0].type))


def gathered_rows(op: ir.Operation) -> int:
    """The rows the kernel's gathers read from operands of at least `GATHERED_FROM_BYTES`: one
    per index vector, the result's elements over its slice's."""
    rows = 0
    for inner in fused_ops(op):
        if inner.name != "xhlo.gather" or type_bytes(inner.operands[0].type) < GATHERED_FROM_BYTES:
            continue
        slice_elements = math.prod(ir.DenseI64ArrayAttr(inner.attributes["slice_sizes"]))
        rows += math.prod(ir.RankedTensorType(inner.results[0].type).shape) // max(slice_elements, 1)
    return rows


def element_bits(value_type: ir.Type) -> int:
    """The bits of a tensor's float element (a complex one's part), 0 for other types."""
    element = ir.ShapedType(value_type).element_type if isinstance(value_type, ir.ShapedType) else value_type
    if isinstance(element, ir.ComplexType):
        element = element.element_type
    return element.width if isinstance(element, ir.FloatType) else 0


def estimate_at_best(op: ir.Operation, threads: int) -> SplitEstimate:
    """The estimate at the bandwidth `estimate` may be given (transposed reads, or one core's)
    that favours a split most, so that a kernel whose split does not pay here pays at none: the
    slowest (bytes divide over the threads, so the slower they come the more a split saves)."""
    cost = kernel_cost(op)
    bandwidths = (core_bandwidth(cost.bytes_accessed), TRANSPOSED_CORE_BANDWIDTH_BYTES_PER_S)
    best = min(bandwidths)
    return estimate_moving(cost.bytes_accessed, lane_work(op, cost), threads, best)


def estimate_moving(bytes_moved: float, work: float, threads: int, bandwidth: float | None = None) -> SplitEstimate:
    """The estimate for a kernel moving `bytes_moved` at `bandwidth` (by default one core's
    from wherever bytes that many are: `core_bandwidth`) and doing `work` flops. Threads divide
    the work and the bytes (the module docstring says what was measured)."""
    single_thread_s = max(bytes_moved / (bandwidth or core_bandwidth(bytes_moved)), work / core_flops_per_s())
    return SplitEstimate(single_thread_s, single_thread_s / threads + (threads - 1) * THREAD_START_S)


@functools.cache
def core_flops_per_s() -> float:
    """What one core computes a second, in the cost model's flops: `FLOPS_PER_S_PER_LANE` times
    the f32 lanes of the host's widest vectors as LLVM vectorizes for it (16 with AVX-512, 8
    with AVX, 4 otherwise)."""
    features = llvm.get_host_cpu_features().flatten().split(",")
    lanes = 16 if "+avx512f" in features else 8 if "+avx" in features else 4
    return FLOPS_PER_S_PER_LANE * lanes


def core_bandwidth(bytes_moved: float) -> float:
    """What one core moves per second of a kernel moving `bytes_moved`: from the cache when
    they fit in half the last-level cache (the rest holds what else is live), else from memory."""
    return CACHED_CORE_BANDWIDTH_BYTES_PER_S if in_shared_cache(bytes_moved) else CORE_BANDWIDTH_BYTES_PER_S


def in_shared_cache(bytes_moved: float) -> bool:
    return bytes_moved <= last_level_cache_bytes() / 2


@functools.cache
def last_level_cache_bytes() -> int:
    """The size of the host's last-level data cache as Linux describes it, 0 where it does not."""
    sizes = [0]
    for level in CACHE_LEVELS.glob("index*"):
        try:
            if (level / "type").read_text().strip() in ("Data", "Unified"):
                sizes.append(parse_cache_size((level / "size").read_text().strip()))
        except (OSError, ValueError):
            continue
    return max(sizes)


def parse_cache_size(text: str) -> int:
    """Bytes of a sysfs cache size such as `32768K` or `1M`."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KMGkmg")) * scale


def slice_count(leading: int, threads: int) -> int | None:
    """The slices a kernel of `leading` rows splits into over `threads`, or None."""
    return next((threads * m for m in SLICE_MULTIPLES if leading % (threads * m) == 0), None)
