"""bf16 values that never leave a kernel stay in f32 (XLA's `xla_allow_excess_precision`).

bf16 arithmetic runs in f32 (`arith-emulate-unsupported-floats`): each op widens its
operands, computes in f32 and rounds its result back to bf16, a round-to-nearest-even in
integer ops. In a fused chain (a GELU's dozen ops) that is one rounding per op per element,
and the kernel becomes bound by that integer work instead of by memory (bf16 elementwise
kernels ran at 9-40% of the triad bandwidth). XLA:CPU computes such a chain in f32 and rounds
it once: its float normalization runs every bf16 op the CPU lacks in f32 between converts,
and with `xla_allow_excess_precision` (on by default) `SimplifyFPConversions` removes each
f32 -> bf16 -> f32 pair of converts, so only a bf16 value that is stored is rounded.

Here the same is decided in the kernel, once its loops are in f32: every widening of a value
that was just rounded from f32 to bf16 reads the f32 value instead, whether the pair came from
two emulated ops or from the program's own converts (a dot's f32 result rounded to bf16 for
its bias add), as `SimplifyFPConversions` removes both; a rounding nothing reads any more
goes. What is stored (a kernel's bf16 result, a reduction's bf16 accumulator, scratch) is
still rounded, so values between kernels are the program's bf16 values. f16 keeps rounding
after every op: XLA:CPU computes f16 in LLVM's half type, which rounds after each op too.

`MLIRXLA_ALLOW_EXCESS_PRECISION=0` turns it off (the backend's setting, part of the compile
cache's key): every bf16 op's result is rounded, as its type says.
"""

import os

from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

VARIABLE = "MLIRXLA_ALLOW_EXCESS_PRECISION"


def allowed() -> bool:
    """Whether bf16 intermediates may keep f32 precision: `MLIRXLA_ALLOW_EXCESS_PRECISION`
    (1 or 0), on when unset, as XLA's flag."""
    text = os.environ.get(VARIABLE, "").strip()
    if text not in ("", "0", "1"):
        raise MlirxlaError(f"{VARIABLE}={text!r}: expected 1 (allow excess precision) or 0")
    return text != "0"


def keep_fused_bf16_in_f32(module: ir.Module) -> int:
    """Make every bf16 -> f32 widening of an f32 -> bf16 rounding in `module` read the
    rounding's f32 operand, and erase the roundings left unread; how many widenings went."""
    dropped = 0
    for widening in ops_named(module, "arith.extf"):
        rounding = widening.operands[0].owner
        if isinstance(rounding, ir.Block) or rounding.name != "arith.truncf":
            continue
        if not isinstance(widening.operands[0].type, ir.BF16Type) or rounding.operands[0].type != widening.results[0].type:
            continue
        widening.results[0].replace_all_uses_with(rounding.operands[0])
        widening.erase()
        if not list(rounding.results[0].uses):
            rounding.erase()
        dropped += 1
    return dropped
