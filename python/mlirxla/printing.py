"""Print modules for people: xhlo ops without the segment sizes that follow from their counts.

IRDL stores which optional slots of an xhlo op are filled in `operandSegmentSizes` /
`resultSegmentSizes` attributes; they add a 64-entry array to every `xhlo.return`. They are
derivable from the operand and result counts, so the printer leaves them out and the front
door (`frontdoor/segments.py`) puts them back when it reads the text.
"""

import re

from mlirxla.mlir import ir

# `operandSegmentSizes = array<i32: ...>` inside an attribute dictionary (not in properties `<{`)
_SEGMENTS = re.compile(r"(?:, )?\b(?:operand|result)SegmentSizes = array<i32(?::[ 0-9,]*)?>")
_EMPTY_DICTIONARY = re.compile(r" \{\s*\}(?= :)")
_LEADING_COMMA = re.compile(r"\{, ")


def module_text(module: ir.Module, generic: bool = False, debug_info: bool = False) -> str:
    text = module.operation.get_asm(print_generic_op_form=generic, enable_debug_info=debug_info)
    return strip_segments(text)


def strip_segments(text: str) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        if "SegmentSizes" in line and "<{" not in line:
            line = _LEADING_COMMA.sub("{", _SEGMENTS.sub("", line))
            line = _EMPTY_DICTIONARY.sub("", line)
        lines.append(line)
    return "".join(lines)
