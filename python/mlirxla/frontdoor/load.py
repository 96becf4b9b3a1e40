"""Read StableHLO in every form JAX produces into an MLIR module of our context.

Forms: textual MLIR (custom or generic syntax), MLIR bytecode, and StableHLO portable
artifacts (VHLO bytecode) from the oldest version the toolkit reads up to its current one.
A portable artifact's version is read from its producer string; a newer one is refused
(the version clamp). Text that uses chlo or sdy custom syntax, which only jaxlib's MLIR
can parse, is first printed in generic form by jaxlib (`jaxlib_bridge`).
"""

import re
from dataclasses import dataclass

from mlirxla.errors import MlirxlaError, first_line
from mlirxla.mlir import ir, stablehlo

from . import check_syntax, jaxlib_bridge, segments

BYTECODE_MAGIC = b"ML\xefR"
_PRODUCER = re.compile(rb"StableHLO_v(\d+)\.(\d+)\.(\d+)")


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
        version = artifact_version(data)
        if version is not None:
            clamp_version(version, source)
            if jaxlib_bridge.artifact_needs_jaxlib(data):
                loaded = load_text(jaxlib_bridge.artifact_to_generic_text(data, source), source, context)
                return Loaded(loaded.module, source, "portable-artifact", version)
            module = deserialize_artifact(data, source, context)
            return Loaded(module, source, "portable-artifact", version)
        return Loaded(parse_module(data, source, context), source, "bytecode")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MlirxlaError("neither MLIR text (not UTF-8) nor MLIR bytecode (no 'ML\\xefR' magic)", source) from None
    return load_text(text, source, context)


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
    text = check_syntax.to_generic(text)
    if jaxlib_bridge.needs_jaxlib(text):
        text = jaxlib_bridge.to_generic_text(text, source)
    if segments.needs_segments(text):
        try:
            text = segments.with_segments(text)
        except ir.MLIRError as error:
            raise parse_error(error, source) from None
    return Loaded(parse_module(text, source, context), source, "text")


def parse_module(text_or_bytes, source: str, context: ir.Context) -> ir.Module:
    with context:
        try:
            return ir.Module.parse(text_or_bytes)
        except ir.MLIRError as error:
            raise parse_error(error, source) from None


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
