"""Compile settings that a compile option or an environment variable turns on or off."""

import os

from mlirxla.errors import MlirxlaError


def on_or_off(option: bool | None, variable: str, meaning: str) -> bool:
    """`option` when given, else the environment `variable` (1 or 0; on when unset); another
    value is refused, naming what 1 means."""
    if option is not None:
        return option
    text = os.environ.get(variable, "").strip()
    if text not in ("", "0", "1"):
        raise MlirxlaError(f"{variable}={text!r}: expected 1 ({meaning}) or 0")
    return text != "0"
