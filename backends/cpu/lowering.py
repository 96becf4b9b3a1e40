"""From kernel functions in StableHLO to the LLVM dialect and LLVM IR: the upstream passes,
as a list you can read (and `--dump` shows the module between each, with `dump_passes`).

StableHLO becomes linalg on tensors (the toolkit's `stablehlo-legalize-to-linalg`; a
concatenate written to a result first becomes its operands inserted into slices of it,
`concatenation.py`); elementwise linalg ops fuse into one loop nest; an elementwise loop
nest writes over an operand that dies there (`materialization.py`); an operand a result overwrites is
read before any loop nest writes that result's memory (`overwritten_operands.py`); empty-tensor elimination and one-shot
bufferization write results into the destination memrefs the kernel was given
(`kernel_source.py`), so nothing is allocated for results; what bufferization still
allocates (a reduction's results, one slice of a batch-slice kernel's convolutions) becomes
arguments the caller passes working memory in (`kernel_scratch.py`). linalg becomes loops; complex arithmetic becomes
real arithmetic on the parts; bf16 and f16 max and min reductions accumulate in f32
(`narrow_reductions.py`: exact, and what the vectorizer widens), and f32 ones become the
signed and unsigned max and min of the elements' bits, decoded per row
(`integer_order_reductions.py`: XLA's NaN and signed zeros exactly, half the
instructions of a NaN-propagating float max); bf16, f16 and 8-bit float math and
arithmetic run in f32 (the conversions
expanded to integer ops, so no compiler-runtime helper is needed; f32 -> bf16 keeps a NaN's
sign, `bf16_truncation.py`; LLVM has no 8-bit floats, `float8_conversions.py`), and a bf16 value read
again inside the kernel is not rounded (`excess_precision.py`); f32 exp, tanh, log and
pow (those of bf16 and f16 too, by then in f32) become arithmetic the LLVM vectorizer widens
(`math_approximations.py`), other math stays libm
calls (expm1 and log1p never get here: convert-math-to-llvm would make them exp(x) - 1 and
log(1 + x), so the kernel source computes them as XLA does, `elemental_math.py`, as it does
complex expm1, log1p, tan and tanh, which convert-complex-to-standard computes inaccurately);
copies between strided views become loops (`copies_as_loops`); loops are ordered so that the
innermost runs along contiguous memory (`loop_order.py`; a reduce of several inputs, an
argmax, was first split into lanes along its rows by the kernel source, `lane_reductions.py`,
so that the lanes are that loop), and a kernel reading an
operand across its innermost loop (a transpose) is tiled into cache blocks, transposed in
registers by vector shuffles (`tiling.py`); sibling loop nests over the same rows (a
softmax's max, exp, sum and divide passes) become one nest that takes each row through all
of them while it is in cache (`row_fusion.py`); a loop whose mask compares its position with
a bound (a causal mask) is split where the mask changes, each part computing only what it
selects (`masked_loop_splitting.py`); an innermost loop's index cast to i32 (a
mask's positions) is an i32 counter the loop carries, which the vectorizer keeps in i32
lanes (`narrow_induction.py`); an innermost loop of at most four iterations is unrolled, so that
the loop around it is the one the vectorizer widens (`short_loop_unrolling.py`); a float sum over several dimensions adds each row into a
partial sum of its own, not into the running total (`partial_sums.py`: XLA's accuracy);
an f32 NHWC convolution becomes a call of the runtime library's register-tiled direct
convolution after bufferization (`convolution_library.py`). Functions take bare pointers
(`use-bare-ptr-memref-call-conv`): a kernel is `void k(ptr, ptr, ...)`, operands then results.
"""

from dataclasses import dataclass

from mlirxla import context
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir, linalg, llvm, stablehlo

from . import bf16_truncation, byte_booleans, float8_conversions, concatenation, convolution_library, dot_algorithms, excess_precision, fused_multiply_adds, gathered_producers, generated_broadcasts, indexed_reads, integer_order_reductions, kernel_scratch, llvm_text, loop_order, masked_loop_splitting, materialization, math_approximations, narrow_induction, narrow_reductions, native_bf16_rounding, overwritten_operands, partial_sums, row_fusion, short_loop_unrolling, splat_constants, tiling, vector_math

LEGALIZE_TO_LINALG = ["func.func(stablehlo-legalize-to-linalg)"]
# after `indexed_reads.reads_as_inputs`
FUSE_ELEMENTWISE = [
    "func.func(linalg-fuse-elementwise-ops)",
    "canonicalize",
]
FOLD_UNIT_DIMENSIONS = ["func.func(linalg-fold-unit-extent-dims)", "canonicalize"]
# cse before canonicalize: bufferization writes a slice back into the slice it was read from
# through two equal subviews, a copy canonicalize drops only once they are one value (the
# register-tiled convolutions' blocks: two copy loop nests per block, 20% of the conv net's
# LLVM IR)
BUFFERIZE = [
    "eliminate-empty-tensors",
    "one-shot-bufferize",
    "cse",
    "canonicalize",
]
# after the convolutions became library calls (`convolution_library.call_library_convolutions`
# finds them as named ops)
GENERALIZE = ["func.func(linalg-generalize-named-ops)"]
TO_LOOPS_IN_F32 = [
    "func.func(convert-linalg-to-loops)",
    "func.func(convert-complex-to-standard)",
    "func.func(math-extend-to-supported-types{target-type=f32})",
    "func.func(arith-emulate-unsupported-floats{source-types=bf16,f16,f8E4M3FN,f8E5M2 target-type=f32})",
]
TO_LLVM = [
    "func.func(arith-expand{include-bf16=true})",
    "func.func(lower-affine)",
    "convert-scf-to-cf",
    "expand-strided-metadata",
    "lower-affine",
    "finalize-memref-to-llvm",
    "convert-complex-to-llvm",
    "convert-math-to-llvm",
    "convert-math-to-libm",
    "convert-arith-to-llvm",
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1}",
    "convert-cf-to-llvm",
    "reconcile-unrealized-casts",
]
# kernels with vector ops (the transposes' register blocks, `tiling.py`): vectors become 1-D
# vectors, unrolled (a loop per transfer left a 4-trip loop and a stack buffer per block read
# and write: the conv net's kernel, when its convolutions were vector blocks, was 1411 lines
# of LLVM IR, 1077 unrolled, its O3 43 -> 36 ms), then LLVM vectors; ub.poison (an unset
# vector lane) an LLVM poison value
VECTORS_TO_LLVM = (["convert-vector-to-scf{full-unroll=true}"] + TO_LLVM[: TO_LLVM.index("convert-arith-to-llvm")]
                   + ["convert-vector-to-llvm", "convert-ub-to-llvm"] + TO_LLVM[TO_LLVM.index("convert-arith-to-llvm"):])
# kernels with `memref.generic_atomic_rmw` (the GPU's scatter combining through an update
# computation, run here by the `cuda-host` backend): its lowering inlines the region into a
# compare-and-swap loop only when the region's ops are LLVM already, so arithmetic goes first
ATOMIC_REGIONS_TO_LLVM = [p for p in TO_LLVM if p != "convert-arith-to-llvm"]
ATOMIC_REGIONS_TO_LLVM.insert(ATOMIC_REGIONS_TO_LLVM.index("finalize-memref-to-llvm"), "convert-arith-to-llvm")
ALLOCATORS = {"malloc", "free", "aligned_alloc", "posix_memalign", "calloc", "realloc"}
_REGISTERED = False


def register_passes() -> None:
    global _REGISTERED
    if not _REGISTERED:
        stablehlo.register_stablehlo_passes()
        _REGISTERED = True


def run_passes(module: ir.Module, passes: list[str]) -> None:
    """The pipeline `passes` on `module`, run in its context. The module is verified once,
    before the pipeline (what this backend's own rewrites made since the last one), not after
    every pass: a pass manager's verification after each pass was a third of a convolution
    kernel's lowering (30 -> 19 ms). `translate` verifies the end result."""
    verify(module)
    manager = context.pass_manager(f"builtin.module({','.join(passes)})")
    manager.enable_verifier(False)
    manager.run(module.operation)


def verify(module: ir.Module) -> None:
    """Raise the verifier's diagnostics (as MLIRError, as a failed pass would) when `module` is
    not valid IR."""
    module.operation.verify()


@dataclass(frozen=True)
class Lowered:
    """What the lowering decided: the scratch arguments each function takes after its results
    (their sizes and what they hold), how many loop nests it tiled for the caches (transposes),
    how many convolutions it tiled for registers, how many bf16 roundings of values read in
    the kernel it left out (`excess_precision.py`) and how many loops it split where their
    mask changes (`masked_loop_splitting.py`)."""

    scratch: dict[str, list[kernel_scratch.ScratchArgument]]
    tiled_loop_nests: int
    register_tiled_convolutions: int = 0
    bf16_kept_in_f32: int = 0
    masked_loops_split: int = 0


def keep_narrow_roundings(module: ir.Module) -> None:
    """bf16 and f16 arithmetic emulated in f32 rounds every op's result (a `truncf` to the
    narrow type, an `extf` back), but the emulation marks both `contract`, which lets the
    canonicalizer drop the pair: a fused chain would then round once at its end instead of
    after each op as the op's type says (and as XLA does). The flag goes; the roundings stay."""
    for op in ops_named(module, "arith.extf", "arith.truncf"):
        if "fastmath" in op.attributes:
            del op.attributes["fastmath"]


def lower_to_llvm_dialect(module: ir.Module, name: str, buffer_loops=None, allow_excess_precision: bool = False) -> Lowered:
    """Run the whole lowering on `module` in place; an error names the kernel `name`.
    With `allow_excess_precision`, bf16 values that are not stored stay in f32 (`excess_precision.py`).
    `buffer_loops(module, name)`, when given, makes the loops of the bufferized kernel instead
    of this backend's math approximations, loop order and tiling (the cuda backend's loop
    nests mapped to blocks and threads, run here sequentially)."""
    register_passes()
    try:
        with module.context:
            scratch, library_convolutions = to_buffers(module, cpu_loops=buffer_loops is None)
            with ir.Location.unknown():
                if buffer_loops is not None:
                    buffer_loops(module, name)
                    tiled = 0
                else:
                    copies_as_loops(module)
                    loop_order.reorder_loops(module)
                    tiled = tiling.tile_transposing_loops(module)
            run_passes(module, TO_LOOPS_IN_F32)
            keep_narrow_roundings(module)
            kept_in_f32 = excess_precision.keep_fused_bf16_in_f32(module) if allow_excess_precision else 0
            fused_multiply_adds.allow_contraction(module)
            masked_loops_split = 0
            if buffer_loops is None:  # a GPU kernel's math goes to libdevice instead
                row_fusion.fuse_rows(module)
                with ir.Location.unknown():
                    masked_loops_split = masked_loop_splitting.split_masked_loops(module)
                    partial_sums.add_rows_into_partial_sums(module)
                    narrow_induction.count_in_narrow_integers(module)
                    short_loop_unrolling.unroll_short_loops(module)
                    # after bf16 and f16 math became f32 math, so that it is approximated too
                    math_approximations.approximate(module)
                    native_bf16_rounding.round_bf16_natively(module)
            bf16_truncation.expand_bf16_truncations(module)
            float8_conversions.expand_float8_conversions(module)
            to_llvm = VECTORS_TO_LLVM if tiling.has_vectors(module) else \
                ATOMIC_REGIONS_TO_LLVM if ops_named(module, "memref.generic_atomic_rmw") else TO_LLVM
            run_passes(module, to_llvm)
            with ir.Location.unknown():
                byte_booleans.access_booleans_as_bytes(module)
    except ir.MLIRError as error:
        raise MlirxlaError(f"kernel {name} failed to lower to LLVM: {diagnostic_text(error)}") from None
    return Lowered(scratch, tiled, library_convolutions, kept_in_f32, masked_loops_split)


def to_buffers(module: ir.Module, cpu_loops: bool = True) -> tuple[dict[str, list[kernel_scratch.ScratchArgument]], int]:
    """The front half, shared with the cuda backend (`cpu_loops=False`: its loops are made
    from the buffers by its emitters): StableHLO to linalg on tensors, fused, bufferized into
    the caller's buffers, what bufferization still allocates made scratch arguments, named
    ops generalized. The scratch arguments per function, and how many convolutions became
    library calls (the CPU's own)."""
    with ir.Location.unknown():
        dot_algorithms.round_operands_to_algorithm_precision(module)
        generated_broadcasts.recompute_generated_broadcasts(module)
    if cpu_loops:  # the slices' copies become loops with the CPU's own (`copies_as_loops`)
        with ir.Location.unknown():
            concatenation.concatenated_results_as_slices(module)
    to_linalg(module)
    with ir.Location.unknown():
        gathered_producers.compute_gathered_elements(module)
    fold_unit_dimensions_around_reshapes(module)
    with ir.Location.unknown():
        narrow_reductions.widen_narrow_min_max_reductions(module)
        if cpu_loops:
            integer_order_reductions.reduce_in_integer_order(module)
    materialization.write_over_dying_operands(module)
    if cpu_loops:
        tiling.reversed_reads_apart(module)
        materialization.write_padded_in_place(module)
        convolution_library.mark_library_convolutions(module)
    with ir.Location.unknown():
        splat_constants.fill_splat_constants(module)
        overwritten_operands.keep_overwritten_operands_readable(module)
    run_passes(module, BUFFERIZE)
    scratch = kernel_scratch.scratch_from_arguments(module)
    with ir.Location.unknown():
        library_convolutions = convolution_library.call_library_convolutions(module) if cpu_loops else 0
    run_passes(module, GENERALIZE)
    return scratch, library_convolutions


def to_linalg(module: ir.Module) -> None:
    """StableHLO to linalg on tensors, elementwise work fused (a gather's reads at its own
    indices made inputs first, so that it fuses too: `indexed_reads.py`)."""
    run_passes(module, LEGALIZE_TO_LINALG)
    with ir.Location.unknown():
        indexed_reads.reads_as_inputs(module)
    run_passes(module, FUSE_ELEMENTWISE)


def fold_unit_dimensions_around_reshapes(module: ir.Module) -> None:
    """A result computed with a unit dimension the destination lacks (a cross-entropy
    gradient's [n, 1, m] loop nest over a [n, 1] keepdims sum, reshaped into its [n, m]
    output) would be computed into scratch and copied over: with the unit dimensions dropped
    from the loop nests (upstream's `linalg-fold-unit-extent-dims`) bufferization writes it
    straight into the destination. The same holds for a part of a concatenated result
    (`concatenation.py`'s slices): jnp.meshgrid's halves, [1, n, 1, m] loop nests reshaped
    into [1, n, m] slices, went through 24 MB of scratch. Only kernels that reshape a result
    or a part of one run the pass.

    Likewise a loop nest's result reshaped between unit dimensions for another loop nest
    (`jnp.take_along_axis`' in-bounds mask, [n, m, 1] for a select over [n, m]): elementwise
    fusion stops at the reshape, and bufferization gave the mask a buffer of its own (a
    scratch pass over memory). With the unit dimensions dropped the two nests meet and fuse."""
    reshaped = [op for op in ops_named(module, "bufferization.materialize_in_destination", "tensor.insert_slice")
                if not isinstance(op.operands[0].owner, ir.Block)
                and op.operands[0].owner.name in ("tensor.collapse_shape", "tensor.expand_shape")]
    between_nests = [op for op in ops_named(module, "tensor.collapse_shape", "tensor.expand_shape")
                     if not isinstance(op.operands[0].owner, ir.Block) and op.operands[0].owner.name == "linalg.generic"
                     and any(use.owner.name == "linalg.generic" for use in op.results[0].uses)]
    if reshaped or between_nests:
        run_passes(module, FOLD_UNIT_DIMENSIONS)
    if between_nests:
        run_passes(module, FUSE_ELEMENTWISE)


def copies_as_loops(module: ir.Module) -> None:
    """`memref.copy` between strided views (bufferization makes them, e.g. to pad a
    convolution's input) lowers to a call into MLIR's C runner library, which this process
    does not have: make each a `linalg.copy`, which becomes loops like every other kernel."""
    for copy in ops_named(module, "memref.copy"):
        with ir.InsertionPoint(copy), copy.location:
            linalg.copy(copy.operands[0], outs=[copy.operands[1]])
        copy.erase()


def diagnostic_text(error: ir.MLIRError) -> str:
    """The first diagnostic of a failed pass pipeline, in one line."""
    diagnostics = list(getattr(error, "error_diagnostics", []))
    if not diagnostics:
        return str(error).splitlines()[0]
    return " ".join(str(diagnostics[0].message).split())


def translate(module: ir.Module, name: str) -> str:
    """LLVM IR text of a module in the LLVM dialect, in the syntax llvmlite's LLVM reads.
    An op left outside the LLVM dialect is refused here: translating it would crash. So is a
    kernel that would allocate: its memory comes from the caller."""
    try:
        verify(module)
    except ir.MLIRError as error:
        raise MlirxlaError(f"kernel {name} failed to lower to LLVM: {diagnostic_text(error)}") from None
    leftover, allocators = [], []

    def visit(op):
        if not op.operation.name.startswith("llvm.") and op.operation.name != "builtin.module":
            leftover.append(op.operation)
            return ir.WalkResult.INTERRUPT
        if op.operation.name == "llvm.func" and ir.StringAttr(op.attributes["sym_name"]).value in ALLOCATORS:
            allocators.append(ir.StringAttr(op.attributes["sym_name"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if leftover:
        raise MlirxlaError(f"kernel {name} failed to lower to LLVM: '{leftover[0].name}' has no lowering")
    if allocators:
        raise MlirxlaError(f"kernel {name} would call {allocators[0]}: kernels get their memory from the caller")
    with module.context:
        return vector_math.with_vector_variants(llvm_text.downgrade(str(llvm.translate_module_to_llvmir(module.operation))))
