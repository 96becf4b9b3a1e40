"""The one exception type the command-line tools turn into a one-line error."""


class MlirxlaError(Exception):
    """A user-facing failure: bad input, unsupported construct, failed check."""

    def __init__(self, message: str, location: str | None = None):
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)

    def with_source(self, source: str) -> "MlirxlaError":
        """The same error with the stand-in file name `-` replaced by `source`."""
        if self.location is None:
            return MlirxlaError(self.message, source)
        return MlirxlaError(self.message, in_file(self.location, source))


def in_file(location: str, source: str) -> str:
    """`location` with the stand-in file name `-` (text parsed from memory) replaced by `source`."""
    if location == "-" or location.startswith("-:"):
        return source + location[1:]
    return location


def first_line(text: str) -> str:
    """The first non-empty line of a (possibly multi-line) MLIR diagnostic."""
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return str(text).strip()


def jax_primitive(location) -> str | None:
    """The jax primitive an op was lowered from, read off jax's name location
    (`loc("jit(f)/rng_uniform"(...))`), or None."""
    import re

    match = re.match(r'loc\("([^"]*/([^"/]+))"\(', str(location))
    return match.group(2) if match else None


def location_text(location, source: str = "-") -> str:
    """`file:line:col` of an MLIR location (the innermost file location), `-` standing for `source`."""
    import re

    match = re.search(r'"([^"]*)":(\d+):(\d+)', str(location))
    if not match:
        return source
    file = source if match.group(1) in ("-", "") else match.group(1)
    return f"{file}:{match.group(2)}:{match.group(3)}"


def text_location(text: str, position: int, source: str) -> str:
    """`source:line:col` of the character at `position` in `text` (lines and columns from 1)."""
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return f"{source}:{line}:{column}"
