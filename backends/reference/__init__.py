"""The reference backend: the StableHLO reference interpreter as a backend like the others.

Compiling lowers the module's entry function back to StableHLO (`runtime/reference.py`:
sharding annotations forwarded, rng_bit_generator expanded, checks turned into results) and
plans one host call that interprets it: each parameter and each output its own allocation.
No pass runs, so what it computes is the interpreter's meaning of the input, the oracle the
other backends are held to; a program the interpreter cannot run is refused at compile time.
"""

from mlirxla.backends.backend import Backend, CompiledProgram, NoCode


def compile_program(module, options) -> CompiledProgram:
    from mlirxla.ir_queries import public_entry_name
    from mlirxla.mlir import ir
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.runtime import reference
    from mlirxla.runtime.executable import ExecutablePlan, TensorSpec
    from mlirxla.runtime.thunks import BufferSlice, HostThunk

    dumps = PipelineRunner(module, options).dumps
    dumps.write("before_optimizations.mlir", str(module))
    prepared, _ = reference.prepare(module, public_entry_name(module))
    with prepared.context:
        main = reference.find_function(prepared, "main")
        function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        parameters = [TensorSpec.of(t) for t in function_type.inputs]
        results = [TensorSpec.of(t) for t in function_type.results]
    text = prepared.operation.get_asm(print_generic_op_form=True)
    sizes = [spec_bytes(spec) for spec in parameters + results]
    slices = [BufferSlice(index, 0, size) for index, size in enumerate(sizes)]
    operands = tuple((at, spec.shape, spec.dtype) for at, spec in zip(slices, parameters))
    outputs = tuple((at, spec.shape, spec.dtype) for at, spec in zip(slices[len(parameters):], results))
    thunk = HostThunk("interpret @main", "interpret", operands, outputs, {"module": text})
    plan = ExecutablePlan(parameters, [(at, spec) for (at, _, _), spec in zip(outputs, results)], sizes,
                          ["parameter"] * len(parameters) + ["output"] * len(results), {}, [thunk], backend="reference")
    dumps.write("reference.stablehlo.mlir", text)
    dumps.write("thunk-sequence.txt", plan.describe())
    return CompiledProgram(plan)


def spec_bytes(spec) -> int:
    import numpy as np

    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize


def load_code(object_code: bytes) -> NoCode:
    return NoCode()


def environment() -> str:
    from mlirxla.mlir import stablehlo

    return f"stablehlo={stablehlo.get_current_version()}"


BACKEND = Backend("reference", None, "the StableHLO reference interpreter, one host call per program", compile_program,
                  load_code, environment)
