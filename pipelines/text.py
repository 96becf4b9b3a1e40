"""Parse textual pipelines that mix mlirxla passes and upstream MLIR passes.

    builtin.module(xhlo-algsimp{fast-math=true}, canonicalize, cse, xhlo-dce)
    xhlo-algsimp,cse

MLIR's own parser does not know passes written in Python, so the runner parses the text: it
splits the text into steps at the top-level commas and makes each a pass (`steps.py`).
"""

from mlirxla.errors import MlirxlaError

from .pipeline import Pipeline

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
        pipeline.add(item)
    return pipeline
