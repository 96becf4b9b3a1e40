"""The CPU compiler: an imported xhlo module in, a compiled program (the plan and its object
code) out (XLA's CpuCompiler: RunHloPasses, then RunBackend).

1. The cpu pipeline (`pipelines/cpu.py`) at this backend's alignment: simplification,
   layouts, fusion, copies, the schedule, buffer assignment; dumps as the pipeline runner
   writes them.
2. Thunk emission (`thunk_emitter.py`) over the assignment the pipeline made (its
   `xhlo-buffer-assignment` report; when the pipeline did not run that pass, the backend runs
   it): the thunk sequence and the kernels it needs; a single device's GEMMs are marked to
   run in parts over the runtime's native pool (`gemms_in_parts`).
3. Per kernel: its StableHLO function in destination-passing style (`kernel_source.py`),
   lowered to the LLVM dialect (`lowering.py`) and translated to LLVM IR on the calling
   thread (the toolkit's context is not shared with other threads), then optimized and
   compiled to a native object by llvmlite (`llvm_jit.py`) on the compile threads
   (`llvm_jit.CodegenPool`, `runtime/threads.compile_threads`) while the next kernels are
   lowered; the results are taken in the kernels' order (`finish_kernels`), so decisions,
   scratch and objects are the same whatever the thread count. Dumped as
   `<kernel>.ir-no-opt.ll` and `<kernel>.ir-with-opt.ll`. A kernel the toolkit or LLVM cannot
   compile runs on the reference interpreter instead (`interpreter_fallback.py`), and the
   thunk sequence says so. Kernels whose StableHLO is the same but for their symbol (every
   layer of a stack of equal layers) are lowered and optimized once: the later ones get a
   forwarder that jumps to the first one's code (`llvm_jit.same_code`), and the thunk sequence
   says which code each runs. A kernel whose op has the same structure as an earlier one's
   (`kernel_structure`: names and outer values left out) is known to be such a kernel before
   its StableHLO is even built, so that building is skipped too.
   A kernel with the same StableHLO and symbol as one an earlier compile of this process made
   reuses that one's native code (`kernel_cache.py`): it is neither lowered nor optimized.
4. Scratch: what bufferization still allocated in a kernel (known only now) is placed in
   the temp slab by buffer assignment's `place_scratch`, live while the kernel's thunk runs
   (one range per concurrent call of a sliced kernel, `CONCURRENT_CALLS` at most), beside
   the temps, which keep their offsets. The buffer-assignment dump files and the module's
   `xhlo.buffer_assignment` summary are then written again from that final assignment: the
   dumped assignment is the one the executable runs, scratch included.
5. Native drivers (`driver_emitter.py`): a thunk sequence the executor runs in order becomes
   one LLVM function for the executable (when it is long enough to gain or holds control
   flow); otherwise each top-level `while` or `conditional` becomes one. A driver runs the
   control flow and calls the kernels, GEMMs and copies, calling back into Python only for
   what it cannot run itself; dumped as `<driver>.ir-no-opt.ll` and
   `<driver>.ir-with-opt.ll`, the thunk sequence saying what runs in a native driver.
6. The native objects (one per compiled kernel and driver, one for the forwarders and the
   compiler-runtime helpers) as one archive, which the runtime loads; the thunk sequence is
   dumped as `thunk-sequence.txt`.
"""

import re
from concurrent.futures import Future
from dataclasses import dataclass, replace

from mlirxla import phases
from mlirxla.context import reused_pass_managers
from mlirxla.dialects.xhlo import global_entry
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import entry_function
from mlirxla.mlir import ir
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.dumps import DumpWriter
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.backends.backend import CompiledProgram
from mlirxla.runtime.executable import DEVICE_MEMORY, ExecutablePlan, runs_in_order
from mlirxla.runtime.threads import CONCURRENT_CALLS, compile_threads, cpu_threads
from mlirxla.runtime.thunks import BufferSlice, GemmThunk, KernelThunk, SlicedKernelThunk, every_thunk
from mlirxla.transforms import copy_insertion, erasure
from mlirxla.transforms.buffer_assignment import Assignment, BufferAssignmentPass, BufferAssignmentReport, place_scratch, write_summary
from mlirxla.transforms.pass_base import PassResult
from mlirxla.transforms.sharding_remover import partitioning_need

from . import denormal_flushing, driver_emitter, excess_precision, interpreter_fallback, kernel_cache, kernel_scratch, kernel_source, llvm_jit, lowering
from .emitters.kernels import KernelSpec
from .thunk_emitter import Emission, ThunkEmitter

MEMORY_KIND = "mhlo.memory_kind"  # jax's result attribute for the memory an output goes to


@dataclass
class CompiledKernel:
    symbol: str
    stablehlo: str
    optimized: llvm_jit.OptimizedKernel | None  # once its LLVM work is done (`finish_kernel`)
    scratch: tuple[kernel_scratch.ScratchArgument, ...] = ()  # working memory per call, passed after the results
    tiled_loop_nests: int = 0
    register_tiled_convolutions: int = 0
    bf16_kept_in_f32: int = 0  # bf16 roundings of values read in the kernel left out (`excess_precision.py`)
    masked_loops_split: int = 0  # loops split where their mask changes (`masked_loop_splitting.py`)
    same_as: str | None = None  # the kernel whose code this one runs (its StableHLO is the same)
    native: Future | None = None  # its LLVM work on the compile threads
    source_key: str = ""  # its StableHLO without its symbol (`kernel_stablehlo`)


@dataclass(frozen=True)
class Variant:
    """What another backend changes when it has its program compiled for this CPU (the cuda
    backend, to run its kernels' mapped loop nests here): the named pipeline, whether large
    row-wise kernels are split into slices, the lowering of a kernel's loops after
    bufferization (`lowering.lower_to_llvm_dialect`'s `buffer_loops`), whether bf16 values
    read in a kernel may stay in f32 where the compile's options allow it (`excess_precision.py`),
    whether kernels flush denormals where the options ask it (`denormal_flushing.py`), and
    whether kernels are made as for a GPU (`ThunkEmitter.gpu_kernels`)."""

    pipeline: str = "cpu"
    alignment: int = kernel_scratch.ALIGNMENT
    slice_rows: bool = True
    buffer_loops: object = None
    excess_precision: bool = True
    flush_denormals: bool = True
    gpu_kernels: bool = False  # kernels as for a GPU (`ThunkEmitter.gpu_kernels`)


def compile_module(module: ir.Module, options: RunOptions = RunOptions(), run_pipeline: bool = True,
                   variant: Variant = Variant()) -> CompiledProgram:
    """Compile `module` (imported xhlo) for the host CPU: one compile, whose pipelines are
    parsed once (`reused_pass_managers`)."""
    kernel_cache.budget()  # a bad setting is refused here: met in a kernel's compile, it would send the kernel to the interpreter
    with reused_pass_managers(module.context):
        runner = PipelineRunner(module, options)
        variant = replace(variant, excess_precision=variant.excess_precision and excess_precision.allowed(options.allow_excess_precision),
                          flush_denormals=variant.flush_denormals and denormal_flushing.flushed(options.flush_denormals))
        if run_pipeline:
            runner.compile(named_pipeline(variant.pipeline, alignment=variant.alignment))
        check_partitioned(module)
        with module.context, ir.Location.unknown():
            check_layouts(module)
            assignment = pipeline_assignment(runner)
            with erasure.stage("cpu backend thunk emission"), phases.phase("backend", "thunk emission"):
                emission = ThunkEmitter(module, assignment, slice_rows=variant.slice_rows, excess_precision=variant.excess_precision,
                                       gpu_kernels=variant.gpu_kernels).emit()
            plan = plan_of(emission, module)
            gemms_in_parts(plan, variant)
            phases.publish("kernel-count", len(emission.kernels))
            # one kernel leaves the calling thread nothing to do while a pool thread compiles it
            threads = compile_threads() if len(emission.kernels) > 1 else 1
            with llvm_jit.CodegenPool(threads, keep_ir=runner.dumps.directory is not None) as codegen:
                started: list[tuple[KernelSpec, CompiledKernel | MlirxlaError | None]] = []
                lowered_kernels = LoweredKernels()
                for spec in emission.kernels:
                    with erasure.stage(f"cpu backend kernel '{spec.symbol}'"), phases.phase("kernel", spec.symbol):
                        erasure.processing(spec.op)
                        started.append((spec, None if spec.interpret else start_kernel(spec, lowered_kernels, codegen, variant)))
                with phases.phase("backend", "kernels' native code"):
                    kernels = finish_kernels(started, plan, emission, assignment, codegen, variant)
                plan.allocation_sizes[emission.slab] = assignment.heap.size
                write_summary(module, assignment.summary)
                drivers = compile_drivers(plan, kernels, emission.decisions, codegen, variant.flush_denormals)
            with phases.phase("backend", "shared object"):
                optimized = [kernel.optimized for kernel in kernels] + drivers
                object_code = llvm_jit.object_code(optimized, llvm_jit.shared_objects(optimized))
        if runner.dumps.directory is not None:
            dump_backend(runner.dumps, assignment, kernels, drivers, plan.describe(emission.decisions))
        return CompiledProgram(plan, object_code, emission.decisions)


def finish_kernels(started: list[tuple[KernelSpec, "CompiledKernel | MlirxlaError | None"]], plan: ExecutablePlan,
                   emission: Emission, assignment: Assignment, codegen: llvm_jit.CodegenPool, variant: Variant) -> list[CompiledKernel]:
    """The kernels whose compile `started`, finished in their order (as a serial compile
    would: the same decisions, fall-backs and scratch offsets whatever the thread count)."""
    kernels = []
    finished_by_source: dict[str, CompiledKernel] = {}
    for spec, start in started:
        with erasure.stage(f"cpu backend kernel '{spec.symbol}'"):
            erasure.processing(spec.op)
            compiled = finish_or_fall_back(spec, start, plan, emission.decisions, finished_by_source, codegen, variant)
        if compiled:
            if compiled.same_as:
                emission.decisions.append(f"{compiled.symbol}: the same StableHLO as {compiled.same_as}, whose code it runs (compiled once)")
            phases.publish("kernel", compiled)
            kernels.append(compiled)
            give_scratch(plan, compiled, spec, assignment, emission.slab)
            if compiled.tiled_loop_nests:
                emission.decisions.append(f"{compiled.symbol}: {compiled.tiled_loop_nests} loop nest(s) tiled into cache blocks "
                                          "for an operand read across the innermost loop")
            if compiled.register_tiled_convolutions:
                emission.decisions.append(f"{compiled.symbol}: {compiled.register_tiled_convolutions} convolution(s) as calls of "
                                          "the runtime library's register-tiled convolution (output columns x features held in vector registers)")
            if compiled.bf16_kept_in_f32:
                emission.decisions.append(f"{compiled.symbol}: {compiled.bf16_kept_in_f32} bf16 rounding(s) of values read in the kernel "
                                          "left out, computed in f32 (excess precision)")
            if compiled.masked_loops_split:
                emission.decisions.append(f"{compiled.symbol}: {compiled.masked_loops_split} loop(s) split where their mask of "
                                          "positions changes, each part computing only the branch it selects")
    return kernels


def compile_drivers(plan: ExecutablePlan, kernels: list[CompiledKernel], decisions: list[str],
                    codegen: llvm_jit.CodegenPool, flush_denormals: bool) -> list[llvm_jit.OptimizedKernel]:
    """The plan's native drivers, compiled: one for the whole sequence when it runs in order
    and gains from one, else one per top-level control-flow thunk. After the kernels: a
    driver passes their scratch, placed only once they are compiled. A driver flushes
    denormals around everything it runs when the kernels do."""
    used = {kernel.symbol for kernel in kernels}
    with phases.phase("backend", "native drivers"):
        if runs_in_order(plan) and driver_emitter.worth_one_driver(plan.thunks):
            sources = driver_emitter.drive_executable(plan, used, decisions, pool_threads(plan))
        else:
            sources = driver_emitter.attach_drivers(plan.thunks, used, decisions, pool_threads(plan))
        natives = [codegen.native(source.symbol, flushing(source.ir_text, source.symbol, flush_denormals), frozenset(source.calls))
                   for source in sources]
        return [native.result() for native in natives]


def flushing(ir_text: str, symbol: str, flush_denormals: bool) -> str:
    """`ir_text` with function `symbol` flushing denormals when asked (`denormal_flushing.py`)."""
    return denormal_flushing.flushing_entry(ir_text, symbol, llvm_jit.host_triple()) if flush_denormals else ir_text


def pipeline_assignment(runner: PipelineRunner) -> Assignment:
    """The assignment the pipeline's `xhlo-buffer-assignment` made; when the pipeline did not
    run it (disabled, or the module was optimized by another runner), the backend's own run
    of it at the backend's alignment."""
    report = runner.reports.get(BufferAssignmentPass.name)
    if report is None:
        report = PassResult.of(BufferAssignmentPass(alignment=kernel_scratch.ALIGNMENT).run(runner.module)).report
    if report.assignment.alignment % kernel_scratch.ALIGNMENT:
        raise MlirxlaError(f"the buffer assignment aligns offsets to {report.assignment.alignment} bytes; "
                           f"the cpu backend needs {kernel_scratch.ALIGNMENT}")
    return report.assignment


def start_kernel(spec: KernelSpec, lowered_kernels: "LoweredKernels", codegen: llvm_jit.CodegenPool,
                 variant: Variant = Variant()) -> "CompiledKernel | MlirxlaError":
    """The calling thread's part of the kernel's compile (`compile_kernel`), or why it failed:
    raised or fallen back from in the kernels' order (`finish_or_fall_back`)."""
    try:
        return compile_kernel(spec, lowered_kernels, codegen, variant)
    except MlirxlaError as error:
        return error


def finish_or_fall_back(spec: KernelSpec, start: "CompiledKernel | MlirxlaError | None", plan: ExecutablePlan, decisions: list[str],
                        finished_by_source: dict[str, "CompiledKernel"], codegen: llvm_jit.CodegenPool,
                        variant: Variant = Variant()) -> CompiledKernel | None:
    """The compiled kernel; or None when the kernel runs on the interpreter instead (its thunk
    in `plan` replaced, the reason recorded). `finished_by_source` holds the kernels finished
    so far by their StableHLO with the symbol left out."""
    reason = spec.interpret
    if reason is None:
        try:
            return finish_kernel(spec, start, finished_by_source, codegen, variant)
        except MlirxlaError as error:
            if spec.library_result is not None or spec.source is not None:
                raise
            reason = str(error)
    interpreter_fallback.replace_kernel(plan, spec.symbol, spec.op, reason)
    decisions.append(f"{spec.symbol}: runs on the reference interpreter ({reason})")
    return None


def kernel_stablehlo(spec: KernelSpec, lanes: bool = True) -> tuple[ir.Module, str, str]:
    """The kernel's StableHLO module (its own source, or its op as a function in
    destination-passing style), that module's text, and the text without the kernel's symbol:
    the key under which kernels with the same code are compiled once. `lanes`: as
    `kernel_source.finish` takes it (False for a GPU's loops)."""
    if spec.source is not None:
        kernel_module = ir.Module.parse(spec.source)
        if spec.private_results:
            function = next(op for op in kernel_module.body.operations if op.operation.name == "func.func")
            kernel_source.mark_private_results(function.operation, len(spec.op.operands), spec.private_results)
    else:
        kernel_module = ir.Module.create()
        kernel_source.kernel_function(kernel_module, spec.op, spec.symbol, spec.plan, spec.library_result, spec.in_place,
                                      spec.private_results)
    kernel_source.finish(kernel_module, lanes)
    text = str(kernel_module)
    return kernel_module, text, without_symbol(text, spec.symbol)


def kernel_signature(spec: KernelSpec) -> tuple:
    """What any two kernels of one structure share, read without printing: the op's name, its
    operand and result types, its body's op count, the plan's counts, whether a library call
    computes a value, the in-place pairs. Only a kernel whose signature an earlier kernel has
    is worth its structure's print (`kernel_structure`)."""
    op, plan = spec.op, spec.plan
    body = len(list(op.regions[0].blocks[0].operations)) if op.name == "xhlo.fusion" else 0
    return (op.name, tuple(value.type for value in op.operands), tuple(value.type for value in op.results), body,
            None if plan is None else (plan.count, plan.rows, plan.columns), spec.library_result is not None, spec.in_place)


def kernel_structure(spec: KernelSpec) -> tuple:
    """What the kernel's StableHLO is made of, its names left out: the op printed on its own
    (its SSA values numbered within it, the values it reads from outside unnamed; a fusion's
    own attributes, its name and kind, left out: the kernel function reads only its body and
    types), the slice plan with each value's one-slice type by position, the position of the
    value a library call computes, and the in-place pairs. Kernels of equal structure have
    the same StableHLO but for the symbol, which this tells without building it (each is a
    module made, lowered to StableHLO and printed: most of a duplicate's time)."""
    op, plan = spec.op, spec.plan
    text = op.get_asm(use_local_scope=True, print_generic_op_form=True)
    if op.name == "xhlo.fusion":
        text = without_own_attributes(text)
    values = kernel_values(op) if plan is not None or spec.library_result is not None else []
    slicing = None if plan is None else (plan.count, plan.rows, plan.columns, plan.sliced_operands, plan.read_across,
                                         tuple(plan.types.get(value) for value in values))
    library = None if spec.library_result is None else values.index(spec.library_result)
    return text, slicing, library, spec.in_place


def without_own_attributes(fusion_text: str) -> str:
    """A fusion's generic form without its own attributes, the dictionary after its region
    (`}) {kind = ..., name = ...} : (...) -> ...`), up to its first closing brace: should a
    value hold braces, what follows stays in the text, which only keeps kernels apart."""
    body, _, tail = fusion_text.rpartition("\n}) ")
    if tail.startswith("{"):
        tail = tail[tail.index("}") + 1:]
    return body + tail


def kernel_values(op: ir.Operation) -> list[ir.Value]:
    """The values a kernel function computes with, in order: a fusion's arguments and its body's
    results, or an op's operands and results (what a slice plan retypes)."""
    if op.name != "xhlo.fusion":
        return list(op.operands) + list(op.results)
    block = op.regions[0].blocks[0]
    return list(block.arguments) + [result for inner in block.operations for result in inner.results]


class LoweredKernels:
    """The kernels lowered so far in one compile, found by what makes two kernels the same code:
    their StableHLO without the symbol (`kernel_stablehlo`), and their structure
    (`kernel_structure`), which is known before the StableHLO is built. A structure is
    printed only once two kernels share a signature (`kernel_signature`): then for the
    earlier ones too, which were lowered without it."""

    def __init__(self):
        self.by_text: dict[str, CompiledKernel] = {}
        self.by_structure: dict[tuple, CompiledKernel] = {}
        self.unprinted: dict[tuple, list[tuple[KernelSpec, CompiledKernel]]] = {}  # signature -> kernels lowered

    def structure(self, spec: KernelSpec) -> tuple | None:
        """`spec`'s structure when an earlier kernel shares its signature, else None."""
        if spec.source is not None:
            return None
        signature = kernel_signature(spec)
        earlier = self.unprinted.get(signature)
        if earlier is None:
            self.unprinted[signature] = []
            return None
        for earlier_spec, compiled in earlier:
            self.by_structure.setdefault(kernel_structure(earlier_spec), compiled)
        earlier.clear()
        return kernel_structure(spec)

    def lowered(self, spec: KernelSpec, structure: tuple | None, compiled: CompiledKernel) -> None:
        self.by_text[compiled.source_key] = compiled
        if structure is not None:
            self.by_structure[structure] = compiled
        elif spec.source is None:
            self.unprinted[kernel_signature(spec)].append((spec, compiled))


def compile_kernel(spec: KernelSpec, lowered_kernels: LoweredKernels, codegen: llvm_jit.CodegenPool,
                   variant: Variant = Variant()) -> CompiledKernel:
    """Lower the kernel and hand its LLVM IR to the compile threads; or, when a kernel of the same
    structure or with the same StableHLO was lowered already, note that it runs that kernel's code
    (its forwarder is made once that code is compiled: `finish_kernel`). A call into the runtime
    library has nothing to lower or optimize (unless another backend's loops are asked for: its
    own source then)."""
    if spec.library_call is not None and variant.buffer_loops is None:
        native = Future()
        native.set_result(llvm_jit.library_call(spec.symbol, flushing(spec.library_call, spec.symbol, variant.flush_denormals)))
        return CompiledKernel(spec.symbol, spec.library_call, None, native=native, source_key=spec.library_call)
    structure = lowered_kernels.structure(spec)
    if structure is not None and (first := lowered_kernels.by_structure.get(structure)) is not None:
        stablehlo_text = re.sub(rf"@{re.escape(first.symbol)}\b", f"@{spec.symbol}", first.stablehlo)
        return same_code_as(first, spec.symbol, stablehlo_text)
    kernel_module, stablehlo_text, source_key = kernel_stablehlo(spec, lanes=variant.buffer_loops is None)
    if (first := lowered_kernels.by_text.get(source_key)) is not None:
        if structure is not None:
            lowered_kernels.by_structure[structure] = first
        return same_code_as(first, spec.symbol, stablehlo_text)
    if variant.buffer_loops is None and (earlier := kernel_cache.KERNELS.find(variant, spec.symbol, source_key, codegen.keep_ir)):
        lowered_kernels.lowered(spec, structure, earlier)
        return earlier
    lowered = lowering.lower_to_llvm_dialect(kernel_module, spec.symbol, variant.buffer_loops,
                                             allow_excess_precision=variant.excess_precision)
    native = codegen.native(spec.symbol, flushing(lowering.translate(kernel_module, spec.symbol), spec.symbol, variant.flush_denormals))
    compiled = CompiledKernel(spec.symbol, stablehlo_text, None, tuple(lowered.scratch.get(spec.symbol, ())),
                              lowered.tiled_loop_nests, lowered.register_tiled_convolutions, lowered.bf16_kept_in_f32,
                              lowered.masked_loops_split, native=native, source_key=source_key)
    lowered_kernels.lowered(spec, structure, compiled)
    return compiled


def same_code_as(first: CompiledKernel, symbol: str, stablehlo_text: str) -> CompiledKernel:
    """Kernel `symbol`, which runs `first`'s code (the same StableHLO but for the symbol)."""
    return CompiledKernel(symbol, stablehlo_text, None, first.scratch, first.tiled_loop_nests, first.register_tiled_convolutions,
                          first.bf16_kept_in_f32, first.masked_loops_split, same_as=first.symbol, source_key=first.source_key)


def finish_kernel(spec: KernelSpec, start: "CompiledKernel | MlirxlaError", finished_by_source: dict[str, CompiledKernel],
                  codegen: llvm_jit.CodegenPool, variant: Variant) -> CompiledKernel:
    """The kernel with its native code: its own (waited for), or a forwarder running the code of
    the first finished kernel with its StableHLO. When that first kernel fell back to the
    interpreter, this one is compiled on its own, as a serial compile would have done."""
    if isinstance(start, MlirxlaError):
        raise start
    if start.same_as is not None:
        if (first := finished_by_source.get(start.source_key)) is not None:
            start.same_as, start.optimized = first.symbol, llvm_jit.same_code(spec.symbol, first.optimized)
            return start
        start = compile_kernel(spec, LoweredKernels(), codegen, variant)
    start.optimized = start.native.result()
    finished_by_source[start.source_key] = start
    if not start.optimized.forwards and variant.buffer_loops is None:
        kernel_cache.KERNELS.keep(variant, start)
    return start


def without_symbol(stablehlo_text: str, symbol: str) -> str:
    """A kernel's StableHLO with its symbol (the function's name, and any helper named after
    it) replaced by one placeholder: what makes two kernels the same code."""
    return re.sub(rf"@{re.escape(symbol)}\b", "@kernel", stablehlo_text)


def give_scratch(plan: ExecutablePlan, kernel: CompiledKernel, spec: KernelSpec, assignment: Assignment, slab: int) -> None:
    """Working memory in the slab for each thunk calling `kernel` when it needs any: one
    call's range per concurrent call (a sliced kernel's slices run on `CONCURRENT_CALLS`
    workers at most), live while the kernel's op runs."""
    if not kernel.scratch:
        return
    offsets, size = kernel_scratch.scratch_layout([argument.size for argument in kernel.scratch],
                                                  max(kernel_scratch.ALIGNMENT, assignment.alignment))
    start, end = assignment.time_span(spec.op)
    for thunk in every_thunk(plan.thunks):
        if isinstance(thunk, KernelThunk) and thunk.symbol == kernel.symbol:
            parts = min(thunk.slices, CONCURRENT_CALLS) if isinstance(thunk, SlicedKernelThunk) else 1
            holds = "; ".join(argument.holds for argument in kernel.scratch) + (f" (x{parts} concurrent calls)" if parts > 1 else "")
            offset = place_scratch(assignment, thunk.name, size * parts, start, end, holds)
            thunk.scratch = BufferSlice(slab, offset, size)
            thunk.scratch_offsets = tuple(offsets)
            thunk.scratch_parts = parts


def check_partitioned(module: ir.Module) -> None:
    """A module for several devices runs as written on each of them (collectives and device
    ids included); one that still needs partitioning after the pipeline (which partitions
    what carries shardings) is refused."""
    if (need := partitioning_need(module)) is not None:
        config = read_config(module)
        raise MlirxlaError(
            f"the module is for {config.replica_count} replica(s) x {config.partition_count} partition(s) and {need}: "
            "the cpu backend runs each device's program as written, and the pipeline left it unpartitioned"
        )


def check_layouts(module: ir.Module) -> None:
    """Buffers are row-major: the entry's parameter and result layouts must be. (Layouts inside
    the module are not followed yet: every kernel reads and writes row-major, so a transpose
    that layout assignment made a bitcast is a real transpose in its kernel.)"""
    entry = entry_function(module)
    for key in ("arg_attrs", "res_attrs"):
        if key not in entry.attributes:
            continue
        for index, attributes in enumerate(ir.ArrayAttr(entry.attributes[key])):
            attributes = ir.DictAttr(attributes)
            if "xhlo.layout" in attributes:
                order = list(ir.DenseI64ArrayAttr(attributes["xhlo.layout"]))
                if order != sorted(order, reverse=True):
                    what = "parameter" if key == "arg_attrs" else "result"
                    raise MlirxlaError(f"entry {what} {index} has layout {order}: the cpu backend takes row-major buffers only")


def dump_backend(dumps: DumpWriter, assignment: Assignment, kernels: list[CompiledKernel],
                 drivers: list[llvm_jit.OptimizedKernel], thunk_sequence: str) -> None:
    """The backend's dump files: the final buffer assignment, each kernel's and driver's IR,
    the thunk sequence (made only when dumping: printing them is a good part of a compile)."""
    for suffix, text in BufferAssignmentReport(assignment).dump_files().items():
        dumps.write(suffix, text)
    dump_kernels(dumps, kernels)
    for driver in drivers:
        dumps.write(f"{driver.name}.ir-no-opt.ll", driver.ir_without_opt)
        dumps.write(f"{driver.name}.ir-with-opt.ll", driver.ir_with_opt)
    dumps.write("thunk-sequence.txt", thunk_sequence)


def dump_kernels(dumps: DumpWriter, kernels: list[CompiledKernel]) -> None:
    for kernel in kernels:
        dumps.write(f"{kernel.symbol}.stablehlo.mlir", kernel.stablehlo)
        dumps.write(f"{kernel.symbol}.ir-no-opt.ll", kernel.optimized.ir_without_opt)
        dumps.write(f"{kernel.symbol}.ir-with-opt.ll", kernel.optimized.ir_with_opt)


def pool_threads(plan: ExecutablePlan) -> int:
    """The native pool's threads a single device's program runs its GEMMs in parts on and its
    drivers run its sliced kernels on (`runtime/native_pool.py`); 0 for a grid's: its devices
    already run side by side, and GEMM parts they ran on their own threads repacked an operand
    per part (the 8-device transformer block 69-74 ms whole, 75-78 in parts;
    `benchmarks/spmd_vs_xla.py`)."""
    threads = cpu_threads()
    return threads if plan.replica_count * plan.partition_count == 1 and threads > 1 else 0


def gemms_in_parts(plan: ExecutablePlan, variant: Variant) -> None:
    """A single device's GEMMs run in parts over the native pool (`native_pool.pooled_gemm`), a
    grid's whole on each device's thread (`pool_threads`)."""
    if pool_threads(plan) and variant.slice_rows:
        for thunk in every_thunk(plan.thunks):
            if isinstance(thunk, GemmThunk):
                thunk.in_parts = True


def plan_of(emission: Emission, module: ir.Module) -> ExecutablePlan:
    """The plan, with the module's grid and, for a partitioned module, its entry as the caller
    sees it (`xhlo.global_entry`: what sharded arrays are split and assembled by)."""
    config = read_config(module)
    global_parameters, global_outputs = global_entry.read(module) or ([], [])
    return ExecutablePlan(
        parameters=emission.parameters,
        outputs=emission.outputs,
        allocation_sizes=emission.allocation_sizes,
        allocation_kinds=emission.allocation_kinds,
        constants=emission.constants,
        thunks=emission.thunks,
        replica_count=config.replica_count,
        partition_count=config.partition_count,
        global_parameters=global_parameters,
        global_outputs=global_outputs,
        donated_parameters=donated_parameters(module),
        output_memory_kinds=output_memory_kinds(module),
    )


def output_memory_kinds(module: ir.Module) -> tuple[str, ...]:
    """Per output of the entry, the memory kind its `mhlo.memory_kind` result attribute names
    (`device` where none); () when all are `device`."""
    entry = entry_function(module)
    if entry is None or "res_attrs" not in entry.attributes:
        return ()
    kinds = tuple(ir.StringAttr(ir.DictAttr(attributes)[MEMORY_KIND]).value if MEMORY_KIND in ir.DictAttr(attributes)
                  else DEVICE_MEMORY for attributes in ir.ArrayAttr(entry.attributes["res_attrs"]))
    return kinds if any(kind != DEVICE_MEMORY for kind in kinds) else ()


def donated_parameters(module: ir.Module) -> tuple[int, ...]:
    entry = entry_function(module)
    if entry is None:
        return ()
    return tuple(index for index in range(len(entry.regions[0].blocks[0].arguments)) if copy_insertion.is_donated(entry, index))
