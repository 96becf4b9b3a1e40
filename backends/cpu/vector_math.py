"""f32 math the kernels leave to libm (sin, cos, tan, atan2, erf, cbrt, the inverse and
hyperbolic functions) is vectorized through glibc's vector math library, libmvec.

Only f32 exp, log, tanh and pow have approximations of this backend's own
(`math_approximations.py`). Any other math call in a loop LLVM widens became one scalar libm
call per lane, sixteen `sinf` calls per AVX-512 vector: `jnp.sin` of 65536 floats took
410 us, `lax.lgamma` (its reflection takes `sin(pi x)` of every element) 595 us.
libmvec (part of glibc on x86-64 since 2.22, most functions since 2.35) has each function
at each vector width, within 4 ulp as glibc requires, special values and huge arguments
handled as its scalar ones are; clang uses it the same way (`-fveclib=libmvec`). Now 43 and
295 us (XLA:CPU, which calls the scalar functions: 320 and 510).

The vectorizer is told per call (`vector-function-abi-variant`, the vector function ABI's
names: `_ZGV<isa>N<lanes><v per argument>_<name>`, `b` SSE, `d` AVX2, `e` AVX-512) which
vector functions compute the call at which widths; it offers only the widths the host runs
and the functions this glibc has. f64 calls stay scalar: glibc's scalar f64 functions are
within an ulp (mostly correctly rounded), as XLA:CPU's results are (it calls them too), and
an f64 program asks for those digits; its vector ones were an ulp off in a fifth of `exp`'s
results. The vector functions are declared in the module and kept through O3
(`llvm.compiler.used`), and resolved from libmvec, which `native_symbols` loads into the
process, as libm's functions are.
"""

import functools
import re

import llvmlite.binding as llvm

from . import native_symbols

UNARY = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
         "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "cbrt", "erf", "erfc")
BINARY = ("atan2", "pow", "hypot")
# (the vector function ABI's letter, register bits, the host feature it needs)
ISAS = (("b", 128, None), ("d", 256, "+avx2"), ("e", 512, "+avx512f"))
F32_BITS = 32
# a scalar f32 math call as the kernels' LLVM IR writes it, nothing after its argument list
MATH_CALL = re.compile(r"(call (?:[a-z]+ )*float @((?:llvm\.)?[a-z0-9]+)(?:\.f32)?\(([^()]*)\))$", re.M)
VARIANT_ATTRIBUTE = "vector-function-abi-variant"


@functools.cache
def host_isas() -> tuple[tuple[str, int], ...]:
    """(ABI letter, register bits) of each vector ISA the host runs (x86-64 only: the letters
    are x86's)."""
    if not llvm.get_process_triple().startswith("x86_64"):
        return ()
    features = llvm.get_host_cpu_features().flatten().split(",")
    return tuple((letter, bits) for letter, bits, feature in ISAS if feature is None or feature in features)


def libm_name(callee: str) -> str | None:
    """The f32 libm function an intrinsic or libm call computes (`llvm.sin`, `sinf`: `sinf`),
    or None when libmvec has no such function."""
    base = callee[len("llvm."):] if callee.startswith("llvm.") else callee[:-1] if callee.endswith("f") else None
    return base + "f" if base in UNARY or base in BINARY else None


@functools.cache
def variants(scalar: str, arity: int) -> tuple[tuple[str, int], ...]:
    """(vector function, lanes) of f32 function `scalar` at each width the host runs and
    libmvec has."""
    found = []
    for letter, bits in host_isas():
        lanes = bits // F32_BITS
        vector = f"_ZGV{letter}N{lanes}{'v' * arity}_{scalar}"
        if native_symbols.process_address(vector) is not None:
            found.append((vector, lanes))
    return tuple(found)


def with_vector_variants(ir_text: str) -> str:
    """`ir_text` with each scalar f32 math call libmvec has told its vector functions, and
    those declared and kept."""
    if not native_symbols.load_vector_math():
        return ir_text
    declared: dict[str, str] = {}

    def offer(match: re.Match) -> str:
        call, callee, arguments = match.groups()
        arity = len(arguments.split(","))
        scalar = libm_name(callee)
        found = variants(scalar, arity) if scalar else ()
        if not found:
            return call
        called = callee + ".f32" if callee.startswith("llvm.") else callee
        for vector, lanes in found:
            vector_type = f"<{lanes} x float>"
            declared[vector] = f"declare {vector_type} @{vector}({', '.join([vector_type] * arity)})"
        mappings = ",".join(f"_ZGV_LLVM_N{lanes}{'v' * arity}_{called}({vector})" for vector, lanes in found)
        return f'{call} "{VARIANT_ATTRIBUTE}"="{mappings}"'

    text = MATH_CALL.sub(offer, ir_text)
    if not declared or "@llvm.compiler.used" in text:
        return text
    kept = ", ".join(f"ptr @{vector}" for vector in declared)
    return (text + "\n" + "\n".join(declared.values())
            + f'\n@llvm.compiler.used = appending global [{len(declared)} x ptr] [{kept}], section "llvm.metadata"\n')
