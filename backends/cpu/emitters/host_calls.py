"""Host calls: sort, FFT, triangular solve, Cholesky and scatter run as numpy on views of the
buffers (`runtime/host_calls.py`), as XLA:CPU calls runtime library functions for them, and so
do the custom calls in `HOST_CUSTOM_CALLS` (Python callbacks, jax's cpu LAPACK calls, XLA's QR
calls, `dce_sink`, the interpreter tests' prints). A host call's attributes are plain data read off the op here.
Side-effecting Python callbacks all write one byte besides their results, so that the
executor keeps them in program order."""

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.mlir import ir
from mlirxla.runtime import callbacks
from mlirxla.runtime.executable import TensorSpec
from mlirxla.runtime.thunks import BufferSlice, HostThunk
from mlirxla.transforms.custom_call_layouts import OPERAND_ORDERS, RESULT_ORDERS, inverse
from mlirxla.transforms.dead_code_elimination import has_side_effect
from mlirxla.transforms.fusion_legality import kind_of

from mlirxla.transforms.sort_comparator import comparator_keys


def emit_host_call(emitter, op: ir.Operation) -> list:
    kind = kind_of(op)
    return [host_thunk(emitter, op, kind, HOST_CALLS[kind](op))]


def emit_custom_call(emitter, op: ir.Operation) -> list:
    call, attributes_of = HOST_CUSTOM_CALLS[custom_call_target(op)]
    if call in LAPACK_CALLS:
        check_lapack_element_type(op)
    return [host_thunk(emitter, op, call, attributes_of(op) | buffer_orders(op))]


def buffer_orders(op: ir.Operation) -> dict:
    """The logical dimensions in the order each operand's and result's buffer holds them,
    where `transforms/custom_call_layouts.py` made them other than row-major: the host call
    views those buffers with the logical shapes again."""
    if OPERAND_ORDERS not in op.attributes:
        return {}
    return {key: [list(ir.DenseI64ArrayAttr(order)) for order in ir.ArrayAttr(op.attributes[name])]
            for key, name in (("operand_orders", OPERAND_ORDERS), ("result_orders", RESULT_ORDERS))}


def declared_results(op: ir.Operation) -> list:
    """The [shape, dtype] of each result the call computes, with its logical shape."""
    orders = buffer_orders(op).get("result_orders") or [list(range(ir.RankedTensorType(r.type).rank)) for r in op.results]
    results = []
    for result, order in zip(op.results, orders):
        physical = ir.RankedTensorType(result.type).shape
        results.append([[physical[position] for position in inverse(order)], TensorSpec.of(result.type).dtype])
    return results


def check_lapack_element_type(op: ir.Operation) -> None:
    """LAPACK has routines for f32, f64 and their complex types only; any other element type
    is refused at compile time, in the words jax's tests and cpu lowering use."""
    element = ir.RankedTensorType(op.operands[0].type).element_type
    if str(element) not in LAPACK_ELEMENT_TYPES:
        raise MlirxlaError(f"Unsupported dtype {element} for custom_call @{custom_call_target(op)} (LAPACK takes "
                           "f32, f64, complex<f32> and complex<f64>)", location_text(op.location))


def host_thunk(emitter, op: ir.Operation, call: str, attributes: dict) -> HostThunk:
    name = emitter.name_of(op)
    emitter.decisions.append(f"{name}: {call} as a host call {attributes}")

    def specs(values):
        return tuple((emitter.slice_of(v), tuple(ir.RankedTensorType(v.type).shape), TensorSpec.of(v.type).dtype) for v in values)

    results = specs(op.results)
    if attributes.get("effect"):
        results += ((effect_order_slice(emitter), (1,), "uint8"),)
    return HostThunk(name, call, specs(op.operands), results, attributes)


def effect_order_slice(emitter) -> BufferSlice:
    """The byte every side-effecting host call writes last: the executor orders thunks by the
    memory they touch, and the tokens that order effects take none, so without it two
    callbacks with independent operands could run at once or in either order."""
    if emitter.effect_order is None:
        emitter.effect_order = emitter.allocate(1, None, "effect-order", "the byte every side-effecting host call writes")
    return emitter.effect_order


def custom_call_target(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["call_target_name"]).value


def is_host_custom_call(op: ir.Operation) -> bool:
    return kind_of(op) == "custom_call" and custom_call_target(op) in HOST_CUSTOM_CALLS


# --- the attributes of each host call -----------------------------------------------------------


def sort_attributes(op: ir.Operation) -> dict:
    """The sort as a host call: its dimension, the keys its comparator orders by, and, when
    every use of its results is a slice, how many leading positions along the dimension
    those slices read (so that a top-k selects them instead of sorting everything)."""
    keys = comparator_keys(op)
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    attributes = {"dimension": dimension, "keys": [key.as_dict() for key in keys]}
    leading = leading_positions_read(op, dimension)
    if leading is not None:
        attributes["leading"] = leading
    return attributes


def leading_positions_read(op: ir.Operation, dimension: int) -> int | None:
    """The positions [0, n) along `dimension` that slices, the only users of `op`'s results,
    read; None when something else uses a result (a return, a kernel reading it whole)."""
    limits = []
    for result in op.results:
        for use in result.uses:
            user = use.owner
            if not isinstance(user, (ir.Operation, ir.OpView)) or kind_of(user.operation) != "slice":
                return None
            limits.append(list(ir.DenseI64ArrayAttr(user.operation.attributes["limit_indices"]))[dimension])
    return max(limits) if limits else None


def fft_attributes(op: ir.Operation) -> dict:
    return {"fft_type": ir.StringAttr(op.attributes["fft_type"]).value,
            "fft_length": list(ir.DenseI64ArrayAttr(op.attributes["fft_length"]))}


def triangular_solve_attributes(op: ir.Operation) -> dict:
    flags = {name: bool(ir.BoolAttr(op.attributes[name]).value) for name in ("left_side", "lower", "unit_diagonal")}
    return flags | {"transpose_a": ir.StringAttr(op.attributes["transpose_a"]).value}


def computation_combiner(region: ir.Region) -> str | None:
    """The elementwise op a two-argument computation is (`add` for `return a + b`), or None."""
    block = region.blocks[0]
    operations = list(block.operations)
    owner = operations[-1].operation.operands[0].owner
    if len(operations) != 2 or not isinstance(owner, (ir.Operation, ir.OpView)):
        return None
    return kind_of(owner.operation) if set(owner.operands) == set(block.arguments) else None


SCATTER_COMBINERS = frozenset({"add", "multiply", "maximum", "minimum", "or", "and"})


def scatter_combiner(op: ir.Operation) -> str | None:
    """How a one-input scatter's update computation combines the old value and the update
    ("set", or one elementwise op of both), None for any other computation."""
    if len(op.operands) != 3:
        return None
    block = op.regions[0].blocks[0]
    if list(block.operations)[-1].operation.operands[0] == block.arguments[1]:
        return "set"
    combiner = computation_combiner(op.regions[0])
    return combiner if combiner in SCATTER_COMBINERS else None


def scatter_attributes(op: ir.Operation) -> dict:
    """The scatter as a host call: its dimension numbers and its combiner."""
    numbers = ir.DictAttr(op.attributes["dimension_numbers"])
    fields = {}
    for name in ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "input_batching_dims",
                 "scatter_indices_batching_dims"):
        if name in numbers:
            fields[name] = list(ir.DenseI64ArrayAttr(numbers[name]))
    fields["index_vector_dim"] = ir.IntegerAttr(numbers["index_vector_dim"]).value
    return {"dimension_numbers": fields, "combiner": scatter_combiner(op)}


def cholesky_attributes(op: ir.Operation) -> dict:
    return {"lower": bool(ir.BoolAttr(op.attributes["lower"]).value)}


HOST_CALLS = {"sort": sort_attributes, "fft": fft_attributes, "triangular_solve": triangular_solve_attributes,
              "cholesky": cholesky_attributes, "scatter": scatter_attributes}


def backend_config(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["backend_config"]).value if "backend_config" in op.attributes else ""


def python_callback_attributes(op: ir.Operation) -> dict:
    """The callback's id, from the custom call's backend config, the [shape, dtype] of each
    result it must return, and whether it has a side effect (it then runs in program order
    with the others: `effect_order_slice`)."""
    config = backend_config(op)
    if not config.isdigit():
        raise MlirxlaError(f"custom_call @{callbacks.TARGET}: backend_config must be a callback id, got '{config}'",
                           location_text(op.location))
    return {"callback": int(config), "results": declared_results(op), "effect": has_side_effect(op)}


# jax's cpu LAPACK targets, `lapack_<type letter><routine>_ffi`: the routine each names -> the
# routine that runs it (`runtime/lapack_ffi.py`; the real and complex names share one), and the
# letters of the element types it comes in
LAPACK_FFI_ROUTINES = {
    "potrf": ("potrf", "sdcz"), "getrf": ("getrf", "sdcz"), "geqrf": ("geqrf", "sdcz"), "geqp3": ("geqp3", "sdcz"),
    "orgqr": ("orgqr", "sd"), "ungqr": ("orgqr", "cz"), "ormqr": ("ormqr", "sd"), "unmqr": ("ormqr", "cz"),
    "syevd": ("syevd", "sd"), "heevd": ("syevd", "cz"), "gesdd": ("gesdd", "sdcz"), "gesvd": ("gesvd", "sdcz"),
    "geev": ("geev", "sdcz"), "gees": ("gees", "sdcz"), "gehrd": ("gehrd", "sdcz"), "sytrd": ("sytrd", "sd"),
    "hetrd": ("sytrd", "cz"), "trsm": ("trsm", "sdcz"), "gtsv": ("gtsv", "sdcz"),
}
LAPACK_TYPE_LETTERS = {"s": "f32", "d": "f64", "c": "complex<f32>", "z": "complex<f64>"}
PERTURBED_TRIDIAGONAL_SOLVE_TARGET = "tridiagonal_solve_perturbed_ffi"
# the backend_config characters each routine takes, and the values run here; jax's cpu lowering
# emits only these (gesdd's `O` overwrites the input with u, which jaxlib refuses too; gees's
# sort needs a selection function no custom call carries)
LAPACK_FFI_CHARACTERS = {
    "potrf": {"uplo": "LU"}, "syevd": {"mode": "V", "uplo": "LU"}, "gesdd": {"mode": "ASN"},
    "gesvd": {"mode": "ASN"}, "geev": {"compute_left": "NV", "compute_right": "NV"},
    "gees": {"mode": "NV", "sort": "N"}, "sytrd": {"uplo": "LU"},
    "trsm": {"side": "LR", "uplo": "LU", "trans_x": "NTC", "diag": "NU"},
}
LAPACK_FFI_NUMBERS = {"gehrd": ("low", "high"), "ormqr": ("left", "transpose")}


def lapack_ffi_targets() -> dict:
    """Every jax cpu LAPACK target -> (the routine run here, the element type its name says)."""
    targets = {PERTURBED_TRIDIAGONAL_SOLVE_TARGET: ("tridiagonal_solve_perturbed", None)}
    for name, (runs_as, letters) in LAPACK_FFI_ROUTINES.items():
        for letter in letters:
            targets[f"lapack_{letter}{name}_ffi"] = (runs_as, LAPACK_TYPE_LETTERS[letter])
    return targets


LAPACK_FFI_TARGETS = lapack_ffi_targets()


def ffi_attribute_value(attribute: ir.Attribute):
    """A typed FFI attribute as plain data: an unsigned 8-bit integer is a LAPACK character
    (`uplo = 76 : ui8` is "L"), a boolean a bool, any other integer an int; None for any other
    attribute (no LAPACK call jax emits has one)."""
    if isinstance(attribute, ir.BoolAttr):
        return bool(attribute.value)
    if not isinstance(attribute, ir.IntegerAttr):
        return None
    element = ir.IntegerType(attribute.type)
    if element.width == 8 and element.is_unsigned:
        return chr(attribute.value)
    return bool(attribute.value) if element.width == 1 else attribute.value


def lapack_ffi_attributes(op: ir.Operation) -> dict:
    """A jax cpu LAPACK call as a host call: its routine, its `mhlo.backend_config` as plain
    data, and each result's [shape, dtype]; a variant not run here, or an element type other
    than the target's name says, is refused with the op's location."""
    target = custom_call_target(op)
    routine, element = LAPACK_FFI_TARGETS[target]
    where = location_text(op.location)
    operand_element = str(ir.RankedTensorType(op.operands[-1 if routine == "gtsv" else 0].type).element_type)
    if element is not None and operand_element != element:
        raise MlirxlaError(f"custom_call @{target}: operand element type {operand_element}, where the target takes {element}",
                           where)
    config = {}
    if "mhlo.backend_config" in op.attributes:
        dictionary = ir.DictAttr(op.attributes["mhlo.backend_config"])
        config = {dictionary[index].name: ffi_attribute_value(dictionary[index].attr) for index in range(len(dictionary))}
    unread = [name for name, value in config.items() if value is None]
    if unread:
        raise MlirxlaError(f"custom_call @{target}: backend_config entry {unread[0]} is not an integer or boolean", where)
    for name, allowed in LAPACK_FFI_CHARACTERS.get(routine, {}).items():
        if config.get(name) not in tuple(allowed):
            raise MlirxlaError(f"custom_call @{target}: {name} = {config.get(name)!r} is not supported (runs {', '.join(allowed)})",
                               where)
    for name in LAPACK_FFI_NUMBERS.get(routine, ()):
        if name not in config:
            raise MlirxlaError(f"custom_call @{target}: backend_config has no {name}", where)
    return {"routine": routine, "config": config, "results": declared_results(op)}


# custom calls run as host calls: target -> (host call, its attributes); jax's cpu lowering
# emits the LAPACK ones (and so does the PJRT plugin, with jax's cpu rules); jax's generic QR
# lowering emits XLA's `Qr` and `ProductOfElementaryHouseholderReflectors`;
# `dce_sink` (lax.dce_sink) only keeps its operand computed, as XLA's no-op handler does
HOST_CUSTOM_CALLS = {
    callbacks.TARGET: ("python_callback", python_callback_attributes),
    "dce_sink": ("dce_sink", lambda op: {}),
    "mlirxla.print": ("print", lambda op: {"types": [str(v.type) for v in op.operands], "effect": True}),
    "Qr": ("householder_qr", lambda op: {}),
    "ProductOfElementaryHouseholderReflectors": ("householder_product", lambda op: {}),
    **{target: ("lapack_ffi", lapack_ffi_attributes) for target in LAPACK_FFI_TARGETS},
}

LAPACK_CALLS = {"householder_qr", "householder_product", "lapack_ffi"}
LAPACK_ELEMENT_TYPES = {"f32", "f64", "complex<f32>", "complex<f64>"}
