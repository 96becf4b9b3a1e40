"""The front door: StableHLO in every form JAX produces -> a verified xhlo module.

    load (text / bytecode / portable artifact, version clamp)
 -> quantized types as integer arithmetic (StableHLO's own passes, as XLA runs them)
 -> ApproxTopK as an exact sort and slice (as XLA:CPU computes it)
 -> inline func.call and stablehlo.composite, control_dep scheduling hints dropped,
    async_start/async_done as what they wrap
 -> chlo compositions, sharding import
 -> static shapes, constants sunk into computations, ops newer than the toolkit
 -> StableHLO -> xhlo, module config
 -> verify
"""

import io
from dataclasses import dataclass

from mlirxla import phases
from mlirxla.dialects.xhlo.config import CONFIG, ModuleConfig, read_config, write_config
from mlirxla.errors import MlirxlaError, first_line, location_text
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir, passmanager, stablehlo
from mlirxla.transforms import call_inliner, erasure

from . import approx_top_k, async_regions, bytecode, check_calls, chlo_rules, chlo_to_xhlo, control_dependencies, layout_constraints, memory_placements, newer_ops, shardings, stablehlo_to_xhlo
from .load import Loaded, load_bytes, load_file, load_text

__all__ = ["Imported", "import_file", "import_bytes", "import_text", "import_loaded"]


@dataclass(frozen=True)
class Imported:
    """An xhlo module and the facts about the input it came from."""

    module: ir.Module
    source: str
    form: str
    artifact_version: str | None


def composites_to_calls(module: ir.Module) -> None:
    """stablehlo.composite -> func.call of its decomposition, so that inlining takes it; a
    composite of a chlo op this front door composes (jax serializes erf, sinh, cosh, asin,
    asinh, acosh, atanh and top_k so for a plugin) becomes that chlo op again, as XLA's
    `chlo-recompose-ops` does: the plugin computes them as a module's text does and as
    XLA:CPU does (its erf intrinsic's bits, where jaxlib's decomposition clamps)."""
    from mlirxla.mlir import func

    for op in ops_named(module, "stablehlo.composite"):
        name = ir.StringAttr(op.attributes["name"]).value
        with ir.InsertionPoint(op), op.location:
            if name in chlo_rules.CHLO_RULES:
                replacement = ir.Operation.create(name, [r.type for r in op.results], list(op.operands), composite_attributes(op))
            else:
                callee = ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value
                replacement = func.CallOp([r.type for r in op.results], callee, list(op.operands)).operation
        stablehlo_to_xhlo.replace_op(op, replacement)


def composite_attributes(op: ir.Operation) -> dict[str, ir.Attribute]:
    if "composite_attributes" not in op.attributes:
        return {}
    return {named.name: named.attr for named in ir.DictAttr(op.attributes["composite_attributes"])}


def inline_calls(module: ir.Module) -> None:
    """Inline every func.call, wherever it sits (the xhlo call inliner's machinery: MLIR's
    inliner leaves calls of functions holding ops of dialects it cannot inline)."""
    call_inliner.inline_calls(module, "func.call", call_inliner.every_function)


def module_config(module: ir.Module) -> ModuleConfig:
    """The module's own `xhlo.config` if it has one, else the counts JAX records (mhlo.num_*)."""
    attributes = module.operation.attributes
    if CONFIG in attributes:
        return read_config(module)
    count = lambda key: ir.IntegerAttr(attributes[key]).value if key in attributes else 1
    return ModuleConfig(replica_count=count("mhlo.num_replicas"), partition_count=count("mhlo.num_partitions"))


ALLOWED_OPS = frozenset({"builtin.module", "func.func", "func.return"})
ALLOWED_DIALECTS = ("xhlo.", "check.")


def refuse_foreign_ops(module: ir.Module) -> None:
    """After legalization only xhlo, check and function structure may remain."""
    found = []

    def visit(op):
        name = op.operation.name
        if name not in ALLOWED_OPS and not name.startswith(ALLOWED_DIALECTS):
            found.append(op.operation)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if found:
        op = found[0]
        dialect = op.name.split(".")[0]
        known = dialect in ("stablehlo", "chlo", "func", "sdy", "mhlo")
        problem = f"unsupported op '{op.name}'" if known else f"unsupported op '{op.name}' (dialect '{dialect}' is not StableHLO)"
        raise MlirxlaError(problem, location_text(op.location))


def verify(module: ir.Module, source: str) -> None:
    from mlirxla.transforms.verifier import verify_module

    verify_module(module, source)


QUANTIZED_TO_INTEGERS = (
    "builtin.module(func.func(stablehlo-legalize-quantized-op-to-qdq), func.func(stablehlo-legalize-quant-to-math))"
)


def dequantize(module: ir.Module) -> None:
    """Ops on `!quant.uniform` tensors become dequantize, the op in floats, quantize; then
    quantize and dequantize become integer and float arithmetic (clamps, rounding, converts;
    chlo broadcasts that the chlo step composes): StableHLO's own legalizations, which XLA runs
    on quantized StableHLO too. The step runs on a module holding quantized types (`quantized`)."""
    stablehlo.register_stablehlo_passes()
    try:
        passmanager.PassManager.parse(QUANTIZED_TO_INTEGERS).run(module.operation)
    except ir.MLIRError as error:
        raise MlirxlaError(f"quantized types: {first_line(error)}") from None


def quantized(module: ir.Module) -> bool:
    return mentions_quant_dialect(module) and "!quant." in module.operation.get_asm(print_generic_op_form=True)


def mentions_quant_dialect(module: ir.Module) -> bool:
    """Whether the module's bytecode names the quant dialect among its strings: a quantized
    type is written under its dialect's name, so a module without that name holds none. Writing the
    bytecode is a tenth of printing the module, which every import paid to look for `!quant.`."""
    data = io.BytesIO()
    module.operation.write_bytecode(data)
    return bytecode.names_dialect(data.getvalue(), "quant")


def configure(module: ir.Module) -> None:
    write_config(module, module_config(module))


class OpNames:
    """The names of the ops a module holds, for the steps that look for ops of a few names:
    one walk answers them all, where each step walked the module for its own (a Python call
    per op, about 0.4 ms a walk on a module of 850 ops). Read again once a step that ran may
    have changed the module (`changed`)."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.names: frozenset[str] | None = None

    def held(self) -> frozenset[str]:
        if self.names is None:
            found = set()

            def visit(op):
                found.add(op.name)
                return ir.WalkResult.ADVANCE

            self.module.operation.walk(visit)
            self.names = frozenset(found)
        return self.names

    def changed(self) -> None:
        self.names = None


def named(*names: str):
    return lambda ops: not ops.held().isdisjoint(names)


def in_dialect(dialect: str):
    return lambda ops: any(name.startswith(f"{dialect}.") for name in ops.held())


# The front door's steps in order, each run as a stage that names itself when it fails, with
# what the module must hold for it to change anything (None: it runs on every module): a
# step looking for ops of a few names runs only where the module holds one (and then finds
# them itself, as before), so that a module without any is spared its walk.
STEPS = (
    # first: the ops a manual computation's body holds that name functions come renamed
    ("sharding preparation", shardings.prepare, named("sdy.manual_computation")),
    ("composites to calls", composites_to_calls, named("stablehlo.composite")),
    # before the async regions: a hint may name a future
    ("control dependencies", control_dependencies.drop_control_dependencies, named("stablehlo.custom_call")),
    ("async regions", async_regions.inline_async_regions, named(async_regions.START)),
    ("check calls", check_calls.custom_calls_to_checks, named("stablehlo.custom_call")),
    ("interpreter prints", check_calls.prints_to_custom_calls, named("interpreter.print")),
    ("quantized types", dequantize, lambda ops: quantized(ops.module)),
    ("ApproxTopK as sort", approx_top_k.expand_approx_top_k, named("stablehlo.custom_call")),
    ("memory placements", memory_placements.placements_to_values, named("stablehlo.custom_call")),
    ("layout constraints", layout_constraints.constraints_to_values, named("stablehlo.custom_call")),
    ("chlo compositions", chlo_to_xhlo.legalize_chlo, in_dialect("chlo")),
    ("inlining", inline_calls, named("func.call")),
    ("sharding import", shardings.import_shardings, None),
    ("static shapes", stablehlo_to_xhlo.staticize, named(*stablehlo_to_xhlo.DYNAMIC_OPS)),
    ("captured constants", stablehlo_to_xhlo.sink_captured_constants, named(*stablehlo_to_xhlo.COMPUTATION_OPS)),
    ("newer ops", stablehlo_to_xhlo.legalize_newer_ops, in_dialect(newer_ops.DIALECT)),
    ("StableHLO to xhlo", stablehlo_to_xhlo.legalize_module, None),
    ("foreign ops", refuse_foreign_ops, None),
    ("module config", configure, None),
)


def import_loaded(loaded: Loaded) -> Imported:
    module = loaded.module
    ops = OpNames(module)
    try:
        with module.context, ir.Location.unknown():
            for name, step, needs in STEPS:
                if needs is not None and not needs(ops):
                    continue
                with erasure.stage(f"front door step '{name}'"):
                    step(module)
                ops.changed()
            verify(module, loaded.source)
    except MlirxlaError as error:
        raise error.with_source(loaded.source) from None
    return Imported(module, loaded.source, loaded.form, loaded.artifact_version)


def import_file(path: str, context: ir.Context) -> Imported:
    with phases.phase("frontdoor", path):
        return import_loaded(load_file(path, context))


def import_bytes(data: bytes, source: str, context: ir.Context) -> Imported:
    with phases.phase("frontdoor", source):
        return import_loaded(load_bytes(data, source, context))


def import_text(text: str, source: str, context: ir.Context) -> Imported:
    with phases.phase("frontdoor", source):
        return import_loaded(load_text(text, source, context))
