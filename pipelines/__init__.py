"""Named pipelines per backend (the cpu_compiler.cc / gpu_compiler.cc equivalents).

Each named pipeline is a function in its own module returning a fresh `Pipeline`;
`mlirxla-opt --pipeline=NAME` runs it and `--print-pipeline` shows it as a list.
"""

import importlib

from mlirxla.errors import MlirxlaError

# name -> "module:function" under mlirxla.pipelines
NAMED_PIPELINES = {
    "cpu": "cpu:cpu_pipeline",
    "cuda": "cuda:cuda_pipeline",
    "iree": "iree:iree_pipeline",
    "simplification": "simplification:simplification_pipeline",
}


def pipeline_names() -> list[str]:
    return sorted(NAMED_PIPELINES)


def named_pipeline(name: str, **options):
    """A fresh pipeline `name`, built with `options` (e.g. the cpu pipeline's `alignment`)."""
    if name not in NAMED_PIPELINES:
        raise MlirxlaError(f"unknown pipeline '{name}' (known: {', '.join(pipeline_names())})")
    module_name, function = NAMED_PIPELINES[name].split(":")
    return getattr(importlib.import_module(f"mlirxla.pipelines.{module_name}"), function)(**options)
