"""bf16 values that never leave a kernel stay in f32 (XLA's `xla_allow_excess_precision`).

bf16 arithmetic runs in f32 (`arith-emulate-unsupported-floats`): each op widens its
operands, computes in f32 and rounds its result back to bf16, a round-to-nearest-even in
integer ops. In a fused chain (a GELU's dozen ops) that is one rounding per op per element,
and the kernel is bound by that integer work instead of by memory (the bf16 transformer's
GELU kernel ran at 31-41% of the triad bandwidth). XLA lets a compiler skip those roundings:
with `xla_allow_excess_precision` (on by default) its `SimplifyFPConversions` removes each
f32 -> bf16 -> f32 pair of converts that float normalization left between two bf16 ops run
in f32, so a chain is rounded only where its bf16 value is stored. XLA:GPU runs that pass by
default; XLA:CPU only on its oneDNN path, so jax's default CPU results round after every op
(ours now differ from them by a bf16 ulp in most elements, within the benchmark workloads'
tolerance).

Here it is decided in the kernel, once its loops are in f32: every widening of a value just
rounded from f32 to bf16 reads the f32 value instead, whether the pair came from two emulated
ops or from the program's own converts (a dot's f32 result rounded to bf16 for its bias add),
as `SimplifyFPConversions` removes both; a rounding nothing reads any more goes. A select
between such a rounding and another bf16 value (a mask's constant: a bf16 attention's masked
scores) is a bf16 value read in the kernel too: its widening is the select of the f32 value
and the other one widened, which the select would otherwise keep rounded (seven integer ops a
vector in transformer_bf16's exponential loop). What is
stored (a kernel's bf16 result, a reduction's bf16 accumulator, scratch) is still rounded, so
the values between kernels are the program's bf16 values, and a single op is as exact as
before. A rounding of a widened f16 or f8 value is the program's conversion between two
narrow types and stays. f16 keeps rounding after every op (XLA:CPU computes f16 in LLVM's half type, which
rounds each op's result).

`CompileOptions(allow_excess_precision=False)` or `MLIRXLA_ALLOW_EXCESS_PRECISION=0` turns
it off (either is part of the compile cache's key): every bf16
op's result is rounded, as its type says and as the reference interpreter and XLA:CPU compute it.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .settings import on_or_off

VARIABLE = "MLIRXLA_ALLOW_EXCESS_PRECISION"


def allowed(option: bool | None = None) -> bool:
    """Whether bf16 intermediates may keep f32 precision: the compile option when given
    (`CompileOptions.allow_excess_precision`), else `MLIRXLA_ALLOW_EXCESS_PRECISION` (1 or 0),
    on when unset, as XLA's flag."""
    return on_or_off(option, VARIABLE, "allow excess precision")


def keep_fused_bf16_in_f32(module: ir.Module) -> int:
    """Make every bf16 -> f32 widening of an f32 -> bf16 rounding in `module` (or of a select
    of one) read the rounding's f32 operand, and erase the roundings left unread; how many
    roundings were bypassed."""
    dropped = 0
    for widening in ops_named(module, "arith.extf"):
        narrow = widening.operands[0]
        if not isinstance(narrow.type, ir.BF16Type) or widening.results[0].type != ir.F32Type.get():
            continue
        roundings = bypassed_roundings(narrow)
        if not roundings:
            continue
        with ir.InsertionPoint(widening), widening.location:
            wide = unrounded(narrow)
        widening.results[0].replace_all_uses_with(wide)
        widening.erase()
        erase_unread(narrow.owner)
        dropped += len(roundings)
    return dropped


def is_rounding(value: ir.Value) -> bool:
    """Whether `value` is an f32 -> bf16 rounding of an f32 value computed in f32 (not of an
    f16 or f8 value widened: that rounding is the program's conversion between two narrow
    types, `x.astype(bf16)` of an f16 `x`, which XLA keeps and whose bypass kept f16's extra
    bits, 87% of 100000 converted values)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.truncf" or owner.operands[0].type != ir.F32Type.get():
        return False
    source = owner.operands[0].owner
    return isinstance(source, ir.Block) or source.name != "arith.extf" or isinstance(source.operands[0].type, ir.BF16Type)


def bypassed_roundings(narrow: ir.Value) -> list[ir.Operation]:
    """The f32 -> bf16 roundings the widening of `narrow` can read around: its own, or those
    of a select's operands."""
    if is_rounding(narrow):
        return [narrow.owner]
    owner = narrow.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.select":
        return []
    return [operand.owner for operand in list(owner.operands)[1:] if is_rounding(operand)]


def unrounded(narrow: ir.Value) -> ir.Value:
    """`narrow` widened to f32, reading the f32 operands of the roundings it is made of."""
    if is_rounding(narrow):
        return narrow.owner.operands[0]
    owner = narrow.owner
    if not isinstance(owner, ir.Block) and owner.name == "arith.select":
        condition, chosen, other = owner.operands
        return ir.Operation.create("arith.select", results=[ir.F32Type.get()],
                                   operands=[condition, unrounded(chosen), unrounded(other)]).result
    return ir.Operation.create("arith.extf", results=[ir.F32Type.get()], operands=[narrow]).result


def erase_unread(op) -> None:
    """Erase `op` if nothing reads it, then the roundings and selects it alone read."""
    if isinstance(op, ir.Block) or list(op.results[0].uses) or op.name not in ("arith.truncf", "arith.select"):
        return
    operands = list(op.operands) if op.name == "arith.select" else []
    op.erase()
    for operand in operands:
        erase_unread(operand.owner)
