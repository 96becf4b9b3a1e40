"""One step of a textual pipeline, made a pass: a registered name becomes our pass (its
`{key=value}` options converted to their types); anything else must be an upstream MLIR pass
or nested pipeline that MLIR's PassManager accepts, and is checked now, so that an unknown name
fails before anything runs.

    xhlo-algsimp{fast-math=true}    canonicalize    func.func(cse)
"""

import re

from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir
from mlirxla.transforms import registry
from mlirxla.transforms.pass_base import UpstreamPass

_ITEM = re.compile(r"^([\w.-]+)(?:\{(.*)\})?$", re.DOTALL)
# upstream steps MLIR's PassManager accepted: checking one takes a new context (~5 ms), and
# every compile builds its pipeline from the same steps
_ACCEPTED_UPSTREAM: set[str] = set()


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
    if item not in _ACCEPTED_UPSTREAM:
        try:
            upstream.pass_manager(ir.Context())
        except MlirxlaError:
            if match and "(" not in item:
                raise MlirxlaError(f"unknown pass '{match.group(1)}' (mlirxla-opt --list-passes lists them)") from None
            raise
        _ACCEPTED_UPSTREAM.add(item)
    return upstream
