"""A whole sort as a kernel of its own, for targets that run no host calls (the cuda backend;
on the CPU it is a host call of numpy's sort): a bitonic sorting network over every row.

Each row (a position of the dimensions other than the sort's) is sorted in place in the
results: the operands are copied into them and each element's position along the row into a
scratch array beside them; then every step of the network is one parallel loop nest over
(rows, pairs), a launch a step on a GPU, each iteration comparing two elements of a row and
exchanging them (every operand's, and the positions) when the later one goes first. The
network is the "flip" form: for each block size k = 2, 4, ..., up to the row's length
rounded up to a power of two, a step pairing each element of a block with its mirror image
in the block, then steps pairing elements k/4, k/8, ..., 1 apart. Every comparison leaves the
element that goes first at the lower position, so the positions past the row's end (the
padding to a power of two) hold virtual elements that go last: a pair reaching one is
skipped. log2(N) (log2(N) + 1) / 2 steps: 78 for rows of 4096.

The order is the comparator's keys (`sort_comparator.comparator_keys`: a lexicographic chain
of operands, ascending or descending, NaN and -0 canonical or in IEEE total order) encoded as
the host sort and the top-k kernel encode them (`top_k_kernel.sortable`), ties broken by the
original position: that is a stable sort's order, and one valid order of an unstable sort.
A comparator that is no such chain, or keys on complex parts, keep the host call (which the
cuda backend refuses). O(n log^2 n) compares a row, in global memory; XLA:GPU sorts with a
bitonic network too, its first steps in shared memory a tile of a row at a time.
"""

from mlirxla.mlir import ir
from mlirxla.transforms.sort_comparator import comparator_keys

from ..loop_text import LoopText, element_text, is_float, memref_text
from ..top_k_kernel import FLOAT_BITS, selected_count, sortable
from . import loop_kernels

# positions a thread takes through consecutive steps that stay among them: the first steps
# of every block size, with no exchange between threads (a group's steps in one launch)
GROUP = 64


def emit_sort(emitter, op: ir.Operation) -> list:
    """A sort read only in its first k positions is the top-k selection kernel; a whole sort,
    where the emitter makes kernels for a GPU, the bitonic network; else a host call."""
    if not emitter.gpu_kernels or selected_count(op) is not None or network_reason(op) is not None:
        return loop_kernels.emit_sort(emitter, op)
    length = ir.RankedTensorType(op.operands[0].type).shape[dimension_of(op)]
    padded = padded_length(length)
    steps, launches = len(network_steps(padded)), len(network_launches(padded, min(padded, GROUP)))
    return loop_kernels.gpu_kernel_or_host_call(
        emitter, op, f"sort as a bitonic network over rows of {length}, {steps} compare-exchange steps in {launches} parallel loop nests",
        lambda symbol: network_text(symbol, op))


def network_reason(op: ir.Operation) -> str | None:
    """Why the network cannot sort `op`, or None."""
    keys = comparator_keys(op)
    if keys is None:
        return "its comparator is not a lexicographic chain of keys"
    for key in keys:
        element = element_text(op.operands[key.operand].type)
        if key.part != "value" or element.startswith("complex") or (is_float(element) and element not in FLOAT_BITS):
            return f"a key of {element} has no integer encoding here"
    return None


def dimension_of(op: ir.Operation) -> int:
    rank = ir.RankedTensorType(op.operands[0].type).rank
    return ir.IntegerAttr(op.attributes["dimension"]).value % rank if "dimension" in op.attributes else rank - 1


def padded_length(length: int) -> int:
    return 1 << max(0, (length - 1).bit_length())


def network_steps(padded: int) -> list[tuple[str, int]]:
    """The network's steps in order: ("flip", block size) or ("half", distance)."""
    steps, block = [], 2
    while block <= padded:
        steps.append(("flip", block))
        distance = block // 4
        while distance >= 1:
            steps.append(("half", distance))
            distance //= 2
        block *= 2
    return steps


def within(step: tuple[str, int], group: int) -> bool:
    """Whether every pair of the step lies inside one aligned group of `group` positions."""
    kind, span = step
    return span <= group if kind == "flip" else 2 * span <= group


def network_launches(padded: int, group: int) -> list[list[tuple[str, int]]]:
    """The steps as loop nests: each run of consecutive steps within groups of `group`
    positions one nest (a thread a group), every other step a nest of its own."""
    launches: list[list[tuple[str, int]]] = []
    for step in network_steps(padded):
        if within(step, group) and launches and within(launches[-1][-1], group):
            launches[-1].append(step)
        else:
            launches.append([step])
    return launches


def network_text(symbol: str, op: ir.Operation) -> str:
    """The kernel: (operands...) -> (sorted results...), positions in scratch."""
    dimension = dimension_of(op)
    shape = list(ir.RankedTensorType(op.operands[0].type).shape)
    length = shape[dimension]
    inputs = [(f"in{i}", memref_text(v.type)) for i, v in enumerate(op.operands)]
    outputs = [(f"out{i}", memref_text(v.type)) for i, v in enumerate(op.results)]
    text = LoopText(symbol, inputs + outputs)
    positions_type = f"memref<{'x'.join(map(str, shape))}xi64>"
    text.line(f"%positions = memref.alloc() {{alignment = 64 : i64}} : {positions_type}")

    indices = text.parallel(shape, "c")
    for (source, source_type), (target, _) in zip(inputs, outputs):
        text.store(text.load(f"%{source}", source_type, indices), f"%{target}", source_type, indices)
    text.store(text.value(f"arith.index_cast {indices[dimension]} : index to i64"), "%positions", positions_type, indices)
    text.close_parallel()

    padded = padded_length(length)
    rows = shape[:dimension] + shape[dimension + 1:]
    group = min(padded, GROUP)

    def compare_exchange(row: list[str], kind: str, span: int, pair: str) -> None:
        low, high = pair_positions(text, kind, span, pair)
        text.open(f"scf.if {text.value(f'arith.cmpi ult, {high}, {text.constant(length)} : index')}")

        def at(position: str) -> list[str]:
            return row[:dimension] + [position] + row[dimension:]

        text.open(f"scf.if {goes_first(text, op, outputs, positions_type, at(high), at(low))}")
        for name, memref_type in outputs + [("positions", positions_type)]:
            early, late = text.load(f"%{name}", memref_type, at(low)), text.load(f"%{name}", memref_type, at(high))
            text.store(late, f"%{name}", memref_type, at(low))
            text.store(early, f"%{name}", memref_type, at(high))
        text.close()
        text.close()

    for steps in network_launches(padded, group):
        if len(steps) == 1 and not within(steps[0], group):
            indices = text.parallel(rows + [padded // 2], "s")
            compare_exchange(indices[:-1], *steps[0], indices[-1])
        else:  # a thread a group of positions, its steps one after the other
            indices = text.parallel(rows + [padded // group], "g")
            first_pair = text.value(f"arith.muli {indices[-1]}, {text.constant(group // 2)} : index")
            for kind, span in steps:
                offset = text.fresh("q")
                text.open(f"scf.for {offset} = {text.constant(0)} to {text.constant(group // 2)} step {text.constant(1)}")
                compare_exchange(indices[:-1], kind, span, text.value(f"arith.addi {first_pair}, {offset} : index"))
                text.close()
        text.close_parallel()
    text.line(f"memref.dealloc %positions : {positions_type}")
    return text.text()


def pair_positions(text: LoopText, kind: str, span: int, pair: str) -> tuple[str, str]:
    """The lower and higher positions the step compares for pair number `pair`."""
    if kind == "flip":
        half = text.constant(span // 2)
        block = text.value(f"arith.divui {pair}, {half} : index")
        offset = text.value(f"arith.remui {pair}, {half} : index")
        start = text.value(f"arith.muli {block}, {text.constant(span)} : index")
        low = text.value(f"arith.addi {start}, {offset} : index")
        end = text.value(f"arith.addi {start}, {text.constant(span - 1)} : index")
        return low, text.value(f"arith.subi {end}, {offset} : index")
    distance = text.constant(span)
    group = text.value(f"arith.divui {pair}, {distance} : index")
    offset = text.value(f"arith.remui {pair}, {distance} : index")
    low = text.value(f"arith.addi {text.value(f'arith.muli {group}, {text.constant(2 * span)} : index')}, {offset} : index")
    return low, text.value(f"arith.addi {low}, {distance} : index")


def goes_first(text: LoopText, op: ir.Operation, outputs: list[tuple[str, str]], positions_type: str,
               late: list[str], early: list[str]) -> str:
    """An i1: the element at `late` goes before the one at `early` (the keys in order, then
    the original positions)."""
    before = text.value(f"arith.cmpi slt, {text.load('%positions', positions_type, late)}, "
                        f"{text.load('%positions', positions_type, early)} : i64")
    for key in reversed(comparator_keys(op)):
        name, memref_type = outputs[key.operand]
        tensor_type = op.operands[key.operand].type
        a = sortable(text, text.load(f"%{name}", memref_type, late), tensor_type, key.canonical, key.descending)
        b = sortable(text, text.load(f"%{name}", memref_type, early), tensor_type, key.canonical, key.descending)
        less = text.value(f"arith.cmpi slt, {a}, {b} : i64")
        equal = text.value(f"arith.cmpi eq, {a}, {b} : i64")
        before = text.value(f"arith.ori {less}, {text.value(f'arith.andi {equal}, {before} : i1')} : i1")
    return before
