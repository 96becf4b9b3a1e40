"""`custom_call @control_dep(src, dst)` (jax.experimental.control_deps: `schedule([a, b, c])`)
is dropped: a scheduling hint that `dst` run after `src`, with no results and no computation.

XLA makes it a control edge for its scheduler, which serializes a program's collectives and
compute in the order the user asked for. mlirxla's runtime orders thunks by data dependencies
only (`runtime/executor.py`, independent thunks overlap), so the hint has nothing to bind;
the values it names are computed all the same.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.transforms.erasure import erase, live_ops

from .check_calls import target_name

TARGET = "control_dep"


def drop_control_dependencies(module) -> None:
    for op in live_ops(ops_named(module, "stablehlo.custom_call")):
        if target_name(op) == TARGET and not len(op.results):
            erase(op)
