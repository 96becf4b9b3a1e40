"""Refuse input nested deeper than the parser and the passes can follow.

MLIR's text parser recurses once per region, bracket and nested type: a few thousand
nested regions overflow a thread's 8 MiB C stack, which kills the process without a word.
Our passes recurse in Python over nested regions too, and reach Python's recursion limit
long before. So text whose brackets nest deeper than MAX_BRACKET_DEPTH, or whose regions
nest deeper than MAX_REGION_DEPTH, is refused before it is parsed; a module read from
bytecode (whose reader does not recurse) is measured once it is read. Real programs nest
a few levels deep: a scan in a scan in a cond is three regions.
"""

import re

import numpy as np

from mlirxla.errors import MlirxlaError, location_text, text_location
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import identity

MAX_BRACKET_DEPTH = 512
MAX_REGION_DEPTH = 64

# what does not nest: strings, comments, and the arrow whose '>' closes nothing. A string's
# body is matched run by run between escapes, not character by character: a 64 MB constant
# prints as one hex string, which the per-character alternation took 55 s to skip.
_NOT_NESTING = rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|//[^\n]*|->'
_PAIRS = {"{": "}", "[": "]", "(": ")", "<": ">"}
_BRACKETS = "".join(_PAIRS) + "".join(_PAIRS.values())
_NOT_BRACKETS = bytes(byte for byte in range(256) if chr(byte) not in _BRACKETS)
_NOT_BRACES = b"[]()<>"
_STEP = np.zeros(256, np.int8)
_STEP[[ord(c) for c in _PAIRS]] = 1
_STEP[[ord(c) for c in _PAIRS.values()]] = -1


def deepest(brackets: bytes) -> int:
    """How deep `brackets`, a string of bracket characters only, nest."""
    steps = _STEP[np.frombuffer(brackets, np.uint8)]
    return int(np.cumsum(steps, dtype=np.int32).max(initial=0))


def check_text(text: str, source: str) -> None:
    """Refuse `text` when its brackets or regions nest too deep for the parser and passes."""
    data = text.encode()
    if sum(data.count(opener.encode()) for opener in _PAIRS) <= MAX_REGION_DEPTH:
        return
    brackets = re.sub(_NOT_NESTING, b"", data).translate(None, _NOT_BRACKETS)
    depth = deepest(brackets)
    if depth > MAX_BRACKET_DEPTH:
        raise MlirxlaError(f"brackets nest {depth} deep; mlirxla reads at most {MAX_BRACKET_DEPTH} levels",
                           where_deeper(text, _PAIRS, MAX_BRACKET_DEPTH, source))
    depth = deepest(brackets.translate(None, _NOT_BRACES))
    if depth > MAX_REGION_DEPTH:
        raise MlirxlaError(f"regions nest {depth} deep; mlirxla reads at most {MAX_REGION_DEPTH} levels",
                           where_deeper(text, {"{": "}"}, MAX_REGION_DEPTH, source))


def where_deeper(text: str, pairs: dict[str, str], limit: int, source: str) -> str:
    """`source:line:col` of the first of `pairs`' openers that goes deeper than `limit` (the
    slow scan, run only on input already found too deep)."""
    depth, position = 0, 0
    for match in re.finditer(_NOT_NESTING.decode() + r"|[{}\[\]()<>]", text):
        token = match.group()
        depth += 1 if token in pairs else -1 if token in pairs.values() else 0
        if depth > limit:
            position = match.start()
            break
    return text_location(text, position, source)


def check_module(module: ir.Module, source: str) -> None:
    """Refuse a parsed module whose regions nest deeper than MAX_REGION_DEPTH (bytecode, whose
    reader does not recurse, can hold any depth). One walk, parents before children: an op
    holding regions is one deeper than the op around it."""
    depths: dict[int, int] = {}
    too_deep: list[ir.Operation] = []

    def visit(op):
        if len(op.regions):
            depth = depths.get(identity(op.parent), 0) + 1 if op.parent is not None else 0
            if depth > MAX_REGION_DEPTH:
                too_deep.append(op.operation)
                return ir.WalkResult.INTERRUPT
            depths[identity(op)] = depth
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if too_deep:
        raise MlirxlaError(f"regions nest more than {MAX_REGION_DEPTH} deep; mlirxla reads at most {MAX_REGION_DEPTH} levels",
                           location_text(too_deep[0].location, source))
