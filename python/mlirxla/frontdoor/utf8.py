"""Refuse strings that are not UTF-8 in a module's op names and attributes.

Bytecode carries strings as raw bytes and text can spell any byte as an escape ("\\FF"), so a
symbol name or a string attribute may hold bytes that are not UTF-8. The bindings raise on
such a string wherever Python reads it, deep inside whichever pass reads it first; here the
module is read once, right after parsing, so the error names the op and the attribute.
"""

import re

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import nested_ops
from mlirxla.mlir import ir

# what the bindings raise on a string that is not UTF-8
UNREADABLE = (RuntimeError, UnicodeDecodeError)
# custom calls whose backend config is bytes by design: jaxlib copies a struct of two
# pointers into InspectSharding's (`transforms/inspect_sharding.py` reads it)
BINARY_BACKEND_CONFIGS = frozenset({"InspectSharding"})
# an escape of a byte above 0x7f in a string of MLIR text: only such text can make a string
# that is not UTF-8 (the text itself was read as UTF-8)
_HIGH_BYTE_ESCAPE = re.compile(r"\\[89A-Fa-f][0-9A-Fa-f]")


def may_escape_bytes(text: str) -> bool:
    return _HIGH_BYTE_ESCAPE.search(text) is not None


def check_module(module: ir.Module, source: str) -> None:
    """The ops are collected first and read after the walk: a conversion error raised inside a
    walk's callback crosses C code that cannot pass it on, and aborts the process."""
    for op in nested_ops(module):
        problem = unreadable_string(op, source)
        if problem is not None:
            raise problem


def unreadable_string(op: ir.Operation, source: str) -> MlirxlaError | None:
    where = location_text(op.location, source)
    try:
        name = op.name
    except UNREADABLE:
        return MlirxlaError("an op's name is not UTF-8", where)
    try:
        names = list(op.attributes)  # (a NamedAttribute's `name` aborts the process instead of raising)
    except UNREADABLE:
        return MlirxlaError(f"{name}: an attribute's name is not UTF-8", where)
    binary = binary_backend_config(op, name)
    for index, attribute_name in enumerate(names):
        if not (attribute_name == "backend_config" and binary) and not readable(op.attributes[index].attr):
            return MlirxlaError(f"{name}: attribute '{attribute_name}' holds a string that is not UTF-8", where)
    return None


def binary_backend_config(op: ir.Operation, name: str) -> bool:
    if name != "stablehlo.custom_call" or "call_target_name" not in op.attributes:
        return False
    target = op.attributes["call_target_name"]
    return readable(target) and ir.StringAttr(target).value in BINARY_BACKEND_CONFIGS


def readable(attribute: ir.Attribute) -> bool:
    """Whether every string in `attribute` and the attributes nested in it reads as UTF-8 (a
    walk with its own stack: bytecode can nest arrays deeper than Python recurses)."""
    pending = [attribute]
    try:
        while pending:
            current = pending.pop()
            if isinstance(current, ir.StringAttr):
                current.value_bytes.decode("utf-8")
            elif isinstance(current, (ir.FlatSymbolRefAttr, ir.SymbolRefAttr)):
                current.value
            elif isinstance(current, ir.ArrayAttr):
                pending.extend(current)
            elif isinstance(current, ir.DictAttr):
                pending.extend(named.attr for named in current)
    except UNREADABLE:
        return False
    return True
