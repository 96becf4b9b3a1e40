"""LLVM IR to native code with llvmlite (chosen over the toolkit's ExecutionEngine: the same IR
ran about 2x faster in a probe, and llvmlite's pass builder and target machine are ours to
configure).

Each kernel's LLVM module is parsed, optimized at O3 for the host CPU (its features, loop and
SLP vectorization) and compiled into a native object of its own (`compile_native`), in an LLVM
context of its own: LLVM's global context is not thread-safe, a context per kernel is. llvmlite
releases the GIL in its calls but runs every call under one process-wide lock (for the global
context's sake), so the two calls that are nearly all of a kernel's LLVM time, O3 and code
generation, are made without it (`_unlocked`) on modules, target machines and pass builders
no other thread sees: `CodegenPool` runs the kernels' LLVM work on several threads at once.
A kernel with another's code is a forwarder jumping to it (`same_code`); the forwarders and the
compiler-runtime helpers code generation may call (`native_symbols.py`) are two more objects
(`shared_objects`; the helpers' is compiled once per process). An executable's objects travel
as one archive (`object_archive.py`), which `JitEngine` loads once every symbol they need is
found in them or in this process: the same path serves a fresh compile and the compile cache.
"""

import ctypes
import functools
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

from mlirxla.errors import MlirxlaError

from . import library_cache, native_symbols, object_archive

# `runtime_library` (which imports the lowering and the MLIR toolkit's dialects, 0.2 s) is
# imported by the functions that compile: loading an executable's objects (`JitEngine`, all
# that a cached executable needs) does without it.

_INITIALIZED = threading.Lock()
_STATE: dict = {}
_THREAD_MACHINES = threading.local()

# LLVM's loop unroller at O3 (threshold 300) made the optimized IR of the benchmarks' kernels
# 3.8 MB from 0.9 MB without it, and was most of a cold compile's LLVM time. Paired runs in one
# process (docs/decisions.md) found no workload slower at 50 (run-time geomean 0.98x, masked
# attention's cold compile 3.7x shorter, the transformer's 1.9x), while 0 made the conv net's
# register-tiled convolutions 1.5x slower. llvmlite's options are process-wide: they apply to
# every LLVM compile through llvmlite in this process.
LLVM_OPTIONS = ("-unroll-threshold=50",)
# LLVM's x86 back end with avx512bf16 asserts ("Unexpected illegal type", aborting the
# process) on masked loads and stores of bf16 vectors whose length is not a power of two, which
# the SLP vectorizer makes of a bf16 transpose's strided reads (a <71 x bfloat> masked load for
# every tenth element; the loop vectorizer's masked tails, 16 or 32 lanes, are fine). A kernel
# whose optimized module declares such an intrinsic is optimized again without the SLP
# vectorizer, and without the loop vectorizer too if that made one.
BF16_MASKED_ACCESS = re.compile(r"^llvm\.masked\.[a-z]+\.v(\d+)bf16")


def illegal_bf16_access(function_name: str) -> bool:
    match = BF16_MASKED_ACCESS.match(function_name)
    return match is not None and int(match.group(1)) & (int(match.group(1)) - 1) != 0


def initialized() -> dict:
    """LLVM's host target, initialized once per process: the target, the CPU and its features."""
    with _INITIALIZED:
        if not _STATE:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            for option in LLVM_OPTIONS:
                llvm.set_option("mlirxla", option)
            _STATE["target"] = llvm.Target.from_default_triple()
            _STATE["cpu"] = llvm.get_host_cpu_name()
            _STATE["features"] = llvm.get_host_cpu_features().flatten()
    return _STATE


def target_machine(opt: int = 3) -> "llvm.TargetMachine":
    """A new target machine for the host at code-generation level `opt`."""
    state = initialized()
    return state["target"].create_target_machine(opt=opt, cpu=state["cpu"], features=state["features"], jit=True)


def thread_machine(opt: int = 3) -> "llvm.TargetMachine":
    """This thread's target machine at code-generation level `opt`, made once per thread: O3
    and code generation use a machine no other thread uses, and making one took 0.25 ms, four
    times in a small program's compile. (An MCJIT engine owns the machine it is given, so
    `JitEngine` makes its own.)"""
    machines = _THREAD_MACHINES.__dict__.setdefault("by_level", {})
    if opt not in machines:
        machines[opt] = target_machine(opt)
    return machines[opt]


def host_triple() -> str:
    """The host's target triple, as LLVM names it (`x86_64-unknown-linux-gnu`)."""
    return initialized()["target"].triple


def host_cpu() -> str:
    """The host CPU and its features, as LLVM sees them, the LLVM options the kernels are
    compiled with and whether they may call the vector math library (part of the compile
    cache's key)."""
    initialized()
    vector_math = native_symbols.VECTOR_MATH_LIBRARY if native_symbols.load_vector_math() else "no vector math"
    return f"{_STATE['cpu']}:{_STATE['features']}:{' '.join(LLVM_OPTIONS)}:{vector_math}"


@dataclass
class OptimizedKernel:
    name: str
    ir_without_opt: str
    object_code: bytes = b""  # its own native object; a forwarder's code is in the shared object
    optimized_ir: str = ""  # kept only when the dumps ask: printing a large kernel's IR costs as much as its compile
    return_type: str = "void"
    parameters: tuple[str, ...] = ()  # what a forwarder running this kernel's code declares
    forwards: bool = False  # `same_code`'s tail call into another kernel, or a `library_call`: its text is the optimized one

    @property
    def ir_with_opt(self) -> str:
        return self.ir_without_opt if self.forwards else self.optimized_ir


def optimize(name: str, ir_text: str, linked: frozenset[str], context: "llvm.ContextRef",
             machine: "llvm.TargetMachine") -> "llvm.ModuleRef":
    """Parse and optimize one kernel's LLVM IR at O3 for `machine`, in `context` (both ones no
    other thread uses: O3 runs without llvmlite's lock); `linked` are the functions it calls
    that other objects of the executable define (a native driver calls the kernels)."""
    from . import runtime_library

    for slp, loops in ((True, True), (False, True), (False, False)):
        module = parsed(name, ir_text, context, machine)
        run_o3(machine, module, slp, loops)
        if not any(illegal_bf16_access(function.name) for function in module.functions if function.is_declaration):
            break
    for function in module.functions:
        if function.is_declaration and not function.name.startswith("llvm.") and function.name not in linked \
                and function.name not in runtime_library.FUNCTIONS and native_symbols.process_address(function.name) is None:
            missing = function.name
            module.close()
            raise MlirxlaError(f"kernel {name} calls '{missing}', which this process does not provide")
    return module


def parsed(name: str, ir_text: str, context: "llvm.ContextRef", machine: "llvm.TargetMachine") -> "llvm.ModuleRef":
    """`ir_text` parsed and verified in `context`. A module that fails verification is
    disposed before the error is raised: the error's frames hold both, and the collector,
    freeing the context first, left the module to dispose itself in a freed context (a
    segmentation fault after the error was reported)."""
    try:
        module = llvm.parse_assembly(native_symbols.target_header(machine) + ir_text, context)
    except RuntimeError as error:
        raise rejected(name, error) from None
    try:
        module.verify()
    except RuntimeError as error:
        module.close()
        raise rejected(name, error) from None
    return module


def rejected(name: str, error: RuntimeError) -> MlirxlaError:
    return MlirxlaError(f"kernel {name}: LLVM rejected its IR: {' '.join(line.strip() for line in str(error).splitlines() if line.strip())}")


def run_o3(machine: "llvm.TargetMachine", module: "llvm.ModuleRef", slp: bool, loops: bool) -> None:
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = loops
    tuning.slp_vectorization = slp
    builder = llvm.create_pass_builder(machine, tuning)
    _unlocked("LLVMPY_RunNewModulePassManager")(builder.getModulePassManager(), module, builder)


def compile_native(name: str, ir_text: str, linked: frozenset[str] = frozenset(), keep_ir: bool = False) -> OptimizedKernel:
    """One kernel's LLVM work, safe on any thread: parsed and optimized in a context of its
    own, then compiled into its own object (its optimized IR printed first when `keep_ir`:
    code generation rewrites the module)."""
    machine = thread_machine()
    module = optimize(name, ir_text, linked, llvm.create_context(), machine)
    function = module.get_function(name)
    signature = str(function.global_value_type.get_function_return()), tuple(str(argument.type) for argument in function.arguments)
    optimized_ir = str(module) if keep_ir else ""
    return OptimizedKernel(name, ir_text, emit_object(machine, module), optimized_ir, *signature)


def _unlocked(function: str):
    """llvmlite's entry point `function` (its argument types as llvmlite declares them),
    called without llvmlite's process-wide lock: only on a module in a context of its own,
    with a target machine and a pass builder of its own (llvmlite 0.50's `ffi.lib` wraps each
    ctypes function with the lock as `_cfn`)."""
    return getattr(llvm.ffi.lib, function)._cfn


def emit_object(machine: "llvm.TargetMachine", module: "llvm.ModuleRef") -> bytes:
    """`machine.emit_object(module)` without llvmlite's lock (code generation is about half a
    kernel's LLVM time): `module` and `machine` are this thread's alone."""
    with llvm.ffi.OutputString() as error:
        buffer = _unlocked("LLVMPY_TargetMachineEmitToMemory")(machine, module, 1, error)
        if not buffer:
            raise MlirxlaError(f"code generation failed: {' '.join(str(error).split())}")
    try:
        return ctypes.string_at(llvm.ffi.lib.LLVMPY_GetBufferStart(buffer), llvm.ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        llvm.ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


def same_code(name: str, original: OptimizedKernel) -> OptimizedKernel:
    """Kernel `name`, whose code is `original`'s: a forwarder that jumps to it (a tail call costs
    one jump per call, and its code is not optimized and compiled again); compiled in the
    shared object. `musttail`: the call is a jump at any code-generation level, and the shared
    object's is the lowest (`shared_objects`)."""
    if original.return_type != "void":
        raise MlirxlaError(f"kernel {original.name} returns a value: kernels write their results through pointers")
    arguments = ", ".join(f"{kind} %{index}" for index, kind in enumerate(original.parameters))
    text = (f"; kernel {name} runs the code of {original.name} (the same StableHLO), compiled once\n"
            f"declare void @{original.name}({', '.join(original.parameters)})\n\n"
            f"define void @{name}({arguments}) {{\n"
            f"  musttail call void @{original.name}({arguments})\n"
            f"  ret void\n}}\n")
    return OptimizedKernel(name, text, forwards=True)


def shared_objects(kernels: list[OptimizedKernel]) -> list[bytes]:
    """The objects `kernels` need besides their own: the compiler-runtime helpers when the
    kernels may call them (`helpers_object`), the runtime library's functions they call
    (`library_object`), and the forwarders among them (with the kernels that are a call into
    the library), compiled at code-generation level 0: a forwarder is one jump (or call)
    either way, and LLVM's level 3 took half a millisecond per forwarder (15 ms for the 30
    of an optimizer update over 30 parameters, against 3 ms)."""
    from . import runtime_library

    objects = [helpers_object()] if any(native_symbols.may_call_helpers(kernel.ir_without_opt) for kernel in kernels) else []
    called = {name for kernel in kernels for name in runtime_library.called_functions(kernel.ir_without_opt)}
    objects += [library_object(name) for name in sorted(called)]
    forwarders = [kernel for kernel in kernels if kernel.forwards]
    if forwarders:
        context = llvm.create_context()
        machine = thread_machine(opt=0)
        module = native_symbols.helpers_module(machine, False, context)
        for forwarder in forwarders:
            part = llvm.parse_assembly(native_symbols.target_header(machine) + forwarder.ir_without_opt, context)
            part.verify()
            module.link_in(part)
        objects.append(machine.emit_object(module))
    return objects


@functools.cache
def helpers_object() -> bytes:
    """The compiler-runtime helpers' object: compiled once per process, as a runtime library
    is (its code generation costs more than a small kernel's, and it is the same for every
    executable on this host)."""
    machine = target_machine()
    return machine.emit_object(native_symbols.helpers_module(machine, True, llvm.create_context()))


@functools.cache
def library_object(function: str) -> bytes:
    """The object of the runtime library's `function` (`runtime_library.py`): optimized at O3
    for the host, compiled once per host and version (`library_cache.py`: the row engine's
    LLVM work is seconds) and read once per process."""
    return library_cache.cached_object(function, toolchain(), lambda: build_library_object(function))


def build_library_object(function: str) -> bytes:
    from . import runtime_library

    machine = target_machine()
    return emit_object(machine, optimize(function, runtime_library.function_ir(function), frozenset(), llvm.create_context(), machine))


def toolchain() -> str:
    """What compiles a library function besides its sources: the host CPU, the LLVM options
    and the versions of LLVM and llvmlite."""
    return f"{host_cpu()};llvm={'.'.join(map(str, llvm.llvm_version_info))};llvmlite={llvmlite.__version__}"


def library_call(name: str, ir_text: str) -> OptimizedKernel:
    """Kernel `name`, whose LLVM IR `ir_text` is a call into the runtime library: compiled in
    the shared object with the forwarders (there is nothing to optimize)."""
    return OptimizedKernel(name, ir_text, forwards=True)


def object_code(kernels: list[OptimizedKernel], shared: list[bytes]) -> bytes:
    """What the executable loads and the compile cache stores: every kernel's object, then
    the shared ones (`shared_objects`), as one archive (the same bytes whatever the number of
    threads)."""
    return object_archive.pack([kernel.object_code for kernel in kernels if not kernel.forwards] + shared)


class CodegenPool:
    """Runs kernels' LLVM work (`compile_native`) on `threads` threads; with
    one, on the calling thread when submitted (the serial path). Results come back in the
    order they are asked for, so the executable is the same whatever the thread count."""

    def __init__(self, threads: int, keep_ir: bool = False):
        self.keep_ir = keep_ir
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="mlirxla-codegen") if threads > 1 else None

    def native(self, name: str, ir_text: str, linked: frozenset[str] = frozenset()) -> Future:
        return self.submit(compile_native, name, ir_text, linked, self.keep_ir)

    def submit(self, function, *arguments) -> Future:
        if self.executor is not None:
            return self.executor.submit(function, *arguments)
        future = Future()
        try:
            future.set_result(function(*arguments))
        except Exception as error:
            future.set_exception(error)
        return future

    def __enter__(self) -> "CodegenPool":
        return self

    def __exit__(self, *_) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)


class JitEngine:
    """Native code for an executable's kernels (loaded from its objects), and their addresses."""

    def __init__(self, object_code: bytes):
        machine = target_machine()
        self.empty = llvm.parse_assembly(native_symbols.target_header(machine))  # the engine owns it; kept referenced for its lifetime
        self.engine = llvm.create_mcjit_compiler(self.empty, machine)
        objects = object_archive.unpack(object_code)
        native_symbols.resolve(objects)
        for code in objects:
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        self.engine.finalize_object()

    def address(self, symbol: str) -> int:
        address = self.engine.get_function_address(symbol)
        if not address:
            raise MlirxlaError(f"no native code for kernel {symbol}")
        return address
