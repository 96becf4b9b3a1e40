"""The reference executor: run an xhlo function through the StableHLO reference interpreter.

This is the oracle every later backend is held to. The module is cloned, lowered to
StableHLO, trimmed to the entry function (renamed `main`, as the interpreter requires) and
what it calls; `check` ops are removed and the values they check are appended to the
function's results, so that the checks are judged on the interpreter's outputs
(`checks.judge`). The interpreter aborts the process on ops it does not know, so every op
is checked against the set it evaluates before it runs.
"""

from dataclasses import dataclass

import numpy as np

from mlirxla.dialects.check import is_check
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.errors import MlirxlaError, first_line, location_text
from mlirxla.ir_queries import first_op_where, ops_where, public_entry_name, public_function_names
from mlirxla.mlir import func, ir, stablehlo
from mlirxla.transforms.rng_bit_generator_expander import RngBitGeneratorExpanderPass
from mlirxla.transforms.sharding_remover import forward_annotations
from mlirxla.transforms.xhlo_to_stablehlo import lower_module

from . import isolated, literals

# Ops the reference interpreter evaluates in one process (anything else aborts the process:
# cholesky, dot, rng and rng_bit_generator do ("unsupported at the moment"); collectives,
# replica_id and partition_id need its multi-process `run_parallel` mode).
INTERPRETABLE_OPS = frozenset(
    "stablehlo." + name
    for name in """abs add after_all and atan2 batch_norm_grad
    batch_norm_inference batch_norm_training bitcast_convert broadcast broadcast_in_dim case cbrt
    ceil clamp compare complex concatenate constant
    convert convolution cosine count_leading_zeros divide dot_general dynamic_slice
    dynamic_update_slice exponential exponential_minus_one fft floor gather get_tuple_element if imag
    iota is_finite log log_plus_one logistic map maximum minimum multiply negate not
    optimization_barrier or pad popcnt power real reduce reduce_precision
    reduce_window remainder reshape return reverse round_nearest_afz
    round_nearest_even rsqrt scatter select select_and_scatter shift_left shift_right_arithmetic
    shift_right_logical sign sine slice sort sqrt subtract tan tanh transpose triangular_solve tuple
    while xor""".split()
) | {"func.func", "func.call", "func.return", "builtin.module"}


@dataclass(frozen=True)
class CheckRecord:
    """One check op: its kind, attributes, and which outputs hold its operands."""

    name: str
    attributes: dict
    output_indices: tuple[int, ...]
    location: str


@dataclass(frozen=True)
class Execution:
    """What the interpreter returned: the entry function's results, then the checked values."""

    values: list[ir.Attribute]
    result_count: int
    checks: list[CheckRecord]

    @property
    def outputs(self) -> list[ir.Attribute]:
        return self.values[: self.result_count]

    def checked_values(self, check: CheckRecord) -> list[ir.Attribute]:
        return [self.values[i] for i in check.output_indices]


def find_function(module: ir.Module, name: str) -> func.FuncOp:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    raise MlirxlaError(f"no function @{name} in the module")


def trim_to_entry(module: ir.Module, entry: str) -> None:
    """Keep only `entry` (renamed `main`) and the private functions; drop the other public ones."""
    public = set(public_function_names(module))
    for op in list(module.body.operations):
        if op.operation.name != "func.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if name == entry:
            op.attributes["sym_name"] = ir.StringAttr.get("main")
            op.attributes["sym_visibility"] = ir.StringAttr.get("public")
        elif name in public or name == "main":
            op.erase()


def extract_checks(function: ir.Operation) -> list[CheckRecord]:
    """Remove check ops from `function` and return their operands as extra results."""
    body = function.regions[0].blocks[0]
    operations = list(body.operations)
    terminator = operations[-1]
    results = list(terminator.operands)
    records = []
    for op in ops_where(function, is_check):
        indices = []
        for value in op.operands:
            indices.append(len(results))
            results.append(value)
        attrs = {name: op.attributes[name] for name in op.attributes}
        records.append(CheckRecord(op.name, attrs, tuple(indices), location_text(op.location)))
        op.erase()
    with ir.InsertionPoint(terminator), terminator.location:
        func.ReturnOp(results)
    terminator.erase()
    function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    function.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(function_type.inputs), [v.type for v in results])
    )
    if "res_attrs" in function.attributes:  # one attribute dictionary per result, the new ones empty
        kept = list(ir.ArrayAttr(function.attributes["res_attrs"]))
        function.attributes["res_attrs"] = ir.ArrayAttr.get(kept + [ir.DictAttr.get({})] * (len(results) - len(kept)))
    return records


def uninterpretable_op(module: ir.Module) -> ir.Operation | None:
    return first_op_where(module, lambda op: op.name not in INTERPRETABLE_OPS or batched_triangular_solve(op))


def batched_triangular_solve(op: ir.Operation) -> bool:
    """The interpreter aborts the process on a triangular solve with batch dimensions
    ("Incompatible index and shape found while flattening index")."""
    return op.name == "stablehlo.triangular_solve" and ir.RankedTensorType(op.operands[0].type).rank > 2


def prepare(module: ir.Module, entry: str) -> tuple[ir.Module, list[CheckRecord]]:
    """A StableHLO clone of `module` whose `main` is `entry` with checks turned into results."""
    clone = ir.Module.parse(module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True), module.context)
    with clone.context, ir.Location.unknown():
        function = find_function(clone, entry)
        checks = extract_checks(function.operation)
        trim_to_entry(clone, entry)
        if read_config(clone).partition_count == 1:
            forward_annotations(clone)
        RngBitGeneratorExpanderPass().run(clone)
        lower_module(clone)
    if (bad := uninterpretable_op(clone)) is not None:
        raise MlirxlaError(f"the reference interpreter cannot evaluate '{bad.name}'", location_text(bad.location))
    return clone, checks


def argument_types(module: ir.Module, entry: str) -> list[ir.Type]:
    function = find_function(module, entry)
    return list(ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).inputs)


def check_arguments(types: list[ir.Type], arguments: list[np.ndarray], entry: str) -> None:
    if len(arguments) != len(types):
        raise MlirxlaError(f"@{entry} takes {len(types)} arguments, got {len(arguments)}")
    for index, (expected, array) in enumerate(zip(types, arguments)):
        shaped = ir.RankedTensorType(expected)
        want_dtype = literals.storage_dtype(shaped.element_type)
        if list(array.shape) != list(shaped.shape):
            raise MlirxlaError(f"argument #{index} of @{entry}: expected shape {list(shaped.shape)} ({expected}), got {list(array.shape)}")
        if array.dtype != want_dtype:
            raise MlirxlaError(f"argument #{index} of @{entry}: expected dtype {want_dtype} ({expected}), got {array.dtype}")


def execute(module: ir.Module, arguments: list[np.ndarray], entry: str | None = None) -> Execution:
    """Run `entry` (default: main or the first public function) on numpy `arguments`."""
    entry = entry or public_entry_name(module)
    types = argument_types(module, entry)
    check_arguments(types, arguments, entry)
    prepared, checks = prepare(module, entry)
    with prepared.context:
        attrs = [literals.to_attribute(a, t) for a, t in zip(arguments, types)]
        if isolated.may_crash(prepared):
            outputs = isolated.evaluate_in_child(prepared, attrs)
        else:
            try:
                outputs = stablehlo.eval_module(prepared, attrs)
            except Exception as error:
                raise MlirxlaError(f"the reference interpreter failed: {first_line(error)}") from None
    result_count = len(ir.FunctionType(ir.TypeAttr(find_function(module, entry).attributes["function_type"]).value).results)
    return Execution(list(outputs), result_count, checks)
