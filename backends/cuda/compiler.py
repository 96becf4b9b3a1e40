"""The CUDA compiler: an imported xhlo module in, an `.mlirxla` executable out (XLA's
GpuCompiler: RunHloPasses, then RunBackend), compiled on a machine without a GPU.

1. The cuda pipeline (`pipelines/cuda.py`): the cpu pipeline's decisions with an H200's cost
   model, buffer offsets aligned to 256 bytes.
2. Thunk emission as the cpu backend does it (`backends/cpu/thunk_emitter.py`), without
   splitting kernels into row slices: GEMMs (dots, output fusions' dots, im2col
   convolutions) become cuBLAS calls, copies device-to-device copies, loops and conditionals
   keep their thunk lists; host calls and collectives are refused.
3. Per kernel (`lowering.py`): its StableHLO function as the cpu backend writes it, linalg,
   bufferization into the caller's buffers, each loop nest mapped to blocks and threads
   (`loop_mapping.py`), then `gpu.launch`, outlined `gpu.func`s and NVVM; the host side is a
   list of launches (`launches.py`), each naming the kernel's arguments it passes. Kernels
   with the same StableHLO (but for their symbol) are compiled once and launched under the
   first one's names.
4. All kernels to one PTX module for the target (`ptx.py`, llvmlite's NVPTX back end, libdevice
   linked) and, when `ptxas` is here (the `cuda` extra), one cubin (`ptxas.py`).
5. The executable file (`runtime/cuda/executable_file.py`): one slab holding every allocation
   (parameters, temps and scratch, constants, outputs) at 256-byte aligned offsets, the thunk
   plan over slab offsets, the PTX, the cubin and the constants' bytes.

Dumps (`--dump-to`): per kernel its StableHLO, its mapped loop nest (`<kernel>.loops.mlir`),
NVVM (`<kernel>.nvvm.mlir`), LLVM IR (`<kernel>.ll`) and PTX (`<kernel>.ptx`); the program's
PTX (`kernels.ptx`), its optimized LLVM IR (`kernels.ll`), `ptxas -v`'s figures per kernel
(`kernel-resources.txt`) and the thunk sequence.
"""

import json
from dataclasses import dataclass, field

from mlirxla.backends.backend import CompiledProgram
from mlirxla.backends.cpu import compiler as cpu_compiler
from mlirxla.backends.cpu.emitters.kernels import KernelSpec
from mlirxla.backends.cpu.thunk_emitter import ThunkEmitter
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.mlir import ir
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.runtime.cuda.executable_file import ExecutableFile
from mlirxla.runtime.executable import ExecutablePlan
from mlirxla.runtime.thunks import (BufferSlice, ConditionalThunk, CopyThunk, KernelThunk, ParallelCopyThunk,
                                    SlicedKernelThunk, WhileThunk)
from mlirxla.transforms import erasure
from mlirxla.transforms.buffer_assignment import write_summary

from . import gemm_epilogues, launches as launch_reading, lowering, ptx, ptxas
from .gemm_epilogues import CublasLtGemm
from .launches import Launch
from .stream_assignment import StreamAssignment, assign_streams
from .target import GpuTarget, H200

SLAB_ALIGNMENT = 256


@dataclass
class CudaKernel:
    """One kernel of the plan: its launches (in order) and what the dumps show of it."""

    symbol: str
    launches: list[Launch]
    scratch: tuple = ()
    stablehlo: str = ""
    loops: str = ""
    nvvm: str = ""
    llvm_ir: list[ptx.KernelIr] = field(default_factory=list)
    same_as: str | None = None
    emitters: tuple[str, ...] = ()  # what made each launch (`loop`, `row`)
    notes: tuple[str, ...] = ()


@dataclass
class CudaProgram:
    """What `compile_program` made: the plan, the executable file, its PTX and cubin."""

    plan: ExecutablePlan
    kernels: list[CudaKernel]
    ptx: str
    cubin: ptxas.Cubin | None
    executable: ExecutableFile
    decisions: list[str]
    streams: str = ""  # the stream assignment, a line per thunk


def compile_module(module: ir.Module, options: RunOptions = RunOptions(backend="cuda"), target: GpuTarget = H200) -> CompiledProgram:
    program = compile_program(module, options, target)
    return CompiledProgram(program.plan, program.executable.to_bytes(), program.decisions)


def compile_program(module: ir.Module, options: RunOptions = RunOptions(backend="cuda"), target: GpuTarget = H200) -> CudaProgram:
    runner = PipelineRunner(module, options)
    runner.compile(named_pipeline("cuda"))
    return codegen(runner, target)


def codegen(runner: PipelineRunner, target: GpuTarget = H200) -> CudaProgram:
    """Steps 2-5 on the module `runner` ran the cuda pipeline on (`mlirxla-opt --pipeline=cuda
    --dump-to` calls this after the pipeline)."""
    module = runner.module
    check_single_device(module)
    with module.context, ir.Location.unknown():
        cpu_compiler.check_layouts(module)
        assignment = cpu_compiler.pipeline_assignment(runner)
        emission = emit_thunks(module, assignment)
        plan = cpu_compiler.plan_of(emission, module)
        plan.backend = "cuda"
        specs = {spec.symbol: spec for spec in emission.kernels}
        plan.thunks = gemm_epilogues.plan_gemms(plan.thunks, specs, gemm_epilogues.dot_precisions(module),
                                                gemm_epilogues.precision_mode(), emission.decisions)
        launched = gemm_epilogues.kernel_symbols(plan.thunks)
        kernels, by_source = {}, {}
        for spec in emission.kernels:
            if spec.symbol not in launched:  # an epilogue a cuBLASLt matmul computes
                continue
            with erasure.stage(f"cuda backend kernel '{spec.symbol}'"):
                erasure.processing(spec.op)
                kernel = compile_kernel(spec, by_source)
            kernels[spec.symbol] = kernel
            emission.decisions.extend(kernel.notes)
            if kernel.same_as:
                emission.decisions.append(f"{kernel.symbol}: the same StableHLO as {kernel.same_as}, whose kernels it launches")
            cpu_compiler.give_scratch(plan, kernel, spec, assignment, emission.slab)
        plan.allocation_sizes[emission.slab] = assignment.heap.size
        write_summary(module, assignment.summary)
    irs = [ir_ for kernel in kernels.values() if not kernel.same_as for ir_ in kernel.llvm_ir]
    ptx_text, optimized_ir = ptx.emit_ptx(irs, target.arch)
    cubin = ptxas.assemble(ptx_text, target.arch) if ptxas.find_ptxas() is not None else None
    if cubin is None:
        emission.decisions.append(f"no ptxas here ({ptxas.INSTALL_HINT}): the executable carries PTX only, which the driver compiles when it loads")
    executable, streams = executable_file(plan, kernels, ptx_text, cubin, target)
    emission.decisions.append(f"{executable.plan['streams']} stream(s), {executable.plan['events']} cross-stream event(s) "
                              "(stream_assignment.py; each thunk's stream, waits and records in executable.json)")
    emission.decisions.append(f"{sum(len(k.launches) for k in kernels.values())} launch(es) of "
                              f"{len(ptx.kernel_names(ptx_text))} GPU kernel(s) for {target.arch}")
    program = CudaProgram(plan, list(kernels.values()), ptx_text, cubin, executable, emission.decisions, streams)
    dump(runner, program, optimized_ir, target)
    return program


def emit_thunks(module: ir.Module, assignment):
    """The cpu backend's thunk emission as the cuda backend wants it: whole kernels, ops with
    kernels of their own (a triangular solve) as kernels rather than host calls."""
    with erasure.stage("cuda backend thunk emission"):
        return ThunkEmitter(module, assignment, slice_rows=False, gpu_kernels=True).emit()


def check_single_device(module: ir.Module) -> None:
    config = read_config(module)
    if config.device_count > 1:
        raise MlirxlaError(f"the module is for {config.replica_count} replica(s) x {config.partition_count} partition(s): "
                           "the cuda backend runs a program on one GPU (it runs no collectives)")


def compile_kernel(spec: KernelSpec, by_source: dict[str, CudaKernel]) -> CudaKernel:
    """Map and lower one kernel; a kernel whose StableHLO was compiled already launches that
    one's GPU kernels."""
    if spec.interpret is not None:
        raise MlirxlaError(f"kernel {spec.symbol} has no native lowering ({spec.interpret}): "
                           "the cuda backend has no interpreter to fall back to", location_text(spec.op.location))
    module, stablehlo, key = cpu_compiler.kernel_stablehlo(spec, lanes=False)
    if (first := by_source.get(key)) is not None:
        return CudaKernel(spec.symbol, first.launches, first.scratch, stablehlo, same_as=first.symbol, emitters=first.emitters)
    mapped = lowering.map_to_blocks_and_threads(module, spec.symbol)
    loops = str(module)
    lowering.to_nvvm(module, spec.symbol)
    launches = launch_reading.read_launches(module, spec.symbol)
    if len(launches) != len(mapped.nests):
        raise MlirxlaError(f"kernel {spec.symbol}: {len(mapped.nests)} loop nest(s) mapped but {len(launches)} launch(es) made")
    kernel = CudaKernel(spec.symbol, launches, tuple(mapped.scratch), stablehlo, loops, str(module),
                        ptx.gpu_kernels_as_llvm_ir(module, spec.symbol), emitters=tuple(n.emitter for n in mapped.nests),
                        notes=tuple(mapped.notes))
    by_source[key] = kernel
    return kernel


# --- the executable file ---------------------------------------------------------------------

def align_up(value: int, alignment: int = SLAB_ALIGNMENT) -> int:
    return -(-value // alignment) * alignment


@dataclass(frozen=True)
class SlabPlaces:
    """Where the plan's slices lie in the one slab (called on a slice), and the staging range
    after the allocations through which a parallel copy whose copies overlap goes."""

    offsets: list[int]
    staging: int

    def __call__(self, piece: BufferSlice) -> int:
        return self.offsets[piece.allocation] + piece.offset


def slab_layout(plan: ExecutablePlan) -> tuple[SlabPlaces, int]:
    """Where each allocation starts in the one slab, and the slab's size."""
    offsets, cursor = [], 0
    for size in plan.allocation_sizes:
        offsets.append(cursor)
        cursor = align_up(cursor + size)
    staging = cursor
    cursor += staging_bytes(plan.thunks)
    return SlabPlaces(offsets, staging), max(cursor, SLAB_ALIGNMENT)


def staging_bytes(thunks: list) -> int:
    """The staging the plan's parallel copies need, the most any one needs."""
    most = 0
    for thunk in thunks:
        if isinstance(thunk, ParallelCopyThunk):
            most = max(most, sum(align_up(copy.source.size) for copy in overwritten_sources(thunk.copies)))
        for nested in nested_lists(thunk):
            most = max(most, staging_bytes(nested))
    return most


def nested_lists(thunk) -> list[list]:
    if isinstance(thunk, WhileThunk):
        return [thunk.condition, thunk.body]
    if isinstance(thunk, ConditionalThunk):
        return list(thunk.branches)
    return []


def overwritten_sources(copies: tuple[CopyThunk, ...]) -> list[CopyThunk]:
    """The copies whose source another copy of the same parallel copy writes over (a while
    body's carried values swapped or rotated): copied one after another, the later would read
    what the earlier wrote."""
    return [copy for copy in copies if any(other is not copy and overlaps(copy.source, other.destination) for other in copies)]


def overlaps(a: BufferSlice, b: BufferSlice) -> bool:
    return a.allocation == b.allocation and a.offset < b.offset + b.size and b.offset < a.offset + a.size


def executable_file(plan: ExecutablePlan, kernels: dict[str, CudaKernel], ptx_text: str, cubin, target: GpuTarget) -> tuple[ExecutableFile, str]:
    """The file, and its stream assignment described."""
    at, slab_bytes = slab_layout(plan)
    offsets = at.offsets

    def spec(piece: BufferSlice, tensor) -> dict:
        return {"offset": at(piece), "bytes": piece.size, "shape": list(tensor.shape), "dtype": tensor.dtype}

    parameters = [{"offset": offsets[index], "bytes": plan.allocation_sizes[index], "shape": list(p.shape), "dtype": p.dtype}
                  for index, p in enumerate(plan.parameters)]
    blobs = {"ptx": ptx_text.encode()}
    if cubin is not None:
        blobs["cubin"] = cubin.data
    constants = []
    for allocation, data in sorted(plan.constants.items()):
        blobs[f"constant.{allocation}"] = data.tobytes()
        constants.append({"offset": offsets[allocation], "blob": f"constant.{allocation}"})
    thunks, streams, names = scheduled_thunks(plan.thunks, kernels, at)
    body = {
        "arch": target.arch,
        "slab_bytes": slab_bytes,
        "parameters": parameters,
        "outputs": [spec(piece, tensor) for piece, tensor in plan.outputs],
        "constants": constants,
        "kernels": sorted({launch.kernel for k in kernels.values() for launch in k.launches}),
        "thunks": thunks,
        "streams": streams.stream_count,
        "events": len(streams.events),
    }
    return ExecutableFile(body, blobs), streams.describe(names)


def scheduled_thunks(thunks: list, kernels: dict[str, CudaKernel], at) -> tuple[list[dict], StreamAssignment, list[str]]:
    """The file's top-level thunks with their streams (`stream_assignment.py`): each plan
    thunk's first file thunk waits on the events of the thunks it depends on, its last one
    records the event later thunks wait on. Thunks that become no GPU work (no copies) take no
    part, so that nothing waits on an event never recorded. Also the names of the thunks that
    take part."""
    pieces = [(thunk, plan_thunks([thunk], kernels, at)) for thunk in thunks]
    pieces = [(thunk, piece) for thunk, piece in pieces if piece]
    assignment = assign_streams([thunk for thunk, _ in pieces])
    result = []
    for index, ((_, piece), slot) in enumerate(zip(pieces, assignment.slots)):
        for item in piece:
            item["stream"] = slot.stream
        if slot.waits:
            piece[0]["wait"] = [assignment.events[w] for w in slot.waits]
        if index in assignment.events:
            piece[-1]["record"] = assignment.events[index]
        result.extend(piece)
    return result, assignment, [thunk.name for thunk, _ in pieces]


def plan_thunks(thunks: list, kernels: dict[str, CudaKernel], at) -> list[dict]:
    """The plan's thunks as the file's thunks, slices turned into slab offsets."""
    result = []
    for thunk in thunks:
        if isinstance(thunk, SlicedKernelThunk):
            raise MlirxlaError(f"{thunk.name}: a kernel run slice by slice has no cuda lowering")
        if isinstance(thunk, KernelThunk):
            result.extend(launch_thunks(thunk, kernels[thunk.symbol], at))
        elif isinstance(thunk, CublasLtGemm):
            result.append(matmul(thunk, at))
        elif isinstance(thunk, CopyThunk):
            result.append(memcpy(thunk, at))
        elif isinstance(thunk, ParallelCopyThunk):
            result.extend(parallel_copy(thunk, at))
        elif isinstance(thunk, WhileThunk):
            body, carried = alternating_carries(thunk)
            result.append({"kind": "while", "name": thunk.name, "condition": plan_thunks(thunk.condition, kernels, at),
                           "predicate": at(thunk.predicate), "predicate_bytes": thunk.predicate.size,
                           "body": plan_thunks(body, kernels, at), "trip_count": thunk.trip_count,
                           "carried": [{"state": at(state), "result": at(value), "bytes": state.size} for state, value in carried]})
        elif isinstance(thunk, ConditionalThunk):
            result.append({"kind": "conditional", "name": thunk.name, "selector": at(thunk.selector),
                           "selector_bytes": thunk.selector.size, "is_predicate": thunk.is_predicate,
                           "branches": [plan_thunks(branch, kernels, at) for branch in thunk.branches]})
        else:
            raise MlirxlaError(f"{thunk.name}: a {thunk.kind} thunk (a host call) has no cuda lowering")
    return result


def alternating_carries(loop: WhileThunk) -> tuple[list, list[tuple[BufferSlice, BufferSlice]]]:
    """A loop of known trip count whose body computes a carried value into a buffer of its
    own and copies it back into the loop's state at the end: the runtime alternates the two
    buffers' roles from one iteration to the next instead (`runtime/cuda/executor.py`), so
    that the copy goes (a scan's step: 4 thunks -> 2, what a CUDA graph of the unrolled loop
    launches one after another). Taken per copy of the body's final copy or parallel copy,
    when the body holds no control flow, writes the state nowhere else and reads the new
    value nowhere else. The body without those copies, and the (state, new value) pairs."""
    body = loop.body
    if loop.trip_count is None or not body or not isinstance(body[-1], (CopyThunk, ParallelCopyThunk)) \
            or any(nested_lists(t) for t in body):
        return body, []
    others = body[:-1]
    written = [piece for thunk in others for piece in thunk.writes]
    read = [piece for thunk in others for piece in thunk.reads]
    copies = body[-1].copies if isinstance(body[-1], ParallelCopyThunk) else (body[-1],)
    carried = []
    for copy in copies:
        state, value = copy.destination, copy.source
        touched = [piece for other in copies if other is not copy for piece in (other.source, other.destination)]
        if (state.size == value.size and not overlaps(state, value) and any(overlaps(value, piece) for piece in written)
                and not any(overlaps(state, piece) for piece in written) and not any(overlaps(value, piece) for piece in read)
                and not any(overlaps(state, piece) or overlaps(value, piece) for piece in touched)):
            carried.append(copy)
    if not carried:
        return body, []
    kept = tuple(copy for copy in copies if copy not in carried)
    remaining = others + ([ParallelCopyThunk(body[-1].name, kept)] if kept else [])
    return remaining, [(copy.destination, copy.source) for copy in carried]


def matmul(thunk: CublasLtGemm, at) -> dict:
    gemm = thunk.gemm
    if gemm.element not in gemm_epilogues.GEMM_DTYPES:
        raise MlirxlaError(f"{gemm.name}: a {gemm.element} GEMM has no cuBLASLt lowering")
    operand_dtype, out_dtype = gemm_epilogues.GEMM_DTYPES[gemm.element]
    return {"kind": "gemm", "name": gemm.name, "operand_dtype": operand_dtype, "out_dtype": out_dtype, "compute": thunk.compute,
            "m": gemm.m, "n": gemm.n, "k": gemm.k, "batch": gemm.batch, "transpose_lhs": gemm.transpose_lhs,
            "transpose_rhs": gemm.transpose_rhs, "lhs": at(gemm.lhs), "rhs": at(gemm.rhs), "out": at(gemm.out),
            "epilogue": thunk.epilogue, "bias": None if thunk.bias is None else at(thunk.bias)}


def memcpy(thunk: CopyThunk, at) -> dict:
    return {"kind": "memcpy", "name": thunk.name, "source": at(thunk.source), "destination": at(thunk.destination),
            "bytes": thunk.source.size}


def parallel_copy(thunk: ParallelCopyThunk, at: SlabPlaces) -> list[dict]:
    """Copies that take effect together as memcpys one after another: a source another copy
    writes over is copied to the staging range first, and its copy reads it there."""
    result, sources, cursor = [], {}, at.staging
    for copy in overwritten_sources(thunk.copies):
        result.append({"kind": "memcpy", "name": f"{thunk.name} (staged)", "source": at(copy.source), "destination": cursor,
                       "bytes": copy.source.size})
        sources[id(copy)] = cursor
        cursor += align_up(copy.source.size)
    for copy in thunk.copies:
        source = sources.get(id(copy), at(copy.source))
        if source != at(copy.destination):
            result.append({"kind": "memcpy", "name": thunk.name, "source": source, "destination": at(copy.destination),
                           "bytes": copy.source.size})
    return result


def launch_thunks(thunk: KernelThunk, kernel: CudaKernel, at) -> list[dict]:
    """One `launch` per loop nest of the kernel, its arguments the slab offsets of the slices
    the kernel function's arguments point at (operands, results, then scratch)."""
    pointers = [at(piece) for piece in thunk.arguments]
    sizes = [piece.size for piece in thunk.arguments]
    if thunk.scratch is not None:
        pointers += [at(thunk.scratch) + offset for offset in thunk.scratch_offsets]
        sizes += [end - start for start, end in zip(thunk.scratch_offsets, [*thunk.scratch_offsets[1:], thunk.scratch.size])]
    result = []
    for launch in kernel.launches:
        if max(launch.arguments, default=-1) >= len(pointers):
            raise MlirxlaError(f"kernel {thunk.symbol}: a launch passes argument {max(launch.arguments)} of {len(pointers)}")
        buffers = {pointers[index]: sizes[index] for index in launch.arguments}  # an operand updated in place counts once
        result.append({"kind": "launch", "name": thunk.name, "kernel": launch.kernel, "grid": list(launch.grid),
                       "block": list(launch.block), "shared_bytes": launch.shared_bytes,
                       "arguments": [pointers[index] for index in launch.arguments], "argument_bytes": sum(buffers.values())})
    return result


# --- dumps -----------------------------------------------------------------------------------

def dump(runner: PipelineRunner, program: CudaProgram, optimized_ir: str, target: GpuTarget) -> None:
    dumps = runner.dumps
    if dumps.directory is None:
        return
    for kernel in program.kernels:
        dumps.write(f"{kernel.symbol}.stablehlo.mlir", kernel.stablehlo)
        if kernel.same_as:
            continue
        dumps.write(f"{kernel.symbol}.loops.mlir", kernel.loops)
        dumps.write(f"{kernel.symbol}.nvvm.mlir", kernel.nvvm)
        dumps.write(f"{kernel.symbol}.ll", "\n".join(k.llvm_ir for k in kernel.llvm_ir))
        dumps.write(f"{kernel.symbol}.ptx", ptx.emit_ptx(kernel.llvm_ir, target.arch)[0])
    dumps.write("kernels.ptx", program.ptx)
    dumps.write("kernels.ll", optimized_ir)
    if program.cubin is not None:
        dumps.write_bytes("kernels.cubin", program.cubin.data)
        dumps.write("kernel-resources.txt", f"ptxas -arch={target.arch} -v\n" + "".join(r.line() + "\n" for r in program.cubin.resources))
    else:
        dumps.write("kernel-resources.txt", f"not measured: no ptxas here ({ptxas.INSTALL_HINT})\n")
    dumps.write("thunk-sequence.txt", program.plan.describe(program.decisions))
    dumps.write("stream-assignment.txt", program.streams)
    dumps.write("executable.json", json.dumps(program.executable.plan, indent=1) + "\n")
