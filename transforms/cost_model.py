"""Per-backend cost models for fusion decisions (XLA's GpuPerformanceModel and the CPU cost
analysis, reduced to a roofline): a kernel takes `overhead + max(bytes / bandwidth,
flops / peak)`, where bytes are what it reads from its operands and writes to its results
and flops what its ops compute. Ops that are no kernel of their own (constants, tuples,
bitcasts) cost nothing. `time_saved(producer, consumers)` is the time of the unfused kernels
minus the time of the fused ones (the producer counted again when it stays for other users).
"""

import dataclasses
from dataclasses import dataclass, field

from mlirxla.mlir import ir

from .erasure import identity
from .fusion_legality import NOT_KERNELS, TRANSCENDENTAL, element_count, fused_ops, kind_of


@dataclass(frozen=True)
class CostModel:
    """A roofline for one backend: seconds per kernel launch, bytes and flops per second."""

    name: str
    kernel_overhead_s: float
    memory_bandwidth_bytes_per_s: float
    flops_per_s: float
    transcendental_flops: float = 8.0  # one exp/log/tanh counted as this many flops
    multiprocessors: int = 1  # what runs blocks of threads at once (a GPU's SMs)
    # fusion name -> flops, for one pass run (`remembering`): fusion names are unique in a
    # module, and a fusion's body never changes under its name
    flops_memo: dict | None = field(default=None, compare=False, repr=False)
    # type -> (elements, bytes), for one pass run: types are uniqued in their context, so a
    # type's sizes are read off it once, not once per operand of every kernel costed
    sizes_memo: dict | None = field(default=None, compare=False, repr=False)

    def remembering(self) -> "CostModel":
        """This model, remembering each fusion's flops and each type's sizes (for one pass
        run over one module: a type is only valid while its context lives)."""
        return dataclasses.replace(self, flops_memo={}, sizes_memo={})

    def sizes(self, value_type: ir.Type) -> tuple[int, int]:
        """(elements, bytes) of a value of `value_type`."""
        if self.sizes_memo is None:
            return element_count(value_type), byte_size(value_type)
        sizes = self.sizes_memo.get(value_type)
        if sizes is None:
            sizes = self.sizes_memo[value_type] = (element_count(value_type), byte_size(value_type))
        return sizes

    def kernel_time(self, bytes_accessed: float, flops: float) -> float:
        return self.kernel_overhead_s + max(bytes_accessed / self.memory_bandwidth_bytes_per_s, flops / self.flops_per_s)

    def op_flops(self, op: ir.Operation) -> float:
        """Flops of one (unfused) op, a fusion's body summed."""
        if self.flops_memo is None or op.name != "xhlo.fusion":
            return self.body_flops(op)
        name = ir.StringAttr(op.attributes["name"]).value
        if name not in self.flops_memo:
            self.flops_memo[name] = self.body_flops(op)
        return self.flops_memo[name]

    def body_flops(self, op: ir.Operation) -> float:
        return self.ops_flops(fused_ops(op))

    def ops_flops(self, ops: list[ir.Operation]) -> float:
        """Flops of the ops of one kernel, summed in their order."""
        total = 0.0
        for inner in ops:
            kind = kind_of(inner)
            if not inner.results:
                continue
            elements = element_count(inner.results[0].type)
            if kind in TRANSCENDENTAL:
                total += elements * self.transcendental_flops
            elif kind == "reduce":
                total += element_count(inner.operands[0].type)
            elif kind == "dot":
                # K from M*K * K*N / M*N (batch dimensions folded in)
                squared = element_count(inner.operands[0].type) * element_count(inner.operands[1].type) / max(elements, 1)
                total += 2.0 * elements * max(squared, 1) ** 0.5
            elif kind == "convolution":
                total += 2.0 * elements * element_count(inner.operands[1].type) / max(_last_dim(inner.results[0].type), 1)
            elif kind not in ("broadcast", "reshape", "bitcast", "transpose", "slice", "constant", "iota", "copy", "pad", "concatenate", "reverse", "dynamic_slice", "gather"):
                total += elements
        return total

    def traffic(self, op: ir.Operation) -> "Traffic":
        """What `op` reads and writes as a member of a kernel."""
        reads = []
        for value in op.operands:
            owner = value.owner
            if isinstance(owner, (ir.Operation, ir.OpView)):
                owner = owner.operation
                if owner.name == "xhlo.constant" and self.sizes(value.type)[0] <= 1:
                    continue
                reads.append((value, identity(owner), self.sizes(value.type)[1]))
            else:
                reads.append((value, None, self.sizes(value.type)[1]))
        return Traffic(tuple(reads), sum(self.sizes(v.type)[1] for v in op.results))

    def traffic_time(self, traffic: list["Traffic"], inside: tuple[int, ...], written: int, flops: float) -> float:
        """Time of one kernel whose members (the ops at the addresses `inside`) move `traffic`,
        writing `written` bytes: each value read from outside once."""
        read: dict = {}
        for member in traffic:
            for value, owner, size in member.reads:
                if owner not in inside:
                    read[value] = size
        return self.kernel_time(sum(read.values()) + written, flops)

    def kernel_cost(self, members: list[ir.Operation], outputs: list[ir.Value], flops: float | None = None) -> float:
        """Time of one kernel made of `members` (ops or fusions) computing `outputs`; `flops`,
        when given, is the members' flops summed in their order (as this would sum them)."""
        if len(members) == 1 and kind_of(members[0]) in NOT_KERNELS:
            return 0.0
        if flops is None:
            flops = sum(self.op_flops(m) for m in members)
        return self.traffic_time([self.traffic(m) for m in members], tuple(identity(m) for m in members),
                                 sum(self.sizes(v.type)[1] for v in outputs), flops)

    def op_time(self, op: ir.Operation, flops: float | None = None) -> float:
        return self.kernel_cost([op], list(op.results), flops)

    def fused_time(self, producer: ir.Operation, consumer: ir.Operation, flops: float | None = None) -> float:
        """Time of the kernel `producer` fused into `consumer` makes."""
        return self.kernel_cost([producer, consumer], list(consumer.results), flops)

    def time_saved(self, producer: ir.Operation, consumers: list[ir.Operation], producer_stays: bool) -> tuple[float, float, float]:
        """(saved, unfused, fused) seconds for fusing `producer` into each of `consumers`."""
        return saving(self.op_time(producer), [self.op_time(c) for c in consumers],
                      [self.fused_time(producer, c) for c in consumers], producer_stays)


@dataclass(frozen=True)
class Traffic:
    """What one op moves as a member of a kernel: `reads`, each operand read from memory as
    (the value, the address of the op defining it or None for an argument, its bytes), a
    constant of at most one element left out (it folds into the code); `written`, the bytes
    of its results. Fixed while the op lives and its operands are not redirected."""

    reads: tuple[tuple[ir.Value, int | None, int], ...]
    written: int


def saving(producer_time: float, consumer_times: list[float], fused_times: list[float], producer_stays: bool) -> tuple[float, float, float]:
    """(saved, unfused, fused) seconds from the kernel times of a producer, its consumers and
    each fused pair; the one place the sum is taken, so that cached kernel times give the
    very numbers (the same additions in the same order) that fresh ones do."""
    unfused = producer_time + sum(consumer_times)
    fused = sum(fused_times)
    if producer_stays:
        fused += producer_time
    return unfused - fused, unfused, fused


def _last_dim(value_type: ir.Type) -> int:
    shape = ir.ShapedType(value_type).shape
    return shape[-1] if shape else 1


def byte_size(value_type: ir.Type) -> int:
    if isinstance(value_type, ir.TupleType):
        tuple_type = ir.TupleType(value_type)
        return sum(byte_size(tuple_type.get_type(i)) for i in range(tuple_type.num_types))
    if not isinstance(value_type, ir.ShapedType):
        return 0
    element = ir.ShapedType(value_type).element_type
    if isinstance(element, ir.ComplexType):
        width = 2 * getattr(ir.ComplexType(element).element_type, "width", 32)
    else:
        width = getattr(element, "width", 32)
    return element_count(value_type) * max(int(width), 8) // 8


# a few cores of a server CPU: ~20 GB/s per kernel, ~50 GFLOP/s, ~1 us to dispatch a kernel
CPU = CostModel("cpu", kernel_overhead_s=1e-6, memory_bandwidth_bytes_per_s=20e9, flops_per_s=50e9)
# an H100-class GPU: ~5 us launch, ~3 TB/s HBM, ~60 TFLOP/s fp32
GPU = CostModel("gpu", kernel_overhead_s=5e-6, memory_bandwidth_bytes_per_s=3e12, flops_per_s=60e12)

# the cuda backend's target, an H200 (SXM): ~4 us from one launch to the next in a stream,
# ~4.3 TB/s HBM3e measured, ~67 TFLOP/s fp32 over 132 SMs
H200 = CostModel("cuda", kernel_overhead_s=4e-6, memory_bandwidth_bytes_per_s=4.3e12, flops_per_s=67e12, multiprocessors=132)

MODELS = {"cpu": CPU, "gpu": GPU, "cuda": H200}


def model_for(backend: str) -> CostModel:
    if backend not in MODELS:
        from mlirxla.errors import MlirxlaError

        raise MlirxlaError(f"unknown fusion backend '{backend}' (expected one of {', '.join(MODELS)})")
    return MODELS[backend]
