"""The fusion decisions behind one kernel: the merges that formed it, back to the ops it
started from, and the merges it (or what it was made of) did not take, with the reason
(the sentences of `--explain-fusion`).

Decisions name their ops as `name(kind) at location`: a fusion by its name, unique in the
module; an op not yet fused by its kind and location. A kernel's history is followed through
the `fusion` each merge made.
"""

from dataclasses import dataclass

from mlirxla.transforms.priority_fusion import describe

FUSION_REPORTS = ("xhlo-priority-fusion", "xhlo-multi-output-fusion", "xhlo-output-fusion", "xhlo-widening-gemm-fusion", "xhlo-batch-slice-fusion")


@dataclass(frozen=True)
class KernelDecisions:
    formed: list[str]  # the merges that made it, earliest first
    refused: list[str]  # the merges it or its parts did not take


def subject(description: str) -> str:
    """What a decision's description names: a fusion's name, or the whole description of an
    op not fused (its kind alone is not unique)."""
    name, _, rest = description.partition("(")
    return name if rest.startswith("fusion)") else description


def made(decision) -> str:
    return getattr(decision, "fusion", "")


def parts(decision) -> tuple[str, str]:
    """The two descriptions a decision is about (priority, output and batch-slice fusion say
    producer and consumer; multi-output fusion, first and second)."""
    if hasattr(decision, "producer"):
        return decision.producer, decision.consumer
    return decision.first, decision.second


def all_decisions(reports: dict) -> list:
    """Every fusion decision of the passes that ran, in pipeline order."""
    return [decision for name in FUSION_REPORTS if name in reports for decision in reports[name].decisions]


def history(name: str, decisions: list) -> list[str]:
    """The subjects `name` was made of, itself first, by following the merges back."""
    by_result = {}
    for decision in decisions:
        if decision.verdict == "fused" and made(decision):
            by_result.setdefault(subject(made(decision)), []).append(decision)
    seen, pending = [], [name]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.append(current)
        for decision in by_result.get(current, []):
            pending.extend(subject(part) for part in parts(decision))
    return seen


def kernel_decisions(op, decisions: list) -> KernelDecisions:
    """The decisions about the kernel of `op` (an ir.Operation of the optimized module)."""
    names = history(subject(describe(op)), decisions)
    formed = [d.line() for d in decisions if d.verdict == "fused" and subject(made(d)) in names]
    refused = [d.line() for d in decisions if d.verdict != "fused" and any(subject(p) in names for p in parts(d))]
    return KernelDecisions(formed, refused)
