"""From a scheduled, buffer-assigned xhlo module to a thunk sequence and the kernels to compile
(XLA:CPU's ThunkEmitter).

Allocations, in the order of the execution's address table: the entry parameters, the temp
slab, the constants (their bytes travel with the executable), the outputs. Every value gets
the `BufferSlice` its buffer says in the assignment the cpu pipeline made (the
`xhlo-buffer-assignment` report; no second analysis), and what the emitters need beyond the
values (im2col rows, the effect-order byte) is placed in the same slab, live while its op
runs (`buffer_assignment.place_scratch`); the kernels' own scratch joins it once they are
compiled (`compiler.py`).

Each op of the entry computation, in schedule order, becomes nothing when it is no kernel
(constants, tuples, bitcasts, barriers: buffer assignment made them share their source's
buffer) or has only empty results, a refusal naming it when the backend cannot run it
(`op_support.py`), a kernel the interpreter runs when it has no native lowering, a `copy`
thunk for `xhlo.copy`, and otherwise what `EMITTERS` says for its kind, one module per family
(`emitters/`): library calls (GEMMs, im2col convolutions, output fusions), host calls (sort,
FFT, scatter, ..., the host custom calls), collectives (and send/recv, infeed/outfeed, the
device's ids), control flow (`while`, `conditional`) and, for
every other kind, kernels (`kernel`, or `sliced_kernel` for batch slices and large row-wise
work). Every choice is recorded in `decisions` (the dump's thunk-sequence file says which
path each dot took and why).
"""

import re
from dataclasses import dataclass, field

import numpy as np

from mlirxla.errors import MlirxlaError, jax_primitive, location_text
from mlirxla.ir_queries import entry_function
from mlirxla.mlir import ir
from mlirxla.runtime import literals
from mlirxla.runtime.executable import TensorSpec
from mlirxla.runtime.thunks import BufferSlice, CopyThunk
from mlirxla.transforms.buffer_assignment import Assignment, place_scratch
from mlirxla.transforms.dead_code_elimination import has_side_effect
from mlirxla.transforms.erasure import live_ops
from mlirxla.transforms.fusion_legality import NOT_KERNELS, ContiguousCopy, contiguous_copy, fused_ops, kind_of
from mlirxla.transforms.scheduling import type_bytes

from . import native_symbols, row_programs, softmax_rows
from .emitters import (bitonic_sort, collectives, control_flow, fft_kernel, host_calls, kernels, library_calls, loop_kernels,
                       triangular_solve)
from .emitters.kernels import KernelSpec
from .op_support import interpreted_reason, unsupported_reason

NO_THUNK = (NOT_KERNELS | {"return"}) - collectives.ATTRIBUTES.keys()


def emit_fusion(emitter, op: ir.Operation) -> list:
    copied = contiguous_copy(op)
    if copied is not None:
        return emit_contiguous_copy(emitter, op, copied)
    kind = ir.StringAttr(op.attributes["kind"]).value
    if kind == "output":
        return library_calls.emit_output_fusion(emitter, op)
    if "custom" in op.attributes:
        return kernels.emit_batch_slices(emitter, op)
    if softmax_rows.is_softmax(op):
        return library_calls.emit_softmax(emitter, op)
    program = row_programs.row_program(op)
    thunks = program and library_calls.emit_row_program(emitter, op, program)
    return thunks or kernels.emit_kernel(emitter, op)


def emit_copy(emitter, op: ir.Operation) -> list:
    source, destination = emitter.slice_of(op.operands[0]), emitter.slice_of(op.results[0])
    return [] if source == destination else [CopyThunk(emitter.name_of(op), source, destination)]


def emit_slice(emitter, op: ir.Operation) -> list:
    copied = contiguous_copy(op)
    if copied is not None:
        return emit_contiguous_copy(emitter, op, copied)
    return kernels.emit_kernel(emitter, op)


def emit_contiguous_copy(emitter, op: ir.Operation, copied: ContiguousCopy) -> list:
    """A slice reading one contiguous range of its operand (a stacked weight's layer) is a
    memcpy from inside the operand's buffer: no kernel to compile, and a copy at memcpy's speed."""
    whole = emitter.slice_of(copied.source)
    source = BufferSlice(whole.allocation, whole.offset + copied.offset, copied.size)
    return [CopyThunk(emitter.name_of(op), source, emitter.slice_of(op.results[0]))]


# op kind -> its emitter; any other kind is a kernel (`kernels.emit_kernel`)
EMITTERS = {
    "copy": emit_copy,
    "slice": emit_slice,
    "fusion": emit_fusion,
    "dot": library_calls.emit_dot,
    "convolution": library_calls.emit_convolution,
    "custom_call": loop_kernels.emit_custom_call_kernel_or_host_call,
    "while": control_flow.emit_while,
    "conditional": control_flow.emit_conditional,
    **{kind: host_calls.emit_host_call for kind in host_calls.HOST_CALLS},
    "triangular_solve": triangular_solve.emit_triangular_solve,
    "fft": fft_kernel.emit_fft,
    "scatter": loop_kernels.emit_scatter,
    "select_and_scatter": loop_kernels.emit_select_and_scatter,
    "reduce_window": loop_kernels.emit_reduce_window,
    "sort": bitonic_sort.emit_sort,
    **{kind: collectives.emit_collective for kind in collectives.ATTRIBUTES},
}


@dataclass
class Emission:
    parameters: list[TensorSpec]
    outputs: list[tuple[BufferSlice, TensorSpec]]
    allocation_sizes: list[int]  # per allocation; parameters, slab, constants, outputs
    allocation_kinds: list[str]
    constants: dict[int, np.ndarray]  # allocation -> its bytes
    thunks: list
    kernels: list[KernelSpec]
    slab: int  # the temp slab's allocation
    decisions: list[str] = field(default_factory=list)


def symbol_for(name: str, used: set[str]) -> str:
    """A symbol for kernel `name`, unique in the executable and never a function of this
    process: a kernel named `tanh` would otherwise take the place of libm's `tanh`, which
    another kernel calls."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)
    symbol, counter = base, 0
    while symbol in used or native_symbols.process_address(symbol) is not None:
        counter += 1
        symbol = f"{base}_{counter}"
    used.add(symbol)
    return symbol


class TensorSpecs:
    """`TensorSpec.of` once per type (an optimizer update's hundreds of parameters and outputs
    have a few types; each spec reads the type through the bindings and asks numpy its name)."""

    def __init__(self):
        self.by_type: dict[ir.Type, TensorSpec] = {}

    def of(self, value_type: ir.Type) -> TensorSpec:
        spec = self.by_type.get(value_type)
        if spec is None:
            spec = self.by_type[value_type] = TensorSpec.of(value_type)
        return spec


class ThunkEmitter:
    """The state one emission shares with the emitters: the buffers (values' slices, the
    allocations), the kernels to compile and their symbols, the decisions."""

    def __init__(self, module: ir.Module, assignment: Assignment, slice_rows: bool = True, excess_precision: bool = True,
                 gpu_kernels: bool = False):
        self.module = module
        self.assignment = assignment
        self.slice_rows = slice_rows  # spread large row-wise kernels over host threads (the cuda backend's grids do that)
        self.excess_precision = excess_precision  # a GEMM may ignore a dot's precision algorithm (its operands not rounded)
        # kernels for a GPU (the cuda backend, which runs no host calls): an op with a kernel of its
        # own takes it over its host call, and row-wise kernels run a row a thread
        self.gpu_kernels = gpu_kernels
        self.functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                          for op in module.body.operations if op.operation.name == "func.func"}
        self.symbols: set[str] = set()
        self.kernels: list[KernelSpec] = []
        self.decisions: list[str] = []
        self.slices: dict = {}
        self.effect_order: BufferSlice | None = None
        self.allocations: tuple[list[int], list[str], dict[int, np.ndarray]] = ([], [], {})  # sizes, kinds, constants
        self.tables: dict[bytes, BufferSlice] = {}

    def emit(self) -> Emission:
        entry = entry_function(self.module)
        if entry is None:
            raise MlirxlaError("the module has no entry function")
        sizes, kinds, constants = self.assign_allocations(entry, self.assignment)
        self.allocations = (sizes, kinds, constants)
        self.slab = len(entry.regions[0].blocks[0].arguments)
        block = entry.regions[0].blocks[0]
        thunks = self.emit_block(block)
        terminator = list(block.operations)[-1].operation
        specs = TensorSpecs()
        outputs = [(self.slice_of(value), specs.of(value.type)) for value in terminator.operands]
        parameters = [specs.of(argument.type) for argument in block.arguments]
        sizes[self.slab] = self.assignment.heap.size
        return Emission(parameters, outputs, sizes, kinds, constants, thunks, self.kernels, self.slab, self.decisions)

    # --- buffers ---------------------------------------------------------------------------

    def assign_allocations(self, entry: ir.Operation, assignment: Assignment):
        parameter_count = len(entry.regions[0].blocks[0].arguments)
        sizes = [0] * parameter_count + [assignment.heap.size]
        kinds = ["parameter"] * parameter_count + ["temp"]
        constants: dict[int, np.ndarray] = {}
        slab = parameter_count
        for buffer in assignment.buffers:
            if buffer.kind == "parameter":
                index = buffer.parameter
                sizes[index] = buffer.size
            elif buffer.kind == "temp":
                index = slab
            else:
                index = len(sizes)
                sizes.append(buffer.size)
                kinds.append("constant" if buffer.kind == "constant" else "output")
                if buffer.kind == "constant":
                    constants[index] = self.constant_bytes(buffer)
            offset = buffer.offset if buffer.kind == "temp" else 0
            for value in buffer.values:
                self.slices[value.value] = BufferSlice(index, offset, value.size)
        return sizes, kinds, constants

    def constant_bytes(self, buffer) -> np.ndarray:
        for value in buffer.values:
            owner = value.value.owner
            if isinstance(owner, (ir.Operation, ir.OpView)) and owner.operation.name == "xhlo.constant":
                array = literals.to_numpy(owner.operation.attributes["value"])
                return np.ascontiguousarray(array).view(np.uint8).reshape(-1).copy()
        raise MlirxlaError(f"constant buffer {buffer.name} has no constant op")

    def slice_of(self, value: ir.Value) -> BufferSlice:
        if value not in self.slices:
            raise MlirxlaError(f"value of type {value.type} has no buffer")
        return self.slices[value]

    def allocate(self, size: int, op: ir.Operation | None, name: str, holds: str) -> BufferSlice:
        """Slab memory for what no value holds (im2col rows, the effect-order byte), live while
        `op` runs (None: for the whole program)."""
        start, end = self.assignment.time_span(op) if op is not None else (0, max(len(self.assignment.sequence) - 1, 0))
        return BufferSlice(self.slab, place_scratch(self.assignment, name, size, start, end, holds), size)

    def constant(self, array: np.ndarray) -> BufferSlice:
        """An allocation of the executable's own holding `array` (the emitters' own tables:
        each slice's first row for a sliced kernel that counts rows), one per distinct array."""
        data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        key = data.tobytes()
        if key not in self.tables:
            sizes, kinds, constants = self.allocations
            constants[len(sizes)] = data.copy()
            self.tables[key] = BufferSlice(len(sizes), 0, data.size)
            sizes.append(data.size)
            kinds.append("constant")
        return self.tables[key]

    def symbol(self, name: str) -> str:
        return symbol_for(name, self.symbols)

    def name_of(self, op: ir.Operation) -> str:
        if "name" in op.attributes:
            return ir.StringAttr(op.attributes["name"]).value
        return kind_of(op)

    # --- thunks ----------------------------------------------------------------------------

    def emit_block(self, block: ir.Block) -> list:
        thunks = []
        for op in live_ops(block.operations):
            thunks.extend(self.emit_op(op))
        return thunks

    def emit_op(self, op: ir.Operation) -> list:
        kind = kind_of(op)
        if op.name == "func.return" or kind in NO_THUNK:
            return []
        inner_ops = fused_ops(op)
        for inner in inner_ops:
            if reason := unsupported_reason(inner):
                primitive = jax_primitive(inner.location)
                origin = f" (jax primitive '{primitive}')" if primitive else ""
                raise MlirxlaError(f"xhlo.{kind_of(inner)}: {reason}{origin}", location_text(inner.location))
        interpreted = next((reason for reason in map(interpreted_reason, inner_ops) if reason), None)
        if interpreted:
            return [kernels.kernel_thunk(self, op, interpret=interpreted)]
        if op.results and all(type_bytes(r.type) == 0 for r in op.results) and kind not in ("while", "conditional") \
                and not has_side_effect(op):
            return []  # nothing to compute into empty results (an io_callback's effect still happens)
        return EMITTERS.get(kind, kernels.emit_kernel)(self, op)
