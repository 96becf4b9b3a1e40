"""The autotuner's half that runs here (XLA compiles its autotuning candidates in the
compiler; here the compiler and the GPU are on different machines): every kernel the row or
column emitter makes in a program, compiled once per candidate tiling (`autotune.candidate_row_tilings`)
to PTX, with its launch and the byte sizes of the buffers it takes. `scripts/gpu-pack`
writes them to the pack's `tuning.json`; `gpu-check --tune` on the GPU times each
candidate on scratch buffers and writes the autotune results file (`autotune.py`) that the
compiler then reads.
"""

from dataclasses import asdict, dataclass

from mlirxla.backends.cpu import compiler as cpu_compiler
from mlirxla.backends.cpu.emitters.kernels import KernelSpec
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.transforms import erasure

from . import autotune, compiler, launches, lowering, ptx
from .target import GpuTarget, H200


@dataclass
class Candidate:
    emitter: str
    tiling: dict
    default: bool
    entry: str
    grid: list[int]
    block: list[int]
    arguments: list[int]  # which of the job's buffers each kernel pointer is
    ptx: str


@dataclass
class TuningJob:
    fingerprint: str
    kernel: str
    buffer_bytes: list[int]
    candidates: list[Candidate]

    def as_json(self) -> dict:
        return asdict(self)


def tuning_jobs(module: ir.Module, options: RunOptions = RunOptions(backend="cuda"), target: GpuTarget = H200) -> list[TuningJob]:
    """One job per distinct emitter kernel of the program (by fingerprint) with more than one
    candidate tiling."""
    runner = PipelineRunner(module, options)
    runner.compile(named_pipeline("cuda"))
    jobs: dict[str, TuningJob] = {}
    with runner.module.context, ir.Location.unknown():
        assignment = cpu_compiler.pipeline_assignment(runner)
        for spec in compiler.emit_thunks(runner.module, assignment).kernels:
            if spec.interpret is not None:
                continue
            with erasure.stage(f"cuda tuning job '{spec.symbol}'"):
                job = kernel_job(spec, target, jobs)
            if job is not None:
                jobs[job.fingerprint] = job
    return list(jobs.values())


def kernel_job(spec: KernelSpec, target: GpuTarget, known: dict) -> TuningJob | None:
    probe, _, _ = cpu_compiler.kernel_stablehlo(spec, lanes=False)
    mapped = lowering.map_to_blocks_and_threads(probe, spec.symbol)
    tunable = [nest.tunable for nest in mapped.nests if nest.tunable is not None]
    if not tunable or tunable[0].fingerprint in known or len(tunable[0].candidates) < 2:
        return None  # nothing to choose
    (function,) = ops_named(probe, "func.func")
    buffer_bytes = [memref_bytes(argument.type) for argument in function.regions[0].blocks[0].arguments]
    candidates = []
    for tiling in tunable[0].candidates:
        module, _, _ = cpu_compiler.kernel_stablehlo(spec, lanes=False)
        lowering.map_to_blocks_and_threads(module, spec.symbol, tiling)
        lowering.to_nvvm(module, spec.symbol)
        (launch,) = launches.read_launches(module, spec.symbol)
        text, _ = ptx.emit_ptx(ptx.gpu_kernels_as_llvm_ir(module, spec.symbol), target.arch)
        candidates.append(Candidate(tiling.kind, asdict(tiling), tiling == tunable[0].default, launch.kernel,
                                    list(launch.grid), list(launch.block), list(launch.arguments), text))
    return TuningJob(tunable[0].fingerprint, spec.symbol, buffer_bytes, candidates)


def memref_bytes(kind: ir.Type) -> int:
    memref = ir.MemRefType(kind)
    count = 1
    for size in memref.shape:
        count *= size
    element = memref.element_type
    bits = 64 if isinstance(element, ir.IndexType) else element.width
    return max(1, count * max(1, bits // 8))
