"""LLVM IR text from the toolkit's LLVM (24) made readable by llvmlite's LLVM (22).

The toolkit prints floating-point constants in the newer syntax: decimals that round-trip
only in the constant's own type (`float 1.000000e-01`), special values by name (`-inf`,
`+qnan`, `+snan(0x1)`), other values by their bits (`f0x3727C5AC`). LLVM 22 reads a
`float`/`double` constant as a decimal exact in the type, or as hex (a float as the bits of
the double it widens to; `0xH` half, `0xR` bfloat). Every such constant is rewritten to hex.
"""

import re
import struct

import ml_dtypes
import numpy as np

_LITERAL = (r"(?:[-+]?(?:snan|qnan|nan)\(0x[0-9A-Fa-f]+\)|[-+]?(?:inf|qnan|nan)\b|[-+]?\d+\.\d+(?:e[-+]?\d+)?\b|f0x[0-9A-Fa-f]+\b)")
_FLOAT_TYPE = re.compile(r"\b(half|bfloat|float|double)\b")
# a literal, with the type written just before it when there is one
_CONSTANT = re.compile(r"(?<![\w.%@$\"])(?:(half|bfloat|float|double) )?(" + _LITERAL + ")")
# (exponent bits, mantissa bits) per type
_FORMATS = {"half": (5, 10), "bfloat": (8, 7), "float": (8, 23), "double": (11, 52)}


def _special_bits(kind: str, text: str) -> int:
    """The bit pattern of inf / nan literals in `kind`."""
    exponent_bits, mantissa_bits = _FORMATS[kind]
    negative = text.startswith("-")
    body = text.lstrip("+-")
    exponent = ((1 << exponent_bits) - 1) << mantissa_bits
    quiet = 1 << (mantissa_bits - 1)
    if body == "inf":
        mantissa = 0
    elif body in ("qnan", "nan"):
        mantissa = quiet
    else:
        payload = int(body[body.index("(") + 1:-1], 16)
        mantissa = payload | (0 if body.startswith("snan") else quiet)
    return (negative << (exponent_bits + mantissa_bits)) | exponent | mantissa


def _widened_to_double(kind: str, bits: int) -> int:
    """The double bits LLVM's hex syntax uses for a float/half value's special bits."""
    exponent_bits, mantissa_bits = _FORMATS[kind]
    sign = bits >> (exponent_bits + mantissa_bits)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    return (sign << 63) | (0x7FF << 52) | (mantissa << (52 - mantissa_bits))


def _hex(kind: str, text: str) -> str:
    if text.startswith("f0x"):  # the type's own bits
        bits = int(text[3:], 16)
        if kind == "float":
            value = float(np.array(bits, np.uint32).view(np.float32))
            return "0x" + struct.pack(">d", value).hex().upper()
        return {"half": f"0xH{bits:04X}", "bfloat": f"0xR{bits:04X}", "double": f"0x{bits:016X}"}[kind]
    special = not text.lstrip("+-")[0].isdigit()
    if kind in ("half", "bfloat"):
        if special:
            bits = _special_bits(kind, text)
        elif kind == "half":
            bits = int(np.array(float(text), np.float16).view(np.uint16))
        else:
            bits = int(np.array(float(text), ml_dtypes.bfloat16).view(np.uint16))
        return f"0x{'H' if kind == 'half' else 'R'}{bits:04X}"
    if special:
        bits = _special_bits(kind, text)
        return f"0x{(bits if kind == 'double' else _widened_to_double(kind, bits)):016X}"
    value = float(np.float32(text)) if kind == "float" else float(text)
    return "0x" + struct.pack(">d", value).hex().upper()


def downgrade(text: str) -> str:
    """`text` with every floating-point constant in hex. A literal's type is the one written
    before it, else the line's first floating-point type (`fadd float %a, 1.5`)."""
    return "\n".join(_downgrade_line(line) for line in text.split("\n"))


def _downgrade_line(line: str) -> str:
    first = _FLOAT_TYPE.search(line)
    if first is None or line.lstrip().startswith(("!", ";", "source_filename", "target")):
        return line

    def replace(match: re.Match) -> str:
        kind = match.group(1) or first.group(1)
        prefix = f"{match.group(1)} " if match.group(1) else ""
        return prefix + _hex(kind, match.group(2))

    return _CONSTANT.sub(replace, line)
