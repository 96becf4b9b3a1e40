"""Rewrite the interpreter tests' custom syntax (`check` ops, `interpreter.print`) into generic
form our context parses.

    check.expect_eq_const %v, dense<[1, 2]> : tensor<2xi64>
 -> "check.expect_eq_const"(%v) {value = dense<[1, 2]> : tensor<2xi64>} : (tensor<2xi64>) -> ()

    check.expect_close %a, %b, max_ulp_difference = 3 : tensor<f16>, tensor<f16>
 -> "check.expect_close"(%a, %b) {max_ulp_difference = 3 : i64} : (tensor<f16>, tensor<f16>) -> ()

    interpreter.print %v : tensor<2xi32>
 -> "interpreter.print"(%v) : (tensor<2xi32>) -> ()
"""

import re

_CHECK_START = re.compile(r'(?<!["\w.@])check\.(expect_\w+)\b')
_PRINT = re.compile(r'(?<!["\w.@])interpreter\.print\s+(%[\w#]+)\s*:\s*([^\n]*?)\s*$', re.MULTILINE)
_OPENERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSERS = set(_OPENERS.values())

# attribute name -> the type suffix its bare value gets in generic form
_ATTRIBUTE_TYPES = {"tolerance": "f64", "max_ulp_difference": "i64", "min_ulp_difference": "i64", "iter": "i64"}


def statement_end(text: str, start: int) -> int:
    """Index of the newline or comment that ends the statement starting at `start` (brackets
    balanced, a line ending in a comma continued)."""
    depth = 0
    index = start
    while index < len(text):
        char = text[index]
        if char == '"':
            index = text.index('"', index + 1)
        elif char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth -= 1
        elif char == "\n" and depth == 0 and not text[start:index].rstrip().endswith(","):
            return index  # a trailing comma continues the statement on the next line
        elif text.startswith("//", index) and depth == 0:
            return index  # a comment after the statement stays where it is
        index += 1
    return len(text)


def split_top_level(text: str, separator: str) -> list[str]:
    parts, depth, current, index = [], 0, [], 0
    while index < len(text):
        char = text[index]
        if char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth -= 1
        if depth == 0 and text.startswith(separator, index):
            parts.append("".join(current))
            current = []
            index += len(separator)
            continue
        current.append(char)
        index += 1
    parts.append("".join(current))
    return [p.strip() for p in parts]


def rewrite_statement(name: str, body: str) -> str:
    trailing_attributes = ""
    if body.rstrip().endswith("}"):
        opening = body.rfind("{")
        trailing_attributes = body[opening + 1 : body.rstrip().rfind("}")].strip()
        body = body[:opening]
    head, types_text = split_top_level(body, " : ")[:-1], split_top_level(body, " : ")[-1]
    arguments = split_top_level(" : ".join(head), ",")
    types = split_top_level(types_text, ",")
    operands = [a for a in arguments if a.startswith("%")]
    attributes = [trailing_attributes] if trailing_attributes else []
    for argument in arguments:
        if argument.startswith("%"):
            continue
        if "=" in argument and not argument.startswith("dense"):
            key, value = (part.strip() for part in argument.split("=", 1))
            suffix = f" : {_ATTRIBUTE_TYPES[key]}" if key in _ATTRIBUTE_TYPES and ":" not in value else ""
            attributes.append(f"{key} = {value}{suffix}")
        else:
            attributes.append(f"value = {argument} : {types[0]}")
    operand_types = (types * len(operands))[: len(operands)] if len(types) < len(operands) else types[: len(operands)]
    attribute_text = f" {{{', '.join(attributes)}}}" if attributes else ""
    return f'"check.{name}"({", ".join(operands)}){attribute_text} : ({", ".join(operand_types)}) -> ()'


def to_generic(text: str) -> str:
    """Return `text` with every check op in custom syntax rewritten to generic form. Text
    naming neither `check.expect_` nor `interpreter.print` comes back as it is, without the
    patterns' scans (they begin with a look-behind, so each tries every position)."""
    if "check.expect_" not in text and "interpreter.print" not in text:
        return text
    pieces, position = [], 0
    for match in _CHECK_START.finditer(text):
        if match.start() < position:
            continue
        end = statement_end(text, match.end())
        pieces.append(text[position : match.start()])
        pieces.append(rewrite_statement(match.group(1), text[match.end() : end].strip()))
        position = end
    pieces.append(text[position:])
    return _PRINT.sub(r'"interpreter.print"(\1) : (\2) -> ()', "".join(pieces))
