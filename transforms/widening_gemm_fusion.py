"""xhlo-widening-gemm-fusion: a GEMM takes in the convert that widens its bf16 operand to f32.

A bf16 dot reaches a backend whose GEMMs are f32 only as an f32 dot of converted operands
(`narrow_dot_upcast.py`). An activation's convert joins the fusion that produces it; a weight's
stays a kernel of its own, which reads the bf16 matrix and writes it twice as wide for the
GEMM to read back: a pass over memory at the machine's bandwidth, single-threaded
(transformer_bf16: four such converts, 1.6 ms of a 14.5 ms step). Eigen's contraction,
behind XLA:CPU's dots, widens bf16 while it packs its panels, and XLA:GPU's GEMM fusion
takes operand converts into the Triton GEMM. Here the convert joins the dot's fusion, and the
cpu backend widens the operand panel by panel (`Panels`), each panel into its thread's scratch
where the single-threaded GEMM reading it finds it in cache, the panels spread over the
threads (`runtime_library.widening_gemm_call`).

The convert of a dot's operand (a bare dot, or the library call of an output fusion) fuses
when

- it widens bf16 to f32, its result has the dot as its only user, and the dot is f32;
- the dot is one GEMM over row-major buffers, without a batch (`dot_canonicalizer.gemm_shape`);
- the operand splits into panels along its free dimension (`panels`): at least one for every
  thread, each of at least `LEAST_PANEL` rows or columns and at most `PANEL_BYTES` in f32;
- the panels' GEMMs, each reading the other operand whole, read it again fewer bytes than the
  f32 copy they spare (its write and its read, 8 bytes an element).

Of two converted operands, the larger fuses (the other stays a kernel). The fusion is of kind
`output` (a library call and its epilogue, if any: `convert_dot_fusion` for a bare dot). Every merge and refusal is logged (`widening-gemm-fusion-decisions.txt`; `mlirxla-opt
--explain-fusion` reads it). Changed: any fusion made.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir
from mlirxla.runtime.threads import cpu_threads

from .narrow_dot_upcast import element_of
from .dot_canonicalizer import gemm_shape
from .erasure import live_ops
from .fusion_legality import element_count, fused_ops, fusion_kind, kind_of, users_in_block
from .pass_base import ModulePass, PassResult
from .priority_fusion import Decision, FusionDecisions, Namer, build_fusion, describe, fusible_blocks

# a panel of the widened operand in f32: what stays in a core's L2 cache (1-1.25 MiB on the
# hosts measured) beside BLAS's packed blocks
PANEL_BYTES = 1 << 20
# rows or columns a panel holds at least: fewer leave BLAS's micro-kernel tiles part empty
LEAST_PANEL = 16
F32_BYTES = 4


@dataclass(frozen=True)
class Panels:
    """How a GEMM (m, n, k; `transpose_lhs`, `transpose_rhs`) widens operand `side` (0: lhs,
    1: rhs): `count` panels of `width` rows of the lhs' m, or columns of the rhs' n."""

    side: int
    width: int
    count: int
    m: int
    n: int
    k: int
    transpose_lhs: bool
    transpose_rhs: bool


def widened_side(dot: ir.Operation) -> int | None:
    """The operand of `dot` (0 or 1) that a convert inside its fusion widens, if any."""
    for side, value in enumerate(dot.operands):
        producer = defining_op(value)
        if producer is not None and kind_of(producer) == "convert":
            return side
    return None


def panels(dot: ir.Operation, side: int, threads: int) -> Panels | str:
    """The panels widening operand `side` of `dot`, or why it does not widen so."""
    shape = gemm_shape(dot)
    if shape is None or shape[0] != 1:
        return "the dot is not one GEMM over row-major buffers"
    _, m, n, k, transpose_lhs, transpose_rhs = shape
    free, other_free = (m, n) if side == 0 else (n, m)
    fitting = [width for width in range(LEAST_PANEL, free + 1)
               if free % width == 0 and width * k * F32_BYTES <= PANEL_BYTES and free // width >= threads]
    if not fitting:
        return (f"no panel of {LEAST_PANEL} or more of its {free} {'rows' if side == 0 else 'columns'} fits "
                f"{PANEL_BYTES >> 10} KiB with one panel for each of {threads} thread(s)")
    even = [width for width in fitting if (free // width) % threads == 0]
    width = max(even or fitting)
    count = free // width
    rereading, spared = (count - 1) * other_free * k * F32_BYTES, free * k * 2 * F32_BYTES
    if rereading > spared:
        return f"{count} panels would read the other operand again ({rereading} bytes), more than the {spared} bytes of the f32 copy spared"
    return Panels(side, width, count, m, n, k, transpose_lhs, transpose_rhs)


def library_call(op: ir.Operation) -> ir.Operation | None:
    """The dot of a bare dot or of an output fusion rooted in one."""
    if kind_of(op) == "dot":
        return op
    if kind_of(op) == "fusion" and fusion_kind(op) == "output":
        return next((inner for inner in fused_ops(op) if kind_of(inner) == "dot"), None)
    return None


def f32(value: ir.Value) -> bool:
    return element_of(value) == "f32"


def widening_convert(value: ir.Value, user: ir.Operation) -> ir.Operation | None:
    """The bare bf16 -> f32 convert producing `value`, when `user` is its only user."""
    convert = defining_op(value)
    if convert is None or kind_of(convert) != "convert":
        return None
    widens = element_of(convert.operands[0]) == "bf16" and f32(convert.results[0])
    if not widens or users_in_block(convert) != [user]:
        return None
    return convert


@dataclass(frozen=True)
class WideningGemmFusionPass(ModulePass):
    """Fuses the bf16 -> f32 convert of a dot's operand into the dot."""

    name: ClassVar[str] = "xhlo-widening-gemm-fusion"
    summary: ClassVar[str] = "a GEMM widens its bf16 operand panel by panel instead of reading a widened copy"

    def run(self, module: ir.Module) -> PassResult:
        decisions: list[Decision] = []
        namer = Namer(module)
        threads = cpu_threads()
        changed = False
        with module.context, ir.Location.unknown():
            for block in fusible_blocks(module):
                for op in live_ops(block.operations):
                    dot = library_call(op)
                    if dot is not None and f32(dot.results[0]):
                        changed = fuse_widening(op, dot, threads, namer, decisions) or changed
        return PassResult(changed, FusionDecisions("widening-gemm-fusion-decisions.txt", tuple(decisions)))


def fuse_widening(owner: ir.Operation, dot: ir.Operation, threads: int, namer: Namer, decisions: list[Decision]) -> bool:
    """Fuse the larger widened operand of `dot` (computed by `owner`, the dot or its fusion)."""
    if owner == dot:
        outer = list(dot.operands)
    else:
        arguments = dict(zip(owner.regions[0].blocks[0].arguments, owner.operands))
        outer = [arguments.get(value) for value in dot.operands]
    candidates = []
    for side, value in enumerate(outer):
        convert = widening_convert(value, owner) if value is not None else None
        if convert is not None and f32(dot.operands[1 - side]):
            candidates.append((element_count(value.type), side, convert))
    if not candidates:
        return False
    _, side, convert = max(candidates, key=lambda candidate: candidate[0])
    choice = panels(dot, side, threads)
    if isinstance(choice, str):
        decisions.append(Decision("refused", describe(convert), describe(owner), choice))
        return False
    convert_text, owner_text = describe(convert), describe(owner)
    fusion = build_fusion([convert, owner], list(owner.results), namer, kind="output")
    decisions.append(Decision("fused", convert_text, owner_text, fusion=describe(fusion)))
    return True
