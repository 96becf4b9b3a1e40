"""Pipelines as data: a named, ordered list of passes, sub-pipelines and fixed points.

    Pipeline("simplification").add(AlgebraicSimplifierPass()).add("cse")
    Pipeline("cpu").fixed_point(simplification, max_iterations=25).add(...)

A string step is a pass name (ours from the registry, or an upstream MLIR pass in MLIR's
syntax). A `FixedPoint` re-runs its step until an iteration changes nothing (XLA's
HloPassFix); reaching the cap is an error that names the step. The runner
(`pipelines/runner.py`) executes pipelines and keeps the books.
"""

from dataclasses import dataclass, field

from mlirxla.transforms.pass_base import ModulePass, UpstreamPass
from mlirxla.transforms.registry import UPSTREAM_PASSES

from .steps import parse_step

DEFAULT_MAX_ITERATIONS = 25


@dataclass
class Pipeline:
    """A named sequence of steps: passes, pipelines and fixed points."""

    name: str
    steps: list = field(default_factory=list)

    def add(self, step) -> "Pipeline":
        """Append a pass (instance or pipeline-text name), a pipeline or a fixed point."""
        self.steps.append(as_step(step))
        return self

    def fixed_point(self, step, max_iterations: int = DEFAULT_MAX_ITERATIONS) -> "Pipeline":
        """Append `step` to be run until it changes nothing (at most `max_iterations` times)."""
        self.steps.append(FixedPoint(as_step(step), max_iterations))
        return self

    def describe(self, indent: str = "") -> list[str]:
        """The pipeline as an indented list, one step a line."""
        lines = [f"{indent}{self.name}:"]
        for step in self.steps:
            lines.extend(describe_step(step, indent + "  "))
        return lines


@dataclass
class FixedPoint:
    """Run `step` until an iteration reports no change; more than `max_iterations` is an error."""

    step: object
    max_iterations: int = DEFAULT_MAX_ITERATIONS

    @property
    def name(self) -> str:
        return step_name(self.step)


def as_step(step):
    if isinstance(step, str):
        return parse_step(step)
    if isinstance(step, (ModulePass, Pipeline, FixedPoint)):
        return step
    raise TypeError(f"not a pipeline step: {step!r}")


def step_name(step) -> str:
    if isinstance(step, ModulePass):
        return step.display_name
    return step.name


def describe_step(step, indent: str) -> list[str]:
    if isinstance(step, Pipeline):
        return step.describe(indent)
    if isinstance(step, FixedPoint):
        inner = describe_step(step.step, indent + "  ")
        return [f"{indent}fixed point (at most {step.max_iterations} iterations):"] + inner
    summary = UPSTREAM_PASSES.get(step.display_name, step.summary) if isinstance(step, UpstreamPass) else step.summary
    return [f"{indent}{step.display_name}" + (f"  -- {summary}" if summary else "")]
