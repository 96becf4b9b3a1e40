"""Op sharding rules as data: each op's operand and result dimensions mapped to factors
(Shardy's `OpShardingRule`, `shardy/dialect/sdy/transforms/propagation/op_sharding_rule_registry.cc`).

A factor is one index of the op's iteration space. A tensor dimension maps to a list of
factors, major to minor (a reshape splits or merges dimensions, so one dimension can hold
several factors); a factor sharded on some mesh axes in one tensor can be sharded on the same
axes in every tensor that has it. Factor kinds say what sharding one costs the partitioner:

* `pass`: the dimension is computed independently per shard (elementwise dims, a dot's batch
  and free dims, dims a reduce keeps);
* `reduction`: the dimension is summed over (a dot's contracting dims, a reduce's reduced
  dims, a convolution's input features and window): sharded operands leave partial results
  that the partitioner all-reduces (or reduce-scatters);
* `permutation`: data moves along the dimension (slice, pad, concatenate, reverse, reduce_window
  and convolution spatial dims): sharding it needs halo exchange or a collective-permute;
* `replication`: the op needs the whole dimension on each device (a sort dim, a dynamic_slice's
  sliced dims, gather/scatter index dims): propagation never shards along it.

`rule_for(op)` returns the rule of an xhlo op, or None for ops with no rule (control flow and
sharding annotations are handled by the propagation pass itself; ops such as rng, infeed and
collectives get no sharding from their neighbours). `OpRule.text()` prints Shardy's notation
(`([i, k], [k, j])->([i, j]) {i=8, j=16, k=32} reduction={k}`).
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass

from mlirxla.dialects.xhlo import ops as xhlo_ops
from mlirxla.mlir import ir

KINDS = ("pass", "reduction", "permutation", "replication")


@dataclass(frozen=True)
class Factor:
    size: int
    kind: str = "pass"


@dataclass(frozen=True)
class OpRule:
    """Factors, and per operand and per result the factors of each dimension (major to minor)."""

    factors: tuple[Factor, ...]
    operands: tuple[tuple[tuple[int, ...], ...], ...]
    results: tuple[tuple[tuple[int, ...], ...], ...]

    def text(self) -> str:
        letters = factor_names(len(self.factors))

        def tensors(items):
            return ", ".join("[" + ", ".join("".join(letters[f] for f in dim) for dim in tensor) + "]" for tensor in items)

        sizes = ", ".join(f"{letters[i]}={f.size}" for i, f in enumerate(self.factors))
        text = f"({tensors(self.operands)})->({tensors(self.results)}) {{{sizes}}}"
        for kind in KINDS[1:]:
            named = [letters[i] for i, f in enumerate(self.factors) if f.kind == kind]
            if named:
                text += f" {kind}={{{', '.join(named)}}}"
        return text


def factor_names(count: int) -> list[str]:
    letters = string.ascii_lowercase[8:] + string.ascii_lowercase[:8]  # i, j, k, ... as Shardy
    return [letters[i] if i < 26 else f"z{i}" for i in range(count)]


class _Builder:
    def __init__(self, operand_ranks, result_ranks):
        self.factors: list[Factor] = []
        self.operands = [[[] for _ in range(r)] for r in operand_ranks]
        self.results = [[[] for _ in range(r)] for r in result_ranks]

    def factor(self, size: int, kind: str = "pass") -> int:
        self.factors.append(Factor(int(size), kind))
        return len(self.factors) - 1

    def add(self, size: int, places, kind: str = "pass") -> int:
        """One factor at every (side, tensor index, dim) of `places`."""
        index = self.factor(size, kind)
        for side, tensor, dim in places:
            (self.operands if side == "operand" else self.results)[tensor][dim].append(index)
        return index

    def rule(self) -> OpRule:
        freeze = lambda tensors: tuple(tuple(tuple(dim) for dim in t) for t in tensors)
        return OpRule(tuple(self.factors), freeze(self.operands), freeze(self.results))


def shape(value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def is_ranked(value) -> bool:
    return isinstance(value.type, ir.RankedTensorType)


def ints(op, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name])) if name in op.attributes else []


def integer(op, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def numbers(op, name: str) -> dict:
    entries = {}
    for named in ir.DictAttr(op.attributes[name]):
        value = named.attr
        entries[named.name] = list(ir.DenseI64ArrayAttr(value)) if isinstance(value, ir.DenseI64ArrayAttr) else ir.IntegerAttr(value).value
    return entries


def _builder(op) -> _Builder:
    return _Builder([len(shape(v)) if is_ranked(v) else 0 for v in op.operands], [len(shape(v)) if is_ranked(v) else 0 for v in op.results])


# ---------------------------------------------------------------- rules by op family


def pointwise(op, replicated_dims=()) -> OpRule:
    """Every operand of the result's rank shares the result's dims (scalar operands of clamp
    and select, and index operands, map to nothing)."""
    b = _builder(op)
    result_shape = shape(op.results[0])
    for dim, size in enumerate(result_shape):
        places = [("result", r, dim) for r in range(len(op.results)) if len(shape(op.results[r])) == len(result_shape)]
        places += [("operand", o, dim) for o, v in enumerate(op.operands) if is_ranked(v) and shape(v) == result_shape]
        b.add(size, places, "replication" if dim in replicated_dims else "pass")
    return b.rule()


def broadcast(op) -> OpRule:
    b = _builder(op)
    dims = ints(op, "dimensions")
    operand_shape, result_shape = shape(op.operands[0]), shape(op.results[0])
    for r, size in enumerate(result_shape):
        places = [("result", 0, r)]
        if r in dims and operand_shape[dims.index(r)] == size:
            places.append(("operand", 0, dims.index(r)))
        b.add(size, places)
    for i, d in enumerate(dims):
        if operand_shape[i] != result_shape[d]:
            b.add(operand_shape[i], [("operand", 0, i)])
    return b.rule()


def reshape(op) -> OpRule:
    """Dimensions split and merged by their common factors (gcd), major to minor; what does not
    decompose (a [2,3] -> [3,2]) gets factors that need replication."""
    b = _builder(op)
    source, target = shape(op.operands[0]), shape(op.results[0])
    i = j = 0
    left = source[0] if source else 1
    right = target[0] if target else 1

    def skip_ones():
        nonlocal i, j, left, right
        while i < len(source) and left == 1:
            i += 1
            left = source[i] if i < len(source) else 1
        while j < len(target) and right == 1:
            j += 1
            right = target[j] if j < len(target) else 1

    skip_ones()
    while i < len(source) and j < len(target):
        g = math.gcd(left, right)
        if g == 1:
            break
        b.add(g, [("operand", 0, i), ("result", 0, j)])
        left //= g
        right //= g
        skip_ones()
    for dim in range(i, len(source)):
        if source[dim] > 1:
            b.add(left if dim == i else source[dim], [("operand", 0, dim)], "replication")
    for dim in range(j, len(target)):
        if target[dim] > 1:
            b.add(right if dim == j else target[dim], [("result", 0, dim)], "replication")
    return b.rule()


def transpose(op) -> OpRule:
    b = _builder(op)
    perm = ints(op, "permutation")
    for r, p in enumerate(perm):
        b.add(shape(op.results[0])[r], [("result", 0, r), ("operand", 0, p)])
    return b.rule()


def dot(op) -> OpRule:
    b = _builder(op)
    n = numbers(op, "dot_dimension_numbers")
    lhs_batch, rhs_batch = n.get("lhs_batching_dimensions", []), n.get("rhs_batching_dimensions", [])
    lhs_contract, rhs_contract = n.get("lhs_contracting_dimensions", []), n.get("rhs_contracting_dimensions", [])
    lhs, rhs = shape(op.operands[0]), shape(op.operands[1])
    out = 0
    for a, c in zip(lhs_batch, rhs_batch):
        b.add(lhs[a], [("operand", 0, a), ("operand", 1, c), ("result", 0, out)])
        out += 1
    for a, size in enumerate(lhs):
        if a not in lhs_batch and a not in lhs_contract:
            b.add(size, [("operand", 0, a), ("result", 0, out)])
            out += 1
    for c, size in enumerate(rhs):
        if c not in rhs_batch and c not in rhs_contract:
            b.add(size, [("operand", 1, c), ("result", 0, out)])
            out += 1
    for a, c in zip(lhs_contract, rhs_contract):
        b.add(lhs[a], [("operand", 0, a), ("operand", 1, c)], "reduction")
    return b.rule()


def convolution(op) -> OpRule:
    """Batch and output features pass through; input features and the kernel window are
    summed over; a spatial dimension is shared by input and output (a permutation: halo
    exchange) when the output is the input's size or divides it (strided), the stride part
    then needing replication. Grouped convolutions keep their feature dims apart."""
    b = _builder(op)
    n = numbers(op, "dimension_numbers")
    lhs, rhs, out = shape(op.operands[0]), shape(op.operands[1]), shape(op.results[0])
    feature_groups, batch_groups = integer(op, "feature_group_count"), integer(op, "batch_group_count")
    ib, ob = n["input_batch_dimension"], n["output_batch_dimension"]
    if batch_groups == 1:
        b.add(lhs[ib], [("operand", 0, ib), ("result", 0, ob)])
    else:
        b.add(lhs[ib], [("operand", 0, ib)], "replication")
        b.add(out[ob], [("result", 0, ob)], "replication")
    fi, ki = n["input_feature_dimension"], n["kernel_input_feature_dimension"]
    ko, fo = n["kernel_output_feature_dimension"], n["output_feature_dimension"]
    if feature_groups == 1 and batch_groups == 1:
        b.add(lhs[fi], [("operand", 0, fi), ("operand", 1, ki)], "reduction")
        b.add(rhs[ko], [("operand", 1, ko), ("result", 0, fo)])
    else:
        b.add(lhs[fi], [("operand", 0, fi)], "replication")
        b.add(rhs[ki], [("operand", 1, ki)], "replication")
        b.add(rhs[ko], [("operand", 1, ko), ("result", 0, fo)], "replication" if batch_groups > 1 else "pass")
    for si, sk, so in zip(n["input_spatial_dimensions"], n["kernel_spatial_dimensions"], n["output_spatial_dimensions"]):
        if lhs[si] == out[so]:
            b.add(out[so], [("operand", 0, si), ("result", 0, so)], "permutation")
        elif out[so] > 1 and lhs[si] % out[so] == 0:
            b.add(out[so], [("operand", 0, si), ("result", 0, so)], "permutation")
            b.add(lhs[si] // out[so], [("operand", 0, si)], "replication")
        else:
            b.add(lhs[si], [("operand", 0, si)], "replication")
            b.add(out[so], [("result", 0, so)], "replication")
        b.add(rhs[sk], [("operand", 1, sk)], "reduction")
    return b.rule()


def reduce(op) -> OpRule:
    b = _builder(op)
    count = len(op.operands) // 2
    dims = ints(op, "dimensions")
    operand_shape = shape(op.operands[0])
    out = 0
    for d, size in enumerate(operand_shape):
        places = [("operand", k, d) for k in range(count)]
        if d in dims:
            b.add(size, places, "reduction")
        else:
            b.add(size, places + [("result", k, out) for k in range(count)])
            out += 1
    return b.rule()


def windowed(op, window: list[int], strides: list[int], padding: list[int], inputs: int, outputs: list[int]) -> OpRule:
    """reduce_window (and select_and_scatter's operand): a dim with a window of one, stride one
    and no padding passes through, any other is a permutation (halo exchange)."""
    b = _builder(op)
    operand_shape = shape(op.operands[0])
    result_shape = shape(op.results[0])
    for d, size in enumerate(operand_shape):
        plain = window[d] == 1 and (not strides or strides[d] == 1) and not any(padding[2 * d: 2 * d + 2])
        places = [("operand", k, d) for k in range(inputs)] + [("result", k, d) for k in outputs]
        b.add(math.gcd(size, result_shape[d]), places, "pass" if plain and size == result_shape[d] else "permutation")
    return b.rule()


def reduce_window(op) -> OpRule:
    count = len(op.operands) // 2
    padding = list(ir.DenseIntElementsAttr(op.attributes["padding"])) if "padding" in op.attributes else [0] * (2 * len(shape(op.operands[0])))
    return windowed(op, ints(op, "window_dimensions"), ints(op, "window_strides"), padding, count, list(range(count)))


def select_and_scatter(op) -> OpRule:
    """operand and result share every dim; the source (one element per window) maps to nothing."""
    b = _builder(op)
    for d, size in enumerate(shape(op.operands[0])):
        b.add(size, [("operand", 0, d), ("result", 0, d)])
    return b.rule()


def sliced(op, full: list[bool]) -> OpRule:
    """slice, pad, reverse: a dim kept whole passes through, any other is a permutation."""
    b = _builder(op)
    operand_shape, result_shape = shape(op.operands[0]), shape(op.results[0])
    for d, size in enumerate(operand_shape):
        b.add(math.gcd(size, result_shape[d]), [("operand", 0, d), ("result", 0, d)], "pass" if full[d] else "permutation")
    return b.rule()


def slice_rule(op) -> OpRule:
    operand_shape = shape(op.operands[0])
    starts, limits, strides = ints(op, "start_indices"), ints(op, "limit_indices"), ints(op, "strides")
    return sliced(op, [s == 0 and l == n and t == 1 for s, l, t, n in zip(starts, limits, strides, operand_shape)])


def pad(op) -> OpRule:
    low, high, interior = ints(op, "edge_padding_low"), ints(op, "edge_padding_high"), ints(op, "interior_padding")
    return sliced(op, [a == 0 and c == 0 and i == 0 for a, c, i in zip(low, high, interior)])


def reverse(op) -> OpRule:
    dims = ints(op, "dimensions")
    return sliced(op, [d not in dims for d in range(len(shape(op.operands[0])))])


def concatenate(op) -> OpRule:
    b = _builder(op)
    dim = integer(op, "dimension")
    result_shape = shape(op.results[0])
    for d, size in enumerate(result_shape):
        places = [("result", 0, d)] + [("operand", k, d) for k in range(len(op.operands))]
        if d == dim:
            b.add(math.gcd(*[shape(v)[d] for v in op.operands], size), places, "permutation")
        else:
            b.add(size, places)
    return b.rule()


def dynamic_slice(op) -> OpRule:
    b = _builder(op)
    operand_shape, sizes = shape(op.operands[0]), shape(op.results[0])
    for d, size in enumerate(operand_shape):
        if sizes[d] == size:
            b.add(size, [("operand", 0, d), ("result", 0, d)])
        else:
            b.add(size, [("operand", 0, d)], "replication")
            b.add(sizes[d], [("result", 0, d)], "replication")
    return b.rule()


def dynamic_update_slice(op) -> OpRule:
    b = _builder(op)
    operand_shape, update_shape = shape(op.operands[0]), shape(op.operands[1])
    for d, size in enumerate(operand_shape):
        if update_shape[d] == size:
            b.add(size, [("operand", 0, d), ("operand", 1, d), ("result", 0, d)])
        else:
            b.add(size, [("operand", 0, d), ("result", 0, d)])
            b.add(update_shape[d], [("operand", 1, d)], "replication")
    return b.rule()


def gather(op) -> OpRule:
    """Pass-through: the operand dims sliced whole (offset dims) and the indices' batch dims
    (into the result's batch dims), operand and indices batching dims together; collapsed dims
    are the operand's alone; partly sliced operand dims and the index vector dim need
    replication."""
    b = _builder(op)
    n = numbers(op, "dimension_numbers")
    operand_shape, indices_shape, result_shape = shape(op.operands[0]), shape(op.operands[1]), shape(op.results[0])
    sizes = ints(op, "slice_sizes")
    offset_dims = n.get("offset_dims", [])
    collapsed = n.get("collapsed_slice_dims", [])
    operand_batching, indices_batching = n.get("operand_batching_dims", []), n.get("start_indices_batching_dims", [])
    index_vector_dim = n["index_vector_dim"]
    window_operand_dims = [d for d in range(len(operand_shape)) if d not in collapsed and d not in operand_batching]
    for d, r in zip(window_operand_dims, offset_dims):
        if sizes[d] == operand_shape[d]:
            b.add(operand_shape[d], [("operand", 0, d), ("result", 0, r)])
        else:
            b.add(operand_shape[d], [("operand", 0, d)], "replication")
            b.add(result_shape[r], [("result", 0, r)], "replication")
    batch_result_dims = [r for r in range(len(result_shape)) if r not in offset_dims]
    batch_index_dims = [d for d in range(len(indices_shape)) if d != index_vector_dim]
    for i, r in zip(batch_index_dims, batch_result_dims):
        places = [("operand", 1, i), ("result", 0, r)]
        if i in indices_batching:
            places.append(("operand", 0, operand_batching[indices_batching.index(i)]))
        b.add(indices_shape[i], places)
    for d in collapsed:
        b.add(operand_shape[d], [("operand", 0, d)])
    if index_vector_dim < len(indices_shape):
        b.add(indices_shape[index_vector_dim], [("operand", 1, index_vector_dim)], "replication")
    return b.rule()


def scatter(op) -> OpRule:
    """Inputs and results share every dim (a sharded inserted dim is the partitioner's to mask);
    an update window dim that covers its operand dim whole passes through to it, the update's
    scatter dims share the indices' batch dims (and the operand's batching dims); partly
    covered window dims and the index vector dim need replication."""
    b = _builder(op)
    count = (len(op.operands) - 1) // 2
    n = numbers(op, "dimension_numbers")
    operand_shape, indices_shape = shape(op.operands[0]), shape(op.operands[count])
    update_shape = shape(op.operands[count + 1])
    window_dims = n.get("update_window_dims", [])
    inserted = n.get("inserted_window_dims", [])
    input_batching, indices_batching = n.get("input_batching_dims", []), n.get("scatter_indices_batching_dims", [])
    index_vector_dim = n["index_vector_dim"]
    operand_places = lambda d: [("operand", k, d) for k in range(count)] + [("result", k, d) for k in range(count)]
    update_places = lambda u: [("operand", count + 1 + k, u) for k in range(count)]
    window_operand_dims = [d for d in range(len(operand_shape)) if d not in inserted and d not in input_batching]
    paired = dict(zip(window_operand_dims, window_dims))
    scatter_update_dims = [u for u in range(len(update_shape)) if u not in window_dims]
    batch_index_dims = [d for d in range(len(indices_shape)) if d != index_vector_dim]
    batching_of = {indices_batching[k]: input_batching[k] for k in range(len(indices_batching))}
    for d, size in enumerate(operand_shape):
        u = paired.get(d)
        if u is not None and update_shape[u] == size:
            b.add(size, operand_places(d) + update_places(u))
        elif d in input_batching:
            continue
        else:
            b.add(size, operand_places(d))
            if u is not None:
                b.add(update_shape[u], update_places(u), "replication")
    for i, u in zip(batch_index_dims, scatter_update_dims):
        places = [("operand", count, i)] + update_places(u)
        if i in batching_of:
            places += operand_places(batching_of[i])
        b.add(indices_shape[i], places)
    if index_vector_dim < len(indices_shape):
        b.add(indices_shape[index_vector_dim], [("operand", count, index_vector_dim)], "replication")
    return b.rule()


def sort(op) -> OpRule:
    rank = len(shape(op.operands[0]))
    return pointwise(op, replicated_dims={integer(op, "dimension") % rank})


def trailing_replicated(count: int):
    def rule(op) -> OpRule:
        rank = len(shape(op.results[0]))
        return pointwise(op, replicated_dims=set(range(rank - count, rank)))

    return rule


def declared_batch_dims(op) -> int | None:
    """The `num_batch_dims` a custom call carries in its frontend attributes (jax's LAPACK
    calls: that many leading dims of every operand and result are a batch it runs matrix by
    matrix); None for a call that says nothing of it."""
    if op.name != "xhlo.custom_call" or "mhlo.frontend_attributes" not in op.attributes:
        return None
    attributes = ir.DictAttr(op.attributes["mhlo.frontend_attributes"])
    if "num_batch_dims" not in attributes:
        return None
    count = int(ir.StringAttr(attributes["num_batch_dims"]).value)
    return count if count >= 1 else None


def batch_dims_of_call(op) -> int | None:
    """`declared_batch_dims`, when every operand and result does have those leading dims."""
    count = declared_batch_dims(op)
    tensors = list(op.operands) + list(op.results)
    if count is None or not all(is_ranked(v) and shape(v)[:count] == shape(op.results[0])[:count] for v in tensors):
        return None
    return count


def batched_call(op) -> OpRule | None:
    """A call that runs matrix by matrix over its batch (jax's LAPACK calls): the batch dims are
    shared factors of every operand and result, the matrix dims need replication."""
    count = batch_dims_of_call(op)
    if count is None:
        return None
    b = _builder(op)
    tensors = [("operand", i, v) for i, v in enumerate(op.operands)] + [("result", i, v) for i, v in enumerate(op.results)]
    for dim in range(count):
        b.add(shape(op.results[0])[dim], [(kind, index, dim) for kind, index, _ in tensors])
    for kind, index, value in tensors:
        for dim, size in enumerate(shape(value)[count:], count):
            b.add(size, [(kind, index, dim)], "replication")
    return b.rule()


# Shardy's `#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=8, j=16, k=32} reduction={j}, custom>`
_DECLARED = re.compile(r"^#sdy\.op_sharding_rule<\((?P<operands>[^)]*)\)->\((?P<results>[^)]*)\)\s*\{(?P<sizes>[^}]*)\}(?P<kinds>.*)>$")
_FACTOR_NAME = re.compile(r"z_\d+|[a-z]")  # Shardy's factor names: i, j, ..., z_1, z_2, ...
_DECLARED_KINDS = {"reduction": "reduction", "need_replication": "replication", "permutation": "permutation",
                   "blocked_propagation": "replication"}


def declared_rule(op) -> OpRule | None:
    """The rule a call declares in Shardy's notation (`sdy.sharding_rule`: jax's
    `custom_partitioning(sharding_rule=...)`), when it parses and fits the call's shapes.
    Blocked factors, which Shardy keeps from propagating, are taken as needing replication."""
    if "sdy.sharding_rule" not in op.attributes:
        return None
    match = _DECLARED.match(str(op.attributes["sdy.sharding_rule"]))
    if match is None:
        return None
    sizes = [entry.split("=") for entry in match["sizes"].split(",") if entry.strip()]
    names = {name.strip(): index for index, (name, _) in enumerate(sizes)}
    kinds = ["pass"] * len(sizes)
    for kind, listed in re.findall(r"(\w+)=\{([^}]*)\}", match["kinds"]):
        for name in _FACTOR_NAME.findall(listed):
            if kind in _DECLARED_KINDS and name in names:
                kinds[names[name]] = _DECLARED_KINDS[kind]
    factors = tuple(Factor(int(size), kind) for (_, size), kind in zip(sizes, kinds))

    def tensors(text: str, values) -> tuple | None:
        mapped = tuple(tuple(tuple(names.get(name, -1) for name in _FACTOR_NAME.findall(dim)) for dim in tensor.split(",") if dim.strip())
                       for tensor in re.findall(r"\[([^\]]*)\]", text))
        fits = len(mapped) == len(values) and all(
            len(dims) == len(shape(value)) and all(-1 not in dim and math.prod(factors[f].size for f in dim) == size
                                                    for dim, size in zip(dims, shape(value)))
            for dims, value in zip(mapped, values))
        return mapped if fits else None

    operands, results = tensors(match["operands"], op.operands), tensors(match["results"], op.results)
    return OpRule(factors, operands, results) if operands is not None and results is not None else None


def custom_call(op) -> OpRule | None:
    return declared_rule(op) or batched_call(op)


def fft(op) -> OpRule:
    return trailing_replicated(len(ints(op, "fft_length")))(op)


def bitcast_convert(op) -> OpRule:
    b = _builder(op)
    operand_shape, result_shape = shape(op.operands[0]), shape(op.results[0])
    for d in range(min(len(operand_shape), len(result_shape))):
        b.add(result_shape[d], [("operand", 0, d), ("result", 0, d)])
    for d in range(len(result_shape), len(operand_shape)):
        b.add(operand_shape[d], [("operand", 0, d)], "replication")
    for d in range(len(operand_shape), len(result_shape)):
        b.add(result_shape[d], [("result", 0, d)], "replication")
    return b.rule()


def iota(op) -> OpRule:
    b = _builder(op)
    for d, size in enumerate(shape(op.results[0])):
        b.add(size, [("result", 0, d)])
    return b.rule()


RULES = {
    "xhlo.broadcast": broadcast,
    "xhlo.reshape": reshape,
    "xhlo.bitcast": reshape,
    "xhlo.transpose": transpose,
    "xhlo.dot": dot,
    "xhlo.convolution": convolution,
    "xhlo.reduce": reduce,
    "xhlo.reduce_window": reduce_window,
    "xhlo.select_and_scatter": select_and_scatter,
    "xhlo.slice": slice_rule,
    "xhlo.pad": pad,
    "xhlo.reverse": reverse,
    "xhlo.concatenate": concatenate,
    "xhlo.dynamic_slice": dynamic_slice,
    "xhlo.dynamic_update_slice": dynamic_update_slice,
    "xhlo.gather": gather,
    "xhlo.scatter": scatter,
    "xhlo.sort": sort,
    "xhlo.bitcast_convert": bitcast_convert,
    "xhlo.iota": iota,
    "xhlo.copy": pointwise,
    "xhlo.map": pointwise,
    "xhlo.cholesky": trailing_replicated(2),
    "xhlo.triangular_solve": trailing_replicated(2),
    "xhlo.custom_call": custom_call,
    "xhlo.fft": fft,
}


def rule_for(op: ir.Operation) -> OpRule | None:
    """The sharding rule of `op`; None when it has none (or a tensor of it is not ranked)."""
    if not all(is_ranked(v) for v in list(op.operands) + list(op.results)) or not op.results:
        return None
    if op.name in xhlo_ops.ELEMENTWISE_OPS:
        return pointwise(op)
    build = RULES.get(op.name)
    return build(op) if build else None
