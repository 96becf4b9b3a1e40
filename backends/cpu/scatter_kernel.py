"""Scatter as a generated loop kernel (XLA:CPU's scatter emitter: a loop over the update
elements with the index computation inlined).

The loops run over the updates' scatter dimensions (outer) and window dimensions (inner), in
the updates' order, which is the spec's order of applying updates (repeated targets are
combined one update after another, as the reference does). Per scatter position the kernel
reads the index vector once, builds the window's start in the operand (the index vector's
components at `scatter_dims_to_operand_dims`, the batching dimensions' positions at
`input_batching_dims`) and skips the whole window unless it lies in bounds (start in
[0, dimension - window size]), as XLA does; inside, each update element is combined into
its target: stored (`set`) or read, combined (add, multiply, maximum, minimum, or, and, or
any update computation `scalar_regions.py` inlines, for f32, f64 and integers: jax's
`x.at[i].apply(f)`, `.divide`, `.power`) and written back.

The result starts as the operand: buffer assignment lets a scatter's result take over its
operand's buffer (XLA's scatter is in place), and then the kernel writes only the targets;
otherwise it copies the operand into the result first.

For a GPU (`parallel`, XLA:GPU's scatter emitter) the update elements are one parallel loop,
a thread each, and each combines its element into its target atomically, since two updates
may share a target: a store for `set`, `memref.atomic_rmw` for the combiners the hardware
computes (add, maximum, minimum, or, and of floats and integers), `memref.generic_atomic_rmw`
(a compare-and-swap loop) around a multiply or an inlined update computation of 32- or
64-bit elements. Repeated targets are then combined in an order the run decides (XLA:GPU's too; the
spec leaves it to the implementation). Booleans and complex elements keep the sequential
loops, one thread.

One input and one update tensor, real, integer or complex elements (a complex scatter
sets, adds or multiplies: jax's `sqrtm` sets complex elements one at a time in a loop nest,
each a return to Python while it was a host call); several inputs stay host calls, other
update computations run on the interpreter."""

from dataclasses import dataclass

from mlirxla.mlir import ir

from .emitters.host_calls import scatter_attributes
from .loop_text import LoopText, element_text, is_float, is_unsigned, memref_text
from .scalar_regions import emit_region, region_reason

FLOAT_COMBINERS = {"add": "arith.addf", "multiply": "arith.mulf", "maximum": "arith.maximumf", "minimum": "arith.minimumf"}
INTEGER_COMBINERS = {"add": "arith.addi", "multiply": "arith.muli", "maximum": "arith.maxsi", "minimum": "arith.minsi",
                     "or": "arith.ori", "and": "arith.andi"}
UNSIGNED_COMBINERS = INTEGER_COMBINERS | {"maximum": "arith.maxui", "minimum": "arith.minui"}
# the combiners as `memref.atomic_rmw` kinds (LLVM has no atomic multiply: a multiply is a
# compare-and-swap loop, as an update computation is)
FLOAT_ATOMICS = {"add": "addf", "maximum": "maximumf", "minimum": "minimumf"}
INTEGER_ATOMICS = {"add": "addi", "maximum": "maxs", "minimum": "mins", "or": "ori", "and": "andi"}
UNSIGNED_ATOMICS = INTEGER_ATOMICS | {"maximum": "maxu", "minimum": "minu"}
COMPARE_AND_SWAP_ELEMENTS = {"f32", "f64", "i32", "i64"}
COMPLEX_COMBINERS = {"add": "complex.add", "multiply": "complex.mul"}
# booleans: add is or (StableHLO's boolean add), multiply is and, max and min are or and and
BOOLEAN_COMBINERS = {"add": "arith.ori", "multiply": "arith.andi", "maximum": "arith.ori", "minimum": "arith.andi",
                     "or": "arith.ori", "and": "arith.andi"}


@dataclass(frozen=True)
class ScatterGeometry:
    operand_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    updates_shape: tuple[int, ...]
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    input_batching_dims: tuple[int, ...]
    scatter_indices_batching_dims: tuple[int, ...]
    index_vector_dim: int

    @staticmethod
    def of(op: ir.Operation) -> "ScatterGeometry":
        numbers = scatter_attributes(op)["dimension_numbers"]
        shapes = [tuple(ir.RankedTensorType(v.type).shape) for v in op.operands]
        return ScatterGeometry(*shapes, *(tuple(numbers.get(name, ())) for name in (
            "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "input_batching_dims",
            "scatter_indices_batching_dims")), numbers["index_vector_dim"])

    @property
    def scatter_dims(self) -> list[int]:
        return [d for d in range(len(self.updates_shape)) if d not in self.update_window_dims]

    @property
    def window_operand_dims(self) -> list[int]:
        """The operand dimensions the update window dimensions run along, in order."""
        return [d for d in range(len(self.operand_shape))
                if d not in self.inserted_window_dims and d not in self.input_batching_dims]

    def window_extent(self, operand_dim: int) -> int:
        dims = self.window_operand_dims
        return self.updates_shape[self.update_window_dims[dims.index(operand_dim)]] if operand_dim in dims else 1


def combiner_op(combiner: str, element: str, unsigned: bool) -> str | None:
    """The arith op combining old and new values, None for `set` or what the kernel cannot do."""
    if element == "i1":
        return BOOLEAN_COMBINERS.get(combiner)
    if element.startswith("complex"):
        return COMPLEX_COMBINERS.get(combiner)
    if is_float(element):
        return FLOAT_COMBINERS.get(combiner)
    return (UNSIGNED_COMBINERS if unsigned else INTEGER_COMBINERS).get(combiner)


def kernel_reason(op: ir.Operation) -> str | None:
    """Why this scatter cannot be the loop kernel (then it stays a host call, or runs on the
    interpreter when its update computation is no one-op combiner), or None."""
    if len(op.operands) != 3:
        return "not one input"
    operand_type = op.operands[0].type
    element = str(ir.RankedTensorType(operand_type).element_type)
    if element not in ("complex<f32>", "complex<f64>") and not (is_float(element) or element.lstrip("u").startswith("i")):
        return f"element type {element}"
    combiner = scatter_attributes(op)["combiner"]
    if combiner is None:
        if element in ("f16", "bf16") or element.startswith("complex"):
            return f"an update computation on {element}"
        reason = region_reason(op.regions[0])
        return f"update computation: {reason}" if reason else None
    if combiner != "set" and combiner_op(combiner, element_text(operand_type), is_unsigned(operand_type)) is None:
        return f"{combiner} of {element}"
    return None


def atomic_kind(combiner: str | None, tensor_type: ir.Type) -> str | None:
    """How concurrent threads combine a value into a target of `tensor_type`'s elements by
    `combiner` (None: an update computation): `set` (a store), an atomic kind,
    `compare-and-swap` (a loop around the combiner or the computation), or None when they
    cannot (the kernel stays sequential)."""
    element = element_text(tensor_type)
    if combiner == "set":
        return "set"
    if element == "i1" or element.startswith("complex"):
        return None
    kinds = FLOAT_ATOMICS if is_float(element) else UNSIGNED_ATOMICS if is_unsigned(tensor_type) else INTEGER_ATOMICS
    if combiner in kinds:
        return kinds[combiner]
    return "compare-and-swap" if element in COMPARE_AND_SWAP_ELEMENTS else None


def scatter_atomic_kind(op: ir.Operation) -> str | None:
    """`atomic_kind` of the scatter's update elements; None for one update of one element."""
    if not ir.RankedTensorType(op.operands[2].type).shape:
        return None
    return atomic_kind(scatter_attributes(op)["combiner"], op.operands[0].type)


def scatter_module_text(symbol: str, op: ir.Operation, in_place: bool, parallel: bool = False) -> str:
    """The scatter kernel: (operand, indices, updates) -> result; with `in_place` the result's
    buffer is the operand's, holding its values already; with `parallel`, a thread per
    update element where `scatter_atomic_kind` says how."""
    geometry = ScatterGeometry.of(op)
    operand_type, indices_type, updates_type = (v.type for v in op.operands)
    memrefs = {name: memref_text(t) for name, t in
               (("operand", operand_type), ("indices", indices_type), ("updates", updates_type), ("result", op.results[0].type))}
    text = LoopText(symbol, list(memrefs.items()))
    if not in_place:
        text.line(f"memref.copy %operand, %result : {memrefs['operand']} to {memrefs['result']}")
    atomic = scatter_atomic_kind(op) if parallel else None
    if atomic is not None:
        positions = text.parallel([geometry.updates_shape[d] for d in geometry.scatter_dims + list(geometry.update_window_dims)], "u")
        scatter_index = dict(zip(geometry.scatter_dims, positions))
        window_index = dict(zip(geometry.update_window_dims, positions[len(geometry.scatter_dims):]))
    else:
        scatter_index = {d: text.loop(size, "s") for d, size in ((d, geometry.updates_shape[d]) for d in geometry.scatter_dims)}
    start = window_start(text, geometry, [scatter_index[d] for d in geometry.scatter_dims], memrefs["indices"],
                         is_unsigned(indices_type), element_text(indices_type))
    valid = None
    for d, size in enumerate(geometry.operand_shape):
        if isinstance(start[d], int):
            continue
        low = text.value(f"arith.cmpi sge, {start[d]}, {text.constant(0)} : index")
        high = text.value(f"arith.cmpi sle, {start[d]}, {text.constant(size - geometry.window_extent(d))} : index")
        both = text.value(f"arith.andi {low}, {high} : i1")
        valid = both if valid is None else text.value(f"arith.andi {valid}, {both} : i1")
    if valid is not None:
        text.open(f"scf.if {valid}")
    if atomic is None:
        window_index = {d: text.loop(geometry.updates_shape[d], "w") for d in geometry.update_window_dims}
    target = [start[d] if isinstance(start[d], str) else text.constant(start[d]) for d in range(len(geometry.operand_shape))]
    for operand_dim, update_dim in zip(geometry.window_operand_dims, geometry.update_window_dims):
        target[operand_dim] = (window_index[update_dim] if start[operand_dim] == 0
                               else text.value(f"arith.addi {target[operand_dim]}, {window_index[update_dim]} : index"))
    update_position = [scatter_index.get(d) or window_index[d] for d in range(len(geometry.updates_shape))]
    new = text.load("%updates", memrefs["updates"], update_position)
    if atomic is None:
        combine_in_order(text, op, new, memrefs["result"], target)
    else:
        combine_atomically(text, atomic, scatter_attributes(op)["combiner"], op.regions[0], operand_type, new,
                           memrefs["result"], target)
    if atomic is None:
        for _ in geometry.update_window_dims:
            text.close()
    if valid is not None:
        text.close()
    if atomic is None:
        for _ in geometry.scatter_dims:
            text.close()
    else:
        text.close_parallel()
    return text.text()


def combine_in_order(text: LoopText, op: ir.Operation, new: str, result_type: str, target: list[str]) -> None:
    combiner = scatter_attributes(op)["combiner"]
    operand_type = op.operands[0].type
    if combiner is None:
        new = emit_region(text, op.regions[0], [text.load("%result", result_type, target), new])[0]
    elif combiner != "set":
        element = element_text(operand_type)
        old = text.load("%result", result_type, target)
        new = text.value(f"{combiner_op(combiner, element, is_unsigned(operand_type))} {old}, {new} : {element}")
    text.store(new, "%result", result_type, target)


def combine_atomically(text: LoopText, atomic: str, combiner: str | None, computation: ir.Region, tensor_type: ir.Type,
                       new: str, result_type: str, target: list[str]) -> None:
    """`new` combined into `%result` at `target` as `atomic_kind` said, by `combiner` or (None)
    the update `computation`."""
    element = element_text(tensor_type)
    place = f"%result[{', '.join(target)}]"
    if atomic == "set":
        text.store(new, "%result", result_type, target)
    elif atomic == "compare-and-swap":
        old = text.fresh("old")
        text.open(f"{text.fresh('swapped')} = memref.generic_atomic_rmw {place} : {result_type}")
        text.line(f"^bb0({old}: {element}):")
        if combiner is None:
            combined = emit_region(text, computation, [old, new])[0]
        else:
            combined = text.value(f"{combiner_op(combiner, element, is_unsigned(tensor_type))} {old}, {new} : {element}")
        text.line(f"memref.atomic_yield {combined} : {element}")
        text.close()
    else:
        text.value(f"memref.atomic_rmw {atomic} {new}, {place} : ({element}, {result_type}) -> {element}")


def window_start(text: LoopText, geometry: ScatterGeometry, scatter_index: list[str], indices_memref: str,
                 unsigned: bool, index_element: str) -> list[str | int]:
    """Each operand dimension's window start at this scatter position: an index value, or 0."""
    start: list[str | int] = [0] * len(geometry.operand_shape)
    implicit_vector = geometry.index_vector_dim == len(geometry.indices_shape)
    cast = "arith.index_castui" if unsigned else "arith.index_cast"
    for component, operand_dim in enumerate(geometry.scatter_dims_to_operand_dims):
        position = list(scatter_index)
        if not implicit_vector:
            position.insert(geometry.index_vector_dim, text.constant(component))
        loaded = text.load("%indices", indices_memref, position)
        start[operand_dim] = text.value(f"{cast} {loaded} : {index_element} to index")
    for input_dim, indices_dim in zip(geometry.input_batching_dims, geometry.scatter_indices_batching_dims):
        start[input_dim] = scatter_index[indices_dim if indices_dim < geometry.index_vector_dim else indices_dim - 1]
    return start
