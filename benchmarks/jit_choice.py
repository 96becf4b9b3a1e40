"""Which JIT turns a kernel's LLVM into native code: the toolkit's ExecutionEngine or llvmlite?

The same kernels (the elementwise chain, a softmax, a dense layer's epilogue) are lowered once
to the LLVM dialect by the cpu backend's lowering; the ExecutionEngine compiles that module
(opt level 3), llvmlite compiles its LLVM IR (O3 for the host CPU, as the backend does).
Each kernel then runs on the same buffers; the script prints the median time of each, the
ratio, and whether the outputs agree, with one JSON line at the end under --json.

    python benchmarks/jit_choice.py [--repeats N] [--json]
"""

import argparse
import ctypes
import json
import statistics
import sys
import time

import numpy as np

KERNELS = {
    "chain": ("""func.func @main(%x: tensor<4194304xf32>, %y: tensor<4194304xf32>) -> tensor<4194304xf32> {
  %0 = stablehlo.add %x, %y : tensor<4194304xf32>
  %1 = stablehlo.multiply %0, %x : tensor<4194304xf32>
  %2 = stablehlo.tanh %1 : tensor<4194304xf32>
  %3 = stablehlo.subtract %2, %y : tensor<4194304xf32>
  %4 = stablehlo.exponential %3 : tensor<4194304xf32>
  return %4 : tensor<4194304xf32>
}""", [(4194304,), (4194304,)], (4194304,)),
    "softmax": ("""func.func @main(%x: tensor<512x1024xf32>) -> tensor<512x1024xf32> {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %init) applies stablehlo.maximum across dimensions = [1] : (tensor<512x1024xf32>, tensor<f32>) -> tensor<512xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<512xf32>) -> tensor<512x1024xf32>
  %d = stablehlo.subtract %x, %mb : tensor<512x1024xf32>
  %e = stablehlo.exponential %d : tensor<512x1024xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<512x1024xf32>, tensor<f32>) -> tensor<512xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<512xf32>) -> tensor<512x1024xf32>
  %r = stablehlo.divide %e, %sb : tensor<512x1024xf32>
  return %r : tensor<512x1024xf32>
}""", [(512, 1024)], (512, 1024)),
}


def single_kernel(text: str):
    """(the kernel's LLVM-dialect module, its symbol) for a module that becomes one kernel."""
    from mlirxla import frontdoor
    from mlirxla.backends.cpu import kernel_source, lowering
    from mlirxla.backends.cpu.compiler import pipeline_assignment
    from mlirxla.backends.cpu.thunk_emitter import ThunkEmitter
    from mlirxla.context import new_context
    from mlirxla.mlir import ir
    from mlirxla.pipelines import named_pipeline
    from mlirxla.pipelines.runner import PipelineRunner

    module = frontdoor.import_text(text, "kernel.mlir", new_context()).module
    runner = PipelineRunner(module)
    runner.run(named_pipeline("cpu"))
    with module.context, ir.Location.unknown():
        emission = ThunkEmitter(module, pipeline_assignment(runner)).emit()
        [spec] = [k for k in emission.kernels]
        kernel = ir.Module.create()
        kernel_source.kernel_function(kernel, spec.op, spec.symbol)
        kernel_source.finish(kernel)
        lowering.lower_to_llvm_dialect(kernel, spec.symbol)
    return kernel, spec.symbol


def llvmlite_function(module, symbol: str, arguments: int):
    from mlirxla.backends.cpu import llvm_jit, lowering

    compiled = llvm_jit.compile_native(symbol, lowering.translate(module, symbol))
    engine = llvm_jit.JitEngine(llvm_jit.object_code([compiled], b""))
    return engine, ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * arguments)(engine.address(symbol))


def execution_engine_function(module, symbol: str, arguments: int):
    """The engine's packed entry point (`_mlir_<symbol>`, one `void**` of argument addresses),
    wrapped to take the same pointers as the llvmlite function."""
    from torch_mlir.execution_engine import ExecutionEngine

    with module.context:
        engine = ExecutionEngine(module, opt_level=3)
    packed = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.raw_lookup(symbol))

    def call(*pointers):
        cells = [ctypes.c_void_p(p) for p in pointers]
        table = (ctypes.c_void_p * arguments)(*[ctypes.addressof(c) for c in cells])
        packed(ctypes.addressof(table))

    return engine, call


def median_ms(call, repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    rows = []
    print(f"{'kernel':10} {'llvmlite ms':>12} {'ExecutionEngine ms':>19} {'EE/llvmlite':>12} {'same':>5}")
    for name, (text, shapes, result_shape) in KERNELS.items():
        rng = np.random.default_rng(0)
        inputs = [(0.1 * rng.standard_normal(shape)).astype(np.float32) for shape in shapes]
        outputs = {side: np.empty(result_shape, np.float32) for side in ("llvmlite", "engine")}
        module, symbol = single_kernel(text)
        count = len(inputs) + 1
        keep_lite, lite = llvmlite_function(module, symbol, count)
        module, symbol = single_kernel(text)
        keep_engine, engine = execution_engine_function(module, symbol, count)
        lite_args = [a.ctypes.data for a in inputs] + [outputs["llvmlite"].ctypes.data]
        engine_args = [a.ctypes.data for a in inputs] + [outputs["engine"].ctypes.data]
        lite_ms = median_ms(lambda: lite(*lite_args), arguments.repeats)
        engine_ms = median_ms(lambda: engine(*engine_args), arguments.repeats)
        same = bool(np.allclose(outputs["llvmlite"], outputs["engine"], rtol=1e-5, atol=1e-6))
        rows.append({"kernel": name, "llvmlite_ms": lite_ms, "execution_engine_ms": engine_ms, "ratio": engine_ms / lite_ms, "same": same})
        print(f"{name:10} {lite_ms:12.3f} {engine_ms:19.3f} {engine_ms / lite_ms:11.2f}x {str(same):>5}")
        del keep_lite, keep_engine
    if arguments.json:
        print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
