"""Print chlo / sdy custom syntax in generic form with jaxlib's MLIR.

The toolkit has neither the chlo nor the sdy dialect, so their custom syntax does not parse
in our context; jaxlib's MLIR has both. Objects never cross between the two MLIR builds:
jaxlib parses the text and prints it in generic form, and our context reads that text
(chlo ops as unregistered ops for `chlo_to_xhlo`, sdy attributes as opaque attributes for
`shardings`). Without the jax extra installed, such input is refused naming the extra.

An op inside an `sdy.manual_computation` that names a function (a `func.call` of
`jax.random`'s functions, a `stablehlo.composite` such as `chlo.erf` in a portable artifact)
is carried across renamed, `mlirxla.in_region.func.call`: in our context the manual
computation is an unregistered op with one region, which MLIR takes for a possible symbol
table of its own, so the function is looked up there, not found, and the module fails to
verify as it parses. `shardings.prepare` gives it its name back once the body is inlined.
"""

import contextlib
import re
import threading

from mlirxla.errors import MlirxlaError, first_line
from mlirxla.frontdoor import bytecode

IN_REGION = "mlirxla.in_region."
NAMING_FUNCTIONS = frozenset({"func.call", "stablehlo.composite"})

# a chlo or sdy op written in custom syntax: `chlo.erfc %x ...`, `sdy.mesh @m = ...`,
# or an sdy attribute in custom syntax (`#sdy.sharding<...>`, `#sdy.mesh<...>`)
_CUSTOM_SYNTAX = re.compile(r'(?<!["\w.])(?:chlo|sdy)\.\w+(?!")|#sdy\.\w+<')

# Program bytes one jaxlib context reads before a new one replaces it: a context keeps every
# attribute, type and location it uniqued for as long as it lives.
CONTEXT_BYTES = 64 << 20
_CONTEXT_LOCK = threading.Lock()
_CONTEXT: dict = {"context": None, "bytes read": 0}


def needs_jaxlib(text: str) -> bool:
    """Whether `text` holds chlo or sdy custom syntax. The substring test first: the pattern
    begins with a look-behind, so the regex tries every position of the text (1.4 ms on a
    70 kB module), and every match holds `chlo.` or `sdy.`."""
    if "chlo." not in text and "sdy." not in text:
        return False
    return _CUSTOM_SYNTAX.search(text) is not None


def artifact_needs_jaxlib(data: bytes) -> bool:
    """Whether a portable artifact holds sdy ops or attributes (JAX's shardings), whose
    bytecode only jaxlib's MLIR reads."""
    return bytecode.names_dialect(data, "sdy")


def artifact_to_generic_text(data: bytes, source: str) -> str:
    """A portable artifact deserialized by jaxlib's StableHLO, printed in generic form."""
    def read(context, jax_ir):
        from jaxlib.mlir.dialects import stablehlo as jax_stablehlo

        return jax_stablehlo.deserialize_portable_artifact(context, data)

    return generic_text_in_jaxlib(read, len(data), "this portable artifact uses the sdy dialect", "cannot read portable artifact", source)


def generic_text_in_jaxlib(read, size: int, why: str, failure: str, source: str) -> str:
    """The module `read(context, jax_ir)` makes of `size` bytes in a jaxlib MLIR context
    (unregistered dialects allowed), printed in generic form; a failure to read is one line
    after `failure`; without jaxlib, an error saying `why` it is needed."""
    jax_mlir, jax_ir = jaxlib_mlir(why, source)
    with reused_context(jax_mlir, size) as context:
        try:
            module = read(context, jax_ir)
        except Exception as error:
            raise MlirxlaError(f"{failure} with jaxlib's MLIR: {first_line(error)}", source) from None
        carry_calls_in_manual_computations(module, jax_ir)
        return module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)


@contextlib.contextmanager
def reused_context(jax_mlir, size: int):
    """The process's jaxlib context for the front door, entered, to read `size` bytes: made
    once (a new one costs about as much as the rest of a small program's import) and
    replaced after `CONTEXT_BYTES`."""
    with _CONTEXT_LOCK:
        if _CONTEXT["context"] is None or _CONTEXT["bytes read"] + size > CONTEXT_BYTES:
            context = jax_mlir.make_ir_context()
            context.allow_unregistered_dialects = True
            _CONTEXT.update({"context": context, "bytes read": 0})
        _CONTEXT["bytes read"] += size
        with _CONTEXT["context"] as context:
            yield context


def namers_in_manual_computations(operation, inside: bool = False) -> list:
    """The ops naming a function inside the manual computations under `operation`."""
    found = []
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                if inside and op.operation.name in NAMING_FUNCTIONS:
                    found.append(op.operation)
                found.extend(namers_in_manual_computations(op.operation, inside or op.operation.name == "sdy.manual_computation"))
    return found


def attributes_of(op) -> dict:
    """`op`'s attributes by name (either MLIR build's objects)."""
    return {op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))}


def carry_calls_in_manual_computations(module, jax_ir) -> None:
    """Each op naming a function in a manual computation is renamed (module docstring)."""
    for op in namers_in_manual_computations(module.operation):
        with jax_ir.InsertionPoint(op), op.location:
            carried = jax_ir.Operation.create(IN_REGION + op.name, results=[value.type for value in op.results],
                                              operands=list(op.operands),
                                              attributes=attributes_of(op))
        for old, new in zip(op.results, carried.results):
            old.replace_all_uses_with(new)
        op.erase()


def jaxlib_mlir(why: str, source: str):
    """jax's MLIR helpers and jaxlib's `ir`, or an error naming the jax extra."""
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib.mlir import ir as jax_ir
    except ImportError:
        raise MlirxlaError(f"{why}, which only jaxlib's MLIR reads: install the jax extra (pip install 'mlirxla[jax]')",
                           source) from None
    return jax_mlir, jax_ir


def to_generic_text(text: str, source: str) -> str:
    return generic_text_in_jaxlib(lambda context, jax_ir: jax_ir.Module.parse(text), len(text),
                                  "this module uses chlo or sdy custom syntax", "cannot parse", source)


def legalize_chlo_text(text: str, source: str) -> str:
    """jaxlib's own chlo-legalize-to-stablehlo over `text`, printed in generic form.

    Used only by the oracle, so that our chlo compositions are held to jaxlib's.
    """
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib.mlir import ir as jax_ir
        from jax._src.lib.mlir import passmanager as jax_passmanager
        from jax._src.lib.mlir.dialects import mhlo
        from jaxlib.mlir.dialects import stablehlo as jax_stablehlo
    except ImportError:
        raise MlirxlaError("evaluating chlo ops in the reference needs the jax extra (pip install 'mlirxla[jax]')", source) from None
    context = jax_mlir.make_ir_context()
    context.allow_unregistered_dialects = True
    with context:
        mhlo.register_mhlo_passes()
        jax_stablehlo.register_stablehlo_passes()
        module = jax_ir.Module.parse(text)
        jax_passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))").run(module.operation)
        return module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)
