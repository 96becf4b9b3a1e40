"""The SPMD partitioner's windowed ops: convolution and reduce_window on tiled dims, with the
rows a window reaches across a tile edge brought from the neighbours (XLA's
`convolution_handler.cc` and the halo exchange of `spmd_partitioner_util.cc`).

What it decides, and why:

* **Halo geometry of one dim.** A tiled dim of an operand of global size N in T tiles (n rows
  each) feeding a window (size k, stride s, window dilation d, so it spans e = (k-1)d+1 rows,
  padding lo/hi, base/lhs dilation 1) whose output dim of size M is tiled alike (m rows each)
  is computed locally when every tile's outputs read from the same place relative to its
  input tile, m * s = n: then each partition needs `lo` rows from its left neighbour and
  e - s - lo from its right one, the same numbers on every partition, and runs the window
  on [left halo, tile, right halo] with no padding on that dim. The first tile's left halo
  and the last tile's right halo are exactly the global padding (m * s = n forces
  hi >= e - s - lo). Halos wider than a tile, negative ones (a window that skips rows), base
  dilation and outputs not aligned to the input tiles are not exchanged: such a dim is
  gathered instead (XLA pads and dynamic-slices there; not built). A dim with no halo (a
  size-1 window, or pooling windows that tile exactly) is local with nothing exchanged.
* **The exchange** (`exchange_halo`): each partition slices the rows its neighbour needs and
  one collective-permute per direction moves them along the chain of partitions that differ
  only in that dim's tile index, in tile order; the pieces are concatenated around the tile.
  Several tiled dims exchange one after the other, each on the tile the previous one grew,
  so corners arrive. The edge partitions receive nothing, and a collective-permute gives
  zeros to a partition nobody sends to: that is a convolution's padding, so a convolution
  uses the halo as received; a reduce_window pads with its init value, so its edge halos
  are replaced by the init at the partitions whose tile index is first (or last).
* **convolution** is a dot over windows: its iteration tiling is the result's dims (batch,
  output feature from the kernel's output-feature dim, spatial dims from the input's) next
  to the input-feature dim, which it contracts like a dot's contracting dims. It is chosen,
  as the dot's, among {the result's tiling, the operands', none} x {the input's feature
  tiling, the kernel's input-feature tiling, none} by bytes moved per device (operand
  reshards, halos, partial sums, the result's reshard), ties to the result's. Batch and
  output-feature tiles are local, a tiled input feature leaves partial sums finished by an
  all-reduce or a reduce-scatter (the dot's `finish_partial`), spatial tiles exchange
  halos. A grouped convolution (depthwise ones included) tiles its input and output features
  together when the tiles split its groups evenly, each partition running its groups
  (feature_group_count / tiles); batch-grouped convolutions keep feature and batch whole,
  lhs-dilated spatial dims are gathered.
* **reduce_window** tiles each dim as its result (or its operand, if cheaper) does, every
  tiled windowed dim exchanging halos padded with the init values; a dim whose window is
  one row with stride 1 and no padding is local whatever its tiling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.mlir import ir

from .resharding import cost, finish_cost, finish_partial, reshard
from .spmd_builder import SpmdBuilder, byte_size, tensor_type
from .spmd_tiling import Tiling


@dataclass(frozen=True)
class Window:
    """One dim of a window: size, stride, padding, dilations (XLA's WindowDimension)."""

    size: int
    stride: int = 1
    low: int = 0
    high: int = 0
    window_dilation: int = 1
    base_dilation: int = 1

    def halo(self, size: int, tiles: int, out_size: int) -> tuple[int, int] | None:
        """(left, right) rows each of `tiles` tiles of an input dim of `size` needs from its
        neighbours to compute its tile of an output dim of `out_size` (module docstring);
        None when the tiles cannot be computed so."""
        if self.base_dilation != 1 or size % tiles or out_size % tiles:
            return None
        rows, out_rows = size // tiles, out_size // tiles
        if out_rows * self.stride != rows:
            return None
        left = self.low
        right = (self.size - 1) * self.window_dilation + 1 - self.stride - self.low
        if not (0 <= left <= rows and 0 <= right <= rows):
            return None
        return left, right


def padding_of(op: ir.Operation, rank: int) -> list[list[int]]:
    if "padding" not in op.attributes:
        return [[0, 0] for _ in range(rank)]
    return np.array(list(ir.DenseIntElementsAttr(op.attributes["padding"])), dtype=np.int64).reshape(rank, 2).tolist()


def padding_attribute(padding: list[list[int]]) -> ir.DenseElementsAttr:
    return ir.DenseElementsAttr.get(np.array(padding, dtype=np.int64).reshape(len(padding), 2))


def integers(op: ir.Operation, name: str, count: int, default: int = 1) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name])) if name in op.attributes else [default] * count


def halo_bytes(shape, element, tiling: Tiling, halos: dict[int, tuple[int, int]]) -> int:
    """Bytes each partition sends exchanging `halos` (dim -> (left, right)) one dim after another."""
    local = tiling.shard_shape(shape)
    total = 0
    for dim, (left, right) in sorted(halos.items()):
        for rows in (left, right):
            if rows:
                total += byte_size(local[:dim] + [rows] + local[dim + 1:], element)
        local[dim] += left + right
    return total


def exchange_halo(b: SpmdBuilder, value: ir.Value, tiling: Tiling, dim: int, left: int, right: int,
                  pad: ir.Value | None) -> ir.Value:
    """`value`, a partition's tile (grown by earlier exchanges) of a value tiled by `tiling`,
    with `left` rows of its left neighbour's and `right` of its right neighbour's before and
    after it on `dim`; at the edges those rows are zeros, or `pad` (a scalar) when given."""
    chains = tiling.groups_over([dim])
    shape = shape_of(value.type)
    rows = shape[dim]
    pieces = []
    if left:
        pairs = [(chain[i], chain[i + 1]) for chain in chains for i in range(len(chain) - 1)]
        piece = b.collective_permute(slice_rows(b, value, dim, rows - left, rows), pairs)
        pieces.append(at_edge(b, piece, tiling, dim, 0, pad))
    pieces.append(value)
    if right:
        pairs = [(chain[i + 1], chain[i]) for chain in chains for i in range(len(chain) - 1)]
        piece = b.collective_permute(slice_rows(b, value, dim, 0, right), pairs)
        pieces.append(at_edge(b, piece, tiling, dim, tiling.tiles[dim] - 1, pad))
    if len(pieces) == 1:
        return value
    grown = list(shape)
    grown[dim] += left + right
    return b.emit("xhlo.concatenate", pieces, tensor_type(grown, element_of(value.type)),
                  dimension=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim))


def slice_rows(b: SpmdBuilder, value: ir.Value, dim: int, start: int, limit: int) -> ir.Value:
    shape = shape_of(value.type)
    starts, limits = [0] * len(shape), list(shape)
    starts[dim], limits[dim] = start, limit
    sizes = [hi - lo for lo, hi in zip(starts, limits)]
    return b.emit("xhlo.slice", [value], tensor_type(sizes, element_of(value.type)), start_indices=ir.DenseI64ArrayAttr.get(starts),
                  limit_indices=ir.DenseI64ArrayAttr.get(limits), strides=ir.DenseI64ArrayAttr.get([1] * len(shape)))


def at_edge(b: SpmdBuilder, piece: ir.Value, tiling: Tiling, dim: int, edge: int, pad: ir.Value | None) -> ir.Value:
    """`piece`, with `pad` in place of it on the partitions whose tile index on `dim` is `edge`."""
    if pad is None:
        return piece
    i1, i32 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32)
    flag = b.table([int(vector[dim] == edge) for vector in tiling.index])
    zero = b.constant(np.array(0, dtype=np.int32), i32)
    scalar = b.emit("xhlo.compare", [flag, zero], tensor_type([], i1), comparison_direction=ir.StringAttr.get("NE"))
    shape = shape_of(piece.type)
    predicate = b.emit("xhlo.broadcast", [scalar], tensor_type(shape, i1), dimensions=ir.DenseI64ArrayAttr.get([]))
    filler = b.emit("xhlo.broadcast", [pad], piece.type, dimensions=ir.DenseI64ArrayAttr.get([]))
    return b.emit("xhlo.select", [predicate, filler, piece], piece.type)


def exchange_all(b: SpmdBuilder, value: ir.Value, tiling: Tiling, halos: dict[int, tuple[int, int]], pad: ir.Value | None) -> ir.Value:
    for dim, (left, right) in sorted(halos.items()):
        value = exchange_halo(b, value, tiling, dim, left, right, pad)
    return value


def halos_of(tiling: Tiling, dims: dict[int, tuple[int, Window, int]]) -> tuple[dict[int, tuple[int, int]], list[int]]:
    """For `dims` (tiling dim -> (input size, its window, output size)): the halos of the
    tiled ones that exchange, and the tiled ones that cannot (to be kept whole)."""
    halos, whole = {}, []
    for dim, (size, window, out_size) in dims.items():
        if tiling.tiles[dim] == 1:
            continue
        halo = window.halo(size, tiling.tiles[dim], out_size)
        if halo is None:
            whole.append(dim)
        elif any(halo):
            halos[dim] = halo
    return halos, whole


def describe(halos: dict[int, tuple[int, int]], what: str) -> str:
    if not halos:
        return ""
    return "; halos " + ", ".join(f"{what} dim {d}: {l} left, {r} right" for d, (l, r) in sorted(halos.items())) + " by collective-permute"


@dataclass
class ConvolutionDims:
    """A convolution's dimension numbers, window and groups, read once; its iteration
    tiling's dims are the output's, then the input feature (contracted) at `rank`."""

    input_batch: int
    input_feature: int
    input_spatial: list[int]
    kernel_input_feature: int
    kernel_output_feature: int
    output_batch: int
    output_feature: int
    output_spatial: list[int]
    windows: list[Window]
    lhs_dilation: list[int]
    feature_groups: int
    batch_grouped: bool
    rank: int

    @staticmethod
    def read(op: ir.Operation) -> "ConvolutionDims":
        numbers = {n.name: n.attr for n in ir.DictAttr(op.attributes["dimension_numbers"])}
        number = lambda key: ir.IntegerAttr(numbers[key]).value
        dims = lambda key: list(ir.DenseI64ArrayAttr(numbers[key]))
        spatial = dims("input_spatial_dimensions")
        count = len(spatial)
        kernel = shape_of(op.operands[1].type)
        kernel_spatial = dims("kernel_spatial_dimensions")
        strides, dilations = integers(op, "window_strides", count), integers(op, "rhs_dilation", count)
        padding = padding_of(op, count)
        windows = [Window(kernel[kernel_spatial[i]], strides[i], padding[i][0], padding[i][1], dilations[i]) for i in range(count)]
        groups = lambda name: ir.IntegerAttr(op.attributes[name]).value
        return ConvolutionDims(number("input_batch_dimension"), number("input_feature_dimension"), spatial,
                               number("kernel_input_feature_dimension"), number("kernel_output_feature_dimension"),
                               number("output_batch_dimension"), number("output_feature_dimension"),
                               dims("output_spatial_dimensions"), windows, integers(op, "lhs_dilation", count),
                               groups("feature_group_count"), groups("batch_group_count") > 1, count + 2)

    def lhs_dims(self, lhs_rank: int) -> list[int]:
        """Per input dim, the iteration dim it is tiled by: a grouped convolution's input
        features go with its output features, group by group."""
        feature = self.output_feature if self.feature_groups > 1 else self.rank
        mapping = {self.input_batch: self.output_batch, self.input_feature: feature, **dict(zip(self.input_spatial, self.output_spatial))}
        return [mapping[d] for d in range(lhs_rank)]

    def rhs_dims(self, rhs_rank: int) -> list[int | None]:
        """Per kernel dim, the iteration dim it is tiled by (spatial dims whole, and a grouped
        convolution's input features, one group's)."""
        mapping = {self.kernel_output_feature: self.output_feature}
        if self.feature_groups == 1:
            mapping[self.kernel_input_feature] = self.rank
        return [mapping.get(d) for d in range(rhs_rank)]

    def windowed(self, lhs_shape, out_shape) -> dict[int, tuple[int, Window, int]]:
        """The output spatial dims that may exchange halos, with their input size, window and size."""
        return {o: (lhs_shape[i], w, out_shape[o]) for i, o, w, dilation in
                zip(self.input_spatial, self.output_spatial, self.windows, self.lhs_dilation) if dilation == 1}

    def kept_whole(self, tiling: Tiling) -> list[int]:
        """The output dims `tiling` may not tile: lhs-dilated spatial dims, the feature of a
        grouped convolution unless its tiles split the groups evenly, feature and batch of a
        batch-grouped one."""
        whole = [o for o, dilation in zip(self.output_spatial, self.lhs_dilation) if dilation != 1]
        if self.batch_grouped or (self.feature_groups > 1 and self.feature_groups % tiling.tiles[self.output_feature]):
            whole.append(self.output_feature)
        return whole + ([self.output_batch] if self.batch_grouped else [])

    def from_operands(self, lhs: Tiling, rhs: Tiling) -> Tiling:
        """The output tiling the operands imply: batch and spatial as the input's, feature as
        the kernel's output feature."""
        sources = {self.output_batch: (lhs, self.input_batch), self.output_feature: (rhs, self.kernel_output_feature),
                   **{o: (lhs, i) for i, o in zip(self.input_spatial, self.output_spatial)}}
        dims = [sources[d] for d in range(self.rank)]
        return Tiling(tuple(t.tiles[d] for t, d in dims), tuple(tuple(t.index[q][d] for t, d in dims) for q in range(lhs.partitions)))


@dataclass
class ConvolutionPlan:
    """The chosen iteration: the result's tiles computed, the operands' targets, the input's
    halos (input dim -> (left, right)) and the partial-sum groups (None: no partial sums)."""

    computed: Tiling
    lhs_target: Tiling
    rhs_target: Tiling
    lhs_halos: dict[int, tuple[int, int]]
    groups: list[list[int]] | None


def convolution_plan(p, op: ir.Operation, c: ConvolutionDims, out: Tiling) -> ConvolutionPlan:
    """The cheapest iteration tiling in bytes moved per device (module docstring)."""
    lhs, rhs = op.operands[0], op.operands[1]
    lhs_shape, rhs_shape, out_shape = list(p.env[lhs].shape), list(p.env[rhs].shape), shape_of(op.results[0].type)
    L, R = p.env[lhs].tiling, p.env[rhs].tiling
    contracting = [Tiling.replicated(1, p.partitions)]
    if c.feature_groups == 1 and not c.batch_grouped:
        contracting = [L.restrict([c.input_feature]), R.restrict([c.kernel_input_feature])] + contracting
    element = element_of(op.results[0].type)
    best = None
    for candidate in (out, c.from_operands(L, R), Tiling.replicated(c.rank, p.partitions)):
        halos, whole = halos_of(candidate, c.windowed(lhs_shape, out_shape))
        candidate = candidate.without(whole + c.kept_whole(candidate))
        lhs_halos = {c.input_spatial[c.output_spatial.index(o)]: h for o, h in halos.items()}
        for contract in contracting:
            space = candidate.concat(contract)
            if not space.valid():
                continue
            lhs_target, rhs_target = space.restrict(c.lhs_dims(len(lhs_shape))), space.restrict(c.rhs_dims(len(rhs_shape)))
            if lhs_target.uneven_dim(lhs_shape) is not None or rhs_target.uneven_dim(rhs_shape) is not None:
                continue
            groups = space.groups_over([c.rank]) if not contract.is_replicated() else None
            total = p.cost(lhs, lhs_target) + p.cost(rhs, rhs_target) + halo_bytes(lhs_shape, element, lhs_target, lhs_halos)
            total += finish_cost(out_shape, element, candidate, groups, out) if groups else cost(out_shape, element, candidate, out)
            if best is None or total < best[0]:
                best = (total, ConvolutionPlan(candidate, lhs_target, rhs_target, lhs_halos, groups))
    return best[1]


def convolution(p, op: ir.Operation, tilings) -> str:
    """The convolution handler (module docstring); `p` is the partitioner."""
    out = tilings[0]
    c = ConvolutionDims.read(op)
    plan = convolution_plan(p, op, c, out)
    lhs, rhs = op.operands[0], op.operands[1]
    local_lhs = exchange_all(p.b, p.get(lhs, plan.lhs_target), plan.lhs_target, plan.lhs_halos, None)
    padding = [[0, 0] if i in plan.lhs_halos else [w.low, w.high] for i, w in zip(c.input_spatial, c.windows)]
    local_groups = c.feature_groups // plan.computed.tiles[c.output_feature] if c.feature_groups > 1 else 1
    groups = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), local_groups)
    new = p.b.rebuild(op, [local_lhs, p.get(rhs, plan.rhs_target)], [p.local_type(op.results[0].type, plan.computed)],
                      padding=padding_attribute(padding), feature_group_count=groups)
    out_shape = shape_of(op.results[0].type)
    if plan.groups is not None:
        value = finish_partial(p.b, new.results[0], out_shape, plan.computed, plan.groups, "add", out)
        how = f"local convolution on the input feature tiles, partial sums over groups of {len(plan.groups[0])} combined"
    else:
        value = reshard(p.b, new.results[0], out_shape, plan.computed, out)
        how = "local convolution"
    p.define(op.results[0], value, out)
    tiles = f"input tiles {list(plan.lhs_target.tiles)}, kernel tiles {list(plan.rhs_target.tiles)}, computed tiles {list(plan.computed.tiles)}"
    return f"{how}; {tiles}" + describe(plan.lhs_halos, "input")


def reduce_window(p, op: ir.Operation, tilings) -> str:
    """The reduce_window handler (module docstring); `p` is the partitioner."""
    count = len(op.operands) // 2
    inputs, inits = list(op.operands)[:count], list(op.operands)[count:]
    shape = list(p.env[inputs[0]].shape)
    out_shape = shape_of(op.results[0].type)
    rank = len(shape)
    sizes = integers(op, "window_dimensions", rank)
    strides, base, dilations = (integers(op, name, rank) for name in ("window_strides", "base_dilations", "window_dilations"))
    padding = padding_of(op, rank)
    dims = {d: (shape[d], Window(sizes[d], strides[d], padding[d][0], padding[d][1], dilations[d], base[d]), out_shape[d]) for d in range(rank)}
    element = element_of(op.results[0].type)
    best = None
    for candidate in (tilings[0], p.env[inputs[0]].tiling, Tiling.replicated(rank, p.partitions)):
        halos, whole = halos_of(candidate, dims)
        candidate = candidate.without(whole)
        if candidate.uneven_dim(shape) is not None or candidate.uneven_dim(out_shape) is not None:
            continue
        total = sum(p.cost(v, candidate) for v in inputs) + count * halo_bytes(shape, element, candidate, halos)
        total += sum(cost(out_shape, element, candidate, t) for t in tilings)
        if best is None or total < best[0]:
            best = (total, candidate, halos)
    _, space, halos = best
    pads = [p.get(v, p.replicated(v)) for v in inits]
    operands = [exchange_all(p.b, p.get(v, space), space, halos, pad) for v, pad in zip(inputs, pads)]
    for d in halos:
        padding[d] = [0, 0]
    new = p.b.rebuild(op, operands + pads, [p.local_type(r.type, space) for r in op.results], padding=padding_attribute(padding))
    for result, local, tiling in zip(op.results, new.results, tilings):
        p.define(result, reshard(p.b, local, shape_of(result.type), space, tiling), tiling)
    return f"local reduce_window, computed tiles {list(space.tiles)}" + describe(halos, "operand")
