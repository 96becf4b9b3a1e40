"""Every floating-point multiply, add and subtract of a kernel may be contracted: a product
feeding a sum becomes one fused multiply-add (`vfmadd`) where the host has one.

XLA:CPU compiles every kernel with LLVM's `AllowFPOpFusion = Fast` ("this increases
precision instead of decreasing it"): its results are those of fused multiply-adds, rounded
once. Compiled without, ours differed from XLA's in the last bit wherever a product met a
sum (`jnp.linspace`'s `lo (1 - t) + hi t`, and so `jnp.histogram`'s bin edges and the count
of a value on an edge), and every Horner step, dot-like reduction and interpolation took two
instructions and two roundings. llvmlite's target machine takes no such option, so the
permission is written on the operations themselves (`contract`), which LLVM's instruction
selection honours in the same way.

It runs on the loops, after bf16 and f16 arithmetic became f32 arithmetic with a rounding
after each op (a rounding between a product and a sum keeps them apart, as the narrow type
requires) and before the math approximations, which choose themselves where to contract.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

CONTRACTIBLE = ("arith.mulf", "arith.addf", "arith.subf")


def allow_contraction(module: ir.Module) -> int:
    """Mark every float multiply, add and subtract in `module` `contract`, keeping the
    fast-math flags it had; how many were marked."""
    marked = 0
    for op in ops_named(module, *CONTRACTIBLE):
        flags = fastmath_flags(op)
        if "contract" in flags or "fast" in flags:
            continue
        op.attributes["fastmath"] = ir.Attribute.parse(f"#arith.fastmath<{','.join(sorted(flags | {'contract'}))}>")
        marked += 1
    return marked


def fastmath_flags(op: ir.Operation) -> set[str]:
    """The fast-math flags written on `op` (`none` is no flag)."""
    if "fastmath" not in op.attributes:
        return set()
    text = str(op.attributes["fastmath"])
    return {flag.strip() for flag in text[text.index("<") + 1:text.rindex(">")].split(",")} - {"none"}
