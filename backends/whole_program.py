"""The plan of a backend that runs a program as one call (the reference interpreter's, an
IREE module's): each parameter and each output in an allocation of its own, and one thunk
that reads the parameters and writes the outputs."""

import numpy as np

from mlirxla.mlir import ir
from mlirxla.runtime.executable import ExecutablePlan, TensorSpec
from mlirxla.runtime.thunks import BufferSlice


def signature(function) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The parameter and result specs of a `func.func`."""
    function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    return [TensorSpec.of(t) for t in function_type.inputs], [TensorSpec.of(t) for t in function_type.results]


def spec_bytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize


def one_call_plan(parameters: list[TensorSpec], results: list[TensorSpec], make_thunk, backend: str) -> ExecutablePlan:
    """The plan whose one thunk is `make_thunk(operands, outputs)`, both as (slice, shape,
    dtype) triples over the parameters' and outputs' allocations."""
    sizes = [spec_bytes(spec) for spec in parameters + results]
    slices = [BufferSlice(index, 0, size) for index, size in enumerate(sizes)]
    operands = tuple((at, spec.shape, spec.dtype) for at, spec in zip(slices, parameters))
    outputs = tuple((at, spec.shape, spec.dtype) for at, spec in zip(slices[len(parameters):], results))
    kinds = ["parameter"] * len(parameters) + ["output"] * len(results)
    return ExecutablePlan(parameters, [(at, spec) for (at, _, _), spec in zip(outputs, results)], sizes, kinds, {},
                          [make_thunk(operands, outputs)], backend=backend)
