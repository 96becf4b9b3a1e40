"""Kernels flush denormals to zero as XLA:CPU runs (`backends/cpu/denormal_flushing.py`),
unless the compile options or MLIRXLA_FLUSH_DENORMALS keep gradual underflow."""

import numpy as np
import pytest

from mlirxla.backends.cpu import denormal_flushing
from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client, CompileOptions

SCALE = """
func.func @main(%x: tensor<6xf32>, %y: tensor<6xf64>) -> (tensor<6xf32>, tensor<6xf64>) {
  %a = stablehlo.constant dense<0.5> : tensor<6xf32>
  %b = stablehlo.constant dense<0.25> : tensor<6xf64>
  %0 = stablehlo.multiply %x, %a : tensor<6xf32>
  %1 = stablehlo.multiply %y, %b : tensor<6xf64>
  return %0, %1 : tensor<6xf32>, tensor<6xf64>
}
"""
# denormal operands (read as zero), normal operands with denormal products (written as zero),
# and normal products, which flushing leaves alone
SINGLES = np.array([1e-40, -2e-38, 2e-38, 4e-38, 1.0, -7.0], np.float32)
DOUBLES = np.array([1e-310, -4e-308, 3e-308, 1e-307, 1.0, 2.5], np.float64)


def scaled(options: CompileOptions) -> list[np.ndarray]:
    return Client().compile(SCALE, options).execute_numpy([SINGLES, DOUBLES])


def test_kernels_flush_denormal_operands_and_results_to_zero():
    singles, doubles = scaled(CompileOptions())
    np.testing.assert_array_equal(singles, [0.0, -0.0, 0.0, np.float32(4e-38) * np.float32(0.5), 0.5, -3.5])
    np.testing.assert_array_equal(doubles, [0.0, -0.0, 0.0, 2.5e-308, 0.25, 0.625])
    assert np.signbit(singles[1]) and np.signbit(doubles[1])


def test_the_callers_thread_keeps_gradual_underflow():
    scaled(CompileOptions())
    assert np.float32(1e-40) * np.float32(1.5) != 0.0


def test_gradual_underflow_when_asked(monkeypatch):
    singles, doubles = scaled(CompileOptions(flush_denormals=False))
    np.testing.assert_array_equal(singles, SINGLES * np.float32(0.5))
    np.testing.assert_array_equal(doubles, DOUBLES * 0.25)
    monkeypatch.setenv(denormal_flushing.VARIABLE, "0")
    np.testing.assert_array_equal(scaled(CompileOptions())[0], SINGLES * np.float32(0.5))


def test_an_unreadable_setting_is_refused(monkeypatch):
    monkeypatch.setenv(denormal_flushing.VARIABLE, "yes")
    with pytest.raises(MlirxlaError, match="MLIRXLA_FLUSH_DENORMALS='yes': expected 1"):
        denormal_flushing.flushed()


KERNEL = """declare void @other(ptr)

define void @kernel(ptr %0) {
entry:
  br label %loop
loop:
  br i1 true, label %done, label %loop
done:
  ret void
}

define void @helper(ptr %0) {
  ret void
}
"""


def test_the_entry_sets_the_bits_after_its_label_and_restores_them_before_each_return():
    text = denormal_flushing.flushing_entry(KERNEL, "kernel", "x86_64-unknown-linux-gnu")
    kernel = text[text.index("define void @kernel"):text.index("define void @helper")]
    lines = [line.strip() for line in kernel.splitlines()]
    assert lines[1] == "entry:" and lines[2] == "%mxcsr.saved = alloca i32, align 4"
    assert lines[4] == "call void @mlirxla.flushing.enter(ptr %mxcsr.saved, ptr %mxcsr.flushing)"
    assert lines[lines.index("ret void") - 1] == "call void @mlirxla.flushing.leave(ptr %mxcsr.saved)"
    assert "mxcsr" not in text[text.index("define void @helper"):text.index("declare void @llvm")]
    assert text.count("declare void @llvm.x86.sse.ldmxcsr(ptr)") == 1
    # MXCSR is written only where the bits are not set (a kernel a flushing driver calls)
    enter = text[text.index("define internal void @mlirxla.flushing.enter"):text.index("define internal void @mlirxla.flushing.leave")]
    assert f"and i32 %word, {0x8040}" in enter and "br i1 %set, label %done, label %flush" in enter
    assert denormal_flushing.flushing_entry(KERNEL, "kernel", "aarch64-unknown-linux-gnu") == KERNEL


def test_a_driver_flushes_around_its_kernels_and_they_leave_mxcsr_alone():
    """A loop's kernels run inside the executable's native driver, which sets the bits once
    (the kernels, finding them set, leave MXCSR alone): every step flushes."""
    text = """
func.func @main(%x: tensor<6xf32>) -> tensor<6xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<6xf32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %half = stablehlo.constant dense<0.5> : tensor<6xf32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %w = stablehlo.multiply %v, %half : tensor<6xf32>
      stablehlo.return %j, %w : tensor<i32>, tensor<6xf32>
    }
  return %0#1 : tensor<6xf32>
}
"""
    executable = Client().compile(text)
    assert executable.executable.plan.driver is not None
    got = executable.execute_numpy([np.array([1e-40, 8e-38, 1.6e-37, 1.0, -2.0, 4e-38], np.float32)])[0]
    np.testing.assert_array_equal(got, [0.0, 0.0, np.float32(1.6e-37) / 8, 0.125, -0.25, 0.0])


LOG = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.log %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def test_the_logarithm_of_a_denormal_is_that_of_zero_as_on_xla():
    """jax's cpu backend gives -inf for the log of a denormal (it reads as zero), as here."""
    x = np.array([1e-45, 1e-40, 1e-38, 2e-38], np.float32)
    flushed = Client().compile(LOG).execute_numpy([x])[0]
    np.testing.assert_array_equal(flushed[:3], [-np.inf] * 3)
    np.testing.assert_allclose(flushed[3], np.log(np.float64(x[3])), rtol=1e-6)
    gradual = Client().compile(LOG, CompileOptions(flush_denormals=False)).execute_numpy([x])[0]
    np.testing.assert_allclose(gradual, np.log(x.astype(np.float64)), rtol=1e-6)
