"""`custom_call @ApproxTopK` (jax.lax.approx_max_k / approx_min_k) as an exact sort and slice.

jax emits the custom call with `is_fallback = true` on CPU, where XLA computes the exact top-k:
the inputs are sorted together along `reduction_dim` by the comparator jax passes as its
called computation, and the first `top_k` of each are kept (all of them when
`aggregate_to_topk` is false: the call's result type keeps the whole dimension, as XLA's
does). The comparator (a function whose body ends in `stablehlo.return` or `func.return`, as
jax's passes leave it) becomes the sort's region and is removed once nothing calls it.
"""

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase, live_ops

TARGET = "ApproxTopK"


def backend_config(op: ir.Operation) -> dict:
    if "mhlo.backend_config" not in op.attributes or not isinstance(op.attributes["mhlo.backend_config"], ir.DictAttr):
        raise MlirxlaError(f"custom_call @{TARGET}: needs its mhlo.backend_config dictionary", location_text(op.location))
    return {named.name: named.attr for named in ir.DictAttr(op.attributes["mhlo.backend_config"])}


def comparator(op: ir.Operation, module: ir.Module) -> ir.Operation:
    names = [ir.FlatSymbolRefAttr(a).value for a in ir.ArrayAttr(op.attributes["called_computations"])] if "called_computations" in op.attributes else []
    functions = {ir.StringAttr(f.attributes["sym_name"]).value: f.operation for f in module.body.operations if f.operation.name == "func.func"}
    if len(names) != 1 or names[0] not in functions:
        raise MlirxlaError(f"custom_call @{TARGET}: needs one comparator among its called computations", location_text(op.location))
    return functions[names[0]]


def expand(op: ir.Operation, module: ir.Module) -> ir.Operation:
    """Replace one ApproxTopK by sort + slices; the comparator function it used."""
    config = backend_config(op)
    k, dimension = ir.IntegerAttr(config["top_k"]).value, ir.IntegerAttr(config["reduction_dim"]).value
    inputs = list(op.operands)[: len(op.operands) // 2]
    function = comparator(op, module)
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint(op), op.location:
        sort = ir.Operation.create("stablehlo.sort", results=[v.type for v in inputs], operands=inputs, regions=1,
                                   attributes={"dimension": ir.IntegerAttr.get(i64, dimension), "is_stable": ir.BoolAttr.get(True)})
        body = function.regions[0].blocks[0]
        block = ir.Block.create_at_start(sort.regions[0], [a.type for a in body.arguments])
        mapping = dict(zip(body.arguments, block.arguments))
        operations = [inner.operation for inner in body.operations]
        with ir.InsertionPoint(block):
            for inner in operations[:-1]:
                clone = inner.clone()
                for index, value in enumerate(clone.operands):
                    clone.operands[index] = mapping.get(value, value)
                mapping.update(zip(inner.results, clone.results))
            ir.Operation.create("stablehlo.return", operands=[mapping.get(v, v) for v in operations[-1].operands])
        for result, sorted_value in zip(op.results, sort.results):
            shape = list(ir.RankedTensorType(result.type).shape)
            limits = list(ir.RankedTensorType(sorted_value.type).shape)
            limits[dimension] = shape[dimension]  # k, or every value when aggregate_to_topk is false
            top = ir.Operation.create("stablehlo.slice", results=[result.type], operands=[sorted_value], attributes={
                "start_indices": ir.DenseI64ArrayAttr.get([0] * len(shape)),
                "limit_indices": ir.DenseI64ArrayAttr.get(limits),
                "strides": ir.DenseI64ArrayAttr.get([1] * len(shape))})
            result.replace_all_uses_with(top.results[0])
    erase(op)
    return function


def expand_approx_top_k(module: ir.Module) -> None:
    comparators = []
    for op in live_ops(ops_named(module, "stablehlo.custom_call")):
        if ir.StringAttr(op.attributes["call_target_name"]).value == TARGET:
            comparators.append(expand(op, module))
    if comparators:
        still_called = {ir.FlatSymbolRefAttr(a).value for op in ops_named(module, "stablehlo.custom_call")
                        if "called_computations" in op.attributes for a in ir.ArrayAttr(op.attributes["called_computations"])}
        for function in live_ops(comparators):
            if ir.StringAttr(function.attributes["sym_name"]).value not in still_called:
                erase(function)
