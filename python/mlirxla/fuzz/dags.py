"""Random straight-line StableHLO DAGs that stress the compiler's middle and back end:
fusion (values with many consumers, elementwise chains through broadcasts, reductions and
shape ops), layout assignment (transposes and reshapes between them), buffer assignment
(in-place dynamic_update_slice, a parameter returned directly, one value returned twice,
results that are also read by later ops) and the kernel emitters, over f32 with some i32 and
bf16, in shapes of one element to a few thousand, and for some seeds over 1 MiB (where a
kernel may split over threads). Loops and conditionals hold such DAGs in their regions.

`programs.py` draws programs over every element type and op of small shapes, one op a step;
this one keeps most values in one "base" shape so that ops chain into the fusions and layouts
the pipeline decides about.

Numerics are kept where the backends must agree: transcendentals take bounded operands, and
discontinuous ops (floor, sign, compare, converts to integers, remainder) read only values
computed exactly (arguments, iota, shape ops, max / min / negate / abs / select of exact
values), because an add or multiply may contract into an fma and a transcendental is an
approximation, and a discontinuity turns their last-bit differences into any difference.
"""

import random
import re
from dataclasses import dataclass, field

import numpy as np

from .programs import Value, array, random_factorization, tensor

BIG_SHAPES = [(512, 640), (3, 320, 300), (300, 1000)]
SIZES = [1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 64, 100, 128]


@dataclass(frozen=True)
class Node:
    value: Value
    exact: bool  # computed without rounding differences a backend may legitimately have


@dataclass
class Scope:
    """The values one region (the function, a loop body, a branch) may use, and its lines."""

    nodes: list = field(default_factory=list)
    lines: list = field(default_factory=list)
    indent: str = "  "
    arguments_allowed: bool = True


class DagGenerator:
    def __init__(self, seed: int, ops: int | None = None, big: bool | None = None):
        self.random = random.Random(seed)
        self.count = 0
        self.arguments: list[Value] = []
        self.big = (self.random.random() < 0.04) if big is None else big
        self.op_count = ops if ops is not None else (self.random.randint(3, 8) if self.big else self.random.randint(5, 30))
        self.base = self.random.choice(BIG_SHAPES) if self.big else self.draw_shape()
        self.scope = Scope()
        self.uses_bf16 = False
        self.depth = 0

    # --- values ------------------------------------------------------------------------------

    def draw_shape(self) -> tuple:
        rank = self.random.choice([1, 2, 2, 3, 3, 4])
        shape = []
        for _ in range(rank):
            room = 4096 // max(1, int(np.prod(shape, dtype=np.int64)))
            shape.append(self.random.choice([s for s in SIZES if s <= room] or [1]))
        return tuple(shape)

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def argument(self, shape, element: str) -> Node:
        value = Value(f"%arg{len(self.arguments)}", tuple(shape), element)
        self.arguments.append(value)
        node = Node(value, True)
        self.scope.nodes.append(node)
        return node

    def emit(self, text: str, shape, element: str, exact: bool) -> Node:
        value = Value(self.fresh(), tuple(shape), element)
        self.scope.lines.append("\n".join(self.scope.indent + line for line in text.replace("$R", value.name).split("\n")))
        node = Node(value, exact)
        self.scope.nodes.append(node)
        return node

    def op(self, name: str, operands: list, shape, element: str, attributes: str = "", exact: bool = False) -> Node:
        types = ", ".join(o.value.type for o in operands)
        names = ", ".join(o.value.name for o in operands)
        attributes = f" {{{attributes}}}" if attributes else ""
        return self.emit(f'$R = "stablehlo.{name}"({names}){attributes} : ({types}) -> {tensor(shape, element)}', shape, element, exact)

    def constant(self, number, shape, element: str = "f32") -> Node:
        literal = repr(float(number)) if element in ("f32", "bf16") else str(int(number))
        t = tensor(shape, element)
        return self.emit(f'$R = "stablehlo.constant"() {{value = dense<{literal}> : {t}}} : () -> {t}', shape, element, True)

    def operand(self, shape=None, element="f32", exact=False) -> Node:
        """A value of `shape` (None: any) and `element`, preferring recent ones (so chains form)
        but often an older one (so values gain many consumers)."""
        candidates = [n for n in self.scope.nodes if (shape is None or n.value.shape == tuple(shape)) and n.value.element == element
                      and (n.exact or not exact)]
        if candidates and self.random.random() < 0.9:
            if self.random.random() < 0.6:
                return candidates[-1 - min(int(self.random.expovariate(0.8)), len(candidates) - 1)]
            return self.random.choice(candidates)
        shape = self.base if shape is None else shape
        if self.scope.arguments_allowed:
            return self.argument(shape, element)
        if element == "f32":
            axis = self.random.randrange(len(shape)) if shape else None
            if axis is None:
                return self.constant(self.random.choice([0.5, -1.5, 2.0]), shape)
            iota = self.emit(f'$R = "stablehlo.iota"() {{iota_dimension = {axis} : i64}} : () -> {tensor(shape, "f32")}', shape, "f32", True)
            return iota
        return self.constant(self.random.randint(-3, 3), shape, element)

    def base_operand(self, exact=False) -> Node:
        shape = self.base if self.random.random() < 0.7 else None
        return self.operand(shape, exact=exact)

    def clamped(self, node: Node, low: float, high: float) -> Node:
        bounds = [self.constant(b, (), node.value.element) for b in (low, high)]
        return self.op("clamp", [bounds[0], node, bounds[1]], node.value.shape, node.value.element, exact=node.exact)

    def magnitude_plus_one(self, node: Node) -> Node:
        shape = node.value.shape
        absolute = self.op("abs", [node], shape, "f32", exact=node.exact)
        return self.op("add", [absolute, self.constant(1.0, shape)], shape, "f32")

    # --- ops -----------------------------------------------------------------------------------

    def unary(self):
        node = self.base_operand()
        shape = node.value.shape
        name = self.random.choice(["negate", "abs", "exponential", "tanh", "sine", "cosine", "log", "sqrt", "rsqrt", "logistic",
                                   "log_plus_one", "exponential_minus_one", "cbrt"])
        if name in ("exponential", "exponential_minus_one"):
            node = self.clamped(node, -8, 8)
        if name in ("sine", "cosine"):
            node = self.clamped(node, -30, 30)
        if name in ("log", "sqrt", "rsqrt", "log_plus_one"):
            node = self.magnitude_plus_one(node)
        return self.op(name, [node], shape, "f32", exact=name in ("negate", "abs") and node.exact)

    def discontinuous(self):
        node = self.base_operand(exact=True)
        name = self.random.choice(["floor", "ceil", "sign", "round_nearest_even", "round_nearest_afz"])
        return self.op(name, [node], node.value.shape, "f32", exact=True)

    def binary(self):
        node = self.base_operand()
        other = self.operand(node.value.shape)
        name = self.random.choice(["add", "subtract", "multiply", "maximum", "minimum", "divide", "atan2", "add", "multiply"])
        if name == "divide":
            other = self.magnitude_plus_one(other)
        return self.op(name, [node, other], node.value.shape, "f32",
                       exact=name in ("maximum", "minimum") and node.exact and other.exact)

    def compare_select(self):
        node = self.base_operand(exact=True)
        other = self.operand(node.value.shape, exact=True)
        direction = self.random.choice(["EQ", "NE", "LT", "LE", "GT", "GE"])
        predicate = self.op("compare", [node, other], node.value.shape, "i1",
                            f"comparison_direction = #stablehlo<comparison_direction {direction}>", exact=True)
        chosen = [self.operand(node.value.shape), self.operand(node.value.shape)]
        return self.op("select", [predicate, *chosen], node.value.shape, "f32", exact=all(c.exact for c in chosen))

    def integer_round_trip(self):
        """f32 -> i32 (clamped, exact operand), integer arithmetic, back to f32."""
        node = self.base_operand(exact=True)
        shape = node.value.shape
        node = self.clamped(node, -1000, 1000)
        integer = self.op("convert", [node], shape, "i32", exact=True)
        other = self.operand(shape, "i32")
        name = self.random.choice(["add", "multiply", "maximum", "and", "xor", "subtract"])
        combined = self.op(name, [integer, other], shape, "i32", exact=True)
        if self.random.random() < 0.3:
            masked = self.op("and", [other, self.constant(7, shape, "i32")], shape, "i32", exact=True)
            divisor = self.op("or", [masked, self.constant(1, shape, "i32")], shape, "i32", exact=True)
            combined = self.op(self.random.choice(["divide", "remainder"]), [combined, divisor], shape, "i32", exact=True)
        clamped = self.clamped(combined, -4096, 4096)
        return self.op("convert", [clamped], shape, "f32", exact=True)

    def bf16_round_trip(self):
        """f32 -> bf16, an elementwise op or a max / min reduction in bf16, back to f32."""
        self.uses_bf16 = True
        node = self.clamped(self.base_operand(), -100, 100)
        shape = node.value.shape
        low = self.op("convert", [node], shape, "bf16")
        other = self.op("convert", [self.clamped(self.operand(shape), -100, 100)], shape, "bf16")
        name = self.random.choice(["add", "multiply", "maximum", "subtract", "minimum"])
        combined = self.op(name, [low, other], shape, "bf16")
        if self.random.random() < 0.5:
            combined = self.op("tanh", [combined], shape, "bf16")
        return self.op("convert", [combined], shape, "f32")

    def broadcast(self):
        """A lower-rank value (a reduction's, a row's) broadcast into the base shape, or a
        value into a shape with a new dimension."""
        target = self.base if self.random.random() < 0.7 else None
        if target is not None and len(target) >= 1:
            kept = sorted(self.random.sample(range(len(target)), self.random.randint(0, len(target) - 1)))
            source = self.operand(tuple(target[d] for d in kept))
            return self.op("broadcast_in_dim", [source], target, "f32", f"broadcast_dimensions = {array(kept)}", exact=source.exact)
        source = self.operand(accept_rank_below(self, 4))
        rank = len(source.value.shape) + 1
        new = self.random.randrange(rank)
        kept = [d for d in range(rank) if d != new]
        shape = list(source.value.shape)
        shape.insert(new, self.random.choice([1, 2, 3]))
        return self.op("broadcast_in_dim", [source], shape, "f32", f"broadcast_dimensions = {array(kept)}", exact=source.exact)

    def reshape(self):
        node = self.operand()
        count = int(np.prod(node.value.shape, dtype=np.int64))
        if self.random.random() < 0.4 and count == int(np.prod(self.base, dtype=np.int64)):
            shape = self.base
        else:
            shape = random_factorization(self.random, count)
        return self.op("reshape", [node], shape, "f32", exact=node.exact)

    def transpose(self):
        node = self.operand()
        permutation = self.random.sample(range(len(node.value.shape)), len(node.value.shape))
        return self.op("transpose", [node], tuple(node.value.shape[d] for d in permutation), "f32",
                       f"permutation = {array(permutation)}", exact=node.exact)

    def slice_and_pad(self):
        """A slice, often padded back to the operand's shape (so it meets its neighbours)."""
        node = self.base_operand()
        shape = node.value.shape
        starts = [self.random.randint(0, max(0, s - 1)) for s in shape]
        limits = [self.random.randint(start + 1, s) if s > start else s for start, s in zip(starts, shape)]
        strides = [1 if self.random.random() < 0.7 else 2 for _ in shape]
        sliced_shape = [-(-(limit - start) // stride) for start, limit, stride in zip(starts, limits, strides)]
        sliced = self.op("slice", [node], sliced_shape, "f32",
                         f"start_indices = {array(starts)}, limit_indices = {array(limits)}, strides = {array(strides)}", exact=node.exact)
        if self.random.random() < 0.4 or any(s * 2 - 1 > full for s, full in zip(sliced_shape, shape) if s > 0):
            return sliced
        interior = [1 if s > 1 and 2 * s - 1 <= full and self.random.random() < 0.3 else 0 for s, full in zip(sliced_shape, shape)]
        grown = [s + max(s - 1, 0) * i for s, i in zip(sliced_shape, interior)]
        low = [self.random.randint(0, full - g) for g, full in zip(grown, shape)]
        high = [full - g - lo for g, full, lo in zip(grown, shape, low)]
        padding = self.operand((), exact=node.exact) if self.random.random() < 0.5 else self.constant(self.random.choice([0.0, -1.0]), ())
        return self.op("pad", [sliced, padding], shape, "f32",
                       f"edge_padding_low = {array(low)}, edge_padding_high = {array(high)}, interior_padding = {array(interior)}",
                       exact=node.exact and padding.exact)

    def concatenate(self):
        node = self.operand()
        if not node.value.shape:
            return None
        dimension = self.random.randrange(len(node.value.shape))
        other_shape = list(node.value.shape)
        other_shape[dimension] = self.random.choice([1, 2, node.value.shape[dimension]])
        other = self.operand(tuple(other_shape))
        shape = list(node.value.shape)
        shape[dimension] += other_shape[dimension]
        return self.op("concatenate", [node, other], shape, "f32", f"dimension = {dimension} : i64", exact=node.exact and other.exact)

    def reverse(self):
        node = self.base_operand()
        if not node.value.shape:
            return None
        dimensions = sorted(self.random.sample(range(len(node.value.shape)), self.random.randint(1, len(node.value.shape))))
        return self.op("reverse", [node], node.value.shape, "f32", f"dimensions = {array(dimensions)}", exact=node.exact)

    def reduce(self):
        node = self.base_operand()
        shape = node.value.shape
        if not shape:
            return None
        dimensions = sorted(self.random.sample(range(len(shape)), self.random.randint(1, len(shape))))
        name, identity = self.random.choice([("add", "0.0"), ("maximum", "0xFF800000"), ("minimum", "0x7F800000"), ("add", "0.0")])
        init = self.emit(f'$R = "stablehlo.constant"() {{value = dense<{identity}> : tensor<f32>}} : () -> tensor<f32>', (), "f32", True)
        result = tuple(s for i, s in enumerate(shape) if i not in dimensions)
        lines = [f'$R = "stablehlo.reduce"({node.value.name}, {init.value.name}) ({{',
                 "^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):",
                 f'  %combined = "stablehlo.{name}"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> tensor<f32>',
                 '  "stablehlo.return"(%combined) : (tensor<f32>) -> ()',
                 f"}}) {{dimensions = {array(dimensions)}}} : ({node.value.type}, tensor<f32>) -> {tensor(result, 'f32')}"]
        return self.emit("\n".join(lines), result, "f32", exact=node.exact and name != "add")

    def dot(self):
        """A (batched) dot_general, its operands often transposed from the base shape."""
        if len(self.base) >= 2 and self.random.random() < 0.6:
            lhs = self.base_operand()
            shape = lhs.value.shape
            if len(shape) < 2:
                return None
            batch, contracting = len(shape) - 2, len(shape) - 1
            n = self.random.choice([1, 3, 8, 16]) if not self.big else 8
            rhs = self.operand(shape[:batch] + (shape[contracting], n))
            result = shape[:batch] + (shape[batch], n)
        else:
            batch_sizes = [self.random.choice([1, 2, 3])] if self.random.random() < 0.6 else []
            m, k, n = (self.random.choice([1, 2, 5, 8, 16, 33]) for _ in range(3))
            batch = len(batch_sizes)
            lhs = self.operand(tuple(batch_sizes) + (m, k))
            rhs = self.operand(tuple(batch_sizes) + (k, n))
            contracting, result = batch + 1, tuple(batch_sizes) + (m, n)
        b = list(range(batch))
        numbers = (f"dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {b}, rhs_batching_dimensions = {b}, "
                   f"lhs_contracting_dimensions = [{contracting}], rhs_contracting_dimensions = [{batch}]>")
        return self.op("dot_general", [lhs, rhs], result, "f32", numbers)

    def iota(self):
        shape = self.base if self.random.random() < 0.7 else self.draw_shape()
        axis = self.random.randrange(len(shape))
        element = self.random.choice(["f32", "i32"])
        made = self.emit(f'$R = "stablehlo.iota"() {{iota_dimension = {axis} : i64}} : () -> {tensor(shape, element)}', shape, element, True)
        return made if element == "f32" else self.op("convert", [made], shape, "f32", exact=True)

    def index(self, size: int) -> Node:
        """A start index: a constant, sometimes out of range (the op clamps it), or an argument."""
        if self.scope.arguments_allowed and self.random.random() < 0.3:
            return self.operand((), "i32")
        return self.constant(self.random.randint(-1, size + 1), (), "i32")

    def dynamic_slice(self):
        node = self.base_operand()
        shape = node.value.shape
        if not shape:
            return None
        sizes = [self.random.randint(1, s) for s in shape]
        starts = [self.index(s) for s in shape]
        if self.random.random() < 0.6:
            update = self.operand(tuple(sizes))
            return self.op("dynamic_update_slice", [node, update, *starts], shape, "f32", exact=node.exact and update.exact)
        return self.op("dynamic_slice", [node, *starts], sizes, "f32", f"slice_sizes = {array(sizes)}", exact=node.exact)

    def gather(self):
        node = self.base_operand()
        shape = node.value.shape
        if not shape:
            return None
        count = self.random.randint(1, 6)
        indices = self.emit(f'$R = "stablehlo.constant"() {{value = dense<{[[self.random.randint(0, shape[0] - 1)] for _ in range(count)]}> : '
                            f'tensor<{count}x1xi32>}} : () -> tensor<{count}x1xi32>', (count, 1), "i32", True)
        rest = list(shape[1:])
        numbers = (f"dimension_numbers = #stablehlo.gather<offset_dims = {list(range(1, len(rest) + 1))}, collapsed_slice_dims = [0], "
                   f"start_index_map = [0], index_vector_dim = 1>, slice_sizes = {array([1] + rest)}")
        return self.op("gather", [node, indices], (count, *rest), "f32", numbers, exact=node.exact)

    def scatter(self):
        node = self.base_operand()
        shape = node.value.shape
        if not shape:
            return None
        count = self.random.randint(1, 4)
        # distinct indices: an add scatter's order is free, and floats add differently in another order
        rows = self.random.sample(range(shape[0]), min(count, shape[0]))
        count = len(rows)
        indices = self.emit(f'$R = "stablehlo.constant"() {{value = dense<{[[r] for r in rows]}> : tensor<{count}x1xi32>}} : '
                            f'() -> tensor<{count}x1xi32>', (count, 1), "i32", True)
        rest = list(shape[1:])
        updates = self.operand((count, *rest))
        name = self.random.choice(["add", "maximum", "minimum"])
        numbers = (f"scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {list(range(1, len(rest) + 1))}, "
                   "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>")
        lines = [f'$R = "stablehlo.scatter"({node.value.name}, {indices.value.name}, {updates.value.name}) ({{',
                 "^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):",
                 f'  %combined = "stablehlo.{name}"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> tensor<f32>',
                 '  "stablehlo.return"(%combined) : (tensor<f32>) -> ()',
                 f"}}) {{{numbers}}} : ({node.value.type}, {indices.value.type}, {updates.value.type}) -> {node.value.type}"]
        return self.emit("\n".join(lines), shape, "f32", exact=False)

    def nested(self, carried: list[Node], ops: int) -> tuple[list[str], list[Node]]:
        """Lines of a region computing `ops` ops over block arguments standing for `carried`,
        and the region's nodes (block arguments first)."""
        outer, self.scope = self.scope, Scope(indent=self.scope.indent + "    ", arguments_allowed=False)
        self.scope.nodes = [Node(Value(f"%b{self.depth}_{i}", c.value.shape, c.value.element), c.exact) for i, c in enumerate(carried)]
        self.depth += 1
        made = 0
        while made < ops:
            made += self.step(nested=True) is not None
        self.depth -= 1
        inner, self.scope = self.scope, outer
        return inner.lines, inner.nodes

    def while_loop(self):
        """A counted loop whose body is a small DAG over the carried values, returning a
        permutation or recomputation of them (rotations lose values if copies are wrong)."""
        if self.depth >= 1:
            return None
        carried = [self.base_operand() for _ in range(self.random.randint(1, 3))]
        trips = self.random.randint(0, 3)
        block = ", ".join(f"%b{self.depth}_{i}: {c.value.type}" for i, c in enumerate(carried))
        lines, nodes = self.nested(carried, self.random.randint(1, 5))
        results = []
        for c in carried:
            same = [n for n in nodes if n.value.shape == c.value.shape and n.value.element == c.value.element]
            results.append(self.random.choice(same[len(carried):] or same) if self.random.random() < 0.7 else self.random.choice(same))
        counter = "tensor<i32>"
        types = ", ".join([counter] + [c.value.type for c in carried])
        zero = self.constant(0, (), "i32")
        i = "%i" + str(self.depth)
        text = "\n".join([
            f'$R:{len(carried) + 1} = "stablehlo.while"({zero.value.name}, {", ".join(c.value.name for c in carried)}) ({{',
            f"^bb0({i}: {counter}, {block}):",
            f'  %limit = "stablehlo.constant"() {{value = dense<{trips}> : {counter}}} : () -> {counter}',
            f'  %more = "stablehlo.compare"({i}, %limit) {{comparison_direction = #stablehlo<comparison_direction LT>}} : ({counter}, {counter}) -> tensor<i1>',
            '  "stablehlo.return"(%more) : (tensor<i1>) -> ()',
            "}, {",
            f"^bb0({i}: {counter}, {block}):",
            f'  %one = "stablehlo.constant"() {{value = dense<1> : {counter}}} : () -> {counter}',
            f'  %next = "stablehlo.add"({i}, %one) : ({counter}, {counter}) -> {counter}',
            *lines,
            f'  "stablehlo.return"(%next, {", ".join(r.value.name for r in results)}) : ({types}) -> ()',
            f"}}) : ({types}) -> ({types})"])
        loop = self.emit(text, (), "loop", False)
        self.scope.nodes.remove(loop)
        made = None
        for index, c in enumerate(carried):
            made = self.emit(f'$R = "stablehlo.optimization_barrier"({loop.value.name}#{index + 1}) : ({c.value.type}) -> {c.value.type}',
                             c.value.shape, "f32", exact=False)
        return made

    def conditional(self):
        if self.depth >= 1:
            return None
        captured = [self.base_operand() for _ in range(self.random.randint(1, 2))]
        target = captured[0].value
        predicate = self.op("compare", [self.operand((), exact=True), self.constant(0.0, ())], (), "i1",
                            "comparison_direction = #stablehlo<comparison_direction GT>", exact=True)
        branches = []
        for _ in range(2):
            lines, nodes = self.nested(captured, self.random.randint(0, 4))
            # the region's block arguments stand for the captured values: bind them by barrier
            binding = [f'{self.scope.indent}  %b{self.depth}_{i} = "stablehlo.optimization_barrier"({c.value.name}) : ({c.value.type}) -> {c.value.type}'
                       for i, c in enumerate(captured)]
            result = self.random.choice([n for n in nodes if n.value.shape == target.shape and n.value.element == "f32"])
            branches.append(binding + lines
                            + [f'{self.scope.indent}  "stablehlo.return"({result.value.name}) : ({target.type}) -> ()'])
        text = "\n".join([f'$R = "stablehlo.if"({predicate.value.name}) ({{', *branches[0], "}, {", *branches[1],
                          f"}}) : (tensor<i1>) -> {target.type}"])
        return self.emit(text, target.shape, "f32", exact=False)

    OPS = {"unary": 6, "discontinuous": 1, "binary": 8, "compare_select": 2, "integer_round_trip": 1, "bf16_round_trip": 1,
           "broadcast": 3, "reshape": 2, "transpose": 3, "slice_and_pad": 2, "concatenate": 1, "reverse": 1, "reduce": 3, "dot": 2,
           "iota": 1, "dynamic_slice": 2, "gather": 1, "scatter": 1, "while_loop": 1, "conditional": 1}
    NESTED = ("unary", "binary", "compare_select", "broadcast", "transpose", "slice_and_pad", "reverse", "reduce", "dynamic_slice",
              "reshape", "dot")

    def step(self, nested: bool = False):
        names = [n for n in self.OPS if not nested or n in self.NESTED]
        if self.big:  # the reference interpreter is slow on big shapes, and big dots are slower still
            names = [n for n in names if n not in ("dot", "while_loop", "conditional", "scatter", "gather")]
        return getattr(self, self.random.choices(names, [self.OPS[n] for n in names])[0])()

    def draw(self) -> "Dag":
        made = 0
        while made < self.op_count:
            made += self.step() is not None
        f32 = [n.value for n in self.scope.nodes if n.value.element == "f32" and not n.value.name.startswith("%arg")]
        results = [f32[-1]]
        results += self.random.sample(f32, min(len(f32), self.random.randint(0, 3)))
        if self.random.random() < 0.3:
            results.append(self.random.choice(results))  # the same value twice
        if self.random.random() < 0.3 and self.arguments:
            results.append(self.random.choice(self.arguments))  # a parameter returned directly
        return Dag(list(self.arguments), list(self.scope.lines), results, self.uses_bf16)


def accept_rank_below(generator: DagGenerator, rank: int):
    """A shape of rank below `rank` that some f32 value in scope has (or the base's)."""
    shapes = [n.value.shape for n in generator.scope.nodes if n.value.element == "f32" and len(n.value.shape) < rank]
    return generator.random.choice(shapes) if shapes else generator.base[: rank - 1]


TYPE = re.compile(r"-> (tensor<[^>]*>)$")
NAME = re.compile(r"%(?:v|arg)\d+\b")
DEFINED = re.compile(r"(%v\d+)(?::\d+)? = ")


def parse_type(text: str, name: str) -> Value:
    body = text.removeprefix("tensor<").removesuffix(">").split("x")
    return Value(name, tuple(int(d) for d in body[:-1]), body[-1])


@dataclass
class Dag:
    arguments: list
    lines: list
    results: list
    uses_bf16: bool

    def needed(self, results: list) -> list:
        """The statements `results` depend on, in order (a statement's own regions included)."""
        wanted, kept = {r.name for r in results}, []
        for statement in reversed(self.lines):
            defined = set(DEFINED.findall(statement))
            if defined & wanted:
                kept.append(statement)
                wanted |= set(NAME.findall(statement)) - defined
        return kept[::-1]

    def text(self, results: list | None = None) -> str:
        results = self.results if results is None else results
        statements = self.needed(results)
        used = {name for s in statements for name in NAME.findall(s)} | {r.name for r in results}
        parameters = ", ".join(f"{a.name}: {a.type}" for a in self.arguments if a.name in used)
        types = ", ".join(r.type for r in results)
        names = ", ".join(r.name for r in results)
        body = "\n".join(statements)
        return f"func.func @main({parameters}) -> ({types}) {{\n{body}\n  return {names} : {types}\n}}\n"


def draw_dag(seed: int, **options) -> Dag:
    return DagGenerator(seed, **options).draw()


# --- checking ----------------------------------------------------------------------------------

F32_RTOL, F32_ATOL = 1e-5, 1e-6
BF16_TOLERANCE = 5e-2  # a bf16 rounding one ulp apart is 2^-8 relative, and what follows may grow it


def arguments_for(seed: int, dag: Dag) -> list[np.ndarray]:
    from .differential import argument_value

    return [argument_value(np.random.default_rng([seed, index]), a.shape, a.element) for index, a in enumerate(dag.arguments)]


def mismatch(actual, expected, bf16: bool) -> str | None:
    """Why `actual` is not `expected`: floats within rtol plus an atol scaled to the result's
    magnitude (a sum's rounding grows with its terms), NaNs equal; integers exactly."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if expected.dtype.kind != "f":
        return None if np.array_equal(actual, expected) else "integers differ"
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    finite = np.isfinite(e)
    scale = max(1.0, float(np.max(np.abs(e[finite])))) if finite.any() else 1.0
    rtol, atol = (BF16_TOLERANCE, BF16_TOLERANCE * scale) if bf16 else (F32_RTOL, F32_ATOL * scale)
    close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    index = tuple(np.argwhere(~close)[0])
    return f"{int((~close).sum())} of {close.size} elements differ, first {list(index)}: {a[index]!r} vs {e[index]!r}"


def verdict(text: str, arguments: list[np.ndarray], bf16: bool) -> tuple[str, str]:
    """(ok | mismatch | native-error, detail) of `text` natively against the reference."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.mlir import ir
    from mlirxla.runtime import literals, reference
    from mlirxla.runtime.client import Client, CompileOptions

    module = frontdoor.import_text(text, "dag.mlir", new_context()).module
    with module.context, ir.Location.unknown():
        expected = [literals.to_numpy(v) for v in reference.execute(module, [a.copy() for a in arguments]).outputs]
    try:
        # every bf16 value rounded, as the reference rounds it: a value kept in f32 instead
        # (excess precision, on by default) may differ by far more than a tolerance after a
        # cosine of 30 (seed 30351); denormals kept, as the reference keeps them
        options = CompileOptions(allow_excess_precision=False, flush_denormals=False)
        actual = Client().compile(text, options).execute_numpy([a.copy() for a in arguments])
    except Exception as error:  # noqa: BLE001 - every native failure is a finding
        return "native-error", f"{type(error).__name__}: {str(error)[:400]}"
    for index, (a, e) in enumerate(zip(actual, expected)):
        why = mismatch(a, e, bf16)
        if why:
            return "mismatch", f"result {index}: {why}"
    return "ok", ""


def check_results(seed: int, dag: Dag, results: list) -> tuple[str, str]:
    text = dag.text(results)
    values = dict(zip((a.name for a in dag.arguments), arguments_for(seed, dag)))
    used = [a.name for a in dag.arguments if re.search(rf"{a.name}: ", text.split("\n")[0])]
    return verdict(text, [values[name] for name in used], dag.uses_bf16)


def check(seed: int, **options) -> tuple[str, str, str]:
    """(status, detail, program) of one seed: ok, mismatch or native-error; a failure's
    program is the first single result that fails alone (with only the ops it needs)."""
    dag = draw_dag(seed, **options)
    status, detail = check_results(seed, dag, dag.results)
    if status == "ok":
        return status, detail, dag.text()
    for result in dict.fromkeys(dag.results):
        alone, why = check_results(seed, dag, [result])
        if alone != "ok":
            return alone, why, minimized(seed, dag, result, alone)
    return status, detail, dag.text()


def minimized(seed: int, dag: Dag, result: Value, status: str) -> str:
    """The program of `result` with every op whose value can become a parameter instead
    (the failure staying) cut off, last op first."""

    for statement in reversed(dag.needed([result])):
        name = DEFINED.match(statement.strip()).group(1)
        if f"{name}:" in statement.split("=")[0] or name == result.name:
            continue
        shape = TYPE.search(statement.splitlines()[-1])
        if shape is None:
            continue
        value = parse_type(shape.group(1), name)
        cut = Dag(dag.arguments + [Value(f"%arg{len(dag.arguments)}", value.shape, value.element)],
                  [s for s in dag.lines if s is not statement], [result], dag.uses_bf16)
        cut.lines = [s.replace(f"{name})", f"%arg{len(dag.arguments)})").replace(f"{name},", f"%arg{len(dag.arguments)},")
                     for s in cut.lines]
        try:
            found, _ = check_results(seed, cut, [result])
        except Exception:  # noqa: BLE001 - a cut the interpreter refuses is no smaller failure
            continue
        if found == status:
            dag = cut

    return dag.text([result])


def main(argv=None) -> int:
    import argparse
    import os
    import time

    parser = argparse.ArgumentParser(prog="python -m mlirxla.fuzz.dags",
                                     description="random StableHLO programs compiled by mlirxla against the reference interpreter")
    parser.add_argument("first", type=int, help="the first seed")
    parser.add_argument("count", type=int, help="how many seeds")
    parser.add_argument("dump", nargs="?", help="a folder to write each failing program into (made if missing)")
    arguments = parser.parse_args(argv)
    if arguments.dump:
        os.makedirs(arguments.dump, exist_ok=True)
    failures = 0
    start = time.perf_counter()
    first, count = arguments.first, arguments.count
    for seed in range(first, first + count):
        status, detail, text = check(seed)
        if status != "ok":
            failures += 1
            print(f"seed {seed}: {status}: {detail}", flush=True)
            if arguments.dump:
                with open(os.path.join(arguments.dump, f"seed-{seed}.mlir"), "w") as stream:
                    stream.write(f"// {status}: {detail}\n{text}")
    print(f"{count} programs (seeds {first}..{first + count - 1}): {failures} failed; {time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())


def replay(text: str, seed: int, bf16: bool = False) -> tuple[str, str]:
    """(status, detail) of a (minimized) program on the arguments its seed gives: %argN's
    values depend only on the seed and N."""
    from .differential import argument_value

    header = text[text.index("func.func"):].split("\n")[0]
    arguments = [parse_type(t, name) for name, t in re.findall(r"(%arg\d+): (tensor<[^>]*>)", header)]
    values = [argument_value(np.random.default_rng([seed, int(a.name.removeprefix("%arg"))]), a.shape, a.element) for a in arguments]
    return verdict(text, values, bf16)
