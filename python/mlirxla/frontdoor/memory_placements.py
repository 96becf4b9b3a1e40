"""Memory placements inside a program (`custom_call @annotate_device_placement`, jax's
`device_put` to a memory kind under jit, and XLA's own `@MoveToHost` / `@MoveToDevice`) become
the value they place.

On XLA:CPU every memory kind (`device`, `pinned_host`, `unpinned_host`) is the same host
memory, and so it is on mlirxla's devices: moving a value between them moves nothing. The
memory a result is returned in is the entry's `mhlo.memory_kind` result attribute, which the
plan keeps (`ExecutablePlan.output_memory_kinds`). A placement naming a kind the devices do
not have is refused.
"""

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase, live_ops

from .check_calls import target_name

PLACEMENTS = frozenset({"annotate_device_placement", "MoveToHost", "MoveToDevice"})
MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")
PLACEMENT_ATTRIBUTE = "_xla_buffer_placement"


def placements_to_values(module: ir.Module) -> None:
    for op in live_ops(ops_named(module, "stablehlo.custom_call")):
        if target_name(op) not in PLACEMENTS:
            continue
        kind = placement_kind(op)
        if kind is not None and kind not in MEMORY_KINDS:
            raise MlirxlaError(f"custom_call @{target_name(op)}: memory kind '{kind}' (mlirxla devices have "
                               f"{', '.join(MEMORY_KINDS)})", location_text(op.location))
        replace_by_operands(op)


def replace_by_operands(op: ir.Operation) -> None:
    """Replace custom call `op`, which returns its operands as they are, by them."""
    if len(op.operands) != len(op.results) or any(a.type != r.type for a, r in zip(op.operands, op.results)):
        raise MlirxlaError(f"custom_call @{target_name(op)}: must return its operands as they are", location_text(op.location))
    for operand, result in zip(op.operands, op.results):
        result.replace_all_uses_with(operand)
    erase(op)


def placement_kind(op: ir.Operation) -> str | None:
    if "mhlo.frontend_attributes" not in op.attributes:
        return None
    attributes = ir.DictAttr(op.attributes["mhlo.frontend_attributes"])
    return ir.StringAttr(attributes[PLACEMENT_ATTRIBUTE]).value if PLACEMENT_ATTRIBUTE in attributes else None
