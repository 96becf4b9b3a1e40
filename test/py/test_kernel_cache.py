"""A kernel compiled earlier in the process is not lowered or optimized again by a later compile
that has it (`backends/cpu/kernel_cache.py`): same symbol, same StableHLO, same variant.

Checked here: a second program sharing a kernel with the first lowers only its other kernels,
computes the reference's outputs, and carries the very object the first compile made; the
same program compiled twice makes the same bytes; a compile that dumps gets each kernel's
optimized IR; settings that change a kernel's code keep the kernels apart; the budget drops
the least recently used kernels and 0 keeps none; a bad budget is one line; compiles on several
threads at once share it.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import compiler, kernel_cache, llvm_jit, object_archive
from mlirxla.errors import MlirxlaError
from mlirxla.pipelines.runner import RunOptions
from mlirxla.runtime.client import Client
from mlirxla.runtime.executable import Executable
from mlirxla.runtime.thunks import KernelThunk, every_thunk

from .conftest import random_arguments, reference_outputs

LAYER = """
  %h = stablehlo.constant dense<5.000000e-01> : tensor<8x16xf32>
  %0 = stablehlo.tanh %x : tensor<8x16xf32>
  %1 = stablehlo.multiply %0, %h : tensor<8x16xf32>
  %2 = stablehlo.add %1, %x : tensor<8x16xf32>
"""
ONE_KERNEL = "func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {" + LAYER + """
  return %2 : tensor<8x16xf32>
}
"""
# the same kernel, and a second one (the logistic of a square) after a GEMM
TWO_KERNELS = "func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {" + LAYER + """
  %3 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %4 = stablehlo.multiply %3, %3 : tensor<8x16xf32>
  %5 = stablehlo.logistic %4 : tensor<8x16xf32>
  return %2, %5 : tensor<8x16xf32>, tensor<8x16xf32>
}
"""


def compiled(text: str, context, options: RunOptions = RunOptions()):
    return compiler.compile_module(frontdoor.import_text(text, "kernels", context).module, options)


def kernel_symbols(program) -> list[str]:
    return [thunk.symbol for thunk in every_thunk(program.plan.thunks) if isinstance(thunk, KernelThunk)]


@pytest.fixture
def lowered(monkeypatch) -> list[str]:
    """The kernels (and drivers) whose LLVM work a compile does from now on."""
    names = []
    compile_native = llvm_jit.compile_native
    monkeypatch.setattr(llvm_jit, "compile_native", lambda name, *rest: names.append(name) or compile_native(name, *rest))
    return names


def test_a_kernel_compiled_by_an_earlier_program_is_reused_by_the_next(context, lowered):
    first = compiled(ONE_KERNEL, context)
    [shared] = kernel_symbols(first)
    assert shared in lowered
    lowered.clear()
    hits = kernel_cache.KERNELS.hits
    second_module = frontdoor.import_text(TWO_KERNELS, "kernels", context).module
    arguments = random_arguments(second_module, 4)
    expected = reference_outputs(second_module, arguments)
    second = compiled(TWO_KERNELS, context)
    assert shared in kernel_symbols(second) and len(kernel_symbols(second)) == 2
    assert shared not in lowered and set(kernel_symbols(second)) - {shared} <= set(lowered)
    assert kernel_cache.KERNELS.hits == hits + 1
    first_objects = object_archive.unpack(first.object_code)
    assert first_objects[0] in object_archive.unpack(second.object_code)
    for got, wanted in zip(Executable.of(second).execute(arguments), expected):
        np.testing.assert_allclose(got, wanted, rtol=1e-5, atol=1e-6)


def test_the_same_program_compiled_again_makes_the_same_bytes_without_lowering_a_kernel(context, lowered):
    first = compiled(TWO_KERNELS, context)
    lowered.clear()
    again = compiled(TWO_KERNELS, context)
    assert not set(kernel_symbols(again)) & set(lowered)
    assert again.object_code == first.object_code and again.decisions == first.decisions


def test_a_compile_that_dumps_gets_every_kernels_optimized_ir(tmp_path, context, lowered):
    compiled(ONE_KERNEL, context)
    [shared] = kernel_symbols(compiled(ONE_KERNEL, context))
    lowered.clear()
    compiled(ONE_KERNEL, context, RunOptions(dump_to=str(tmp_path)))
    assert shared in lowered
    [optimized] = [name for name in os.listdir(tmp_path) if name.endswith(f"{shared}.ir-with-opt.ll")]
    with open(tmp_path / optimized) as stream:
        assert f"define void @{shared}(" in stream.read()
    lowered.clear()
    compiled(ONE_KERNEL, context, RunOptions(dump_to=str(tmp_path / "again")))
    assert shared not in lowered


def test_kernels_made_with_other_settings_are_kept_apart(context, lowered):
    [shared] = kernel_symbols(compiled(ONE_KERNEL, context))
    lowered.clear()
    compiled(ONE_KERNEL, context, RunOptions(flush_denormals=False))
    assert shared in lowered


def test_the_budget_drops_the_least_recently_used_kernels(context, lowered, monkeypatch):
    [shared] = kernel_symbols(compiled(ONE_KERNEL, context))
    [entry] = kernel_cache.KERNELS.entries.values()
    monkeypatch.setattr(kernel_cache, "budget", lambda: kernel_cache.kernel_bytes(entry) + 1)
    compiled(TWO_KERNELS, context)
    assert list(kernel_cache.KERNELS.entries) == [key for key in kernel_cache.KERNELS.entries if key[1] != shared]
    assert kernel_cache.KERNELS.held <= kernel_cache.budget()
    lowered.clear()
    compiled(ONE_KERNEL, context)
    assert shared in lowered


def test_a_budget_of_0_keeps_no_kernel(context, lowered, monkeypatch):
    monkeypatch.setenv(kernel_cache.VARIABLE, "0")
    [shared] = kernel_symbols(compiled(ONE_KERNEL, context))
    assert not kernel_cache.KERNELS.entries
    lowered.clear()
    compiled(ONE_KERNEL, context)
    assert shared in lowered


def test_a_budget_that_is_not_a_number_of_megabytes_is_one_line(context, monkeypatch):
    monkeypatch.setenv(kernel_cache.VARIABLE, "lots")
    with pytest.raises(MlirxlaError, match=r"^MLIRXLA_KERNEL_CACHE_MB='lots': expected a whole number of megabytes") as error:
        compiled(ONE_KERNEL, context)
    assert "\n" not in str(error.value)


def test_compiles_on_several_threads_share_the_kernels_and_compute_the_reference(context):
    """Four threads compile the two programs twice each at once (jax compiles on its own
    threads): every executable computes the reference's outputs, and the cache holds each
    kernel once, its byte count the sum of its entries'."""
    module = frontdoor.import_text(TWO_KERNELS, "kernels", context).module
    arguments = random_arguments(module, 5)
    expected = reference_outputs(module, arguments)
    texts = [TWO_KERNELS, ONE_KERNEL] * 4
    with ThreadPoolExecutor(4) as pool:
        clients = list(pool.map(lambda text: Client().compile(text), texts))
    for text, executable in zip(texts, clients):
        outputs = executable.execute_numpy(arguments if text == TWO_KERNELS else arguments[:1])
        wanted = expected if text == TWO_KERNELS else expected[:1]
        for got, want in zip(outputs, wanted):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    entries = kernel_cache.KERNELS.entries
    assert len(entries) == 2 and kernel_cache.KERNELS.held == sum(map(kernel_cache.kernel_bytes, entries.values()))
