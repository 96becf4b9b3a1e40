"""The CPU compiler's pipeline, stage by stage (XLA's cpu_compiler.cc, as a readable list).

Later stages (layout assignment, fusion, copy insertion, scheduling, buffer assignment)
join here as their passes land.
"""

from .pipeline import Pipeline
from .simplification import simplification_pipeline


def cpu_pipeline() -> Pipeline:
    return Pipeline("cpu").fixed_point(simplification_pipeline(), max_iterations=25)
