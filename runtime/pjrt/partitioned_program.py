"""The program each device runs, as jax's `compiled.as_text()` shows it: for a program over
several partitions, the module after the SPMD partitioner and the collective combiners, back
in StableHLO.

XLA's optimized HLO of a sharded jit is the partitioned program: per-device shapes and the
collectives the partitioner inserted (`all-gather`, `all-reduce`, ...), which is what users
and jax's own tests read (`'all-reduce' in compiled.as_text()`). jaxlib prints whatever
PJRT_Executable_OptimizedProgram returns; it used to be jax's own program with the chosen
shardings added (`chosen_shardings.py`), which shows no collective at all.

`PartitionedProgram` listens to the compile (`phases`): when the SPMD partitioner or a
collective combiner changed the module, a copy of it is lowered to StableHLO
(`transforms/xhlo_to_stablehlo.py`) and kept as text, mlirxla's own module attributes
dropped; the last one kept is what jax gets (one all-reduce of four gradients where the
combiner made one, as XLA's optimized HLO shows). The bridge then hands jax that text
with the chosen shardings as module attributes, parsed and printed by jaxlib's MLIR as
`chosen_shardings.py` does; where there is none (one partition, a module the lowering
cannot take back to StableHLO) jax's own program is kept. With a compile cache the text is
kept beside the entry (`bridge.kept_partitioned_program`), so a compile the cache serves
shows it too.
The cost analysis compiles the kept program again: a partitioned one gives each device's
cost, as XLA's does for a partitioned module.
"""

from mlirxla import phases
from mlirxla.mlir import ir

SNAPSHOTS = frozenset({"xhlo-spmd-partitioner", "xhlo-all-reduce-combiner", "xhlo-all-gather-combiner"})
PRIVATE_ATTRIBUTE = "xhlo."  # mlirxla's module, argument and result attributes


class PartitionedProgram(phases.Listener):
    """While listening, keeps the StableHLO text of the module as the last of `SNAPSHOTS` to
    change it left it. A compile for one partition (`partitions` 1; 0 when the options do
    not say) is not listened to: a listener makes every phase of the compile report itself."""

    def __init__(self, partitions: int):
        self.text: str | None = None
        self.listening = partitions != 1

    def __enter__(self) -> "PartitionedProgram":
        if self.listening:
            phases.add_listener(self)
        return self

    def __exit__(self, *exception) -> None:
        if self.listening:
            phases.remove_listener(self)

    def published(self, kind: str, value) -> None:
        if kind != "module-changed" or not value.ledger.rows or value.ledger.rows[-1].pass_name not in SNAPSHOTS:
            return
        try:
            self.text = stablehlo_text(value.module)
        except Exception:  # a view for jax to print: an op the lowering cannot take back must not fail the compile
            self.text = None


def stablehlo_text(module: ir.Module) -> str:
    """A copy of xhlo `module` in StableHLO, without mlirxla's attributes."""
    from mlirxla.transforms import xhlo_to_stablehlo

    with module.context, ir.Location.unknown():
        copy = ir.Module.parse(str(module))
        xhlo_to_stablehlo.lower_module(copy)
        drop_private_attributes(copy)
        return str(copy)


def drop_private_attributes(module: ir.Module) -> None:
    attributes = module.operation.attributes
    for name in [name for name in attributes if name.startswith(PRIVATE_ATTRIBUTE)]:
        del attributes[name]
    for op in module.body.operations:
        for key in ("arg_attrs", "res_attrs"):
            if key in op.attributes:
                op.attributes[key] = ir.ArrayAttr.get([public_entries(entry) for entry in ir.ArrayAttr(op.attributes[key])])


def public_entries(entry: ir.Attribute) -> ir.Attribute:
    return ir.DictAttr.get({named.name: named.attr for named in ir.DictAttr(entry) if not named.name.startswith(PRIVATE_ATTRIBUTE)})
