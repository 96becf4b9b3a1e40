"""xhlo-batch-slice-fusion: kernels around convolutions and dots that work on each batch
element apart merge into one kernel that runs slice by slice, so the large values between
them never reach memory whole (what XLA:CPU's YNNPACK fusions do for a conv net: conv, bias,
relu, conv, bias, relu and the pooling reduction become one kernel).

A kernel keeps its slices apart when, with N the size of dimension 0 of its results, every
value it computes has dimension 0 of size N and slice b of it depends only on slice b of the
values it reads (or on values it reads whole):

- elementwise ops read their operands slice by slice;
- a broadcast either maps its operand's dimension 0 onto dimension 0 or makes dimension 0
  new or expands a dimension of size 1 into it (its operand is read whole);
- a convolution with batch dimension 0 in and out and no feature or batch groups reads its
  input slice by slice and its kernel whole;
- a dot whose lhs keeps dimension 0 as its first free dimension (no batch dimensions) reads
  its lhs slice by slice and its rhs whole; in a kernel's own row blocks (not in merges,
  which would take a BLAS GEMM's place) one batched over dimension 0 of both operands
  (attention's [batch, heads] dots that BLAS cannot take) reads both slice by slice;
- a reshape keeping dimension 0 (both shapes start with N) reads its operand slice by slice;
- a reduce that keeps dimension 0 reads its inputs slice by slice and its inits whole;
- an iota along another dimension is the same in every slice; one along dimension 0 counts
  from the slice's first row, which the kernel is then given (`SliceCheck.positions`);
- a bitcast_convert keeping dimension 0 reads its operand slice by slice;
- a slice keeping dimension 0 whole and a concatenate along another dimension read their
  operands slice by slice;
- a gather whose result's dimension 0 is its indices' dimension 0 reads its indices slice by
  slice and its operand whole (each row gathers its own);
- constants are read whole or sliced; small elementwise, iota and broadcast work on whole
  values only (at most 16 KiB of results, whose dimension 0 is not N) is done again in
  every slice; anything else mixes slices.

A producer merges into its consumer when it has no other user, one of the two holds a
convolution or dot, the producer's result is larger than `min-intermediate-bytes` (it would
not stay in cache between two kernels) while one slice of it is at most `max-slice-bytes`
(it does), the weights the convolutions and dots read whole for every slice fit in
`max-slice-bytes` too (so slicing a matmul into matrix-vector products that stream their
weights again per row is refused), the dots of fewer than `MIN_DOT_SLICE_ROWS` lhs rows a
slice (a [rows, features] lhs sliced row by row: one matrix-vector product per row) read
their rhs again per slice no more bytes than the producer's result or `max-slice-bytes`,
whichever is more (a pairwise distance matrix
of 2000 x 1500 points, its dot merged with the epilogue computing the distances, ran 2000
GEMVs over a 384 KB rhs in 14.6 ms where the GEMM and the epilogue apart take about 3.5; a
small conv net's last dense layer, 96 bytes of weights, still merges), the consumer reads the producer's result slice by slice, both keep their slices
apart with the same N, and no other path leads from producer to consumer. A lone reshape
never merges: alone it becomes a bitcast, which moves no bytes, so merging it would save
nothing and make its consumer's convolution a loop nest in slices (jax's 1-D convolutions
read their input through one). Merges repeat to a
fixed point, so a chain of such kernels becomes one.

With `convolutions-as-gemms`, a merge is also refused when the convolutions of the two lose
more by running as loops in slices than the merge saves: the convolution cost model
(`convolution_strategy.py`) estimates each one as its best GEMM strategy and as the loop
nest it becomes inside the slices, and the difference is weighed against writing and
reading the producer's result once. That trades memory for speed (a 3x3 layer of 32 to 64
channels ran 2x slower as loops than as im2col + GEMM, more than the traffic of its
intermediate saves; apart, the benchmark conv net ran 1.5x faster), so it is off by
default: the conv net's bar is XLA:CPU's temp bytes, which its one fused kernel for the
whole net meets, and only GEMMs inside the slices would give both.

The result is an `xhlo.fusion` of kind `custom` with `custom = "batch_slices"` and
`scratch_bytes`: the bytes one slice of its inner convolution, dot and reduce results needs
(the backend's per-slice working memory, reported by buffer assignment apart from the
slab). Every merge and refusal is logged (`batch-slice-fusion-decisions.txt`); `mlirxla-opt
--explain-fusion` reads it too. Changed: any fusion made.
"""

from dataclasses import dataclass
from math import prod
from typing import ClassVar

from mlirxla.dialects.xhlo.types import dot_dimension_numbers
from mlirxla.mlir import ir

from . import convolution_strategy as strategy
from .cost_model import byte_size
from .erasure import live_ops
from .fusion_legality import (
    CHEAP_TO_DUPLICATE,
    ELEMENTWISE,
    LIBRARY_CALLS,
    NOT_KERNELS,
    FusionLimits,
    fused_kinds,
    fused_operand_count,
    fused_ops,
    fusion_kind,
    kind_of,
    reachable,
    users_in_block,
)
from .pass_base import ModulePass, PassResult
from .priority_fusion import TERMINATORS, Decision, FusionDecisions, Namer, build_fusion, describe, fusible_blocks
from .reshape_to_bitcast import is_reshape

CUSTOM_KIND = "batch_slices"
# the largest value on whole operands each slice computes again: the work repeated per slice
# stays far below the slice's own
RECOMPUTED_WHOLE_BYTES = 16 << 10
SCRATCH_HEROES = LIBRARY_CALLS | {"reduce"}
MIN_DOT_SLICE_ROWS = 16  # fewer lhs rows a slice make a dot's slices matrix-vector products


def leading_size(value: ir.Value) -> int | None:
    value_type = value.type
    if not isinstance(value_type, ir.RankedTensorType) or ir.RankedTensorType(value_type).rank == 0:
        return None
    return ir.RankedTensorType(value_type).shape[0]


def counts_rows(iota: ir.Operation) -> bool:
    """Whether an iota counts along dimension 0 (in a slice, from the slice's first row)."""
    return ir.IntegerAttr(iota.attributes["iota_dimension"]).value == 0


def _dims(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name])) if name in op.attributes else []


class SliceCheck:
    """Which values of a kernel are computed slice by slice (dimension 0 of size `n`)."""

    def __init__(self, n: int, sliced_inputs: set, batched_dots: bool = False, transposed_reads: bool = False,
                 recomputed_whole_bytes: int = RECOMPUTED_WHOLE_BYTES):
        self.n = n
        self.batched_dots = batched_dots
        self.transposed_reads = transposed_reads
        self.recomputed_whole_bytes = recomputed_whole_bytes
        self.read_across: dict = {}  # values from outside read slice by slice along another dimension: that dimension
        self.sliced = set(sliced_inputs)
        self.reread_bytes = 0  # what convolutions and dots read whole, again for every slice
        self.read_sliced: set = set()  # values from outside the slices (operands, constants) read slice by slice
        self.read_whole: set = set()  # ... and read whole
        self.positions = False  # an iota along dimension 0 counts from each slice's first row

    def sliceable(self, value: ir.Value) -> bool:
        """Can `value` be read slice by slice? (Values from outside are then read so.)"""
        if value in self.sliced:
            return True
        if leading_size(value) == self.n:
            self.read_sliced.add(value)
            return True
        return False

    def whole(self, value: ir.Value) -> bool:
        """Can `value` be read whole? (Values from outside are then read so.)"""
        if value in self.sliced:
            return False
        self.read_whole.add(value)
        return True

    def problem(self, op: ir.Operation) -> str | None:
        """None when `op` keeps the slices apart (its results join the sliced values)."""
        kind = kind_of(op)
        if kind == "constant":
            return None
        if all(leading_size(r) is None for r in op.results) and all(self.whole(v) for v in op.operands):
            return None  # scalar work on whole values: done once
        if self.recomputed_whole(op, kind):
            return None
        if any(leading_size(r) != self.n for r in op.results):
            return f"xhlo.{kind} computes a value whose dimension 0 is not {self.n}"
        reason = self.operand_problem(op, kind)
        if reason:
            return reason
        self.sliced.update(op.results)
        return None

    def recomputed_whole(self, op: ir.Operation, kind: str) -> bool:
        """Is `op` small work on whole values that every slice may compute again (an iota of
        the key positions an attention mask compares with each row's length)? Its results
        stay whole: their dimension 0 must not look like the slices' own."""
        if kind not in CHEAP_TO_DUPLICATE and kind not in ELEMENTWISE:
            return False
        if any(leading_size(r) in (None, self.n) or byte_size(r.type) > self.recomputed_whole_bytes for r in op.results):
            return False
        if any(v in self.sliced for v in op.operands):
            return False
        for value in op.operands:
            self.whole(value)
        return True

    def operand_problem(self, op: ir.Operation, kind: str) -> str | None:
        operands = list(op.operands)
        if kind in ELEMENTWISE:
            if all(self.sliceable(v) or leading_size(v) is None for v in operands):
                return None
            return f"xhlo.{kind} reads a value it cannot slice"
        if kind == "broadcast":
            dims = _dims(op, "dimensions")
            if 0 in dims and ir.RankedTensorType(operands[0].type).shape[dims.index(0)] == 1 and self.n != 1:
                return None if self.whole(operands[0]) else "a broadcast repeats a sliced value along dimension 0"
            if 0 in dims:
                return None if dims.index(0) == 0 and self.sliceable(operands[0]) else "a broadcast moves dimension 0"
            return None if self.whole(operands[0]) else "a broadcast repeats a sliced value along dimension 0"
        if kind == "transpose":
            return self.transpose_problem(op, operands[0])
        if kind == "copy" and self.transposed_reads:  # the copy a transposed layout leaves after its transpose
            return None if self.sliceable(operands[0]) else "a copy reads a value it cannot slice"
        if kind == "reshape":  # dimension 0 kept: row-major, each slice's elements stay its own
            return None if self.sliceable(operands[0]) else "a reshape reads a value it cannot slice"
        if kind == "bitcast_convert":  # between widths only the last dimension changes
            return None if self.sliceable(operands[0]) else "a bitcast_convert reads a value it cannot slice"
        if kind == "iota":
            self.positions = self.positions or counts_rows(op)
            return None
        if kind == "convolution":
            numbers = ir.DictAttr(op.attributes["dimension_numbers"])
            batch_in = ir.IntegerAttr(numbers["input_batch_dimension"]).value
            batch_out = ir.IntegerAttr(numbers["output_batch_dimension"]).value
            groups = [ir.IntegerAttr(op.attributes[name]).value for name in ("feature_group_count", "batch_group_count")]
            if batch_in != 0 or batch_out != 0 or groups != [1, 1]:
                return "the convolution's batch is not dimension 0 in and out, or it has groups"
            self.reread_bytes += byte_size(operands[1].type)
            return None if self.sliceable(operands[0]) and self.whole(operands[1]) else "the convolution reads its kernel slice by slice"
        if kind == "dot":
            numbers = dot_dimension_numbers(op)
            contracting, batching = numbers["lhs_contracting_dimensions"], numbers["lhs_batching_dimensions"]
            if self.batched_dots and batching and batching[0] == 0 and numbers["rhs_batching_dimensions"][0] == 0:
                sliced = self.sliceable(operands[0]) and self.sliceable(operands[1])
                return None if sliced else "the dot reads a batch it cannot slice"
            if batching or 0 in contracting:
                return "the dot contracts or batches dimension 0 of its lhs"
            self.reread_bytes += byte_size(operands[1].type)
            return None if self.sliceable(operands[0]) and self.whole(operands[1]) else "the dot reads its rhs slice by slice"
        if kind == "slice":
            stride = (_dims(op, "strides") or [1])[0]
            whole_rows = (_dims(op, "start_indices")[0], _dims(op, "limit_indices")[0], stride) == (0, self.n, 1)
            return None if whole_rows and self.sliceable(operands[0]) else "a slice cuts dimension 0"
        if kind == "concatenate":
            if ir.IntegerAttr(op.attributes["dimension"]).value == 0:
                return "the concatenate joins along dimension 0"
            return None if all(self.sliceable(value) for value in operands) else "a concatenate reads a value it cannot slice"
        if kind == "gather":
            return self.gather_problem(op, operands)
        if kind == "reduce":
            if 0 in _dims(op, "dimensions"):
                return "the reduce reduces dimension 0"
            inputs, inits = operands[:len(operands) // 2], operands[len(operands) // 2:]
            if not all(self.sliceable(value) for value in inputs):
                return "the reduce reads an input it cannot slice"
            return None if all(self.whole(value) for value in inits) else "the reduce reads its init slice by slice"
        return f"xhlo.{kind} mixes slices"

    def gather_problem(self, op: ir.Operation, operands: list[ir.Value]) -> str | None:
        """A gather whose result's dimension 0 is its indices' dimension 0 (no offset
        dimension there) reads its indices slice by slice, and its operand whole or, when
        dimension 0 of both is a batching pair (`jnp.take_along_axis`: row b of the result
        gathers from row b of the operand), slice by slice too."""
        numbers = {named.name: named.attr for named in ir.DictAttr(op.attributes["dimension_numbers"])}

        def dims(name: str) -> list[int]:
            return list(ir.DenseI64ArrayAttr(numbers[name])) if name in numbers else []

        if 0 in dims("offset_dims") or ir.IntegerAttr(numbers["index_vector_dim"]).value == 0:
            return "the gather's dimension 0 is not its indices' dimension 0"
        operand_batching, indices_batching = dims("operand_batching_dims"), dims("start_indices_batching_dims")
        if 0 in indices_batching:
            if operand_batching[indices_batching.index(0)] != 0:
                return "the gather's dimension 0 batches another dimension of its operand"
            operand_read = self.sliceable(operands[0])
        else:
            operand_read = 0 not in operand_batching and self.whole(operands[0])
        return None if self.sliceable(operands[1]) and operand_read else "the gather reads its indices or its operand whole"

    def transpose_problem(self, op: ir.Operation, operand: ir.Value) -> str | None:
        """With `transposed_reads` (a kernel's row blocks, whose operands the thunk can point
        into anywhere; merges leave transposes out): a transpose keeping dimension 0 reads
        its operand slice by slice, one moving dimension k to 0 and its last dimension reads
        an operand from outside in blocks of dimension k, strided views of it, one per slice."""
        if not self.transposed_reads:
            return "xhlo.transpose mixes slices"
        permutation = _dims(op, "permutation")
        across = permutation[0]
        if across == 0:
            return None if self.sliceable(operand) else "a transpose reads a value it cannot slice"
        if permutation[-1] == len(permutation) - 1:
            return "a transpose moves dimension 0 but keeps rows whole (a block copy: split, it ran 2x slower)"
        if operand in self.sliced or self.read_across.get(operand, across) != across:
            return "a transpose moves dimension 0"
        self.read_across[operand] = across
        return None


def body_of(kernel: ir.Operation) -> tuple[list[ir.Operation], list[ir.Value], dict]:
    """(ops, returned values, {inner value: kernel operand}) of a kernel: a fusion's body, or
    the op itself."""
    if kernel.name != "xhlo.fusion":
        return [kernel], list(kernel.results), {v: v for v in kernel.operands}
    block = kernel.regions[0].blocks[0]
    terminator = list(block.operations)[-1]
    return fused_ops(kernel), list(terminator.operands), dict(zip(block.arguments, kernel.operands))


def slice_problem(kernel: ir.Operation, n: int, sliced_operands: list[ir.Value], batched_dots: bool = False,
                  transposed_reads: bool = False, recomputed_whole_bytes: int = RECOMPUTED_WHOLE_BYTES) -> tuple[str | None, SliceCheck]:
    """(None when `kernel` keeps its slices apart with `sliced_operands` (values computed slice
    by slice before it) read slice by slice, else why not; the check, which knows what is
    sliced and the bytes convolutions and dots read whole for every slice). `batched_dots`:
    whether dots batched over dimension 0 may run slice by slice, as a kernel already
    generated does (its row blocks); merges leave them out, since a batched dot on its own
    may be a BLAS GEMM, which a batch-slice fusion would make a loop nest. `transposed_reads`:
    whether operands may be read in blocks of another dimension (`transpose_problem`).
    `recomputed_whole_bytes`: the largest value on whole operands every slice may compute
    again."""
    ops, returned, bound = body_of(kernel)
    check = SliceCheck(n, {inner for inner, outer in bound.items() if outer in sliced_operands}, batched_dots, transposed_reads,
                       recomputed_whole_bytes)
    for op in ops:
        reason = check.problem(op)
        if reason:
            return reason, check
    if not all(check.sliceable(v) for v in returned):
        return f"a result's dimension 0 is not {n}", check
    if check.read_sliced & check.read_whole:
        return "a value is read both slice by slice and whole", check
    if set(check.read_across) & (check.read_sliced | check.read_whole):
        return "a value is read both transposed and not", check
    return None, check


def thin_dot_weights(*kernels: ir.Operation) -> int:
    """The rhs bytes of the kernels' unbatched dots whose slices multiply fewer than
    `MIN_DOT_SLICE_ROWS` lhs rows (the product of the lhs's free dimensions after dimension 0)."""
    weights = 0
    for kernel in kernels:
        for op in fused_ops(kernel):
            if kind_of(op) != "dot" or dot_dimension_numbers(op)["lhs_batching_dimensions"]:
                continue
            contracting = dot_dimension_numbers(op)["lhs_contracting_dimensions"]
            shape = ir.RankedTensorType(op.operands[0].type).shape
            if prod(shape[d] for d in range(1, len(shape)) if d not in contracting) < MIN_DOT_SLICE_ROWS:
                weights += byte_size(op.operands[1].type)
    return weights


def scratch_bytes(fusion: ir.Operation, n: int) -> int:
    """Bytes one slice of the fusion's inner convolution, dot and reduce results takes."""
    ops, returned, _ = body_of(fusion)
    return sum(byte_size(r.type) // n for op in ops if kind_of(op) in SCRATCH_HEROES for r in op.results if r not in returned)


def is_kernel(op: ir.Operation) -> bool:
    kind = kind_of(op)
    if not op.name.startswith("xhlo.") or kind in NOT_KERNELS or op.name in TERMINATORS:
        return False
    if kind == "fusion":
        kind_name = fusion_kind(op)
        return kind_name != "custom" or ("custom" in op.attributes and ir.StringAttr(op.attributes["custom"]).value == CUSTOM_KIND)
    return not op.regions or kind == "reduce"


@dataclass(frozen=True)
class BatchSliceFusionPass(ModulePass):
    """Merges chains of kernels that work per batch element around convolutions and dots."""

    name: ClassVar[str] = "xhlo-batch-slice-fusion"
    summary: ClassVar[str] = "batch-slice fusion: convolution/dot chains that keep batch elements apart run slice by slice in one kernel"
    min_intermediate_bytes: int = 1 << 20
    max_slice_bytes: int = 1 << 20
    convolutions_as_gemms: bool = False  # refuse merges that cost convolutions their GEMM speed (memory for speed)

    def run(self, module: ir.Module) -> PassResult:
        log = DecisionLog()
        namer = Namer(module)
        changed = False
        with module.context, ir.Location.unknown():
            for block in fusible_blocks(module):
                while self.merge_one(block, namer, log):
                    changed = True
        return PassResult(changed, FusionDecisions("batch-slice-fusion-decisions.txt", tuple(log.decisions)))

    def merge_one(self, block: ir.Block, namer: Namer, log: "DecisionLog") -> bool:
        for producer in live_ops(block.operations):
            if not is_kernel(producer) or len(producer.results) != 1:
                continue
            users = users_in_block(producer)
            if len(users) != 1 or not is_kernel(users[0]):
                continue
            consumer = users[0]
            reason = self.refusal(producer, consumer)
            if reason is None:
                producer_text, consumer_text = describe(producer), describe(consumer)
                fusion = build_fusion([producer, consumer], list(consumer.results), namer, kind="custom")
                n = leading_size(fusion.results[0])
                fusion.attributes["custom"] = ir.StringAttr.get(CUSTOM_KIND)
                fusion.attributes["scratch_bytes"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), scratch_bytes(fusion, n))
                log.decisions.append(Decision("fused", producer_text, consumer_text, fusion=describe(fusion)))
                return True
            if reason != "":
                log.refused(Decision("refused", describe(producer), describe(consumer), reason))
        return False

    def refusal(self, producer: ir.Operation, consumer: ir.Operation) -> str | None:
        """None to merge; "" when the pair is no candidate at all (nothing worth logging)."""
        kinds = fused_kinds(producer) + fused_kinds(consumer)
        if not any(kind in LIBRARY_CALLS for kind in kinds):
            return ""
        result = producer.results[0]
        n = leading_size(result)
        size = byte_size(result.type)
        if is_reshape(producer):
            return "the producer is a reshape, a bitcast once alone: merging it saves no memory traffic"
        if n is None or n < 2:
            return "the producer's result has no batch dimension to slice"
        if size <= self.min_intermediate_bytes:
            return f"the producer's result ({size} bytes) stays in cache between two kernels"
        if size // n > self.max_slice_bytes:
            return f"one slice of the producer's result ({size // n} bytes) is larger than {self.max_slice_bytes} bytes"
        if any(leading_size(r) != n for r in consumer.results):
            return "the consumer's results are not sliced like the producer's"
        producer_problem, producer_check = slice_problem(producer, n, [])
        consumer_problem, consumer_check = slice_problem(consumer, n, [result])
        producer_reread, consumer_reread = producer_check.reread_bytes, consumer_check.reread_bytes
        if producer_problem or consumer_problem:
            return producer_problem or consumer_problem
        reread = thin_dot_weights(producer, consumer) * n
        if reread > max(size, self.max_slice_bytes):
            return (f"dots of fewer than {MIN_DOT_SLICE_ROWS} lhs rows a slice would read {reread} bytes of their rhs"
                    f" (matrix-vector products, once per slice), more than the {size} bytes the merge keeps out of memory")
        if producer_reread + consumer_reread > self.max_slice_bytes:
            return (f"the convolutions and dots would read {producer_reread + consumer_reread} bytes of weights again for every slice,"
                    f" more than the {self.max_slice_bytes} bytes that stay in cache")
        if self.convolutions_as_gemms and (reason := loops_cost_more_than_fusion_saves(producer, consumer, size)):
            return reason
        if reachable(producer, consumer, skip_direct=True):
            return "fusion would create a cycle"
        limits = FusionLimits()
        if fused_operand_count(producer, consumer) > limits.max_operands:
            return f"the fusion would have more than {limits.max_operands} operands"
        return None


def loops_cost_more_than_fusion_saves(producer: ir.Operation, consumer: ir.Operation, intermediate_bytes: int) -> str | None:
    """Why not to merge when the convolutions of the two, run as loops in slices, lose more
    against their best GEMM strategy than keeping the intermediate out of memory saves; else None."""
    saved = 2 * intermediate_bytes / strategy.MEMORY_BYTES_PER_S
    lost, choices = 0.0, []
    for kernel in (producer, consumer):
        for op in body_of(kernel)[0]:
            if kind_of(op) != "convolution":
                continue
            choice = strategy.choose(op)
            nest = choice.seconds(strategy.LOOP_NEST)
            if nest is not None and choice.strategy != strategy.LOOP_NEST:
                lost += nest - choice.seconds(choice.strategy)
                choices.append(choice.describe())
    if lost <= saved:
        return None
    return (f"its convolutions would run {1e6 * lost:.0f} us slower as loops in slices than as GEMMs ({'; '.join(choices)}), "
            f"more than the {1e6 * saved:.0f} us of memory traffic the merge saves")


class DecisionLog:
    """The pass's decisions in order, each refusal once: a pair is asked again after every
    merge in its block."""

    def __init__(self):
        self.decisions: list[Decision] = []
        self.refusals: set[str] = set()

    def refused(self, refusal: Decision) -> None:
        line = refusal.line()
        if line not in self.refusals:
            self.refusals.add(line)
            self.decisions.append(refusal)
