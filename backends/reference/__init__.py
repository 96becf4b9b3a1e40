"""The reference backend: the StableHLO reference interpreter as a backend like the others.

Compiling lowers the module's entry function back to StableHLO (`runtime/reference.py`:
sharding annotations forwarded, rng_bit_generator expanded, checks turned into results) and
plans one host call that interprets it: each parameter and each output its own allocation.
No pass runs, so what it computes is the interpreter's meaning of the input, the oracle the
other backends are held to; a program the interpreter cannot run is refused at compile time.
"""

from mlirxla.backends.backend import Backend, CompiledProgram, NoCode


def compile_program(module, options) -> CompiledProgram:
    from mlirxla.backends.whole_program import one_call_plan, signature
    from mlirxla.ir_queries import public_entry_name
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.runtime import reference
    from mlirxla.runtime.thunks import HostThunk

    dumps = PipelineRunner(module, options).dumps
    dumps.write("before_optimizations.mlir", str(module))
    prepared, _ = reference.prepare(module, public_entry_name(module))
    with prepared.context:
        parameters, results = signature(reference.find_function(prepared, "main"))
    text = prepared.operation.get_asm(print_generic_op_form=True)
    plan = one_call_plan(parameters, results,
                         lambda operands, outputs: HostThunk("interpret @main", "interpret", operands, outputs, {"module": text}),
                         "reference")
    dumps.write("reference.stablehlo.mlir", text)
    dumps.write("thunk-sequence.txt", plan.describe())
    return CompiledProgram(plan)


def load_code(object_code: bytes) -> NoCode:
    return NoCode()


def environment() -> str:
    from mlirxla.mlir import stablehlo

    return f"stablehlo={stablehlo.get_current_version()}"


BACKEND = Backend("reference", None, "the StableHLO reference interpreter, one host call per program", compile_program,
                  load_code, environment)
