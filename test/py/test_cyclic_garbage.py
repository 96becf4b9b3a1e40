"""A compile and a call leave nothing in reference cycles for the collector: the fusion
passes' graphs are collected as the passes end (`young_garbage.py`), LLVM modules get their
target in their text (`native_symbols.target_header`), and ctypes array types are made once
(`runtime/ctypes_arrays.py`). jax's core_test asks the same of a jit."""

import subprocess
import sys

# fusions (priority and multi-output fusion decide on graphs), a loop (a native driver and its
# address tables), a sort (a host call's views of the buffers) and bf16 values (LLVM helpers)
PROGRAM = """func.func @main(%x: tensor<64x32xf32>, %n: tensor<i32>) -> (tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xbf16>, tensor<64x32xf32>) {
  %e = stablehlo.exponential %x : tensor<64x32xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<64x32xf32>, tensor<f32>) -> tensor<64xf32>
  %b = stablehlo.convert %e : (tensor<64x32xf32>) -> tensor<64x32xbf16>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %loop:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<64x32xf32>
    cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %next = stablehlo.add %i, %c1 : tensor<i32>
      %w = stablehlo.multiply %v, %v : tensor<64x32xf32>
      stablehlo.return %next, %w : tensor<i32>, tensor<64x32xf32>
    }
  %sorted = "stablehlo.sort"(%loop#1) ({
    ^bb0(%a: tensor<f32>, %c: tensor<f32>):
      %less = stablehlo.compare LT, %a, %c : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %less : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<64x32xf32>) -> tensor<64x32xf32>
  return %e, %s, %b, %sorted : tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xbf16>, tensor<64x32xf32>
}"""


# run in a process of its own: another test's objects (a dropped client) die in cycles too
CHECK = f"""
import gc
import numpy as np
from mlirxla.runtime.client import Client, CompileOptions

PROGRAM = {PROGRAM!r}
client = Client()
first = client.compile(PROGRAM, CompileOptions())
gc.collect()
executable = client.compile(PROGRAM, CompileOptions())
x = np.random.default_rng(0).uniform(0.5, 1.0, (64, 32)).astype(np.float32)
for _ in range(3):
    results = executable.execute_numpy([x, np.array(2, np.int32)])
assert np.allclose(results[3], np.sort(x**4, axis=1), rtol=1e-6)  # not numpy.testing: importing it leaves cycles
gc.set_debug(gc.DEBUG_SAVEALL)
gc.collect()
print(sorted({{f"{{type(item).__module__}}.{{type(item).__qualname__}}" for item in gc.garbage}}))
"""


def test_a_compile_and_calls_leave_no_cycles():
    """The same program twice on one client (as jax's plugin has one): the first compile
    imports what compiling needs (importlib's metadata readers leave cycles of their own once),
    the second is the one checked. The first executable is kept: a dropped executable leaves
    its LLVM engine's module handle in a cycle (llvmlite hashes it through `ctypes.cast`, which
    puts an object into its own `_objects`)."""
    run = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
