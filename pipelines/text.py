"""Parse textual pipelines that mix mlirxla passes and upstream MLIR passes.

    builtin.module(xhlo-algsimp{fast-math=true}, canonicalize, cse, xhlo-dce)
    xhlo-algsimp,cse

MLIR's own parser does not know passes written in Python, so the runner parses the text:
registered names become our passes (options converted to their types), anything else must
be an upstream pass or nested pipeline that MLIR's PassManager accepts, and is checked now,
so that an unknown name fails before anything runs.
"""

import re

from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir
from mlirxla.transforms import registry
from mlirxla.transforms.pass_base import UpstreamPass

from .pipeline import Pipeline

_ITEM = re.compile(r"^([\w.-]+)(?:\{(.*)\})?$", re.DOTALL)
_OPENERS, _CLOSERS = "({[<", ")}]>"


def split_top_level(text: str) -> list[str]:
    """Comma-separated items of `text`, brackets balanced; a stray bracket is an error."""
    items, depth, current = [], 0, []
    for char in text:
        if char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth -= 1
            if depth < 0:
                raise MlirxlaError(f"malformed pipeline '{text}': unbalanced '{char}'")
        if char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if depth != 0:
        raise MlirxlaError(f"malformed pipeline '{text}': unbalanced brackets")
    items.append("".join(current).strip())
    if any(not item for item in items):
        raise MlirxlaError(f"malformed pipeline '{text}': empty pass name")
    return items


def parse_options(text: str) -> dict[str, str]:
    options = {}
    for part in re.split(r"[\s,]+", text.strip()):
        if not part:
            continue
        if "=" not in part:
            raise MlirxlaError(f"malformed pass option '{part}' (expected key=value)")
        key, value = part.split("=", 1)
        options[key] = value
    return options


def parse_step(item: str):
    match = _ITEM.match(item)
    if match and registry.is_registered(match.group(1)):
        return registry.pass_class(match.group(1)).with_options(parse_options(match.group(2) or ""))
    upstream = UpstreamPass(text=item)
    try:
        upstream.pass_manager(ir.Context())
    except MlirxlaError:
        if match and "(" not in item:
            raise MlirxlaError(f"unknown pass '{match.group(1)}' (mlirxla-opt --list-passes lists them)") from None
        raise
    return upstream


def unwrap_module(text: str) -> str:
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        return text[len("builtin.module(") : -1]
    return text


def parse_pipeline(text: str, name: str = "pass-pipeline") -> Pipeline:
    """A pipeline named `name` from textual pipeline `text`."""
    body = unwrap_module(text)
    if not body:
        raise MlirxlaError("empty pass pipeline")
    pipeline = Pipeline(name)
    for item in split_top_level(body):
        pipeline.add(parse_step(item))
    return pipeline
