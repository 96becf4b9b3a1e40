"""A loaded executable: its plan (plain data: allocations, thunks, parameter and output specs)
and its native code; `execute` runs it on numpy arrays (XLA's CpuExecutable).

Per execution: the address table is the parameters' own memory (C-contiguous arrays are
used in place, not copied), a fresh temp slab, the constants (owned by the executable), and
fresh output allocations; outputs come back as numpy views of their allocation (or copies,
for an output that is a parameter or a constant). The plan round-trips through JSON
(`to_json`/`from_json`), so that the compile cache stores it without pickle.
"""

import base64
from dataclasses import dataclass, field

import numpy as np

from mlirxla.errors import MlirxlaError

from . import thunks as thunk_kinds
from .executor import ThreadPool, plan_graph, run_thunks
from .thunks import BufferSlice

ALIGNMENT = 64


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str  # the numpy dtype name holding it
    element: str  # the MLIR element type

    def to_json(self) -> list:
        return [list(self.shape), self.dtype, self.element]

    @classmethod
    def from_json(cls, data: list) -> "TensorSpec":
        return cls(tuple(data[0]), data[1], data[2])

    def text(self) -> str:
        return f"{self.element}[{','.join(map(str, self.shape))}]"


@dataclass
class ExecutablePlan:
    parameters: list[TensorSpec]
    outputs: list[tuple[BufferSlice, TensorSpec]]
    allocation_sizes: list[int]
    allocation_kinds: list[str]  # parameter | temp | constant | output
    constants: dict[int, np.ndarray]  # allocation -> bytes (uint8)
    thunks: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "parameters": [p.to_json() for p in self.parameters],
            "outputs": [[s.to_json(), spec.to_json()] for s, spec in self.outputs],
            "allocation_sizes": self.allocation_sizes,
            "allocation_kinds": self.allocation_kinds,
            "constants": {str(k): base64.b64encode(v.tobytes()).decode() for k, v in self.constants.items()},
            "thunks": [t.to_json() for t in self.thunks],
        }

    @classmethod
    def from_json(cls, data: dict) -> "ExecutablePlan":
        return cls(
            [TensorSpec.from_json(p) for p in data["parameters"]],
            [(BufferSlice.from_json(s), TensorSpec.from_json(spec)) for s, spec in data["outputs"]],
            list(data["allocation_sizes"]),
            list(data["allocation_kinds"]),
            {int(k): np.frombuffer(base64.b64decode(v), np.uint8).copy() for k, v in data["constants"].items()},
            [thunk_kinds.from_json(t) for t in data["thunks"]],
        )

    def describe(self, decisions: list[str] = ()) -> str:
        lines = ["allocations:"]
        for index, (kind, size) in enumerate(zip(self.allocation_kinds, self.allocation_sizes)):
            lines.append(f"  #{index} {kind} {size} bytes")
        lines.append("thunks:")
        for thunk in self.thunks:
            lines += ["  " + line for line in thunk.describe().splitlines()]
        lines.append("outputs: " + ", ".join(f"{spec.text()} at {s.text()}" for s, spec in self.outputs))
        if decisions:
            lines.append("decisions:")
            lines += [f"  {d}" for d in decisions]
        return "\n".join(lines) + "\n"


class Executable:
    """Compiled once, executed many times."""

    def __init__(self, plan: ExecutablePlan, object_code: bytes, pool: ThreadPool | None = None):
        from mlirxla.backends.cpu.llvm_jit import JitEngine

        self.plan = plan
        self.object_code = object_code
        self.engine = JitEngine(object_code)
        for thunk in plan.thunks:
            thunk.bind(self.engine)
        self.pool = pool or ThreadPool.shared()
        self.graph = plan_graph(plan.thunks)
        self.constants = {index: np.ascontiguousarray(data) for index, data in plan.constants.items()}
        self.parameter_dtypes = [np.dtype(p.dtype) for p in plan.parameters]
        self.output_allocations = [i for i, kind in enumerate(plan.allocation_kinds) if kind == "output"]

    def check_arguments(self, arguments) -> list[np.ndarray]:
        specs = self.plan.parameters
        if len(arguments) != len(specs):
            raise MlirxlaError(f"the executable takes {len(specs)} argument(s), got {len(arguments)}")
        arrays = []
        for index, (argument, spec, dtype) in enumerate(zip(arguments, specs, self.parameter_dtypes)):
            array = np.asarray(argument)
            if array.dtype != dtype:
                raise MlirxlaError(f"argument {index}: expected dtype {dtype} ({spec.text()}), got {array.dtype}")
            if array.shape != spec.shape:
                raise MlirxlaError(f"argument {index}: expected shape {spec.shape} ({spec.text()}), got {array.shape}")
            arrays.append(array if array.flags.c_contiguous else np.ascontiguousarray(array))
        return arrays

    def execute(self, arguments) -> list[np.ndarray]:
        arrays = self.check_arguments(arguments)
        plan = self.plan
        storage: dict[int, np.ndarray] = {}
        bases = []
        for index, kind in enumerate(plan.allocation_kinds):
            if kind == "parameter":
                array = arrays[index]
            elif kind == "constant":
                array = self.constants[index]
            else:
                array = aligned_bytes(plan.allocation_sizes[index])
                storage[index] = array
            bases.append(array.ctypes.data)
        run_thunks(plan.thunks, bases, self.pool, self.graph)
        return [self.output(s, spec, storage, arrays) for s, spec in plan.outputs]

    def output(self, at: BufferSlice, spec: TensorSpec, storage: dict, arrays: list) -> np.ndarray:
        dtype = np.dtype(spec.dtype)
        count = int(np.prod(spec.shape, dtype=np.int64))
        kind = self.plan.allocation_kinds[at.allocation]
        if kind == "output":
            return np.frombuffer(storage[at.allocation], dtype, count, at.offset).reshape(spec.shape)
        source = arrays[at.allocation] if kind == "parameter" else (self.constants[at.allocation] if kind == "constant" else storage[at.allocation])
        return np.frombuffer(source.reshape(-1).view(np.uint8), dtype, count, at.offset).reshape(spec.shape).copy()


def aligned_bytes(size: int) -> np.ndarray:
    """`size` bytes aligned to ALIGNMENT (the kernels' vector loads like aligned memory)."""
    raw = np.empty(size + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + size]
