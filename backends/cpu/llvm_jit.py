"""LLVM IR to native code with llvmlite (chosen over the toolkit's ExecutionEngine: the same IR
ran about 2x faster in a probe, and llvmlite's pass builder and target machine are ours to
configure).

Each kernel's LLVM module is optimized on its own at O3 for the host CPU (its features,
loop and SLP vectorization), a kernel with another's code is a stub jumping to it
(`same_code`); the optimized modules are linked and compiled into one native
object (`object_code`) with the compiler-runtime helpers code generation may call
(`native_symbols.py`), which `JitEngine` loads once every symbol it needs is found in this
process: the same path serves a fresh compile and the compile cache.
"""

import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

from mlirxla.errors import MlirxlaError

from . import native_symbols

_INITIALIZED = threading.Lock()
_STATE: dict = {}

# LLVM's loop unroller at O3 (threshold 300) made the optimized IR of the benchmarks' kernels
# 3.8 MB from 0.9 MB without it, and was most of a cold compile's LLVM time. Paired runs in one
# process (docs/decisions.md) found no workload slower at 50 (run-time geomean 0.98x, masked
# attention's cold compile 3.7x shorter, the transformer's 1.9x), while 0 made the conv net's
# register-tiled convolutions 1.5x slower. llvmlite's options are process-wide: they apply to
# every LLVM compile through llvmlite in this process.
LLVM_OPTIONS = ("-unroll-threshold=50",)


def target_machine() -> "llvm.TargetMachine":
    """A new target machine for the host (LLVM is initialized once per process). New each time:
    an MCJIT engine takes ownership of the machine it is given and frees it with itself."""
    with _INITIALIZED:
        if not _STATE:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            for option in LLVM_OPTIONS:
                llvm.set_option("mlirxla", option)
            _STATE["target"] = llvm.Target.from_default_triple()
            _STATE["cpu"] = llvm.get_host_cpu_name()
            _STATE["features"] = llvm.get_host_cpu_features().flatten()
    return _STATE["target"].create_target_machine(opt=3, cpu=_STATE["cpu"], features=_STATE["features"], jit=True)


def host_cpu() -> str:
    """The host CPU and its features, as LLVM sees them, and the LLVM options the kernels are
    compiled with (part of the compile cache's key)."""
    target_machine()
    return f"{_STATE['cpu']}:{_STATE['features']}:{' '.join(LLVM_OPTIONS)}"


@dataclass
class OptimizedKernel:
    name: str
    ir_without_opt: str
    module: "llvm.ModuleRef"
    forwards: bool = False  # `same_code`'s tail call into another kernel: its text is the optimized one

    @property
    def ir_with_opt(self) -> str:
        """The optimized IR, printed only when asked (the dumps ask): printing a large kernel's
        IR costs as much as a small kernel's whole compile."""
        return self.ir_without_opt if self.forwards else str(self.module)


def optimize(name: str, ir_text: str, linked: frozenset[str] = frozenset()) -> OptimizedKernel:
    """Parse and optimize one kernel's LLVM IR at O3 for the host; `linked` are the functions it
    calls that other modules of the same object define (a native driver calls the kernels)."""
    machine = target_machine()
    try:
        module = llvm.parse_assembly(ir_text)
        module.verify()
    except RuntimeError as error:
        raise MlirxlaError(f"kernel {name}: LLVM rejected its IR: {' '.join(line.strip() for line in str(error).splitlines() if line.strip())}") from None
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    for function in module.functions:
        if function.is_declaration and not function.name.startswith("llvm.") and function.name not in linked \
                and native_symbols.process_address(function.name) is None:
            raise MlirxlaError(f"kernel {name} calls '{function.name}', which this process does not provide")
    return OptimizedKernel(name, ir_text, module)


def same_code(name: str, original: OptimizedKernel) -> OptimizedKernel:
    """Kernel `name`, whose code is `original`'s: a stub that jumps to it (a tail call costs
    one jump per call, and its code is not optimized and compiled again)."""
    function_type = original.module.get_function(original.name).global_value_type
    if str(function_type.get_function_return()) != "void":
        raise MlirxlaError(f"kernel {original.name} returns a value: kernels write their results through pointers")
    parameters = [str(parameter) for parameter in function_type.get_function_parameters()]
    arguments = ", ".join(f"{kind} %{index}" for index, kind in enumerate(parameters))
    text = (f"; kernel {name} runs the code of {original.name} (the same StableHLO), compiled once\n"
            f"declare void @{original.name}({', '.join(parameters)})\n\n"
            f"define void @{name}({arguments}) {{\n"
            f"  tail call void @{original.name}({arguments})\n"
            f"  ret void\n}}\n")
    machine = target_machine()
    module = llvm.parse_assembly(text)
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    module.verify()
    return OptimizedKernel(name, text, module, forwards=True)


class JitEngine:
    """Native code for an executable's kernels (loaded from one object), and their addresses."""

    def __init__(self, object_code: bytes):
        machine = target_machine()
        self.empty = llvm.parse_assembly("")  # the engine owns it; kept referenced for its lifetime
        self.empty.triple = machine.triple
        self.engine = llvm.create_mcjit_compiler(self.empty, machine)
        native_symbols.resolve(object_code)
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
        self.engine.finalize_object()

    def address(self, symbol: str) -> int:
        address = self.engine.get_function_address(symbol)
        if not address:
            raise MlirxlaError(f"no native code for kernel {symbol}")
        return address


def object_code(kernels: list[OptimizedKernel]) -> bytes:
    """One native object holding every kernel and, when they may call them, the
    compiler-runtime helpers (what the executable loads and the compile cache stores)."""
    machine = target_machine()
    linked = native_symbols.helpers_module(machine, any(native_symbols.may_call_helpers(kernel.ir_without_opt) for kernel in kernels))
    for kernel in kernels:
        linked.link_in(kernel.module, preserve=True)
    return machine.emit_object(linked)
