"""The entry as its caller sees it once the module is partitioned: every parameter's and
result's global shape and HloSharding, kept on the module as `xhlo.global_entry` (XLA keeps
`spmd_parameters_shardings` / `spmd_output_sharding` on the HloModuleConfig for the same
reason: PJRT's `GetParameterShardings`).

A partitioned program sees only local shapes, and its entry's sharding attributes go with
the rewrite; the caller still has to split global arrays into each device's shards and put
the results back together. The partitioners (`xhlo-spmd-partitioner`, after propagation
gave every result a sharding, and `xhlo-manual-partitioner`, from the declared ones) record
the entry just before they rewrite it; the cpu backend copies the record into the
executable's plan (`runtime/executable.py`), which the runtime's sharded arrays read
(`runtime/sharded.py`). A value without a sharding is `{replicated}`.

    xhlo.global_entry = {parameters = [{shape = array<i64: 16, 32>, sharding = "{devices=[2,4]<=[8]}"}, ...],
                         results = [...]}
"""

from __future__ import annotations

from dataclasses import dataclass

from mlirxla.mlir import ir

from .sharding import HloSharding, parse_attribute

GLOBAL_ENTRY = "xhlo.global_entry"
SHARDING = "xhlo.sharding"


@dataclass(frozen=True)
class GlobalValue:
    """A parameter or result of the entry: its global shape and its HloSharding's text."""

    shape: tuple[int, ...]
    sharding: str

    def to_json(self) -> list:
        return [list(self.shape), self.sharding]

    @classmethod
    def from_json(cls, data: list) -> "GlobalValue":
        return cls(tuple(int(d) for d in data[0]), str(data[1]))


def record(module: ir.Module, function: ir.Operation) -> None:
    """Write `xhlo.global_entry` from the entry `function` as it is now (global types, the
    shardings on its parameters and results)."""
    signature = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)

    def values(key: str, types) -> ir.ArrayAttr:
        entries = list(ir.ArrayAttr(function.attributes[key])) if key in function.attributes else []
        out = []
        for index, value_type in enumerate(types):
            attributes = ir.DictAttr(entries[index]) if index < len(entries) else None
            sharding = parse_attribute(attributes[SHARDING]) if attributes is not None and SHARDING in attributes else HloSharding.replicated()
            shape = list(ir.RankedTensorType(value_type).shape) if isinstance(value_type, ir.RankedTensorType) else [0]
            out.append(ir.DictAttr.get({"shape": ir.DenseI64ArrayAttr.get(shape), "sharding": ir.StringAttr.get(str(sharding))}))
        return ir.ArrayAttr.get(out)

    module.operation.attributes[GLOBAL_ENTRY] = ir.DictAttr.get({
        "parameters": values("arg_attrs", signature.inputs), "results": values("res_attrs", signature.results)})


def read(module: ir.Module) -> tuple[list[GlobalValue], list[GlobalValue]] | None:
    """(parameters, results) as recorded; None when no partitioner rewrote the entry."""
    attributes = module.operation.attributes
    if GLOBAL_ENTRY not in attributes:
        return None
    entry = ir.DictAttr(attributes[GLOBAL_ENTRY])

    def values(key: str) -> list[GlobalValue]:
        return [GlobalValue(tuple(ir.DenseI64ArrayAttr(ir.DictAttr(v)["shape"])), ir.StringAttr(ir.DictAttr(v)["sharding"]).value)
                for v in ir.ArrayAttr(entry[key])]

    return values("parameters"), values("results")
