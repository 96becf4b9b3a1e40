"""xhlo-rng-bit-generator-expander: `rng_bit_generator` becomes the integer arithmetic of its
algorithm (XLA's RngBitGeneratorExpander over xla/hlo/builder/lib/prng.cc), bit for bit as
XLA:CPU computes it, so that jax's `rbg` and `unsafe_rbg` keys give XLA's numbers.

The state is `ui64[n]`; its first word is the key. Algorithms:

- THREE_FRY (state `ui64[2]`): counter `state[1]`. 32-bit and narrower outputs split the
  shape in halves along its first even dimension (else its largest, or one element for a
  scalar) and run Threefry-2x32 (20 rounds) once per pair of outputs, on the counters
  `state[1] + i` for i in row-major order over the half shape; element `j` of the split
  dimension is word `j % 2` of pair `j // 2`. 64-bit outputs take both words of one
  Threefry block each. The new counter is the old plus the number of blocks used.
- PHILOX (state `ui64[2]` or `ui64[3]`): the counter is a 128-bit number, low word
  `state[1]`, high word `state[2]` (with a two-word state, `state[0]`, as XLA reads it).
  Block `v` is Philox-4x32 (10 rounds) of counter + v; 32-bit outputs take its four words in
  order, 64-bit outputs its two double words, narrower ones the low bits of a 32-bit output.
  The new counter is the old plus the number of blocks (one word when the state has two).
- DEFAULT is `default_algorithm`, PHILOX as on XLA:CPU.

Outputs of a signed or float element type are the unsigned bits of their width, bitcast.
Changed: any generator expanded.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import XhloBuilder, dense_splat
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .erasure import erase, live_ops
from .pass_base import ModulePass

THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
THREEFRY_PARITY = 0x1BD11BDA
PHILOX_ROUNDS = 10
PHILOX_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
PHILOX_WEYL = (0x9E3779B9, 0xBB67AE85)


class Words:
    """xhlo ops on unsigned integer tensors of one location: the vocabulary of the generators."""

    def __init__(self, builder: XhloBuilder):
        self.b = builder
        self.u32 = ir.IntegerType.get_unsigned(32)
        self.u64 = ir.IntegerType.get_unsigned(64)

    def tensor(self, shape, element) -> ir.Type:
        return ir.RankedTensorType.get(list(shape), element)

    def splat(self, value: int, like: ir.Value) -> ir.Value:
        return self.b.splat(value, like)

    def lift(self, value, like: ir.Value) -> ir.Value:
        return self.splat(value, like) if isinstance(value, int) else value

    def binary(self, name: str, x: ir.Value, y) -> ir.Value:
        return self.b.binary(name, x, self.lift(y, x))

    def add(self, x, y):
        return self.binary("add", x, y)

    def xor(self, x, y):
        return self.binary("xor", x, y)

    def rotate_left(self, x: ir.Value, distance: int) -> ir.Value:
        return self.binary("or", self.binary("shift_left", x, distance), self.binary("shift_right_logical", x, 32 - distance))

    def convert(self, x: ir.Value, element: ir.Type) -> ir.Value:
        return self.b.convert(x, element)

    def low_high(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The low and high 32-bit words of a ui64 tensor."""
        return self.convert(x, self.u32), self.convert(self.binary("shift_right_logical", x, 32), self.u32)

    def join(self, low: ir.Value, high: ir.Value) -> ir.Value:
        """low | high << 32, as ui64."""
        return self.binary("or", self.convert(low, self.u64), self.binary("shift_left", self.convert(high, self.u64), 32))

    def shape(self, x: ir.Value) -> list[int]:
        return list(ir.RankedTensorType(x.type).shape)

    def reshape(self, x: ir.Value, shape) -> ir.Value:
        return self.b.op("reshape", [x], self.tensor(shape, ir.RankedTensorType(x.type).element_type))

    def broadcast(self, scalar: ir.Value, shape) -> ir.Value:
        return self.b.op("broadcast", [scalar], self.tensor(shape, ir.RankedTensorType(scalar.type).element_type),
                         dimensions=ir.DenseI64ArrayAttr.get([]))

    def word(self, state: ir.Value, index: int) -> ir.Value:
        """state[index] as a ui64 scalar."""
        piece = self.b.op("slice", [state], self.tensor([1], self.u64), start_indices=ir.DenseI64ArrayAttr.get([index]),
                          limit_indices=ir.DenseI64ArrayAttr.get([index + 1]), strides=ir.DenseI64ArrayAttr.get([1]))
        return self.reshape(piece, [])

    def counters(self, shape) -> ir.Value:
        """0, 1, 2, ... in row-major order over `shape`, as ui64."""
        count = math.prod(shape)
        iota = self.b.op("iota", [], self.tensor([count], self.u64), iota_dimension=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0))
        return self.reshape(iota, shape)

    def concatenate(self, values: list[ir.Value], dimension: int) -> ir.Value:
        shape = self.shape(values[0])
        shape[dimension] = sum(self.shape(v)[dimension] for v in values)
        element = ir.RankedTensorType(values[0].type).element_type
        return self.b.op("concatenate", values, self.tensor(shape, element), dimension=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dimension))

    def prefix(self, x: ir.Value, dimension: int, size: int) -> ir.Value:
        """The first `size` elements of `x` along `dimension`."""
        shape = self.shape(x)
        limit = list(shape)
        limit[dimension] = size
        element = ir.RankedTensorType(x.type).element_type
        return self.b.op("slice", [x], self.tensor(limit, element), start_indices=ir.DenseI64ArrayAttr.get([0] * len(shape)),
                         limit_indices=ir.DenseI64ArrayAttr.get(limit), strides=ir.DenseI64ArrayAttr.get([1] * len(shape)))

    def interleave(self, lanes: list[ir.Value], count: int, shape) -> ir.Value:
        """Element `len(lanes) * v + c` is `lanes[c][v]` (each lane one-dimensional), the first
        `count` of them in `shape`."""
        length = self.shape(lanes[0])[0]
        columns = [self.reshape(lane, [length, 1]) for lane in lanes]
        flat = self.reshape(self.concatenate(columns, 1), [length * len(lanes)])
        return self.reshape(self.prefix(flat, 0, count), shape)

    # --- the two block ciphers ------------------------------------------------------------

    def threefry(self, x0: ir.Value, x1: ir.Value, k0: ir.Value, k1: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Threefry-2x32 with 20 rounds; the key words broadcast like the counters."""
        k2 = self.xor(self.xor(k0, k1), THREEFRY_PARITY)
        keys = (k0, k1, k2)
        x0, x1 = self.add(x0, k0), self.add(x1, k1)
        for group in range(5):
            for rotation in THREEFRY_ROTATIONS[4 * (group % 2) : 4 * (group % 2) + 4]:
                x0 = self.add(x0, x1)
                x1 = self.xor(x0, self.rotate_left(x1, rotation))
            x0 = self.add(x0, keys[(group + 1) % 3])
            x1 = self.add(self.add(x1, keys[(group + 2) % 3]), group + 1)
        return x0, x1

    def philox(self, words: list[ir.Value], k0: ir.Value, k1: ir.Value) -> list[ir.Value]:
        """Philox-4x32 with 10 rounds; the key words broadcast like the counters."""
        for round_number in range(PHILOX_ROUNDS):
            if round_number:
                k0, k1 = self.add(k0, PHILOX_WEYL[0]), self.add(k1, PHILOX_WEYL[1])
            low0, high0 = self.multiply_wide(words[0], PHILOX_MULTIPLIERS[0])
            low1, high1 = self.multiply_wide(words[2], PHILOX_MULTIPLIERS[1])
            words = [self.xor(self.xor(high1, words[1]), k0), low1, self.xor(self.xor(high0, words[3]), k1), low0]
        return words

    def multiply_wide(self, x: ir.Value, factor: int) -> tuple[ir.Value, ir.Value]:
        """The low and high words of the 64-bit product of a ui32 tensor and a constant."""
        wide = self.convert(x, self.u64)
        return self.low_high(self.b.binary("multiply", wide, self.splat(factor, wide)))


def split_in_halves(shape: list[int]) -> tuple[int, list[int]] | None:
    """(dimension split, the half shape) as XLA's SplitShapeIntoHalves; None for a scalar."""
    if not shape:
        return None
    even = [i for i, size in enumerate(shape) if size % 2 == 0]
    dimension = even[0] if even else max(range(len(shape)), key=lambda i: (shape[i], -i))
    half = shape[:dimension] + [math.ceil(shape[dimension] / 2), 1] + shape[dimension + 1 :]
    return dimension, half


def threefry_bits(w: Words, state: ir.Value, shape: list[int], bits: int) -> tuple[ir.Value, ir.Value]:
    """(the ui32 or ui64 output, the new counter) of THREE_FRY."""
    key0, key1 = w.low_high(w.word(state, 0))
    counter = w.word(state, 1)
    split = split_in_halves(shape) if bits <= 32 else None
    block_shape = shape if bits == 64 else (split[1] if split else [1])
    blocks = math.prod(block_shape)
    inputs = w.add(w.broadcast(counter, block_shape), w.counters(block_shape))
    x0, x1 = w.low_high(inputs)
    key0, key1 = w.broadcast(key0, block_shape), w.broadcast(key1, block_shape)
    y0, y1 = w.threefry(x0, x1, key0, key1)
    new_counter = w.add(counter, blocks)
    if bits == 64:
        return w.join(y0, y1), new_counter
    if split is None:
        return w.reshape(y0, []), new_counter
    dimension, half = split
    pairs = w.concatenate([y0, y1], dimension + 1)
    even = list(shape)
    even[dimension] = 2 * half[dimension]
    values = w.reshape(pairs, even)
    if even[dimension] != shape[dimension]:
        values = w.prefix(values, dimension, shape[dimension])
    return values, new_counter


def philox_bits(w: Words, state: ir.Value, state_words: int, shape: list[int], bits: int) -> tuple[ir.Value, list[ir.Value]]:
    """(the ui32 or ui64 output, the new counter words) of PHILOX."""
    key0, key1 = w.low_high(w.word(state, 0))
    low = w.word(state, 1)
    high = w.word(state, 2 if state_words >= 3 else 0)
    count = math.prod(shape)
    blocks = math.ceil(count * (2 if bits == 64 else 1) / 4)
    offsets = w.counters([blocks])
    block_low = w.add(w.broadcast(low, [blocks]), offsets)
    carried = w.b.compare(block_low, w.broadcast(low, [blocks]), "LT", "UNSIGNED")
    block_high = w.b.select(carried, w.broadcast(w.add(high, 1), [blocks]), w.broadcast(high, [blocks]))
    words = [*w.low_high(block_low), *w.low_high(block_high)]
    outputs = w.philox(words, w.broadcast(key0, [blocks]), w.broadcast(key1, [blocks]))
    new_low = w.add(low, blocks)
    new_high = w.b.select(w.b.compare(new_low, low, "LT", "UNSIGNED"), w.add(high, 1), high)
    new_counter = [new_low, new_high] if state_words >= 3 else [new_low]
    if bits == 64:
        lanes = [w.join(outputs[0], outputs[1]), w.join(outputs[2], outputs[3])]
    else:
        lanes = outputs
    return w.interleave(lanes, count, shape), new_counter


def element_bits(element: ir.Type) -> int:
    if isinstance(element, ir.IntegerType):
        return ir.IntegerType(element).width
    return {ir.F16Type: 16, ir.BF16Type: 16, ir.F32Type: 32, ir.F64Type: 64}.get(type(element), 0)


def expand(op: ir.Operation, default_algorithm: str) -> None:
    state = op.operands[0]
    state_type = ir.RankedTensorType(state.type)
    output_type = ir.RankedTensorType(op.results[1].type)
    element = output_type.element_type
    bits = element_bits(element)
    algorithm = ir.StringAttr(op.attributes["rng_algorithm"]).value
    if algorithm == "DEFAULT":
        algorithm = default_algorithm
    words = state_type.shape[0] if state_type.rank == 1 else 0
    where = location_text(op.location)
    if str(state_type.element_type) != "ui64" or words < 2 or (algorithm == "THREE_FRY" and words != 2) or words > 3:
        raise MlirxlaError(f"xhlo.rng_bit_generator: {algorithm} takes a ui64[2]{' or ui64[3]' if algorithm != 'THREE_FRY' else ''} state, got {state_type}", where)
    if bits not in (8, 16, 32, 64):
        raise MlirxlaError(f"xhlo.rng_bit_generator: no {element} output (8, 16, 32 or 64-bit elements)", where)
    w = Words(XhloBuilder(op.location))
    shape = list(output_type.shape)
    with ir.InsertionPoint(op):
        generated = w.u64 if bits == 64 else w.u32
        if math.prod(shape) == 0:
            op.results[0].replace_all_uses_with(state)
            op.results[1].replace_all_uses_with(w.b.op("constant", [], output_type, value=dense_splat(0, output_type)))
            erase(op)
            return
        if algorithm == "THREE_FRY":
            values, new_counter = threefry_bits(w, state, shape, bits)
            counter_words = [new_counter]
        elif algorithm == "PHILOX":
            values, counter_words = philox_bits(w, state, words, shape, bits)
        else:
            raise MlirxlaError(f"xhlo.rng_bit_generator: unknown algorithm '{algorithm}'", where)
        unsigned = ir.IntegerType.get_unsigned(bits)
        if bits < 32:
            values = w.convert(values, unsigned)
        if element != (unsigned if bits < 32 else generated):
            values = w.b.op("bitcast_convert", [values], output_type)
        pieces = [w.reshape(word, [1]) for word in [w.word(state, 0), *counter_words]]
        new_state = w.concatenate(pieces, 0)
    op.results[0].replace_all_uses_with(new_state)
    op.results[1].replace_all_uses_with(values)
    erase(op)


@dataclass(frozen=True)
class RngBitGeneratorExpanderPass(ModulePass):
    """Expands every rng_bit_generator into the integer arithmetic of its algorithm."""

    name: ClassVar[str] = "xhlo-rng-bit-generator-expander"
    summary: ClassVar[str] = "rng_bit_generator -> Threefry / Philox arithmetic, bit-exact with XLA:CPU"
    default_algorithm: str = "PHILOX"  # what DEFAULT means (XLA:CPU: PHILOX)

    def run(self, module: ir.Module) -> bool:
        changed = False
        for op in live_ops(ops_named(module, "xhlo.rng_bit_generator")):
            expand(op, self.default_algorithm)
            changed = True
        return changed
