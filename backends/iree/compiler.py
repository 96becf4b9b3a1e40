"""The iree backend's compiler: an imported xhlo module in, an IREE module out.

1. The iree pipeline (`pipelines/iree.py`): sharding removal on one partition, rng expansion,
   simplification to a fixed point; dumps as the pipeline runner writes them.
2. Back to StableHLO (`transforms/xhlo_to_stablehlo.py`), the entry function the only public
   one; ops the backend refuses are refused here with their location (`op_support.py`).
3. iree-compile for the target (`iree_compile.py`), the user's IREE flags last.
4. The plan: one `function` thunk calling the entry of the loaded module on the parameters,
   each parameter and output in an allocation of its own; the vmfb is the object code.

Dumps, in the pipeline's naming grammar (`module_NNNN.<name>.<suffix>`): the StableHLO IREE
compiles (`iree-input.stablehlo.mlir`), the command (`iree-compile.txt`), the module
(`iree.vmfb`), the dispatch list (`iree-dispatches.txt`), IREE's phase dumps and
executables (`iree.<IREE's file name>`, from `--dump-compilation-phases-to` and
`--iree-hal-dump-executable-files-to`) and the thunk sequence.
"""

from mlirxla.backends.backend import CompiledProgram
from mlirxla.backends.whole_program import one_call_plan, signature
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import entry_function, function_name, is_public, module_functions
from mlirxla.mlir import ir
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.dumps import DumpWriter
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.runtime.thunks import FunctionThunk
from mlirxla.transforms.xhlo_to_stablehlo import lower_module

from . import iree_compile, toolchain
from .op_support import refuse_unsupported


def compile_module(module: ir.Module, options: RunOptions = RunOptions(backend="iree"),
                   target: toolchain.Target | None = None) -> CompiledProgram:
    """`target`: the device to compile for (`toolchain.target()`'s, from MLIRXLA_IREE_DEVICE,
    when None; `scripts/gpu-pack` asks for cuda)."""
    target = target or toolchain.target()
    check_single_device(module)
    runner = PipelineRunner(module, options)
    runner.compile(named_pipeline("iree"))
    with module.context, ir.Location.unknown():
        lower_module(module)
        entry = only_public_entry(module)
        refuse_unsupported(module)
        parameters, results = signature(entry)
        name = function_name(entry)
        text = module.operation.get_asm(enable_debug_info=True)
    runner.dumps.write(iree_compile.INPUT_DUMP, text)
    compiled = iree_compile.compile_text(text, target, options.iree_flags, dumping=runner.dumps.directory is not None)
    description = {"device": target.device, "dispatches": compiled.dispatch_count}
    plan = one_call_plan(parameters, results,
                         lambda operands, outputs: FunctionThunk(f"iree @{name}", name, operands, outputs, description), "iree")
    decisions = [f"IREE {target.device}: {compiled.dispatch_count} dispatch(es) of {len(compiled.dispatches)} executable(s)"]
    dump_iree(runner.dumps, compiled)
    runner.dumps.write("thunk-sequence.txt", plan.describe(decisions))
    return CompiledProgram(plan, compiled.vmfb, decisions)


def check_single_device(module: ir.Module) -> None:
    config = read_config(module)
    if config.device_count > 1:
        raise MlirxlaError(
            f"the module is for {config.replica_count} replica(s) x {config.partition_count} partition(s): "
            "the iree backend runs a program on one device (it runs no collectives)"
        )


def only_public_entry(module: ir.Module) -> ir.Operation:
    """The entry function, made the module's only public one: IREE compiles every public
    function, and the program is the entry alone."""
    entry = entry_function(module)
    if entry is None:
        raise MlirxlaError("the module has no function to compile")
    name = function_name(entry)
    for function in module_functions(module):
        if function_name(function) != name and is_public(function):
            function.attributes["sym_visibility"] = ir.StringAttr.get("private")
    entry.attributes["sym_visibility"] = ir.StringAttr.get("public")
    return entry


def dump_iree(dumps: DumpWriter, compiled: iree_compile.IreeModule) -> None:
    if dumps.directory is None:
        return
    dumps.write("iree-compile.txt", " ".join(compiled.command) + "\n")
    dumps.write_bytes("iree.vmfb", compiled.vmfb)
    dumps.write("iree-dispatches.txt", f"{compiled.dispatch_count} dispatch(es) of {len(compiled.dispatches)} executable(s):\n"
                + "".join(f"  {entry}\n" for entry in compiled.dispatches) + "\n" + compiled.statistics)
    for name, data in compiled.artifacts.items():
        dumps.write_bytes(f"iree.{name.replace('/', '.')}", data)
