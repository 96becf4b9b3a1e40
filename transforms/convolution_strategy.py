"""How the CPU backend runs a convolution: a cost model that estimates each strategy's time
and picks the fastest (XLA:CPU makes the same choice between its Eigen/oneDNN library
convolutions and its emitted loops by what the library can take; here it is a model, not a
work threshold).

The strategies:

- `gemm`: a 1x1 convolution with stride 1 and no padding in NHWC x HWIO -> NHWC is the GEMM
  input [N*H*W, C] @ kernel [C, F] straight from the buffers: no copy at all;
- `im2col_gemm`: every output position's receptive field laid out as one row of scratch
  memory, [N*OH*OW, KH*KW*C], then one GEMM with the HWIO kernel (`convolution_gemm.py`);
- `transposed_gemm`: a convolution in another layout (NCHW, a gradient's swapped batch and
  feature dimensions) transposed into NHWC x HWIO -> NHWC and back around the canonical
  convolution, which then takes one of the two above (`xhlo-convolution-layout` rewrites it);
- `weight_gradient_gemm`: the kernel gradient jax makes of an NHWC x HWIO layer
  (`[f, 0, 1, b] x [i, 0, 1, o] -> [0, 1, b, f]`: the layer's input with batch and features
  swapped, the output gradient as kernel, dilated by the layer's stride) is the layer's own
  im2col rows, transposed, times the output gradient: dW [KH*KW*C, F] = rows^T [KH*KW*C,
  N*OH*OW] @ dy [N*OH*OW, F], a GEMM over both operands as they lie (`weight_gradient`
  gives the layer's geometry). `transposed_gemm` would move the input and the output
  gradient through transposes and lay out rows dilated by the stride, which only a
  generated kernel writes (conv1d_grad's: 1.4 ms of transposes and 2.5 ms of rows, against
  about 1 ms for the layer's rows);
- `loop_nest`: the generated loops (`stablehlo-legalize-to-linalg`, loop order, LLVM's
  vectorizer), the only strategy for grouped (depthwise) and window-reversed convolutions.

Dilations take the GEMM too (XLA:CPU's Eigen convolutions extract dilated patches the same
way): the im2col rows of an input dilation (a transposed convolution, the input gradient of
a strided layer) hold the zeros between its pixels, those of a window dilation (an atrous
convolution, the kernel gradient of a strided layer) the pixels the window spans. The loop
nest ran both far slower than its model says: a 16x4x4x256 input dilated by 2 into
128 features through a 3x3 HWOI window took 1.9 s as loops (estimated 44 ms), a kernel
gradient dilated by 2 210 ms (estimated 44 ms).

Each estimate is a roofline, `max(flops / rate, bytes / bandwidth)`, plus what a strategy
pays besides (a BLAS call waking its threads; the im2col rows written and read back; the
transposes), with rates measured on the development host (2 shared AMD EPYC cores, AVX-512):

- a GEMM runs at `GEMM_FLOPS_PER_S` times an efficiency that falls off when one of its
  dimensions is small (`gemm_efficiency`: OpenBLAS's micro-kernels and packing need a few
  rows and a few dozen columns to pay for themselves; a 8192x64x288 f32 GEMM ran at 29
  GFLOP/s, 1024^3 at 43);
- a loop nest runs at `NEST_FLOPS_PER_S` (13 GFLOP/s measured for NHWC 3x3 convolutions with
  64 features) times its vectorization: loop order puts the output's last dimension
  innermost, so the output features vectorize in NHWC (a lane count that does not divide
  them wastes the rest of the last vector); a shallow reduction (few input channels) leaves
  the loop overhead exposed (`depth_efficiency`). A spatial dimension innermost (NCHW, or a
  single feature) broadcasts each tap against a row of the input at the window's offset: its
  rate grows with the row (`SPATIAL_NEST_FLOPS_PER_S` times `spatial_efficiency`), 2.8
  GFLOP/s for NCHW 3x3 layers of 32 columns, 28.6 for `jnp.convolve` of 20000 samples with
  1001 taps (the model had it at 0.35, so its 80 MB of im2col rows and a GEMV ran 12.3 ms
  against the nest's 1.4; XLA:CPU 2.2);
- a register-tiled nest (`register_tiled`: the backend keeps a block of 4 output columns by
  16 features in registers across the window and the input channels) runs at
  `TILED_NEST_FLOPS_PER_S` times its depth efficiency. Measured on the quiet host (both
  cores) it is about the GEMM's rate: 112 GFLOP/s for an 8x32x32x32 -> 64 3x3 layer where
  im2col + GEMM ran 91, 48 for a 3 -> 32 layer as im2col + GEMM did (the plain nest ran
  7.6 and 1.2 under load, the tiled one 19 and 35). The constant stays below the GEMM's:
  at 45e9 a 1x1 convolution left its plain GEMM for the nest and ran 2.8x slower, and the
  convolution benchmark's geomean went from 0.73x to 0.81x XLA's time;
- bytes move at `MEMORY_BYTES_PER_S` (10 GB/s copy bandwidth measured).

So a large convolution takes a GEMM (an 8x32x32x32 -> 64 3x3 layer: 11 ms estimated as
im2col + GEMM, 24 ms as loops; measured 11.5 and 23.2) and a tiny one the loop nest (a
1x8x8x4 -> 8 layer: the BLAS call alone costs more than the loops). `choose` returns the
estimates of every strategy that can run the convolution with the one picked, which the
thunk sequence's decisions print; `forcing(strategy)` makes every convolution that
strategy can run take it (tests run each strategy against the reference interpreter).
"""

import contextlib
import contextvars
from dataclasses import dataclass

from mlirxla.mlir import ir

GEMM = "gemm"
IM2COL_GEMM = "im2col_gemm"
TRANSPOSED_GEMM = "transposed_gemm"
WEIGHT_GRADIENT_GEMM = "weight_gradient_gemm"
LOOP_NEST = "loop_nest"
STRATEGIES = (GEMM, IM2COL_GEMM, TRANSPOSED_GEMM, WEIGHT_GRADIENT_GEMM, LOOP_NEST)

GEMM_FLOPS_PER_S = 40e9  # f32; f64 half
NEST_FLOPS_PER_S = 14e9  # f32, output features innermost filling whole vectors; f64 half
TILED_NEST_FLOPS_PER_S = 30e9  # f32, register-tiled (4 output columns x 16 features in registers)
MEMORY_BYTES_PER_S = 10e9
BLAS_CALL_S = 10e-6  # a BLAS call waking and joining its threads
KERNEL_CALL_S = 2e-6
VECTOR_BYTES = 32  # what LLVM's vectorizer widens to on this host (256-bit vectors preferred)
# a nest whose innermost loop walks output positions (NCHW, or one feature): the window's taps
# broadcast against a row of the input; along a long row it runs above the features-innermost
# rate (jnp.convolve of 20000 samples with 1001 taps: 28.6 GFLOP/s), on a short one far
# below (NCHW 3x3 layers of 32 columns: 2.8), half speed at SPATIAL_HALF_EXTENT positions
SPATIAL_NEST_FLOPS_PER_S = 30e9
SPATIAL_HALF_EXTENT = 256
TRANSPOSE_SLOWDOWN = 2.0  # a transpose moves its bytes at half the copy bandwidth (tiled, strided reads)

NHWC_NUMBERS = (0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))
# the kernel gradient of an NHWC x HWIO layer: its input [N, H, W, C] as [f, 0, 1, b], its
# output gradient [N, OH, OW, F] as [i, 0, 1, o], the gradient [KH, KW, C, F] as [0, 1, b, f]
WEIGHT_GRADIENT_NUMBERS = (3, 0, (1, 2), 0, 3, (1, 2), 2, 3, (0, 1))

_forced: contextvars.ContextVar[str | None] = contextvars.ContextVar("forced_convolution_strategy", default=None)


@contextlib.contextmanager
def forcing(strategy: str):
    """Every convolution `strategy` can run takes it while this is active (the others keep
    the model's choice)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown convolution strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
    token = _forced.set(strategy)
    try:
        yield
    finally:
        _forced.reset(token)


@dataclass(frozen=True)
class Geometry:
    """A 2-D convolution in NHWC x HWIO -> NHWC terms, whatever its layout."""

    batch: int
    height: int
    width: int
    channels: int
    kernel_height: int
    kernel_width: int
    features: int
    out_height: int
    out_width: int
    strides: tuple[int, int]
    padding: tuple[tuple[int, int], tuple[int, int]]
    element: str
    canonical: bool  # NHWC x HWIO -> NHWC
    out_of_place: tuple[bool, bool, bool]  # input, kernel, output: not in the canonical order
    blas_ready: bool  # no groups or reversal; f32 or f64; no negative padding before (after: unread rows and columns)
    innermost_features: bool  # the output's last dimension (of more than one element) is its features
    innermost_extent: int  # the size of that dimension
    groups: int = 1  # feature groups (a depthwise convolution: as many as channels)
    lhs_dilation: tuple[int, int] = (1, 1)  # the input's: a transposed convolution's (a strided layer's input gradient)
    rhs_dilation: tuple[int, int] = (1, 1)  # the window's: an atrous convolution's (a strided layer's kernel gradient)

    @property
    def dilated(self) -> bool:
        return (self.lhs_dilation, self.rhs_dilation) != ((1, 1), (1, 1))

    @property
    def width_bytes(self) -> int:
        return 4 if self.element == "f32" else 8

    @property
    def m(self) -> int:
        return self.batch * self.out_height * self.out_width

    @property
    def k(self) -> int:
        return self.kernel_height * self.kernel_width * self.channels

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.k * self.features / self.groups

    @property
    def input_bytes(self) -> int:
        return self.batch * self.height * self.width * self.channels * self.width_bytes

    @property
    def kernel_bytes(self) -> int:
        return self.k * self.features * self.width_bytes

    @property
    def output_bytes(self) -> int:
        return self.m * self.features * self.width_bytes

    @property
    def pointwise(self) -> bool:
        no_padding = all(p == 0 for side in self.padding for p in side)
        return (self.kernel_height, self.kernel_width, self.strides) == (1, 1, (1, 1)) and no_padding and not self.dilated


@dataclass(frozen=True)
class Estimate:
    strategy: str
    seconds: float


@dataclass(frozen=True)
class Choice:
    """The strategy picked and the estimate of every strategy that can run the convolution."""

    strategy: str
    estimates: tuple[Estimate, ...]
    forced: bool = False

    def seconds(self, strategy: str) -> float | None:
        return next((e.seconds for e in self.estimates if e.strategy == strategy), None)

    def describe(self) -> str:
        figures = ", ".join(f"{e.strategy} {1e6 * e.seconds:.1f} us" for e in self.estimates)
        return f"{self.strategy}{' (forced)' if self.forced else ''}; estimated {figures}"


def dimension_numbers(op: ir.Operation) -> tuple:
    """(input batch, feature, spatial; kernel input, output, spatial; output batch, feature,
    spatial) dimensions of a convolution."""
    numbers = ir.DictAttr(op.attributes["dimension_numbers"])

    def number(name):
        return ir.IntegerAttr(numbers[name]).value

    def numbers_list(name):
        return tuple(ir.DenseI64ArrayAttr(numbers[name]))

    return (number("input_batch_dimension"), number("input_feature_dimension"), numbers_list("input_spatial_dimensions"),
            number("kernel_input_feature_dimension"), number("kernel_output_feature_dimension"), numbers_list("kernel_spatial_dimensions"),
            number("output_batch_dimension"), number("output_feature_dimension"), numbers_list("output_spatial_dimensions"))


def window_attribute(op: ir.Operation, name: str, default: list[int]) -> list[int]:
    """A window attribute of a convolution (strides, dilations) as a list, `default` when absent."""
    return list(ir.DenseI64ArrayAttr(op.attributes[name])) if name in op.attributes else default


def window_padding(op: ir.Operation, spatial: int) -> tuple[tuple[int, ...], ...]:
    """(low, high) padding per spatial dimension of a convolution (its attribute may be a splat)."""
    if "padding" not in op.attributes:
        return tuple((0, 0) for _ in range(spatial))
    attribute = ir.DenseElementsAttr(op.attributes["padding"])
    if attribute.is_splat:
        value = ir.IntegerAttr(attribute.get_splat_value()).value
        return tuple((value, value) for _ in range(spatial))
    values = list(ir.DenseIntElementsAttr(attribute))
    return tuple((values[2 * d], values[2 * d + 1]) for d in range(spatial))


def geometry(op: ir.Operation) -> Geometry | None:
    """The convolution's geometry, or None when it is not 2-D (only loops run it)."""
    ib, if_, isp, ki, ko, ksp, ob, of, osp = numbers = dimension_numbers(op)
    if len(isp) != 2:
        return None
    input_shape = ir.RankedTensorType(op.operands[0].type).shape
    kernel_shape = ir.RankedTensorType(op.operands[1].type).shape
    output_shape = ir.RankedTensorType(op.results[0].type).shape
    element = str(ir.RankedTensorType(op.results[0].type).element_type)
    groups = [ir.IntegerAttr(op.attributes[name]).value for name in ("feature_group_count", "batch_group_count")]
    reversed_window = "window_reversal" in op.attributes and any(ir.DenseBoolArrayAttr(op.attributes["window_reversal"]))
    padding = window_padding(op, 2)
    blas_ready = (groups == [1, 1] and not reversed_window and element in ("f32", "f64")
                  and all(str(ir.RankedTensorType(v.type).element_type) == element for v in op.operands)
                  and all(low >= 0 for low, _ in padding))
    # the loops of unit dimensions fold away: the innermost is the output's last longer one
    last = max((d for d, size in enumerate(output_shape) if size > 1), default=len(output_shape) - 1)
    return Geometry(
        batch=input_shape[ib], height=input_shape[isp[0]], width=input_shape[isp[1]], channels=input_shape[if_],
        kernel_height=kernel_shape[ksp[0]], kernel_width=kernel_shape[ksp[1]], features=kernel_shape[ko],
        out_height=output_shape[osp[0]], out_width=output_shape[osp[1]],
        strides=tuple(window_attribute(op, "window_strides", [1, 1])), padding=padding, element=element,
        canonical=numbers == NHWC_NUMBERS, blas_ready=blas_ready,
        out_of_place=(list((ib, *isp, if_)) != [0, 1, 2, 3], list((*ksp, ki, ko)) != [0, 1, 2, 3], list((ob, *osp, of)) != [0, 1, 2, 3]),
        innermost_features=of == last, innermost_extent=output_shape[last], groups=groups[0] * groups[1],
        lhs_dilation=tuple(window_attribute(op, "lhs_dilation", [1, 1])), rhs_dilation=tuple(window_attribute(op, "rhs_dilation", [1, 1])))


def weight_gradient(op: ir.Operation) -> Geometry | None:
    """The geometry of the layer whose kernel gradient `op` is (`WEIGHT_GRADIENT_NUMBERS`,
    its window not dilated by a stride of its own, no input dilation), or None: the layer
    reads the same input at the gradient's padding, its stride the gradient's window dilation,
    its window the gradient's output, its output positions the gradient's window."""
    g = geometry(op)
    if (g is None or not g.blas_ready or dimension_numbers(op) != WEIGHT_GRADIENT_NUMBERS or g.strides != (1, 1)
            or g.lhs_dilation != (1, 1)):
        return None
    x, dy, dw = (ir.RankedTensorType(v.type).shape for v in (op.operands[0], op.operands[1], op.results[0]))
    return Geometry(batch=x[0], height=x[1], width=x[2], channels=x[3], kernel_height=dw[0], kernel_width=dw[1], features=dy[3],
                    out_height=dy[1], out_width=dy[2], strides=g.rhs_dilation, padding=g.padding, element=g.element, canonical=True,
                    out_of_place=(False, False, False), blas_ready=True, innermost_features=True, innermost_extent=dy[3])


def _weight_gradient_seconds(layer: Geometry) -> float:
    """The layer's im2col rows written and read back by a GEMM whose rows are the layer's
    window positions and channels and whose depth is its output positions."""
    rows = layer.m * layer.k * layer.width_bytes
    efficiency = gemm_efficiency(layer.k, layer.features, layer.m)
    moved = rows + layer.output_bytes + layer.kernel_bytes
    gemm = BLAS_CALL_S + max(layer.flops / (_rate(GEMM_FLOPS_PER_S, layer) * efficiency), moved / MEMORY_BYTES_PER_S)
    return KERNEL_CALL_S + (layer.input_bytes + rows) / MEMORY_BYTES_PER_S + gemm


def gemm_efficiency(m: int, n: int, k: int) -> float:
    """The fraction of GEMM_FLOPS_PER_S an m x n x k GEMM reaches: each small dimension costs
    (half speed at 16 rows, 8 columns, a depth of 8)."""
    return m / (m + 16) * n / (n + 8) * k / (k + 8)


def depth_efficiency(channels: int) -> float:
    """A loop nest reducing over few input channels per window position runs more loop
    control per multiply-add (half speed at 4 channels)."""
    return channels / (channels + 4)


def vector_efficiency(g: Geometry) -> float:
    """The fraction of vector lanes the nest's innermost loop fills."""
    lanes = VECTOR_BYTES // g.width_bytes
    extent = g.innermost_extent
    return extent / (-(-extent // lanes) * lanes)


def spatial_efficiency(extent: int) -> float:
    """A nest walking `extent` output positions innermost pays its setup per tap and channel
    once per row (half speed at SPATIAL_HALF_EXTENT)."""
    return extent / (extent + SPATIAL_HALF_EXTENT)


def _rate(rate: float, g: Geometry) -> float:
    return rate if g.element != "f64" else rate / 2


def _gemm_seconds(g: Geometry) -> float:
    efficiency = gemm_efficiency(g.m, g.features, g.k)
    moved = g.m * g.k * g.width_bytes + g.kernel_bytes + g.output_bytes
    return BLAS_CALL_S + max(g.flops / (_rate(GEMM_FLOPS_PER_S, g) * efficiency), moved / MEMORY_BYTES_PER_S)


def _im2col_seconds(g: Geometry) -> float:
    rows = g.m * g.k * g.width_bytes
    return KERNEL_CALL_S + (g.input_bytes + rows) / MEMORY_BYTES_PER_S + _gemm_seconds(g)


def register_tiled(g: Geometry) -> bool:
    """Whether the loop nest is the CPU backend's register-tiled direct convolution
    (`backends/cpu/convolution_library.py`: NHWC x HWIO -> NHWC in f32, ungrouped, output
    features a multiple of 8) rather than plain loops."""
    return g.canonical and g.element == "f32" and g.groups == 1 and g.features % 8 == 0


def _nest_seconds(g: Geometry) -> float:
    if register_tiled(g):
        rate = TILED_NEST_FLOPS_PER_S * depth_efficiency(g.channels)
    elif g.innermost_features:
        rate = _rate(NEST_FLOPS_PER_S, g) * vector_efficiency(g) * depth_efficiency(g.channels)
    else:  # the taps and channels are outer loops: their count costs no loop control per multiply-add
        rate = _rate(SPATIAL_NEST_FLOPS_PER_S, g) * vector_efficiency(g) * spatial_efficiency(g.innermost_extent)
    moved = g.input_bytes + g.kernel_bytes + g.output_bytes
    return KERNEL_CALL_S + max(g.flops / rate, moved / MEMORY_BYTES_PER_S)


def _transpose_seconds(g: Geometry) -> float:
    """Transposing what is out of place of input and kernel into NHWC and HWIO, and the
    output back (a gradient's kernel alone, an NCHW layer all three)."""
    sizes = (g.input_bytes, g.kernel_bytes, g.output_bytes)
    moved = 2 * sum(size for size, out_of_place in zip(sizes, g.out_of_place) if out_of_place)
    return sum(g.out_of_place) * KERNEL_CALL_S + TRANSPOSE_SLOWDOWN * moved / MEMORY_BYTES_PER_S


def canonical_seconds(g: Geometry) -> tuple[str, float] | None:
    """The best BLAS strategy for `g` once it is NHWC x HWIO -> NHWC, and its estimate."""
    if not g.blas_ready:
        return None
    if g.pointwise:
        return GEMM, _gemm_seconds(g)
    return IM2COL_GEMM, _im2col_seconds(g)


def estimates(g: Geometry) -> list[Estimate]:
    """The estimate of every strategy that can run `g` (the loop nest always can)."""
    found = []
    if g.blas_ready and g.canonical:
        if g.pointwise:
            found.append(Estimate(GEMM, _gemm_seconds(g)))
        found.append(Estimate(IM2COL_GEMM, _im2col_seconds(g)))
    elif (canonical := canonical_seconds(g)) is not None:
        found.append(Estimate(TRANSPOSED_GEMM, canonical[1] + _transpose_seconds(g)))
    found.append(Estimate(LOOP_NEST, _nest_seconds(g)))
    return found


def choose(op: ir.Operation) -> Choice:
    """The strategy for the convolution `op`: the forced one when it can run it, else the
    one with the smallest estimate."""
    g = geometry(op)
    if g is None:
        return Choice(LOOP_NEST, ())
    found = estimates(g)
    if (layer := weight_gradient(op)) is not None:
        found.insert(0, Estimate(WEIGHT_GRADIENT_GEMM, _weight_gradient_seconds(layer)))
    forced = _forced.get()
    if forced is not None and any(e.strategy == forced for e in found):
        return Choice(forced, tuple(found), forced=True)
    best = min(found, key=lambda e: e.seconds)
    return Choice(best.strategy, tuple(found))
