"""Kernels compile through LLVM on several threads (issue 18: kernels compile in parallel over
the cores) and that changes nothing in what the compile makes.

Each kernel's LLVM work (parse, O3, code generation) runs in an LLVM context of its own on the
compile threads (`llvm_jit.CodegenPool`), into an object of its own; the executable is an
archive of those objects. Checked here: one and two compile threads give the same kernels, the
same decisions, the same bytes and the same outputs; the compile cache stores and reloads the
archive; an LLVM error met on a compile thread is still one line naming its kernel, whether
the kernel falls back to the interpreter or the error ends the compile.
"""

import ctypes
import os
import threading

import llvmlite.binding as llvm
import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import compiler, driver_emitter, kernel_cache, llvm_jit, lowering, native_symbols, object_archive, row_programs
from mlirxla.errors import MlirxlaError
from mlirxla.runtime import compile_cache
from mlirxla.runtime.client import Client
from mlirxla.runtime.executable import Executable
from mlirxla.runtime.thunks import KernelThunk, every_thunk
from mlirxla.runtime.threads import COMPILE_VARIABLE, compile_threads

from .conftest import JAX_PROGRAMS, random_arguments, reference_outputs
from .test_compile_time import THREE_LAYERS

TRANSFORMER = os.path.join(JAX_PROGRAMS, "programs", "transformer.stablehlo.mlir")
BROKEN = "\ndefine void @broken_on_purpose() {\n  this is not an instruction\n}\n"


def transformer(context):
    with open(TRANSFORMER) as stream:
        return frontdoor.import_text(stream.read(), "transformer", context).module


def kernel_symbols(program) -> list[str]:
    return [thunk.symbol for thunk in every_thunk(program.plan.thunks) if isinstance(thunk, KernelThunk)]


def test_one_and_two_compile_threads_make_the_same_executable(context, monkeypatch):
    arguments = random_arguments(transformer(context), 5)
    programs, outputs = [], []
    for threads in ("1", "2"):
        monkeypatch.setenv(COMPILE_VARIABLE, threads)
        kernel_cache.KERNELS.clear()  # each compile lowers and optimizes every kernel
        program = compiler.compile_module(transformer(context))
        programs.append(program)
        outputs.append(Executable.of(program).execute(arguments))
    one, two = programs
    assert len(set(kernel_symbols(one))) > 5
    assert kernel_symbols(one) == kernel_symbols(two)
    assert one.decisions == two.decisions
    assert one.object_code == two.object_code
    for got_one, got_two in zip(*outputs):
        np.testing.assert_array_equal(got_one, got_two)


def test_each_compiled_kernel_is_an_object_of_its_own_and_the_forwarders_share_one(context):
    """Three equal layers: one compiled kernel, the native driver, and the shared object
    holding the two forwarders; every symbol a driver or forwarder calls is defined by another object."""
    program = compiler.compile_module(frontdoor.import_text(THREE_LAYERS, "three_layers", context).module)
    objects = object_archive.unpack(program.object_code)
    assert len(objects) == 3
    defined = [{name for name, is_defined, _ in native_symbols._symbols(code) if is_defined} for code in objects]
    kernels = kernel_symbols(program)
    assert kernels[0] in defined[0] and "driver_executable" in defined[1] and set(kernels[1:]) <= defined[2]
    needed = {name for code in objects for name in native_symbols.undefined_symbols(code)}
    assert set(kernels) <= needed and not needed & {"driver_executable"}


BF16_TANH = """
func.func @main(%x: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  %0 = stablehlo.tanh %x : tensor<64x64xbf16>
  return %0 : tensor<64x64xbf16>
}
"""


def test_the_compiler_runtime_helpers_are_compiled_once_and_shared_by_executables(context):
    """bf16 kernels may call the compiler-runtime helpers: their object, compiled once per
    process, is in the archive of every executable that may need them; the outputs of one
    bf16 op (rounded once, with excess precision or without) stay the interpreter's."""
    reference_module = frontdoor.import_text(BF16_TANH, "bf16_tanh", context).module
    arguments = random_arguments(reference_module, 3)
    expected = reference_outputs(reference_module, arguments)
    archives = []
    for _ in range(2):
        program = compiler.compile_module(frontdoor.import_text(BF16_TANH, "bf16_tanh", context).module)
        archives.append(object_archive.unpack(program.object_code))
        for got, wanted in zip(Executable.of(program).execute(arguments), expected):
            np.testing.assert_array_equal(got, wanted)
    assert all(llvm_jit.helpers_object() in objects for objects in archives)


def test_the_cache_round_trips_an_executable_of_several_objects(tmp_path, context, monkeypatch):
    monkeypatch.setenv(COMPILE_VARIABLE, "2")
    with open(TRANSFORMER) as stream:
        text = stream.read()
    arguments = random_arguments(transformer(context), 6)
    first = Client(cache_dir=str(tmp_path))
    expected = first.compile(text).execute_numpy(arguments)
    [key] = os.listdir(tmp_path)
    with open(os.path.join(tmp_path, key, compile_cache.OBJECTS), "rb") as stream:
        stored = stream.read()
    assert stored.startswith(object_archive.MAGIC) and len(object_archive.unpack(stored)) > 5
    second = Client(cache_dir=str(tmp_path))
    loaded = second.compile(text)
    assert (second.cache.hits, second.cache.misses, second.cache.corrupted) == (1, 0, 0)
    assert loaded.executable.object_code == stored
    for got, wanted in zip(loaded.execute_numpy(arguments), expected):
        np.testing.assert_array_equal(got, wanted)


def break_the_llvm_ir_of(kernel: int, monkeypatch) -> tuple[list[str], dict[str, int]]:
    """Compiles from now on get LLVM IR that LLVM refuses for the `kernel`-th kernel lowered;
    the kernels lowered, and the thread each one's LLVM work ran on."""
    translated, compiled_on = [], {}
    translate, compile_native = lowering.translate, llvm_jit.compile_native

    def translate_breaking_one(module, name):
        translated.append(name)
        return translate(module, name) + (BROKEN if len(translated) == kernel else "")

    def compile_native_noting_the_thread(name, *arguments):
        compiled_on[name] = threading.get_ident()
        return compile_native(name, *arguments)

    monkeypatch.setattr(lowering, "translate", translate_breaking_one)
    monkeypatch.setattr(llvm_jit, "compile_native", compile_native_noting_the_thread)
    return translated, compiled_on


def test_an_llvm_error_on_a_compile_thread_names_its_kernel_and_the_kernel_falls_back(context, monkeypatch):
    """LLVM refuses the second kernel's IR on a compile thread: that kernel runs on the
    interpreter, the one-line error naming it is the reason the thunk sequence gives, and the
    program computes the reference's results. The row engine is set aside: it takes one of the
    program's two loop fusions, which left it one generated kernel."""
    monkeypatch.setenv(COMPILE_VARIABLE, "2")
    monkeypatch.setattr(row_programs, "row_program", lambda op: None)
    translated, compiled_on = break_the_llvm_ir_of(2, monkeypatch)
    with open(os.path.join(JAX_PROGRAMS, "programs", "mlp_softmax_small.stablehlo.mlir")) as stream:
        module = frontdoor.import_text(stream.read(), "mlp_softmax_small", context).module
    arguments = random_arguments(module, 7)
    expected = reference_outputs(module, arguments)
    program = compiler.compile_module(module)
    broken = translated[1]
    assert compiled_on[broken] != threading.get_ident()
    assert kernel_symbols(program) == [name for name in translated if name != broken]
    [fallen_back] = [line for line in program.decisions if line.startswith(f"{broken}: runs on the reference interpreter")]
    assert f"(kernel {broken}: LLVM rejected its IR: " in fallen_back and "\n" not in fallen_back
    for got, wanted in zip(Executable.of(program).execute(arguments), expected):
        np.testing.assert_allclose(got, wanted, rtol=1e-4, atol=1e-6)


def test_an_llvm_error_in_a_kernel_that_cannot_fall_back_ends_the_compile_in_one_line(context, monkeypatch):
    """A GEMM's epilogue kernel has no interpreter fall-back: LLVM's refusal on a compile
    thread is the compile's error, one line naming the kernel."""
    monkeypatch.setenv(COMPILE_VARIABLE, "2")
    translated, compiled_on = break_the_llvm_ir_of(1, monkeypatch)
    with pytest.raises(MlirxlaError) as raised:
        compiler.compile_module(frontdoor.import_text(THREE_LAYERS, "three_layers", context).module)
    message = str(raised.value)
    assert compiled_on[translated[0]] != threading.get_ident()
    assert message.startswith(f"kernel {translated[0]}: LLVM rejected its IR: ") and "\n" not in message


def test_an_llvm_error_in_a_native_driver_on_a_compile_thread_is_one_line_naming_it(context, monkeypatch):
    monkeypatch.setenv(COMPILE_VARIABLE, "2")
    drive_executable = driver_emitter.drive_executable

    def broken_driver(*arguments):
        sources = drive_executable(*arguments)
        for source in sources:
            source.ir_text += BROKEN
        return sources

    monkeypatch.setattr(driver_emitter, "drive_executable", broken_driver)
    with pytest.raises(MlirxlaError) as raised:
        compiler.compile_module(frontdoor.import_text(THREE_LAYERS, "three_layers", context).module)
    message = str(raised.value)
    assert message.startswith("kernel driver_executable: LLVM rejected its IR: ") and "\n" not in message


def test_a_damaged_archive_is_refused_in_one_line():
    archive = object_archive.pack([b"\x7fELF first", b"second object"])
    assert object_archive.unpack(archive) == [b"\x7fELF first", b"second object"]
    with pytest.raises(MlirxlaError, match="^the native code archive is truncated at byte 78$"):
        object_archive.unpack(archive[:-4])


@pytest.mark.parametrize("value, threads", [("3", 3), ("", None)])
def test_compile_threads_follow_their_setting_else_the_runtime_threads(monkeypatch, value, threads):
    monkeypatch.setenv(COMPILE_VARIABLE, value)
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "5")
    assert compile_threads() == (threads or 5)


def test_a_bad_compile_thread_count_is_refused(monkeypatch):
    monkeypatch.setenv(COMPILE_VARIABLE, "zero")
    with pytest.raises(MlirxlaError, match=f"^{COMPILE_VARIABLE}='zero': expected a positive number of threads$"):
        compile_threads()


def test_o3_and_code_generation_run_while_llvmlite_s_lock_is_held_elsewhere():
    """llvmlite runs every call under one process-wide lock; a compile thread's O3 and code
    generation must not wait for it, or the threads would compile one at a time. Here the
    test holds the lock while another thread optimizes and emits a kernel."""
    machine = llvm_jit.target_machine()
    module = llvm.parse_assembly("define void @k(ptr %p) {\n  store float 1.0, ptr %p\n  ret void\n}\n", llvm.create_context())
    module.triple = machine.triple
    builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=3))
    passes = builder.getModulePassManager()
    emitted = []

    def optimize_and_emit():
        llvm_jit._unlocked("LLVMPY_RunNewModulePassManager")(passes, module, builder)
        error = ctypes.c_char_p()  # llvmlite's OutputString would take the lock to free itself
        emitted.append(llvm_jit._unlocked("LLVMPY_TargetMachineEmitToMemory")(machine, module, 1, ctypes.byref(error)))

    with llvm.ffi.lib._lock:
        worker = threading.Thread(target=optimize_and_emit)
        worker.start()
        worker.join(timeout=120)  # a deadlock guard, not a time limit: the work takes milliseconds
        done = not worker.is_alive()
    worker.join()
    assert done and emitted[0]
    llvm.ffi.lib.LLVMPY_DisposeMemoryBuffer(emitted[0])
