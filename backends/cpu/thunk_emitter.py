"""From a scheduled, buffer-assigned xhlo module to a thunk sequence and the kernels to compile
(XLA:CPU's ThunkEmitter).

Allocations, in the order of the execution's address table: the entry parameters, the temp
slab, the constants (their bytes travel with the executable), the outputs. Every value gets
the `BufferSlice` its buffer-assignment buffer says.

Each op of the entry computation, in schedule order, becomes:

- nothing, when it is no kernel (constants, tuples, bitcasts, barriers: buffer assignment
  already made them share their source's buffer);
- a `copy` thunk for `xhlo.copy`;
- a `gemm` thunk for a dot BLAS can run (f32/f64, row-major operands in one of the four
  transpose combinations, optionally batched over dimension 0), and an im2col kernel plus a
  `gemm` for a convolution worth it (`convolution_gemm.py`); an output fusion rooted in such
  a dot or convolution becomes the `gemm` writing the fusion's output, then its epilogue as
  a kernel reading that output elementwise and writing it in place;
- a `sliced_kernel` thunk for a batch-slice fusion (one kernel computing one slice), and for
  a large kernel that keeps the rows of dimension 0 apart (elementwise work, row
  reductions): blocks of rows run on the thread pool;
- a `host` thunk for sort, FFT, triangular solve, Cholesky and scatter: numpy on views of the buffers, as
  XLA:CPU calls runtime library functions for them; and for the custom calls in
  `HOST_CUSTOM_CALLS` (Python callbacks, eigh, svd): side-effecting Python callbacks all
  write one byte besides their results, so that the executor keeps them in program order;
- `while` and `conditional` thunks holding the thunks of their computations;
- a `kernel` thunk for everything else (a fusion, or a single op as its own kernel).

Every choice is recorded in `decisions` (the dump's thunk-sequence file says which path each
dot took and why).
"""

import json
import re
from dataclasses import dataclass, field

import numpy as np

from mlirxla.errors import MlirxlaError, jax_primitive, location_text
from mlirxla.mlir import ir
from mlirxla.runtime import callbacks, literals
from mlirxla.runtime.executable import ALIGNMENT, TensorSpec
from mlirxla.runtime.thunks import (
    BufferSlice,
    ConditionalThunk,
    CopyThunk,
    GemmThunk,
    HostThunk,
    KernelThunk,
    ParallelCopyThunk,
    SlicedKernelThunk,
    WhileThunk,
)
from mlirxla.transforms.buffer_assignment import Assignment, analyze
from mlirxla.transforms.dead_code_elimination import has_side_effect
from mlirxla.transforms.erasure import live_ops
from mlirxla.transforms.fusion_legality import LIBRARY_CALLS, NOT_KERNELS, fused_ops, kind_of
from mlirxla.transforms.batch_slice_fusion import leading_size, slice_problem
from mlirxla.transforms.scheduling import entry_function, type_bytes

from . import native_symbols
from .convolution_gemm import convolution_shape, im2col_module_text, worth_a_gemm
from .kernel_source import SlicePlan, slice_plan
from .sort_comparator import comparator_keys

NO_THUNK = NOT_KERNELS | {"return"}
# ops with no native lowering: the interpreter evaluates them (interpreter_fallback.py)
INTERPRETED = {
    "select_and_scatter": "select_and_scatter has no native lowering",
}
PARALLEL_MIN_BYTES = 1 << 20  # smaller kernels run on one thread: splitting costs more than it saves
PARALLEL_BLOCKS = (16, 8, 4, 2)  # slices per parallel kernel, the first that divides dimension 0
UNSUPPORTED = {
    "rng": "rng is not implemented in the cpu backend yet",
    "rng_bit_generator": "rng_bit_generator reaches the cpu backend only when xhlo-rng-bit-generator-expander is disabled",
    "all_reduce": "collectives need the multi-device runtime",
    "all_gather": "collectives need the multi-device runtime",
    "all_to_all": "collectives need the multi-device runtime",
    "reduce_scatter": "collectives need the multi-device runtime",
    "collective_permute": "collectives need the multi-device runtime",
    "collective_broadcast": "collectives need the multi-device runtime",
    "infeed": "infeed is not supported", "outfeed": "outfeed is not supported",
    "send": "send is not supported", "recv": "recv is not supported",
}


@dataclass
class KernelSpec:
    """A kernel to compile: the op, its symbol, and how (one slice of it; its epilogue only)."""

    symbol: str
    op: ir.Operation
    plan: SlicePlan | None = None
    library_result: ir.Value | None = None
    interpret: str | None = None  # why the interpreter evaluates it instead (no native lowering)
    source: str | None = None  # the kernel's own module text (an im2col), instead of the op's


@dataclass
class Emission:
    parameters: list[TensorSpec]
    outputs: list[tuple[BufferSlice, TensorSpec]]
    allocation_sizes: list[int]  # per allocation; parameters, slab, constants, outputs
    allocation_kinds: list[str]
    constants: dict[int, np.ndarray]  # allocation -> its bytes
    thunks: list
    kernels: list[KernelSpec]
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


class ThunkEmitter:
    def __init__(self, module: ir.Module):
        self.module = module
        self.functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                          for op in module.body.operations if op.operation.name == "func.func"}
        self.symbols: set[str] = set()
        self.kernels: list[KernelSpec] = []
        self.decisions: list[str] = []
        self.slices: dict = {}
        self.effect_order: BufferSlice | None = None

    def emit(self) -> Emission:
        entry = entry_function(self.module)
        if entry is None:
            raise MlirxlaError("the module has no entry function")
        assignment = analyze(self.module, alignment=ALIGNMENT)
        sizes, kinds, constants = self.assign_allocations(entry, assignment)
        self.sizes, self.kinds = sizes, kinds  # scratch allocations (im2col rows) join them
        block = entry.regions[0].blocks[0]
        thunks = self.emit_block(block)
        terminator = list(block.operations)[-1].operation
        outputs = [(self.slice_of(value), TensorSpec.of(value.type)) for value in terminator.operands]
        parameters = [TensorSpec.of(argument.type) for argument in block.arguments]
        return Emission(parameters, outputs, sizes, kinds, constants, thunks, self.kernels, self.decisions)

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
            reason = unsupported_reason(inner)
            if reason:
                primitive = jax_primitive(inner.location)
                origin = f" (jax primitive '{primitive}')" if primitive else ""
                raise MlirxlaError(f"xhlo.{kind_of(inner)}: {reason}{origin}", location_text(inner.location))
        interpreted = next((reason for reason in map(interpreted_reason, inner_ops) if reason), None)
        if interpreted:
            return [self.kernel_thunk(op, interpret=interpreted)]
        if op.results and all(type_bytes(r.type) == 0 for r in op.results) and kind not in ("while", "conditional") \
                and not has_side_effect(op):
            return []  # nothing to compute into empty results (an io_callback's effect still happens)
        if kind == "copy":
            source, destination = self.slice_of(op.operands[0]), self.slice_of(op.results[0])
            return [] if source == destination else [CopyThunk(self.name_of(op), source, destination)]
        if kind in HOST_CALLS:
            return [self.host_thunk(op)]
        if (target := host_custom_call(op)) is not None:
            call, attributes_of = HOST_CUSTOM_CALLS[target]
            return [self.host_thunk(op, call, attributes_of(op))]
        if kind == "while":
            return [self.emit_while(op)]
        if kind == "conditional":
            return [self.emit_conditional(op)]
        if kind == "dot":
            gemm = self.gemm_for(op, op, op.results[0])
            if gemm is not None:
                return [gemm]
        if kind == "convolution":
            library = self.convolution_as_gemm(op, op, op.operands[0], op.operands[1])
            if library:
                return library
        if kind == "fusion" and ir.StringAttr(op.attributes["kind"]).value == "output":
            return self.emit_output_fusion(op)
        if kind == "fusion" and "custom" in op.attributes:
            return [self.emit_sliced(op, slice_plan(op), "batch slices")]
        rows = parallel_rows(op)
        if rows:
            return [self.emit_sliced(op, slice_plan(op, rows), "parallel row blocks")]
        return [self.kernel_thunk(op)]

    def name_of(self, op: ir.Operation) -> str:
        if "name" in op.attributes:
            return ir.StringAttr(op.attributes["name"]).value
        return kind_of(op)

    def kernel_thunk(self, op: ir.Operation, library_result: ir.Value | None = None, interpret: str | None = None) -> KernelThunk:
        name = self.name_of(op)
        symbol = symbol_for(name if library_result is None else f"{name}_epilogue", self.symbols)
        self.kernels.append(KernelSpec(symbol, op, library_result=library_result, interpret=interpret))
        operands = [self.slice_of(v) for v in op.operands]
        if library_result is not None:
            operands.append(self.slice_of(op.results[0]))
        results = [self.slice_of(r) for r in op.results]
        return KernelThunk(name, symbol, tuple(operands + results), len(results))

    def emit_sliced(self, op: ir.Operation, plan: SlicePlan, why: str) -> SlicedKernelThunk:
        name = self.name_of(op)
        symbol = symbol_for(name, self.symbols)
        self.kernels.append(KernelSpec(symbol, op, plan=plan))
        arguments = [self.slice_of(v) for v in op.operands] + [self.slice_of(r) for r in op.results]
        strides = [type_bytes(v.type) // plan.count if sliced else 0 for v, sliced in zip(op.operands, plan.sliced_operands)]
        strides += [type_bytes(r.type) // plan.count for r in op.results]
        self.decisions.append(f"{name}: {why}, {plan.count} slices of {plan.rows} row(s), "
                              f"{sum(plan.sliced_operands)} operand(s) read slice by slice")
        return SlicedKernelThunk(name, symbol, tuple(arguments), len(op.results), slices=plan.count, strides=tuple(strides))

    def emit_output_fusion(self, op: ir.Operation) -> list:
        roots = [inner for inner in fused_ops(op) if kind_of(inner) in LIBRARY_CALLS]
        call = roots[0]
        block = op.regions[0].blocks[0]
        operands = {argument: value for argument, value in zip(block.arguments, op.operands)}
        lhs, rhs = operands.get(call.operands[0]), operands.get(call.operands[1])
        if lhs is not None and rhs is not None:
            if kind_of(call) == "dot":
                gemm = self.gemm_for(call, op, op.results[0], lhs, rhs)
                library = [gemm] if gemm is not None else None
            else:
                library = self.convolution_as_gemm(call, op, lhs, rhs)
            if library:
                return library + [self.kernel_thunk(op, library_result=call.results[0])]
        self.decisions.append(f"{self.name_of(op)}: {kind_of(call)} generated with its epilogue in one kernel")
        return [self.kernel_thunk(op)]

    def convolution_as_gemm(self, convolution: ir.Operation, owner: ir.Operation, lhs: ir.Value, rhs: ir.Value) -> list | None:
        """An im2col kernel and a GEMM writing `owner`'s result for `convolution` when BLAS can
        run it and its work is worth it, else None; the decision is recorded either way."""
        name = self.name_of(owner)
        shape = convolution_shape(convolution)
        if shape is None or not worth_a_gemm(shape):
            why = "a layout, dilation, group or type BLAS cannot take" if shape is None else "too little work for im2col + GEMM"
            self.decisions.append(f"{name}: convolution generated as a kernel ({why})")
            return None
        width = 4 if shape.element == "f32" else 8
        rows = BufferSlice(len(self.sizes), 0, shape.m * shape.k * width)
        self.sizes.append(rows.size)
        self.kinds.append("temp")
        symbol = symbol_for(f"{name}_im2col", self.symbols)
        self.kernels.append(KernelSpec(symbol, convolution, source=im2col_module_text(symbol, shape)))
        self.decisions.append(f"{name}: convolution as im2col + BLAS GEMM {shape.element} {shape.m}x{shape.features}x{shape.k}")
        im2col = KernelThunk(f"{name}.im2col", symbol, (self.slice_of(lhs), rows), 1)
        gemm = GemmThunk(name, shape.element, rows, self.slice_of(rhs), self.slice_of(owner.results[0]), shape.m,
                         shape.features, shape.k, False, False)
        return [im2col, gemm]

    def gemm_for(self, dot: ir.Operation, owner: ir.Operation, out: ir.Value, lhs=None, rhs=None) -> GemmThunk | None:
        """A GEMM thunk for `dot` (reading `lhs`, `rhs`, writing `out`), or None when BLAS cannot
        run it; the decision is recorded either way."""
        lhs = dot.operands[0] if lhs is None else lhs
        rhs = dot.operands[1] if rhs is None else rhs
        name = self.name_of(owner)
        shape = gemm_shape(dot)
        element = str(ir.RankedTensorType(dot.results[0].type).element_type)
        operand_elements = {str(ir.RankedTensorType(v.type).element_type) for v in dot.operands}
        if operand_elements != {element}:
            element = f"{'/'.join(sorted(operand_elements))} to {element}"
        if shape is None or element not in ("f32", "f64"):
            self.decisions.append(f"{name}: dot generated as a kernel ({'element type ' + element if shape else 'dimension numbers BLAS cannot take'})")
            return None
        batch, m, n, k, transpose_lhs, transpose_rhs = shape
        self.decisions.append(f"{name}: dot as a BLAS GEMM {element} {batch}x{m}x{n}x{k}")
        return GemmThunk(name, element, self.slice_of(lhs), self.slice_of(rhs), self.slice_of(out), m, n, k,
                         transpose_lhs, transpose_rhs, batch)

    def emit_while(self, op: ir.Operation) -> WhileThunk:
        condition_block = op.regions[0].blocks[0]
        body_block = op.regions[1].blocks[0]
        condition = self.emit_block(condition_block)
        predicate = self.slice_of(list(condition_block.operations)[-1].operation.operands[0])
        body = self.emit_body(body_block)
        touched = self.touched(op, condition + body, [predicate])
        return WhileThunk(self.name_of(op), condition, predicate, body, touched)

    def emit_conditional(self, op: ir.Operation) -> ConditionalThunk:
        branches = []
        for symbol in ir.ArrayAttr(op.attributes["branch_computations"]):
            function = self.functions[ir.FlatSymbolRefAttr(symbol).value]
            branches.append(self.emit_block(function.regions[0].blocks[0]))
        selector = op.operands[0]
        is_predicate = str(ir.RankedTensorType(selector.type).element_type) == "i1"
        touched = self.touched(op, [thunk for branch in branches for thunk in branch], [])
        return ConditionalThunk(self.name_of(op), self.slice_of(selector), is_predicate, branches, touched)

    def host_thunk(self, op: ir.Operation, call: str | None = None, attributes: dict | None = None) -> HostThunk:
        kind = call or kind_of(op)
        attributes = HOST_CALLS[kind](op) if attributes is None else attributes
        name = self.name_of(op)
        self.decisions.append(f"{name}: {kind} as a host call {attributes}")

        def specs(values):
            return tuple((self.slice_of(v), tuple(ir.RankedTensorType(v.type).shape), TensorSpec.of(v.type).dtype) for v in values)

        results = specs(op.results)
        if attributes.get("effect"):
            results += ((self.effect_order_slice(), (1,), "uint8"),)
        return HostThunk(name, kind, specs(op.operands), results, attributes)

    def effect_order_slice(self) -> BufferSlice:
        """The byte every side-effecting host call writes last: the executor orders thunks by
        the memory they touch, and the tokens that order effects take none, so without it
        two callbacks with independent operands could run at once or in either order."""
        if self.effect_order is None:
            self.effect_order = BufferSlice(len(self.sizes), 0, 1)
            self.sizes.append(1)
            self.kinds.append("temp")
        return self.effect_order

    def emit_body(self, block: ir.Block) -> list:
        """A while body's thunks, its carried values' final copies (copies used only by the
        return) gathered at the end into one parallel copy: a body that returns its carried
        values swapped or rotated reads each before any is overwritten."""
        terminator = list(block.operations)[-1].operation
        returned = set(terminator.operands)
        final, thunks = [], []
        for op in live_ops(list(block.operations)[:-1]):
            emitted = self.emit_op(op)
            if kind_of(op) == "copy" and op.results[0] in returned and all(use.owner == terminator for use in op.results[0].uses):
                final.extend(emitted)
            else:
                thunks.extend(emitted)
        if len(final) > 1:
            thunks.append(ParallelCopyThunk("carried values", tuple(final)))
        else:
            thunks.extend(final)
        return thunks

    def touched(self, op: ir.Operation, nested: list, extra: list) -> tuple[BufferSlice, ...]:
        """Every slice a control-flow thunk touches: its operands and results, and whatever the
        thunks inside read or write (their temps share the slab with the rest of the program,
        so the executor must order them too)."""
        slices = [self.slice_of(v) for v in list(op.operands) + list(op.results)] + extra
        for thunk in nested:
            slices.extend(thunk.reads)
            slices.extend(thunk.writes)
        return tuple(dict.fromkeys(slices))


def sort_attributes(op: ir.Operation) -> dict:
    """The sort as a host call: its dimension and the keys its comparator orders by."""
    keys = comparator_keys(op)
    return {"dimension": ir.IntegerAttr(op.attributes["dimension"]).value, "keys": [key.as_dict() for key in keys]}


def fft_attributes(op: ir.Operation) -> dict:
    return {"fft_type": ir.StringAttr(op.attributes["fft_type"]).value,
            "fft_length": list(ir.DenseI64ArrayAttr(op.attributes["fft_length"]))}


def triangular_solve_attributes(op: ir.Operation) -> dict:
    flags = {name: bool(ir.BoolAttr(op.attributes[name]).value) for name in ("left_side", "lower", "unit_diagonal")}
    return flags | {"transpose_a": ir.StringAttr(op.attributes["transpose_a"]).value}


SCATTER_COMBINERS = frozenset({"add", "multiply", "maximum", "minimum", "or", "and"})


def scatter_combiner(op: ir.Operation) -> str | None:
    """How a one-input scatter's update computation combines the old value and the update
    ("set", or one elementwise op of both), None for any other computation."""
    if len(op.operands) != 3:
        return None
    block = op.regions[0].blocks[0]
    returned = list(block.operations)[-1].operation.operands[0]
    if returned == block.arguments[1]:
        return "set"
    owner = returned.owner
    combiner = kind_of(owner.operation) if isinstance(owner, (ir.Operation, ir.OpView)) else ""
    if combiner in SCATTER_COMBINERS and set(owner.operands) == set(block.arguments):
        return combiner
    return None


def scatter_attributes(op: ir.Operation) -> dict:
    """The scatter as a host call: its dimension numbers and its combiner."""
    numbers = ir.DictAttr(op.attributes["dimension_numbers"])
    fields = {}
    for name in ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "input_batching_dims",
                 "scatter_indices_batching_dims"):
        if name in numbers:
            fields[name] = list(ir.DenseI64ArrayAttr(numbers[name]))
    fields["index_vector_dim"] = ir.IntegerAttr(numbers["index_vector_dim"]).value if "index_vector_dim" in numbers else 0
    return {"dimension_numbers": fields, "combiner": scatter_combiner(op)}


def cholesky_attributes(op: ir.Operation) -> dict:
    return {"lower": bool(ir.BoolAttr(op.attributes["lower"]).value)}


HOST_CALLS = {"sort": sort_attributes, "fft": fft_attributes, "triangular_solve": triangular_solve_attributes,
              "cholesky": cholesky_attributes, "scatter": scatter_attributes}


def unsupported_reason(op: ir.Operation) -> str | None:
    """Why the backend cannot run `op` at all, or None."""
    if host_custom_call(op):
        return None
    if kind_of(op) == "custom_call":
        return f"custom call @{ir.StringAttr(op.attributes['call_target_name']).value} has no implementation in the cpu backend"
    return UNSUPPORTED.get(kind_of(op))


def host_custom_call(op: ir.Operation) -> str | None:
    """The target of a custom call the backend runs as a host call, or None."""
    if kind_of(op) != "custom_call":
        return None
    target = ir.StringAttr(op.attributes["call_target_name"]).value
    return target if target in HOST_CUSTOM_CALLS else None


def backend_config(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["backend_config"]).value if "backend_config" in op.attributes else ""


def python_callback_attributes(op: ir.Operation) -> dict:
    """The callback's id, from the custom call's backend config, the [shape, dtype] of each
    result it must return, and whether it has a side effect (it then runs in program order
    with the others: `effect_order_slice`)."""
    config = backend_config(op)
    if not config.isdigit():
        raise MlirxlaError(f"custom_call @{callbacks.TARGET}: backend_config must be a callback id, got '{config}'",
                           location_text(op.location))
    results = [[list(ir.RankedTensorType(r.type).shape), TensorSpec.of(r.type).dtype] for r in op.results]
    return {"callback": int(config), "results": results, "effect": has_side_effect(op)}


def json_attributes(op: ir.Operation) -> dict:
    """A linear-algebra custom call's flags, its backend config as JSON."""
    try:
        return json.loads(backend_config(op) or "{}")
    except json.JSONDecodeError as error:
        raise MlirxlaError(f"custom_call: backend_config is not JSON ({error.msg})", location_text(op.location)) from None


# custom calls run as host calls: target -> (host call, its attributes); the PJRT plugin emits
# the `mlirxla.` linear-algebra ones (jax lowers those per platform); jax's generic QR
# lowering emits XLA's `Qr` and `ProductOfElementaryHouseholderReflectors`;
# `dce_sink` (lax.dce_sink) only keeps its operand computed, as XLA's no-op handler does
HOST_CUSTOM_CALLS = {
    callbacks.TARGET: ("python_callback", python_callback_attributes),
    "dce_sink": ("dce_sink", lambda op: {}),
    "mlirxla.eigh": ("eigh", json_attributes),
    "mlirxla.svd": ("svd", json_attributes),
    "mlirxla.eig": ("eig", json_attributes),
    "mlirxla.schur": ("schur", json_attributes),
    "mlirxla.hessenberg": ("hessenberg", json_attributes),
    "mlirxla.tridiagonal": ("tridiagonal", json_attributes),
    "Qr": ("householder_qr", lambda op: {}),
    "ProductOfElementaryHouseholderReflectors": ("householder_product", lambda op: {}),
}


def interpreted_reason(op: ir.Operation) -> str | None:
    """Why the interpreter, not native code, runs `op`, or None."""
    kind = kind_of(op)
    if kind in INTERPRETED:
        return INTERPRETED[kind]
    if kind == "bitcast_convert" and any("complex" in str(v.type) for v in list(op.operands) + list(op.results)):
        return "the toolkit's lowering of a complex bitcast_convert crashes"
    if kind == "reduce_precision" and ir.IntegerAttr(op.attributes["mantissa_bits"]).value == 0:
        return "the toolkit's lowering of reduce_precision to 0 mantissa bits gives nan for inf"
    if kind == "sort" and comparator_keys(op) is None:
        return "the host sort takes comparators that are lexicographic chains of compares"
    if kind == "scatter" and scatter_combiner(op) is None:
        return "the host scatter takes one input combined by set, add, multiply, max, min, or, and"
    return None


def parallel_rows(op: ir.Operation) -> int | None:
    """Rows per slice when the kernel is worth spreading over threads by blocks of dimension 0
    (it writes at least PARALLEL_MIN_BYTES and keeps its rows apart), else None."""
    if kind_of(op) == "fusion":
        if ir.StringAttr(op.attributes["kind"]).value not in ("loop", "input"):
            return None
    elif op.regions and kind_of(op) != "reduce":
        return None
    if not op.results or not all(isinstance(r.type, ir.RankedTensorType) for r in op.results):
        return None
    if sum(type_bytes(r.type) for r in op.results) < PARALLEL_MIN_BYTES:
        return None
    n = leading_size(op.results[0])
    blocks = next((count for count in PARALLEL_BLOCKS if n and n % count == 0), None)
    if blocks is None or slice_problem(op, n, [])[0]:
        return None
    return n // blocks


def gemm_shape(dot: ir.Operation) -> tuple[int, int, int, int, bool, bool] | None:
    """(batch, m, n, k, transpose lhs, transpose rhs) when the dot is a (batched) GEMM over
    row-major buffers, else None."""
    numbers = ir.DictAttr(dot.attributes["dot_dimension_numbers"])

    def dims(name):
        return list(ir.DenseI64ArrayAttr(numbers[name])) if name in numbers else []

    lhs_shape = list(ir.RankedTensorType(dot.operands[0].type).shape)
    rhs_shape = list(ir.RankedTensorType(dot.operands[1].type).shape)
    lhs_batch, rhs_batch = dims("lhs_batching_dimensions"), dims("rhs_batching_dimensions")
    lhs_contracting, rhs_contracting = dims("lhs_contracting_dimensions"), dims("rhs_contracting_dimensions")
    if len(lhs_contracting) != 1 or len(rhs_contracting) != 1:
        return None
    batched = len(lhs_batch)
    if batched > 1 or lhs_batch != rhs_batch or lhs_batch not in ([], [0]):
        return None
    if len(lhs_shape) != 2 + batched or len(rhs_shape) != 2 + batched:
        return None
    batch = lhs_shape[0] if batched else 1
    transpose_lhs = lhs_contracting[0] == batched
    transpose_rhs = rhs_contracting[0] == batched + 1
    m = lhs_shape[batched + (1 if transpose_lhs else 0)]
    k = lhs_shape[lhs_contracting[0]]
    n = rhs_shape[batched + (0 if transpose_rhs else 1)]
    return batch, m, n, k, transpose_lhs, transpose_rhs
