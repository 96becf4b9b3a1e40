"""Random StableHLO programs for differential fuzzing, drawn from a seed.

A program is a list of `Step`s, each defining one value with one op (regions included), over
arguments created on demand: an op that needs an operand of a shape and element type takes a
value the program already has or adds an argument. The steps cover elementwise math on every
element type the cpu backend takes (f16, bf16, f32, f64, i1, integers of 4 to 64 bits signed
and unsigned, complex), comparisons, select and clamp, converts and bitcasts, shape ops
(broadcast, reshape, transpose, slice, pad, concatenate, reverse, iota), reductions and
reduce_window, dots and convolutions, gathers and scatters, dynamic slices and updates, sorts,
while loops and conditionals; shapes of rank 0 to 5, zero-sized dimensions included.

Operands are kept where every backend agrees on the answer: divisors are odd and positive,
logs and roots take |x| + 1, floats converted to integers are clamped first, shift amounts are
masked, sorts compare in total order; total-order comparisons never see a NaN or a -0.0 (the
reference interpreter orders them as IEEE comparisons do there). `Program.text(results)` renders the function returning
the values asked for, with only the steps they need (what the minimizer shrinks to).
"""

import random
from dataclasses import dataclass, field

import numpy as np

FLOATS = ("f16", "bf16", "f32", "f64")
SIGNED = ("i4", "i8", "i16", "i32", "i64")
UNSIGNED = ("ui8", "ui16", "ui32", "ui64")
COMPLEX = ("complex<f32>", "complex<f64>")
ELEMENTS = FLOATS + SIGNED + UNSIGNED + ("i1",) + COMPLEX
BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "i1": 1, "i4": 4, "i8": 8, "i16": 16, "i32": 32, "i64": 64,
        "ui8": 8, "ui16": 16, "ui32": 32, "ui64": 64, "complex<f32>": 64, "complex<f64>": 128}
SAME_WIDTH = {16: ("f16", "bf16", "i16", "ui16"), 32: ("f32", "i32", "ui32"), 64: ("f64", "i64", "ui64")}


def is_float(element: str) -> bool:
    return element in FLOATS


def is_integer(element: str) -> bool:
    return element in SIGNED or element in UNSIGNED


def tensor(shape, element: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"


def array(values) -> str:
    return f"array<i64{': ' if values else ''}{', '.join(str(v) for v in values)}>"


def literal_of(number, element: str) -> str:
    if is_float(element):
        return repr(float(number))
    if element in COMPLEX:
        return f"({float(number)!r}, 0.0)"
    if element == "i1":
        return "true" if number else "false"
    return str(int(number))


@dataclass(frozen=True)
class Value:
    name: str
    shape: tuple
    element: str

    @property
    def type(self) -> str:
        return tensor(self.shape, self.element)


@dataclass
class Step:
    """One op defining `value` from `operands` (names), as `lines` of StableHLO."""

    value: Value
    operands: tuple
    lines: list


@dataclass
class Program:
    arguments: list = field(default_factory=list)  # Values
    steps: list = field(default_factory=list)

    def needed(self, results: list) -> list:
        """The steps the `results` depend on, in program order."""
        by_name = {step.value.name: step for step in self.steps}
        wanted, stack = set(), [r.name for r in results]
        while stack:
            name = stack.pop()
            if name in by_name and name not in wanted:
                wanted.add(name)
                stack.extend(by_name[name].operands)
        return [step for step in self.steps if step.value.name in wanted]

    def text(self, results: list) -> str:
        steps = self.needed(results)
        used = {name for step in steps for name in step.operands} | {r.name for r in results}
        arguments = [a for a in self.arguments if a.name in used]
        parameters = ", ".join(f"{a.name}: {a.type}" for a in arguments)
        types = ", ".join(r.type for r in results)
        body = "\n".join(line for step in steps for line in step.lines)
        names = ", ".join(r.name for r in results)
        return f"func.func @main({parameters}) -> ({types}) {{\n{body}\n  return {names} : {types}\n}}\n"

    def used_arguments(self, results: list) -> list:
        steps = self.needed(results)
        used = {name for step in steps for name in step.operands} | {r.name for r in results}
        return [a for a in self.arguments if a.name in used]


class Generator:
    """Draws one program: `steps` ops over arguments made on demand."""

    def __init__(self, seed: int, steps: int = 8):
        self.random = random.Random(seed)
        self.program = Program()
        self.count = 0
        self.step_count = steps
        self.multiple = set()  # names of ops with several results, used only through a barrier

    # --- values ------------------------------------------------------------------------------

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def argument(self, shape, element: str) -> Value:
        value = Value(f"%arg{len(self.program.arguments)}", tuple(shape), element)
        self.program.arguments.append(value)
        return value

    def values(self) -> list:
        return self.program.arguments + [step.value for step in self.program.steps if step.value.name not in self.multiple]

    def operand(self, shape=None, element=None, accept=None) -> Value:
        """A value of `shape` and `element` (either may be None: any), preferring recent ones."""
        candidates = [v for v in self.values() if (shape is None or v.shape == tuple(shape)) and (element is None or v.element == element)
                      and (accept is None or accept(v))]
        if candidates and self.random.random() < 0.8:
            return candidates[-1 - min(int(self.random.expovariate(0.7)), len(candidates) - 1)]
        while True:
            made = Value("", tuple(shape) if shape is not None else self.shape(), element or self.element())
            if accept is None or accept(made):
                return self.argument(made.shape, made.element)

    def shape(self, rank: int | None = None) -> tuple:
        rank = self.random.choice([0, 1, 1, 2, 2, 2, 3, 3, 4, 5]) if rank is None else rank
        sizes = [1, 2, 3, 4, 5, 7, 8]
        return tuple(0 if self.random.random() < 0.03 else self.random.choice(sizes) for _ in range(rank))

    def element(self) -> str:
        return self.random.choice(("f32", "f32", "f32") + ELEMENTS)

    def emit(self, lines, value_shape, element: str, operands) -> Value:
        value = Value(self.fresh(), tuple(value_shape), element)
        lines = [lines] if isinstance(lines, str) else lines
        lines = [line.replace("$R", value.name) for line in lines]
        self.program.steps.append(Step(value, tuple(o.name for o in operands), ["  " + line for line in lines]))
        return value

    def op(self, name: str, operands: list, shape, element: str, attributes: str = "") -> Value:
        types = ", ".join(o.type for o in operands)
        names = ", ".join(o.name for o in operands)
        attributes = f" {{{attributes}}}" if attributes else ""
        return self.emit(f'$R = "stablehlo.{name}"({names}){attributes} : ({types}) -> {tensor(shape, element)}', shape, element, operands)

    def constant(self, value, shape, element: str) -> Value:
        """A splat constant; `value` a number, or a literal already written for the element type."""
        literal = value if isinstance(value, str) else literal_of(value, element)
        return self.emit(f'$R = "stablehlo.constant"() {{value = dense<{literal}> : {tensor(shape, element)}}} : () -> {tensor(shape, element)}',
                         shape, element, [])

    def scalar_operand(self, element: str) -> Value:
        return self.operand((), element)

    # --- safe operands -----------------------------------------------------------------------

    def positive(self, value: Value) -> Value:
        """|x| + 1 for floats (a log's or root's argument), (x & 7) | 1 for integers (a divisor)."""
        if is_float(value.element) or value.element in COMPLEX:
            magnitude = self.op("abs", [value], value.shape, value.element) if is_float(value.element) else value
            return self.op("add", [magnitude, self.constant(1, value.shape, value.element)], value.shape, value.element)
        masked = self.op("and", [value, self.constant(7, value.shape, value.element)], value.shape, value.element)
        return self.op("or", [masked, self.constant(1, value.shape, value.element)], value.shape, value.element)

    def clamped(self, value: Value, low: float, high: float) -> Value:
        bounds = [self.constant(bound, (), value.element) for bound in (low, high)]
        return self.op("clamp", [bounds[0], value, bounds[1]], value.shape, value.element)

    # --- ops -----------------------------------------------------------------------------------

    def unary(self):
        value = self.operand()
        element = value.element
        if is_float(element):
            name = self.random.choice(["negate", "abs", "exponential", "tanh", "sqrt", "log", "sine", "cosine", "floor", "ceil",
                                       "round_nearest_even", "round_nearest_afz", "sign", "logistic", "rsqrt", "cbrt",
                                       "exponential_minus_one", "log_plus_one", "tan"])
            if name in ("sqrt", "log", "rsqrt", "log_plus_one"):
                value = self.positive(value)
            if name in ("exponential", "exponential_minus_one"):
                value = self.clamped(value, -4, 4)
            if name == "tan":  # away from the poles, where an ulp of input is any output
                value = self.clamped(value, -1.25, 1.25)
            return self.op(name, [value], value.shape, element)
        if is_integer(element):
            name = self.random.choice(["negate", "abs", "not", "popcnt", "count_leading_zeros", "sign"])
            if element in UNSIGNED and name in ("negate", "abs", "sign"):
                name = "not"
            return self.op(name, [value], value.shape, element)
        if element == "i1":
            return self.op("not", [value], value.shape, element)
        name = self.random.choice(["negate", "real", "imag", "abs"])
        part = "f32" if element == "complex<f32>" else "f64"
        return self.op(name, [value], value.shape, element if name == "negate" else part)

    def binary(self):
        value = self.operand()
        other = self.operand(value.shape, value.element)
        element = value.element
        if is_float(element):
            name = self.random.choice(["add", "subtract", "multiply", "maximum", "minimum", "divide", "remainder", "power", "atan2"])
        elif is_integer(element):
            name = self.random.choice(["add", "subtract", "multiply", "maximum", "minimum", "divide", "remainder", "and", "or", "xor",
                                       "shift_left", "shift_right_logical", "shift_right_arithmetic"])
        elif element == "i1":
            name = self.random.choice(["and", "or", "xor", "maximum", "minimum"])
        else:
            name = self.random.choice(["add", "subtract", "multiply"])
        if name in ("divide", "remainder"):
            other = self.positive(other)
        if name == "power":
            value, other = self.positive(value), self.clamped(other, -3, 3)
        if name.startswith("shift"):
            other = self.op("and", [other, self.constant(BITS[element] - 1, other.shape, element)], other.shape, element)
        return self.op(name, [value, other], value.shape, element)

    def complex_value(self):
        part = self.random.choice(["f32", "f64"])
        real = self.operand(element=part)
        imaginary = self.operand(real.shape, part)
        return self.op("complex", [real, imaginary], real.shape, f"complex<{part}>")

    def compare_select(self):
        value = self.operand(accept=lambda v: v.element not in COMPLEX)
        other = self.operand(value.shape, value.element)
        direction = self.random.choice(["EQ", "NE", "LT", "LE", "GT", "GE"])
        kind = "TOTALORDER" if is_float(value.element) and self.random.random() < 0.5 else (
            "FLOAT" if is_float(value.element) else "UNSIGNED" if value.element in UNSIGNED or value.element == "i1" else "SIGNED")
        if kind == "TOTALORDER":  # the reference interpreter compares NaNs in total order as IEEE does
            value, other = self.canonical(value), self.canonical(other)
        predicate = self.op("compare", [value, other], value.shape, "i1",
                            f"comparison_direction = #stablehlo<comparison_direction {direction}>, "
                            f"compare_type = #stablehlo<comparison_type {kind}>")
        if self.random.random() < 0.3:
            return predicate
        return self.op("select", [predicate, value, other], value.shape, value.element)

    def clamp(self):
        value = self.operand(accept=lambda v: v.element not in COMPLEX and v.element != "i1")
        low = self.operand((), value.element)
        high = self.op("maximum", [low, self.operand((), value.element)], (), value.element)
        return self.op("clamp", [low, value, high], value.shape, value.element)

    def convert(self):
        value = self.operand(accept=lambda v: v.element not in COMPLEX)
        target = self.random.choice([e for e in ELEMENTS if e not in COMPLEX])
        if is_float(value.element) and not is_float(target):
                value = self.clamped(self.canonical(value), 0 if target in UNSIGNED or target == "i1" else -7, 7)
        elif is_integer(value.element) and is_integer(target) and BITS[target] < BITS[value.element]:
            value = self.clamped(value, 0, 7)
        elif is_integer(value.element) and target in UNSIGNED:
            value = self.clamped(value, 0, 7)
        return self.op("convert", [value], value.shape, target)

    def bitcast(self):
        width = self.random.choice([16, 32, 64])
        element = self.random.choice(SAME_WIDTH[width])
        # a float's bits only as an argument holds them: computed, they may differ by an ulp
        # (libm's cbrt, a fused multiply-add) or in a NaN's sign (x86's 0 * inf is -NaN)
        value = self.argument(self.shape(), element) if is_float(element) else self.operand(element=element)
        return self.op("bitcast_convert", [value], value.shape, self.random.choice(SAME_WIDTH[width]))

    def broadcast(self):
        value = self.operand(accept=lambda v: len(v.shape) < 5)
        rank = self.random.randint(len(value.shape), min(5, len(value.shape) + 2))
        kept = sorted(self.random.sample(range(rank), len(value.shape)))
        sizes = dict(zip(kept, value.shape))
        shape = tuple(sizes.get(d, self.random.choice([1, 2, 3])) for d in range(rank))
        return self.op("broadcast_in_dim", [value], shape, value.element, f"broadcast_dimensions = {array(kept)}")

    def reshape(self):
        value = self.operand()
        count = int(np.prod(value.shape, dtype=np.int64))
        if count == 0:
            others = self.random.sample([1, 2, 3], self.random.randint(0, 2))
            shape = tuple(self.random.sample([0] + others, len(others) + 1))
        else:
            shape = random_factorization(self.random, count)
        return self.op("reshape", [value], shape, value.element)

    def transpose(self):
        value = self.operand()
        permutation = self.random.sample(range(len(value.shape)), len(value.shape))
        return self.op("transpose", [value], tuple(value.shape[d] for d in permutation), value.element, f"permutation = {array(permutation)}")

    def slice(self):
        value = self.operand()
        starts, limits, strides, shape = [], [], [], []
        for size in value.shape:
            start = self.random.randint(0, size)
            limit = self.random.randint(start, size)
            stride = self.random.choice([1, 1, 2, 3])
            starts.append(start), limits.append(limit), strides.append(stride), shape.append(-(-(limit - start) // stride))
        return self.op("slice", [value], shape, value.element,
                       f"start_indices = {array(starts)}, limit_indices = {array(limits)}, strides = {array(strides)}")

    def pad(self):
        value = self.operand()
        low = [self.random.randint(-min(1, s), 2) for s in value.shape]
        high = [self.random.randint(-min(1, s), 2) for s in value.shape]
        interior = [self.random.randint(0, 1) for _ in value.shape]
        shape = [l + h + s + max(s - 1, 0) * i for s, l, h, i in zip(value.shape, low, high, interior)]
        if any(s < 0 for s in shape):
            return None
        padding = self.scalar_operand(value.element)
        return self.op("pad", [value, padding], shape, value.element,
                       f"edge_padding_low = {array(low)}, edge_padding_high = {array(high)}, interior_padding = {array(interior)}")

    def concatenate(self):
        value = self.operand(accept=lambda v: len(v.shape) > 0)
        dimension = self.random.randrange(len(value.shape))
        other_shape = list(value.shape)
        other_shape[dimension] = self.random.choice([0, 1, 2, 3])
        other = self.operand(other_shape, value.element)
        shape = list(value.shape)
        shape[dimension] += other.shape[dimension]
        return self.op("concatenate", [value, other], shape, value.element, f"dimension = {dimension} : i64")

    def reverse(self):
        value = self.operand(accept=lambda v: len(v.shape) > 0)
        dimensions = sorted(self.random.sample(range(len(value.shape)), self.random.randint(1, len(value.shape))))
        return self.op("reverse", [value], value.shape, value.element, f"dimensions = {array(dimensions)}")

    def iota(self):
        shape = self.shape(self.random.randint(1, 3))
        element = self.random.choice(["f32", "i32", "ui8", "i64", "f16"])
        return self.emit(f'$R = "stablehlo.iota"() {{iota_dimension = {self.random.randrange(len(shape))} : i64}} : () -> {tensor(shape, element)}',
                         shape, element, [])

    def reducer(self, name: str, element: str) -> list:
        scalar = tensor((), element)
        return [f"^bb0(%lhs: {scalar}, %rhs: {scalar}):",
                f'  %combined = "stablehlo.{name}"(%lhs, %rhs) : ({scalar}, {scalar}) -> {scalar}',
                f'  "stablehlo.return"(%combined) : ({scalar}) -> ()']

    def reduction(self, element: str) -> tuple[str, str]:
        """(combining op, its identity) suited to `element`."""
        if element == "i1":
            return self.random.choice([("and", "true"), ("or", "false")])
        if is_integer(element):
            return self.random.choice([("add", "0"), ("multiply", "1"), ("maximum", str(-(2 ** (BITS[element] - 1)) if element in SIGNED else 0)),
                                       ("xor", "0")])
        extremes = [("maximum", "0xFF800000" if element == "f32" else "-1.0e+4"), ("minimum", "1.0e+4")]
        if element in ("f16", "bf16"):  # sums: XLA accumulates in f32, the interpreter in f16
            return self.random.choice(extremes)
        return self.random.choice([("add", "0.0")] + extremes)

    def reduce(self):
        value = self.operand(accept=lambda v: len(v.shape) > 0 and v.element not in COMPLEX)
        dimensions = sorted(self.random.sample(range(len(value.shape)), self.random.randint(1, len(value.shape))))
        name, identity = self.reduction(value.element)
        init = self.constant(identity, (), value.element)
        shape = tuple(s for i, s in enumerate(value.shape) if i not in dimensions)
        lines = [f'$R = "stablehlo.reduce"({value.name}, {init.name}) ({{'] + ["  " + line for line in self.reducer(name, value.element)] + [
            f"}}) {{dimensions = {array(dimensions)}}} : ({value.type}, {init.type}) -> {tensor(shape, value.element)}"]
        return self.emit(lines, shape, value.element, [value, init])

    def reduce_window(self):
        value = self.operand(accept=lambda v: len(v.shape) > 0 and v.element not in COMPLEX and 0 not in v.shape)
        window = [self.random.randint(1, min(3, s)) for s in value.shape]
        strides = [self.random.randint(1, 2) for _ in value.shape]
        padding = [[self.random.randint(0, 1), self.random.randint(0, 1)] for _ in value.shape]
        shape = [(s + lo + hi - w) // st + 1 for s, w, st, (lo, hi) in zip(value.shape, window, strides, padding)]
        name, identity = self.reduction(value.element)
        init = self.constant(identity, (), value.element)
        rows = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
        lines = [f'$R = "stablehlo.reduce_window"({value.name}, {init.name}) ({{'] + ["  " + line for line in self.reducer(name, value.element)] + [
            f"}}) {{window_dimensions = {array(window)}, window_strides = {array(strides)}, "
            f"padding = dense<[{rows}]> : tensor<{len(shape)}x2xi64>}} : ({value.type}, {init.type}) -> {tensor(shape, value.element)}"]
        return self.emit(lines, shape, value.element, [value, init])

    def dot(self):
        # no f16 / bf16: XLA accumulates them in f32, the interpreter in their own precision
        element = self.random.choice(["f32", "f32", "f64", "i32", "complex<f32>", "i8"])
        batch = [self.random.randint(1, 3)] if self.random.random() < 0.4 else []
        m, k, n = (self.random.randint(1, 6) for _ in range(3))
        lhs = self.operand(tuple(batch) + (m, k), element)
        rhs = self.operand(tuple(batch) + (k, n), element)
        b = len(batch)
        numbers = (f"dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {list(range(b))}, rhs_batching_dimensions = "
                   f"{list(range(b))}, lhs_contracting_dimensions = [{b + 1}], rhs_contracting_dimensions = [{b}]>")
        return self.op("dot_general", [lhs, rhs], tuple(batch) + (m, n), element, numbers)

    def convolution(self):
        element = self.random.choice(["f32", "f32", "f64"])
        batch, features, outputs = self.random.randint(1, 2), self.random.randint(1, 3), self.random.randint(1, 3)
        spatial = [self.random.randint(2, 6) for _ in range(self.random.choice([1, 2]))]
        kernel = [self.random.randint(1, s) for s in spatial]
        strides = [self.random.randint(1, 2) for _ in spatial]
        lhs_dilation = [self.random.choice([1, 1, 2]) for _ in spatial]
        rhs_dilation = [self.random.choice([1, 1, 2]) for _ in spatial]
        padding = [[self.random.randint(0, 1), self.random.randint(0, 1)] for _ in spatial]
        out = []
        for s, k, st, ld, rd, (lo, hi) in zip(spatial, kernel, strides, lhs_dilation, rhs_dilation, padding):
            extent = (s - 1) * ld + 1 + lo + hi - ((k - 1) * rd + 1)
            if extent < 0:
                return None
            out.append(extent // st + 1)
        lhs = self.operand((batch, *spatial, features), element)
        rhs = self.operand((*kernel, features, outputs), element)
        if any(map(any, padding)) or max(lhs_dilation) > 1:
            # the kernel finite: XLA, as this backend, skips the padding and the dilation's
            # holes, where the reference interpreter multiplies its zeros (0 * inf is NaN)
            rhs = self.finite(rhs)
        letters = "".join(str(i) for i in range(len(spatial)))
        layout = f"[b, {', '.join(letters)}, f]x[{', '.join(letters)}, i, o]->[b, {', '.join(letters)}, f]"
        rows = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
        attributes = (f"dimension_numbers = #stablehlo.conv<{layout}>, window_strides = {array(strides)}, padding = dense<[{rows}]> : "
                      f"tensor<{len(spatial)}x2xi64>, lhs_dilation = {array(lhs_dilation)}, rhs_dilation = {array(rhs_dilation)}, "
                      "feature_group_count = 1 : i64, batch_group_count = 1 : i64")
        return self.op("convolution", [lhs, rhs], (batch, *out, outputs), element, attributes)

    def gather(self):
        value = self.operand(accept=lambda v: len(v.shape) >= 1 and 0 not in v.shape)
        count = self.random.randint(1, 5)
        # signed indices: the reference interpreter reads unsigned ones as signed
        indices = self.operand((count, 1), self.random.choice(["i32", "i64"]))
        rest = list(value.shape[1:])
        numbers = (f"dimension_numbers = #stablehlo.gather<offset_dims = {list(range(1, len(rest) + 1))}, collapsed_slice_dims = [0], "
                   f"start_index_map = [0], index_vector_dim = 1>, slice_sizes = {array([1] + rest)}")
        return self.op("gather", [value, indices], (count, *rest), value.element, numbers)

    def scatter(self):
        value = self.operand(accept=lambda v: len(v.shape) >= 1 and 0 not in v.shape and v.element not in COMPLEX and v.element != "i1")
        count = self.random.randint(1, 5)
        indices = self.operand((count, 1), self.random.choice(["i32", "i64"]))
        rest = list(value.shape[1:])
        updates = self.operand((count, *rest), value.element)
        name = self.random.choice(["add", "maximum", "minimum"])
        numbers = (f"scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {list(range(1, len(rest) + 1))}, "
                   "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>")
        lines = [f'$R = "stablehlo.scatter"({value.name}, {indices.name}, {updates.name}) ({{'] + [
            "  " + line for line in self.reducer(name, value.element)] + [
            f"}}) {{{numbers}}} : ({value.type}, {indices.type}, {updates.type}) -> {value.type}"]
        return self.emit(lines, value.shape, value.element, [value, indices, updates])

    def dynamic_slice(self):
        value = self.operand(accept=lambda v: len(v.shape) >= 1)
        index_element = self.random.choice(["i32", "i64"])
        starts = [self.scalar_operand(index_element) for _ in value.shape]
        sizes = [self.random.randint(0, s) for s in value.shape]
        if self.random.random() < 0.5:
            update = self.operand(tuple(sizes), value.element)
            return self.op("dynamic_update_slice", [value, update, *starts], value.shape, value.element)
        return self.op("dynamic_slice", [value, *starts], sizes, value.element, f"slice_sizes = {array(sizes)}")

    def canonical(self, value: Value) -> Value:
        """NaNs as 0 and -0.0 as +0.0 (x + 0.0): the reference interpreter compares and sorts
        in total order as IEEE comparisons do, NaNs unordered and the zeros equal."""
        if not is_float(value.element):
            return value
        same = self.op("compare", [value, value], value.shape, "i1", "comparison_direction = #stablehlo<comparison_direction EQ>")
        zero = self.constant(0, value.shape, value.element)
        finite = self.op("select", [same, value, zero], value.shape, value.element)
        return self.op("add", [finite, zero], value.shape, value.element)

    def finite(self, value: Value) -> Value:
        """Infinities and NaNs as 0."""
        finite = self.op("is_finite", [value], value.shape, "i1")
        return self.op("select", [finite, value, self.constant(0, value.shape, value.element)], value.shape, value.element)

    def sort(self):
        value = self.canonical(self.operand(accept=lambda v: len(v.shape) >= 1 and v.element not in COMPLEX))
        companion = self.operand(value.shape)
        dimension = self.random.randrange(len(value.shape))
        direction = self.random.choice(["LT", "GT"])
        kind = "TOTALORDER" if is_float(value.element) else "UNSIGNED" if value.element in UNSIGNED or value.element == "i1" else "SIGNED"
        key, other = tensor((), value.element), tensor((), companion.element)
        lines = [f'$R:2 = "stablehlo.sort"({value.name}, {companion.name}) ({{',
                 f"  ^bb0(%a: {key}, %b: {key}, %c: {other}, %d: {other}):",
                 f'    %less = "stablehlo.compare"(%a, %b) {{comparison_direction = #stablehlo<comparison_direction {direction}>, '
                 f"compare_type = #stablehlo<comparison_type {kind}>}} : ({key}, {key}) -> tensor<i1>",
                 '    "stablehlo.return"(%less) : (tensor<i1>) -> ()',
                 f"}}) {{dimension = {dimension} : i64, is_stable = true}} : ({value.type}, {companion.type}) -> ({value.type}, {companion.type})"]
        sorted_pair = self.emit(lines, value.shape, value.element, [value, companion])
        self.multiple.add(sorted_pair.name)
        which = self.random.randint(0, 1)
        chosen = (value, companion)[which]
        return self.emit(f"$R = \"stablehlo.optimization_barrier\"({sorted_pair.name}#{which}) : ({chosen.type}) -> {chosen.type}",
                         chosen.shape, chosen.element, [sorted_pair])

    def while_loop(self):
        value = self.operand(accept=lambda v: is_float(v.element) or is_integer(v.element))
        trips = self.random.randint(0, 4)
        counter, carried = "tensor<i32>", value.type
        step = "add" if self.random.random() < 0.5 else "multiply"
        zero = self.constant(0, (), "i32")
        lines = [f'$R:2 = "stablehlo.while"({zero.name}, {value.name}) ({{',
                 f"  ^bb0(%i: {counter}, %x: {carried}):",
                 f'    %limit = "stablehlo.constant"() {{value = dense<{trips}> : {counter}}} : () -> {counter}',
                 f'    %more = "stablehlo.compare"(%i, %limit) {{comparison_direction = #stablehlo<comparison_direction LT>}} : ({counter}, {counter}) -> tensor<i1>',
                 '    "stablehlo.return"(%more) : (tensor<i1>) -> ()',
                 "}, {",
                 f"  ^bb0(%i: {counter}, %x: {carried}):",
                 f'    %one = "stablehlo.constant"() {{value = dense<1> : {counter}}} : () -> {counter}',
                 f'    %next = "stablehlo.add"(%i, %one) : ({counter}, {counter}) -> {counter}',
                 f'    %y = "stablehlo.{step}"(%x, %x) : ({carried}, {carried}) -> {carried}',
                 f'    "stablehlo.return"(%next, %y) : ({counter}, {carried}) -> ()',
                 f"}}) : ({counter}, {carried}) -> ({counter}, {carried})"]
        loop = self.emit(lines, value.shape, value.element, [zero, value])
        self.multiple.add(loop.name)
        return self.emit(f'$R = "stablehlo.optimization_barrier"({loop.name}#1) : ({value.type}) -> {value.type}',
                         value.shape, value.element, [loop])

    def conditional(self):
        value = self.operand(accept=lambda v: v.element not in COMPLEX and v.element != "i1")
        predicate = self.scalar_operand("i1")
        t = value.type
        first, second = self.random.sample(["negate", "abs", "add"], 2) if value.element not in UNSIGNED else ("add", "multiply")

        def branch(name):
            operands = "%c, %c" if name in ("add", "multiply") else "%c"
            types = f"{t}, {t}" if name in ("add", "multiply") else t
            return [f'    %r = "stablehlo.{name}"({operands}) : ({types}) -> {t}', f'    "stablehlo.return"(%r) : ({t}) -> ()']

        lines = [f'$R = "stablehlo.if"({predicate.name}) ({{', f'    %c = "stablehlo.optimization_barrier"({value.name}) : ({t}) -> {t}',
                 *branch(first), "}, {", f'    %c = "stablehlo.optimization_barrier"({value.name}) : ({t}) -> {t}', *branch(second),
                 f"}}) : (tensor<i1>) -> {t}"]
        return self.emit(lines, value.shape, value.element, [predicate, value])

    OPS = {"unary": 6, "binary": 6, "compare_select": 3, "clamp": 1, "convert": 3, "bitcast": 1, "complex_value": 1, "broadcast": 2,
           "reshape": 2, "transpose": 2, "slice": 2, "pad": 1, "concatenate": 1, "reverse": 1, "iota": 1, "reduce": 3,
           "reduce_window": 1, "dot": 2, "convolution": 1, "gather": 1, "scatter": 1, "dynamic_slice": 1, "sort": 1,
           "while_loop": 1, "conditional": 1}

    def draw(self) -> tuple[Program, list]:
        """The program and the values it returns (the last one, and sometimes another)."""
        names, weights = zip(*self.OPS.items())
        while len(self.program.steps) < self.step_count:
            made = getattr(self, self.random.choices(names, weights)[0])()
            if made is None:
                continue
        returnable = [step.value for step in self.program.steps if step.value.name not in self.multiple]
        results = [returnable[-1]]
        if self.random.random() < 0.5:
            results.append(self.random.choice(returnable))
        return self.program, list(dict.fromkeys(results))


def draw_program(seed: int, steps: int = 8) -> tuple[Program, list]:
    return Generator(seed, steps).draw()


def random_factorization(rng, count: int) -> tuple[int, ...]:
    """A shape of 1 to 4 dimensions with `count` elements, its factors in random order."""
    shape, remaining = [], count
    for _ in range(rng.randint(0, 3)):
        factor = rng.choice([d for d in range(1, remaining + 1) if remaining % d == 0])
        shape.append(factor)
        remaining //= factor
    return tuple(rng.sample(shape + [remaining], len(shape) + 1))
