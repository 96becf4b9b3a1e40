"""GPU kernels in the NVVM dialect to PTX, through llvmlite's NVPTX target (the toolkit
translates MLIR to LLVM IR but has no PTX emission of its own).

Each `gpu.module` of a kernel function holds one outlined kernel; its functions are copied
into a plain module, translated to LLVM IR (`nvvm.kernel` functions become `ptx_kernel`s),
and renamed after their `gpu.module` (unique in the program: the launches name them so). All
kernels of a program are linked into one LLVM module with libdevice (the math functions
`convert-gpu-to-nvvm` calls, `__nv_expf`, from the `cuda` extra's `nvvm/libdevice`), which
is optimized at O3 for the target and emitted as one PTX file: one module to load on the
device.
"""

import importlib.util
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from mlirxla.backends.cpu import llvm_text
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

TRIPLE = "nvptx64-nvidia-cuda"
TARGETS = {"sm_90": "+ptx80", "sm_80": "+ptx70"}  # the H200's architecture, the A100's second
_INITIALIZED = threading.Lock()
_STATE: dict = {}


@dataclass
class KernelIr:
    """One outlined kernel as LLVM IR, named as its launches name it."""

    name: str
    llvm_ir: str


def gpu_kernels_as_llvm_ir(module: ir.Module, symbol: str) -> list[KernelIr]:
    """Every `gpu.module` of `module` (lowered to NVVM) as LLVM IR text. A constant array a
    kernel reads is a global of its module, made private so that linking keeps the globals
    of different kernels apart (it renames private symbols that clash)."""
    kernels = []
    for gpu_module in ops_named(module, "gpu.module"):
        name = ir.StringAttr(gpu_module.attributes["sym_name"]).value
        contents = [op.operation for op in gpu_module.regions[0].blocks[0].operations]  # functions, constant globals
        text = "\n".join(str(op) for op in contents)
        with module.context:
            plain = ir.Module.parse(f"module {{\n{text}\n}}")
            for op in plain.body.operations:
                if "nvvm.kernel" in op.attributes or "gpu.kernel" in op.attributes:
                    op.attributes["sym_name"] = ir.StringAttr.get(name)
                if op.operation.name == "llvm.mlir.global":
                    op.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<private>")
            if (leftover := first_unlowered(plain)) is not None:
                raise MlirxlaError(f"kernel {symbol} failed to lower to NVVM: '{leftover}' has no lowering")
            try:
                from mlirxla.mlir import llvm as llvm_dialect

                text = str(llvm_dialect.translate_module_to_llvmir(plain.operation))
            except ir.MLIRError as error:
                raise MlirxlaError(f"kernel {symbol} failed to translate to LLVM IR: {error}") from None
        kernels.append(KernelIr(name, llvm_text.downgrade(text)))
    return kernels


def first_unlowered(module: ir.Module) -> str | None:
    """The first op outside the LLVM and NVVM dialects (a conversion left it; translating
    it would crash the process), or None."""
    found = []

    def visit(op):
        name = op.operation.name
        if name != "builtin.module" and not name.startswith(("llvm.", "nvvm.")):
            found.append(name)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found[0] if found else None


def target_machine(arch: str) -> "llvm.TargetMachine":
    if arch not in TARGETS:
        raise MlirxlaError(f"unknown GPU architecture '{arch}' (known: {', '.join(TARGETS)})")
    with _INITIALIZED:
        if not _STATE:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _STATE["target"] = llvm.Target.from_triple(TRIPLE)
    return _STATE["target"].create_target_machine(cpu=arch, features=TARGETS[arch], opt=3)


def libdevice_path() -> Path | None:
    """libdevice's bitcode, from the `cuda` extra's `nvidia-cuda-nvcc-cu12` package."""
    spec = importlib.util.find_spec("nvidia.cuda_nvcc") if importlib.util.find_spec("nvidia") else None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "nvvm" / "libdevice" / "libdevice.10.bc"
    return path if path.exists() else None


def emit_ptx(kernels: list[KernelIr], arch: str = "sm_90") -> tuple[str, str]:
    """One PTX module holding every kernel; returns it and the optimized LLVM IR."""
    machine = target_machine(arch)
    linked = llvm.parse_assembly("")
    linked.triple = TRIPLE
    linked.data_layout = str(machine.target_data)
    for kernel in kernels:
        try:
            module = llvm.parse_assembly(kernel.llvm_ir)
            module.verify()
        except RuntimeError as error:
            raise MlirxlaError(f"kernel {kernel.name}: LLVM rejected its IR: {' '.join(str(error).split())}") from None
        module.triple = TRIPLE
        module.data_layout = str(machine.target_data)
        linked.link_in(module)
    needs_math = any(f.is_declaration and f.name.startswith("__nv_") for f in linked.functions)
    if needs_math:
        path = libdevice_path()
        if path is None:
            missing = sorted(f.name for f in linked.functions if f.is_declaration and f.name.startswith("__nv_"))
            raise MlirxlaError(f"the kernels call {missing[0]} (libdevice), which needs the cuda extra: pip install 'mlirxla[cuda]'")
        libdevice = llvm.parse_bitcode(path.read_bytes())
        libdevice.triple = TRIPLE
        libdevice.data_layout = str(machine.target_data)
        linked.link_in(libdevice)
        internalize_library(linked, {k.name for k in kernels})
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(linked, builder)
    undefined = [f.name for f in linked.functions if f.is_declaration and not f.name.startswith("llvm.")]
    if undefined:
        raise MlirxlaError(f"the kernels call '{undefined[0]}', which neither they nor libdevice define")
    return machine.emit_assembly(linked), str(linked)


def internalize_library(module: "llvm.ModuleRef", kernels: set[str]) -> None:
    """Give libdevice's functions internal linkage so that the optimizer drops those no
    kernel calls (otherwise all of libdevice would be emitted as PTX)."""
    for function in module.functions:
        if not function.is_declaration and function.name not in kernels:
            function.linkage = llvm.Linkage.internal


def kernel_names(ptx: str) -> list[str]:
    return re.findall(r"\.entry\s+(\w+)\s*\(", ptx)
