"""Read StableHLO in every form JAX produces into an MLIR module of our context.

Forms: textual MLIR (custom or generic syntax), MLIR bytecode, and StableHLO portable
artifacts (VHLO bytecode) from the oldest version the toolkit reads up to its current one.
A portable artifact's version is read from its producer string; a newer one is refused
(the version clamp). Text that uses chlo or sdy custom syntax, which only jaxlib's MLIR
can parse, is first printed in generic form by jaxlib (`jaxlib_bridge`).
"""

import math
import re
from dataclasses import dataclass

from mlirxla.errors import MlirxlaError, first_line, text_location
from mlirxla.mlir import ir, stablehlo

from . import bytecode, check_syntax, jaxlib_bridge, nesting, newer_ops, segments, utf8

BYTECODE_MAGIC = bytecode.MAGIC
_PRODUCER = re.compile(rb"StableHLO_v(\d+)\.(\d+)\.(\d+)")
_STATIC_DIMENSIONS = re.compile(r"tensor<((?:\d+x)+)")


@dataclass(frozen=True)
class Loaded:
    """A parsed module and where it came from."""

    module: ir.Module
    source: str
    form: str  # "text", "bytecode" or "portable-artifact"
    artifact_version: str | None = None


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def artifact_version(data: bytes) -> str | None:
    match = _PRODUCER.search(data[:4096])
    return ".".join(m.decode() for m in match.groups()) if match else None


def clamp_version(version: str, source: str) -> None:
    current, minimum = stablehlo.get_current_version(), stablehlo.get_minimum_version()
    if version_tuple(version) > version_tuple(current):
        raise MlirxlaError(
            f"portable artifact version {version} is newer than the newest this build reads ({current})", source
        )
    if version_tuple(version) < version_tuple(minimum):
        raise MlirxlaError(
            f"portable artifact version {version} is older than the oldest this build reads ({minimum})", source
        )


def load_bytes(data: bytes, source: str, context: ir.Context) -> Loaded:
    if data.startswith(BYTECODE_MAGIC):
        if holds_vhlo(data):
            return load_artifact(data, source, context)
        module = parse_module(data, source, context)
        check_module(module, source)
        return Loaded(module, source, "bytecode")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MlirxlaError("neither MLIR text (not UTF-8) nor MLIR bytecode (no 'ML\\xefR' magic)", source) from None
    return load_text(text, source, context)


def holds_vhlo(data: bytes) -> bool:
    """Whether bytecode is a portable artifact: its producer is StableHLO, or it names the
    VHLO dialect. Read as plain bytecode, VHLO ops need the version the artifact path sets
    first: without it a damaged artifact crashes the reader instead of failing."""
    return data[len(BYTECODE_MAGIC) + 1:].startswith(b"StableHLO") or bytecode.names_dialect(data, "vhlo")


def load_artifact(data: bytes, source: str, context: ir.Context) -> Loaded:
    version = artifact_version(data)
    if version is None:
        raise MlirxlaError(f"portable artifact (it holds VHLO ops) whose producer '{producer(data)}' names no StableHLO version", source)
    clamp_version(version, source)
    if jaxlib_bridge.artifact_needs_jaxlib(data):
        text = newer_ops.rename(jaxlib_bridge.artifact_to_generic_text(data, source))
        check_text(text, source)
        return Loaded(parse_checked_text(text, source, context), source, "portable-artifact", version)
    module = deserialize_artifact(data, source, context)
    check_module(module, source)
    return Loaded(module, source, "portable-artifact", version)


def producer(data: bytes) -> str:
    """The producer string of bytecode (after the magic and the version byte), as text."""
    start = len(BYTECODE_MAGIC) + 1
    end = data.find(b"\0", start, start + 64)
    return repr(data[start:end if end >= 0 else start + 64])[2:-1]


def check_module(module: ir.Module, source: str) -> None:
    """What every parsed module must pass before the front door's steps read it."""
    nesting.check_module(module, source)
    utf8.check_module(module, source)


def deserialize_artifact(data: bytes, source: str, context: ir.Context) -> ir.Module:
    """Deserialize a portable artifact, turning the diagnostics it prints into one error."""
    messages: list[str] = []

    def collect(diagnostic) -> bool:
        messages.append(str(diagnostic.message))
        return True

    handler = context.attach_diagnostic_handler(collect)
    try:
        return stablehlo.deserialize_portable_artifact(context, data)
    except Exception as error:
        reason = messages[0] if messages else first_line(error)
        raise MlirxlaError(f"cannot read portable artifact: {first_line(reason)}", source) from None
    finally:
        handler.detach()


def load_text(text: str, source: str, context: ir.Context) -> Loaded:
    check_text(text, source)
    text = newer_ops.rename(check_syntax.to_generic(text))
    if jaxlib_bridge.needs_jaxlib(text):
        text = jaxlib_bridge.to_generic_text(text, source)
    return Loaded(parse_checked_text(text, source, context), source, "text")


def check_text(text: str, source: str) -> None:
    """What text must pass before any MLIR parser (ours or jaxlib's) reads it."""
    refuse_nul(text, source)
    nesting.check_text(text, source)
    refuse_uncountable_shapes(text, source)


def parse_checked_text(text: str, source: str, context: ir.Context) -> ir.Module:
    """Parse text that needs jaxlib no more: in our syntax, or printed in generic form by
    jaxlib (whose sdy attributes, still in their own syntax, our context reads as opaque)."""
    if segments.needs_segments(text):
        try:
            text = segments.with_segments(text)
        except ir.MLIRError as error:
            raise parse_error(error, source) from None
    module = parse_module(text, source, context)
    if utf8.may_escape_bytes(text):
        utf8.check_module(module, source)
    return module


def refuse_uncountable_shapes(text: str, source: str) -> None:
    """A tensor type with 2^63 elements or more: MLIR parses it, but no size of it fits the
    64-bit integers that every later step counts in (XLA refuses such shapes too)."""
    for dimensions in set(_STATIC_DIMENSIONS.findall(text)):
        if math.prod(int(extent) for extent in dimensions.split("x") if extent) >= 1 << 63:
            position = text.index(f"tensor<{dimensions}")
            raise MlirxlaError(f"a tensor of shape {dimensions.rstrip('x')} has more elements than 64-bit sizes count",
                               text_location(text, position, source))


def refuse_nul(text: str, source: str) -> None:
    """MLIR's lexer takes a NUL character for the end of the input and would silently drop
    what follows it."""
    position = text.find("\0")
    if position >= 0:
        raise MlirxlaError("the text holds a NUL character", text_location(text, position, source))


def parse_module(text_or_bytes, source: str, context: ir.Context) -> ir.Module:
    with context:
        try:
            return ir.Module.parse(text_or_bytes)
        except ir.MLIRError as error:
            raise parse_error(error, source) from None
        except utf8.UNREADABLE:  # the bindings could not turn the parser's diagnostic into a str
            raise MlirxlaError("does not parse, and the parser's message quotes bytes that are not UTF-8", source) from None


def parse_error(error: ir.MLIRError, source: str) -> MlirxlaError:
    """The first diagnostic of a parse failure, at `file:line:col`."""
    diagnostics = getattr(error, "error_diagnostics", None) or []
    if diagnostics:
        diagnostic = diagnostics[0]
        match = re.search(r'"[^"]*":(\d+):(\d+)', str(diagnostic.location))
        where = f"{source}:{match.group(1)}:{match.group(2)}" if match else source
        return MlirxlaError(first_line(diagnostic.message), where)
    return MlirxlaError(first_line(error), source)


def load_file(path: str, context: ir.Context) -> Loaded:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise MlirxlaError(f"cannot read file: {error.strerror}", path) from None
    return load_bytes(data, path, context)
