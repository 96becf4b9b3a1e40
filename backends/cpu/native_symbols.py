"""The compiler-runtime functions LLVM's code generator may call, and the check that nothing
else is left unresolved in a native object.

x86 without AVX512-BF16 has no bf16 registers: when an optimized kernel moves `bfloat`
values through vector selects or element extraction, code generation widens them to f32
and narrows them back with a call to `__truncsfbf2` (compiler-rt's helper), which no
library of this process provides; a `convert` from f64 to bf16 or f16 becomes a call to
`__truncdfbf2` / `__truncdfhf2`. Such calls appear after the IR is optimized, so the IR's
declarations do not show them. `HELPERS` defines them in LLVM IR, compiled into the shared
object of every executable whose IR holds bf16 or f16 values (`may_call_helpers`; code
generation of the helpers costs
more than that of a small kernel, and only such values lead to these calls):
`__truncsfbf2` rounds to nearest even and makes a NaN the quiet NaN of its sign, payload
dropped, as `bf16_truncation.py` does for the conversions in the kernels themselves (and
XLA and ml_dtypes do); the f64 narrowings (`narrowing`) round the double once, to nearest
even, through the target's subnormals, to infinity past its largest value, as compiler-rt's
fp_trunc does (f64 -> f32 -> bf16 would round twice), NaNs the quiet NaN of their sign as
jax's cpu backend gives.

`undefined_symbols` lists what an ELF object still needs from outside; what no object of the
executable defines (a driver's kernels, a forwarder's original, the helpers are in other objects)
the JIT resolves from this process (`resolve`), and objects needing a symbol the process lacks
are refused at compile time: MCJIT would otherwise bind it to address 0 and crash on the call.
"""

import ctypes
import functools
import re
import struct

import llvmlite.binding as llvm

from mlirxla.errors import MlirxlaError
from mlirxla.runtime import blas

HELPERS = """
define bfloat @__truncsfbf2(float %value) {
  %bits = bitcast float %value to i32
  %is_nan = fcmp uno float %value, %value
  %upper = lshr i32 %bits, 16
  %lowest_kept = and i32 %upper, 1
  %bias = add i32 %lowest_kept, 32767
  %rounded = add i32 %bits, %bias
  %rounded_upper = lshr i32 %rounded, 16
  %sign = and i32 %upper, 32768
  %quiet_nan = or i32 %sign, 32704
  %result = select i1 %is_nan, i32 %quiet_nan, i32 %rounded_upper
  %narrow = trunc i32 %result to i16
  %as_bfloat = bitcast i16 %narrow to bfloat
  ret bfloat %as_bfloat
}
"""


def narrowing(name: str, target: str, exponent_bits: int, mantissa_bits: int) -> str:
    """LLVM IR of `name`: f64 to a 16-bit float of `exponent_bits` and `mantissa_bits`, in
    integer arithmetic on the double's bits, branch-free."""
    shift = 52 - mantissa_bits
    source_bias, target_bias = 1023, (1 << (exponent_bits - 1)) - 1
    target_max = (1 << exponent_bits) - 1
    return f"""
define {target} @{name}(double %value) {{
  %bits = bitcast double %value to i64
  %sign = lshr i64 %bits, 63
  %magnitude = and i64 %bits, 9223372036854775807
  %is_nan = fcmp uno double %value, %value
  %exponent = lshr i64 %magnitude, 52
  %mantissa = and i64 %magnitude, 4503599627370495
  %is_normal_source = icmp ne i64 %exponent, 0
  %implicit = select i1 %is_normal_source, i64 4503599627370496, i64 0
  %significand = or i64 %mantissa, %implicit
  %source_exponent = select i1 %is_normal_source, i64 %exponent, i64 1
  %target_exponent = add i64 %source_exponent, {target_bias - source_bias}
  %normal_kept = lshr i64 %mantissa, {shift}
  %normal_dropped = and i64 %mantissa, {(1 << shift) - 1}
  %normal_high = shl i64 %target_exponent, {mantissa_bits}
  %normal_truncated = or i64 %normal_high, %normal_kept
  %normal = call i64 @round_half_even(i64 %normal_truncated, i64 %normal_dropped, i64 {1 << (shift - 1)})
  %below = sub i64 1, %target_exponent
  %tiny_shift_wide = add i64 %below, {shift}
  %too_tiny = icmp ugt i64 %tiny_shift_wide, 54
  %tiny_shift = select i1 %too_tiny, i64 54, i64 %tiny_shift_wide
  %tiny_kept = lshr i64 %significand, %tiny_shift
  %tiny_mask_bit = shl i64 1, %tiny_shift
  %tiny_mask = sub i64 %tiny_mask_bit, 1
  %tiny_dropped = and i64 %significand, %tiny_mask
  %tiny_half = lshr i64 %tiny_mask_bit, 1
  %tiny = call i64 @round_half_even(i64 %tiny_kept, i64 %tiny_dropped, i64 %tiny_half)
  %is_normal_target = icmp sgt i64 %target_exponent, 0
  %finite = select i1 %is_normal_target, i64 %normal, i64 %tiny
  %overflows = icmp sge i64 %target_exponent, {target_max}
  %is_infinite_source = icmp eq i64 %exponent, 2047
  %infinite = or i1 %overflows, %is_infinite_source
  %bounded = select i1 %infinite, i64 {target_max << mantissa_bits}, i64 %finite
  %unsigned = select i1 %is_nan, i64 {(target_max << mantissa_bits) | (1 << (mantissa_bits - 1))}, i64 %bounded
  %sign_bit = shl i64 %sign, 15
  %result = or i64 %unsigned, %sign_bit
  %narrow = trunc i64 %result to i16
  %as_float = bitcast i16 %narrow to {target}
  ret {target} %as_float
}}
"""


ROUND_HALF_EVEN = """
define internal i64 @round_half_even(i64 %kept, i64 %dropped, i64 %half) {
  %above = icmp ugt i64 %dropped, %half
  %tie = icmp eq i64 %dropped, %half
  %odd = trunc i64 %kept to i1
  %tie_up = and i1 %tie, %odd
  %up = or i1 %above, %tie_up
  %increment = zext i1 %up to i64
  %rounded = add i64 %kept, %increment
  ret i64 %rounded
}
"""
HELPERS += ROUND_HALF_EVEN + narrowing("__truncdfbf2", "bfloat", 8, 7) + narrowing("__truncdfhf2", "half", 5, 10)
_PROCESS = ctypes.CDLL(None)  # the symbols native code may call: libc, libm and what Python loaded
# dlsym itself, looked up once: `_PROCESS[name]` makes a function object that ctypes ties into a
# reference cycle, garbage for the collector at every lookup
_DLSYM = _PROCESS.dlsym
_DLSYM.restype, _DLSYM.argtypes = ctypes.c_void_p, (ctypes.c_void_p, ctypes.c_char_p)
_ELF_MAGIC = b"\x7fELF"
VECTOR_MATH_LIBRARY = "libmvec.so.1"
VECTOR_FUNCTION_PREFIX = "_ZGV"  # the vector function ABI's names
_SYMBOL_TABLE = 2
_UNDEFINED_SECTION = 0
_LOCAL_BINDING = 0


NARROW_FLOAT = re.compile(r"\b(?:bfloat|half)\b")


def may_call_helpers(ir_text: str) -> bool:
    """Whether the code generated for this LLVM IR may call a helper: only when it holds bf16
    or f16 values, whose type the IR then names."""
    return NARROW_FLOAT.search(ir_text) is not None


def helpers_module(machine: "llvm.TargetMachine", needed: bool = True, context=None) -> "llvm.ModuleRef":
    """The module of an executable's shared object (in `context`; None: the global one), with
    the helpers when `needed`."""
    return llvm.parse_assembly(target_header(machine) + (HELPERS if needed else ""), context)


def target_header(machine: "llvm.TargetMachine") -> str:
    """The IR lines that give a module `machine`'s triple and data layout. Written into the text
    rather than set on the parsed module: llvmlite's setters copy the string through a ctypes
    array type made for its length, which dies in a reference cycle, garbage each compile
    leaves to the collector (jax's core_test checks a jit leaves none)."""
    return f'target datalayout = "{machine.target_data}"\ntarget triple = "{machine.triple}"\n'


def process_address(name: str) -> int | None:
    """Where this process has function `name`, or None. A vector math function
    (`vector_math.py`) is looked for after glibc's vector math library is loaded; a GEMM
    routine (a convolution's blocks call it) in numpy's OpenBLAS, whose symbols are local."""
    if name in blas.GEMM_ROUTINES.values():
        return blas.routine_address(name)
    if name.startswith(VECTOR_FUNCTION_PREFIX):
        load_vector_math()
    return _DLSYM(_PROCESS._handle, name.encode())


@functools.cache
def load_vector_math() -> bool:
    """Load glibc's vector math library into the process, its symbols global as libm's are;
    whether there is one."""
    try:
        ctypes.CDLL(VECTOR_MATH_LIBRARY, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    return True


def _symbols(object_code: bytes):
    """(name, defined, global) of each named symbol of an ELF64 little-endian object (none for
    another format: the checks are skipped there)."""
    if object_code[:4] != _ELF_MAGIC or object_code[4] != 2 or object_code[5] != 1:
        return
    section_offset, = struct.unpack_from("<Q", object_code, 0x28)
    entry_size, count = struct.unpack_from("<HH", object_code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", object_code, section_offset + i * entry_size) for i in range(count)]
    for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
        if kind != _SYMBOL_TABLE:
            continue
        strings_offset = sections[link][4]
        for start in range(offset + symbol_size, offset + size, symbol_size):  # entry 0 is the null symbol
            name_offset, info, _, section = struct.unpack_from("<IBBH", object_code, start)
            if name_offset:
                end = object_code.index(b"\0", strings_offset + name_offset)
                yield object_code[strings_offset + name_offset:end].decode(), section != _UNDEFINED_SECTION, info >> 4 != _LOCAL_BINDING


def undefined_symbols(object_code: bytes) -> list[str]:
    """The named symbols an object uses without defining."""
    return [name for name, defined, _ in _symbols(object_code) if not defined]


def resolve(objects: list[bytes]) -> None:
    """Make every symbol `objects` need and none of them defines known to the JIT at its
    address in this process; refuse the objects when one is missing."""
    defined = {name for code in objects for name, is_defined, is_global in _symbols(code) if is_defined and is_global}
    for code in objects:
        for name in undefined_symbols(code):
            if name in defined:
                continue
            address = process_address(name)
            if address is None:
                raise MlirxlaError(f"native code calls '{name}', which this process does not provide")
            llvm.add_symbol(name, address)
