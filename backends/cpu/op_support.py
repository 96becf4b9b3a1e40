"""What the cpu backend runs, and how: the ops it refuses (and why), and the ops whose kernels
the reference interpreter evaluates instead of native code (`interpreter_fallback.py`).
Everything else runs natively, as a kernel, a library call or a host call."""

from mlirxla.mlir import ir
from mlirxla.transforms.fusion_legality import kind_of
from mlirxla.transforms.sort_comparator import comparator_keys
from mlirxla.transforms.top_k_rewriter import TARGET as TOP_K_TARGET

from . import scatter_kernel, select_and_scatter_kernel
from .emitters.host_calls import custom_call_target, is_host_custom_call, scatter_combiner

UNSUPPORTED = {
    "rng": "rng is not implemented in the cpu backend yet",
    "rng_bit_generator": "rng_bit_generator reaches the cpu backend only when xhlo-rng-bit-generator-expander is disabled",
}


def unsupported_reason(op: ir.Operation) -> str | None:
    """Why the backend cannot run `op` at all, or None."""
    if kind_of(op) == "custom_call" and not is_host_custom_call(op) and custom_call_target(op) != TOP_K_TARGET:
        return f"custom call @{custom_call_target(op)} has no implementation in the cpu backend"
    return UNSUPPORTED.get(kind_of(op))


def interpreted_reason(op: ir.Operation) -> str | None:
    """Why the interpreter, not native code, runs `op`, or None."""
    kind = kind_of(op)
    if kind == "select_and_scatter":
        return select_and_scatter_kernel.kernel_reason(op)
    if kind == "bitcast_convert" and any("complex" in str(v.type) for v in list(op.operands) + list(op.results)):
        return "the toolkit's lowering of a complex bitcast_convert crashes"
    if kind == "reduce_precision" and ir.IntegerAttr(op.attributes["mantissa_bits"]).value == 0:
        return "the toolkit's lowering of reduce_precision to 0 mantissa bits gives nan for inf"
    if kind == "dynamic_slice" and not op.operands[1:]:
        return "the toolkit's lowering of a dynamic_slice without start indices (a 0-d one) crashes"
    if kind == "sort" and comparator_keys(op) is None:
        return "the host sort takes comparators that are lexicographic chains of compares"
    if kind == "scatter" and scatter_combiner(op) is None and (reason := scatter_kernel.kernel_reason(op)) is not None:
        return f"neither the scatter kernel ({reason}) nor the host scatter (one input combined by set, add, multiply, max, min, or, and) takes it"
    return None
