"""From a kernel function in StableHLO to GPU kernels in the NVVM dialect and the launches of
its host side: the upstream passes, as lists you can read.

1. The cpu backend's front half (`backends/cpu/lowering.to_buffers`, the same steps the
   `cuda-host` backend runs): a dot algorithm's operand roundings, generated broadcasts (a
   padding mask) recomputed at their readers' shape, StableHLO to linalg on tensors,
   elementwise fusion, writing over dying operands, one-shot bufferization into the caller's
   buffers, what bufferization still allocates made scratch arguments.
2. Parallel dimensions first (`loop_mapping.parallel_dimensions_first`), copies as
   generics. Then an emitter takes the whole kernel when it qualifies, as one launch: the
   row emitter (reductions of the minor dimensions with what is fused around them, e.g. a
   softmax: `row_emitter.py`), else the column emitter (reductions keeping the minor
   dimension: `column_emitter.py`), or for a kernel with no reduction the transpose
   emitter (`transpose_emitter.py`); the tiling comes from the given one, the autotune
   results file or a default (`autotune.py`), and a note says which (or why a kernel with a
   reduction was not taken).
3. Otherwise `TO_PARALLEL_LOOPS` (`convert-linalg-to-parallel-loops`: one `scf.parallel`
   per generic, `scf.for` inside for its reductions) and the loop emitter
   (`loop_mapping.map_loop_nests`): one thread per element, or 4 consecutive ones with
   vector loads and stores. The tests also compile the mapped loop nests for the CPU and run
   them against the reference interpreter (`host_check.py`; the emitters' barriers and
   shuffles emulated there, `thread_program.py`).
4. `TO_GPU`: `convert-parallel-loops-to-gpu` (one `gpu.launch` per nest),
   `gpu-kernel-outlining` (each launch a `gpu.func` in a `gpu.module`, the host a sequence
   of `gpu.launch_func`); buffer arguments marked 16-byte aligned (`aligned_pointers`).
5. `TO_F32_ARITHMETIC` and `TO_NVVM`, inside the `gpu.module`: bf16/f16 math and
   arithmetic in f32 (f32 -> bf16 keeping a NaN's sign, `bf16_truncation.py`) and complex as
   real arithmetic (as on the CPU), loops to branches, then `convert-gpu-to-nvvm` with bare
   pointers (a kernel is `void k(ptr, ptr, ...)`, operands, results, scratch), math as
   libdevice calls (`__nv_expf`), which `ptx.py` links.
"""

from dataclasses import dataclass

from mlirxla.backends.cpu import bf16_truncation, kernel_scratch, lowering as cpu_lowering
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir, passmanager

from . import autotune, block_programs, column_emitter, launch_merging, loop_mapping, loop_nest_fusion, row_emitter, transpose_emitter

TO_PARALLEL_LOOPS = [
    "func.func(convert-linalg-to-parallel-loops)",
    "canonicalize",
]
GENERALIZE = ["func.func(linalg-generalize-named-ops)"]  # the copies `copies_as_loops` made, for the row emitter
TO_GPU = [
    "func.func(convert-parallel-loops-to-gpu)",
    "func.func(lower-affine)",
    "gpu-launch-sink-index-computations",
    "gpu-kernel-outlining",
    "canonicalize",
    "cse",
]
TO_F32_ARITHMETIC = [
    "gpu.module(convert-complex-to-standard)",
    "gpu.module(math-extend-to-supported-types{target-type=f32})",
    "gpu.module(arith-emulate-unsupported-floats{source-types=bf16,f16 target-type=f32})",
]
# after the f32 -> bf16 roundings keep their NaN's sign (`bf16_truncation.py`)
TO_NVVM = [
    "gpu.module(arith-expand{include-bf16=true})",
    "gpu.module(lower-affine)",
    "gpu.module(convert-scf-to-cf)",
    "gpu.module(expand-strided-metadata)",
    "gpu.module(lower-affine)",
    "gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64})",
    "gpu.module(convert-math-to-llvm)",  # what has no libdevice call (ctlz, ctpop) as LLVM's intrinsics
    "reconcile-unrealized-casts",
]


@dataclass(frozen=True)
class MappedKernel:
    """A kernel function after mapping: its loop nests as launches, its scratch arguments."""

    nests: list[loop_mapping.MappedLoopNest]
    scratch: list[kernel_scratch.ScratchArgument]
    notes: list[str]  # which emitter took the kernel, or why a reduction kept the loop emitter


@dataclass(frozen=True)
class BufferLoops:
    nests: list[loop_mapping.MappedLoopNest]
    notes: list[str]


def aligned_pointers(module: ir.Module) -> None:
    """Tell LLVM the kernels' buffers are aligned (`llvm.align` on every `gpu.func` buffer
    argument), so that its load-store vectorizer can merge neighbouring accesses into
    `ld.global.v4`/`st.global.v4` (the loop emitter gives a thread 4 consecutive elements)."""
    attribute = ir.DictAttr.get({"llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), loop_mapping.ALIGNED_POINTERS)})
    for function in ops_named(module, "gpu.func"):
        arguments = function.regions[0].blocks[0].arguments
        if any(isinstance(argument.type, ir.MemRefType) for argument in arguments):
            function.attributes["arg_attrs"] = ir.ArrayAttr.get(
                [attribute if isinstance(argument.type, ir.MemRefType) else ir.DictAttr.get({}) for argument in arguments])


def run(module: ir.Module, passes: list[str]) -> None:
    passmanager.PassManager.parse(f"builtin.module({','.join(passes)})").run(module.operation)


def map_to_blocks_and_threads(module: ir.Module, symbol: str, tiling=None) -> MappedKernel:
    """Steps 1-3 on `module` in place; an error names the kernel. `tiling` overrides the row
    emitter's (the tuner's candidates)."""
    cpu_lowering.register_passes()
    try:
        with module.context:
            scratch = cpu_lowering.to_buffers(module, cpu_loops=False)[0].get(symbol, [])
            with ir.Location.unknown():
                loops = map_buffer_loops(module, symbol, tiling=tiling)
    except ir.MLIRError as error:
        raise MlirxlaError(f"kernel {symbol} failed to map to blocks and threads: {cpu_lowering.diagnostic_text(error)}") from None
    return MappedKernel(loops.nests, list(scratch), loops.notes)


def map_buffer_loops(module: ir.Module, symbol: str, host: bool = False, target_name: str = "H200",
                     autotune_path: str | None = None, tiling=None) -> BufferLoops:
    """Step 2 and 3 on a bufferized kernel; `host`: the row emitter's exchanges emulated for
    the CPU (what the host check runs sequentially)."""
    cpu_lowering.copies_as_loops(module)
    run(module, GENERALIZE)
    loop_mapping.parallel_dimensions_first(module)
    emitted, notes = emit_rows(module, symbol, host, target_name, autotune_path, tiling)
    if not emitted:
        run(module, TO_PARALLEL_LOOPS)
        notes += fuse_nests(module, symbol)
        emitted = block_programs.map_block_programs(module, symbol, host)
    nests = loop_mapping.map_loop_nests(module, symbol, emitted, host, merge=launch_merging.merge_independent)
    return BufferLoops(nests, notes + [f"{symbol}: {nest.detail}" for nest in nests if nest.emitter == "loop.merged"])


def fuse_nests(module: ir.Module, symbol: str) -> list[str]:
    fused = sum(loop_nest_fusion.fuse_loop_nests(function) for function in ops_named(module, "func.func"))
    return [f"{symbol}: {fused} loop nest(s) fused into the one before (loop_nest_fusion.py)"] if fused else []


def emit_rows(module: ir.Module, symbol: str, host: bool, target_name: str, autotune_path: str | None,
              forced=None) -> tuple[list, list[str]]:
    """The row emitter, or else the column emitter, on the kernel function when it has a
    reduction and qualifies (one function per kernel module); the launch made and a note
    either way. `forced`: a tiling to use instead of the results file's or the default."""
    functions = ops_named(module, "func.func")
    if len(functions) != 1:
        return [], []
    function = functions[0]
    skippable = loop_mapping.VIEW_OPS | loop_mapping.SINKABLE
    row_emitter.subtractions_as_additions(function)
    try:
        plan = row_emitter.plan_rows(function, skippable)
        if plan is None:
            return emit_transpose(function, module, symbol, host, target_name, autotune_path, forced, skippable)
        if row_emitter.reads_along_rows(plan):
            raise row_emitter.NotRows("its reductions read along the rows, which lanes over columns read coalesced")
        emitter, length = row_emitter, plan.shortest_reduction
        default = autotune.default_row_tiling(plan.rows, length)
        candidates = autotune.candidate_row_tilings(plan.rows, length)
        shape = f"{plan.rows} row(s)"
    except row_emitter.NotRows as not_rows:
        try:
            plan = column_emitter.plan_columns(function, skippable)
        except row_emitter.NotRows as not_columns:
            return [], [f"{symbol}: loop emitter: not rows ({not_rows}); not columns ({not_columns})"]
        emitter, length = column_emitter, plan.shortest_reduction
        default, candidates = autotune.default_column_tiling(length), autotune.candidate_column_tilings(length)
        shape = f"{plan.columns} column(s)"
    return emit_with(emitter, plan, function, module, symbol, host, target_name, autotune_path, forced, default, candidates,
                     length, f"{len(plan.phases)} phase(s), {shape}")


def emit_transpose(function, module, symbol, host, target_name, autotune_path, forced, skippable) -> tuple[list, list[str]]:
    try:
        plan = transpose_emitter.plan_transpose(function, skippable)
    except row_emitter.NotRows as reason:
        return [], [f"{symbol}: loop emitter, not the transpose emitter: {reason}"]
    if plan is None:
        return [], []
    shape = "x".join(map(str, plan.sizes))
    return emit_with(transpose_emitter, plan, function, module, symbol, host, target_name, autotune_path, forced,
                     autotune.DEFAULT_TRANSPOSE, autotune.TRANSPOSE_CANDIDATES, 0,
                     f"{shape}, dimension {plan.minor} read along the minor one")


def emit_with(emitter, plan, function, module, symbol, host, target_name, autotune_path, forced, default, candidates, length,
              shape: str) -> tuple[list, list[str]]:
    """One emitter's launch with the given tiling, else the results file's, else the default."""
    print_ = autotune.fingerprint(str(function), symbol)

    def accepts(tiling) -> bool:
        return isinstance(tiling, type(default)) and tiling.valid_for(length)

    if forced is not None and accepts(forced):
        tiling, source = forced, "given"
    else:
        tiling, gpu = autotune.tuned_tiling(print_, target_name, accepts, autotune_path)
        source = f"autotuned on {gpu}" if tiling is not None else "default"
        tiling = tiling or default
    launch = emitter.emit(function, plan, tiling, host, module.body, symbol)
    detail = f"{shape}, {tiling.describe()} ({source}, fingerprint {print_})"
    nest = loop_mapping.MappedLoopNest(launch.grid * launch.block, launch.grid, launch.block, default.kind, detail,
                                       autotune.Tunable(print_, default, tuple(candidates)))
    return [(nest, launch.program.block_loop.operation, launch.program.sink_target())], [f"{symbol}: {default.kind} emitter: {detail}"]


def to_nvvm(module: ir.Module, symbol: str) -> None:
    """Steps 4-5 on a mapped module in place."""
    try:
        with module.context:
            run(module, TO_GPU)
            module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
            aligned_pointers(module)
            run(module, TO_F32_ARITHMETIC)
            with ir.Location.unknown():
                bf16_truncation.expand_bf16_truncations(module)
            run(module, TO_NVVM)
    except ir.MLIRError as error:
        raise MlirxlaError(f"kernel {symbol} failed to lower to NVVM: {cpu_lowering.diagnostic_text(error)}") from None
