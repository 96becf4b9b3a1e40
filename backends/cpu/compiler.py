"""The CPU compiler: an imported xhlo module in, a compiled program (the plan and its object
code) out (XLA's CpuCompiler: RunHloPasses, then RunBackend).

1. The cpu pipeline (`pipelines/cpu.py`): simplification, layouts, fusion, copies, the
   schedule, buffer assignment; dumps as the pipeline runner writes them.
2. Thunk emission (`thunk_emitter.py`): the thunk sequence and the kernels it needs.
3. Per kernel: its StableHLO function in destination-passing style (`kernel_source.py`),
   lowered to the LLVM dialect (`lowering.py`), translated to LLVM IR and optimized by
   llvmlite (`llvm_jit.py`); dumped as `<kernel>.ir-no-opt.ll` and `<kernel>.ir-with-opt.ll`.
   A kernel that needs working memory gets it from a `scratch` allocation of its thunk.
   A kernel the toolkit cannot lower runs on the reference interpreter instead
   (`interpreter_fallback.py`), and the thunk sequence says so.
4. One native object for all kernels, which the runtime loads; the thunk sequence is
   dumped as `thunk-sequence.txt`.
"""

from dataclasses import dataclass

from mlirxla import phases
from mlirxla.dialects.xhlo import global_entry
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import entry_function
from mlirxla.mlir import ir
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.dumps import DumpWriter
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.backends.backend import CompiledProgram
from mlirxla.runtime.executable import ExecutablePlan
from mlirxla.runtime.thunks import BufferSlice, KernelThunk, every_thunk
from mlirxla.transforms import erasure
from mlirxla.transforms.sharding_remover import partitioning_need

from . import interpreter_fallback, kernel_scratch, kernel_source, llvm_jit, lowering, tiling
from .emitters.kernels import KernelSpec
from .thunk_emitter import Emission, ThunkEmitter


@dataclass
class CompiledKernel:
    symbol: str
    stablehlo: str
    optimized: llvm_jit.OptimizedKernel
    scratch_sizes: tuple[int, ...] = ()  # working memory per call, passed after the results
    tiled_loop_nests: int = 0


def compile_module(module: ir.Module, options: RunOptions = RunOptions(), run_pipeline: bool = True) -> CompiledProgram:
    """Compile `module` (imported xhlo) for the host CPU."""
    runner = PipelineRunner(module, options)
    if run_pipeline:
        runner.compile(named_pipeline("cpu"))
    check_partitioned(module)
    with module.context, ir.Location.unknown():
        check_layouts(module)
        with erasure.stage("cpu backend thunk emission"), phases.phase("backend", "thunk emission"):
            emission = ThunkEmitter(module).emit()
        plan = plan_of(emission, module)
        phases.publish("kernel-count", len(emission.kernels))
        kernels = []
        for spec in emission.kernels:
            with erasure.stage(f"cpu backend kernel '{spec.symbol}'"), phases.phase("kernel", spec.symbol):
                erasure.processing(spec.op)
                compiled = compile_or_fall_back(spec, plan, emission.decisions)
            if compiled:
                phases.publish("kernel", compiled)
                kernels.append(compiled)
                give_scratch(plan, compiled)
                if compiled.tiled_loop_nests:
                    emission.decisions.append(f"{compiled.symbol}: {compiled.tiled_loop_nests} loop nest(s) tiled "
                                              f"{tiling.TILE}x{tiling.TILE} for an operand read across the innermost loop")
    dump_kernels(runner.dumps, kernels)
    runner.dumps.write("thunk-sequence.txt", plan.describe(emission.decisions))
    return CompiledProgram(plan, llvm_jit.object_code([k.optimized for k in kernels]), emission.decisions)


def compile_or_fall_back(spec: KernelSpec, plan: ExecutablePlan, decisions: list[str]) -> CompiledKernel | None:
    """The compiled kernel; or None when the kernel runs on the interpreter instead (its thunk
    in `plan` replaced, the reason recorded)."""
    reason = spec.interpret
    if reason is None:
        try:
            return compile_kernel(spec)
        except MlirxlaError as error:
            if spec.library_result is not None or spec.source is not None:
                raise
            reason = str(error)
    interpreter_fallback.replace_kernel(plan, spec.symbol, spec.op, reason)
    decisions.append(f"{spec.symbol}: runs on the reference interpreter ({reason})")
    return None


def compile_kernel(spec: KernelSpec) -> CompiledKernel:
    if spec.source is not None:
        kernel_module = ir.Module.parse(spec.source)
    else:
        kernel_module = ir.Module.create()
        kernel_source.kernel_function(kernel_module, spec.op, spec.symbol, spec.plan, spec.library_result)
    kernel_source.finish(kernel_module)
    stablehlo_text = str(kernel_module)
    lowered = lowering.lower_to_llvm_dialect(kernel_module, spec.symbol)
    optimized = llvm_jit.optimize(spec.symbol, lowering.translate(kernel_module, spec.symbol))
    return CompiledKernel(spec.symbol, stablehlo_text, optimized, tuple(lowered.scratch.get(spec.symbol, ())),
                          lowered.tiled_loop_nests)


def give_scratch(plan: ExecutablePlan, kernel: CompiledKernel) -> None:
    """A `scratch` allocation for each thunk calling `kernel` when it needs working memory:
    one call's range (the executable makes room for one per worker)."""
    if not kernel.scratch_sizes:
        return
    offsets, size = kernel_scratch.scratch_layout(list(kernel.scratch_sizes))
    for thunk in every_thunk(plan.thunks):
        if isinstance(thunk, KernelThunk) and thunk.symbol == kernel.symbol:
            thunk.scratch = BufferSlice(len(plan.allocation_sizes), 0, size)
            thunk.scratch_offsets = tuple(offsets)
            plan.allocation_sizes.append(size)
            plan.allocation_kinds.append("scratch")


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


def dump_kernels(dumps: DumpWriter, kernels: list[CompiledKernel]) -> None:
    for kernel in kernels:
        dumps.write(f"{kernel.symbol}.stablehlo.mlir", kernel.stablehlo)
        dumps.write(f"{kernel.symbol}.ir-no-opt.ll", kernel.optimized.ir_without_opt)
        dumps.write(f"{kernel.symbol}.ir-with-opt.ll", kernel.optimized.ir_with_opt)


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
    )
