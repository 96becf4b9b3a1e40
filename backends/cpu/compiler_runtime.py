"""The compiler-runtime functions LLVM's code generator may call, and the check that nothing
else is left unresolved in a native object.

x86 without AVX512-BF16 has no bf16 registers: when an optimized kernel moves `bfloat`
values through vector selects or element extraction, code generation widens them to f32
and narrows them back with a call to `__truncsfbf2` (compiler-rt's helper), which no
library of this process provides. Such calls appear after the IR is optimized, so the IR's
declarations do not show them. `HELPERS` defines the helper in LLVM IR, linked into every
object: round to nearest even, NaN kept quiet (its sign and top mantissa bits), as
`arith-expand` does for the conversions in the kernels themselves.

`undefined_symbols` lists what an ELF object still needs from outside; the JIT resolves
each from this process (`resolve`), and an object needing a symbol the process lacks is
refused at compile time: MCJIT would otherwise bind it to address 0 and crash on the call.
"""

import ctypes
import struct

import llvmlite.binding as llvm

from mlirxla.errors import MlirxlaError

HELPERS = """
define bfloat @__truncsfbf2(float %value) {
  %bits = bitcast float %value to i32
  %is_nan = fcmp uno float %value, %value
  %upper = lshr i32 %bits, 16
  %lowest_kept = and i32 %upper, 1
  %bias = add i32 %lowest_kept, 32767
  %rounded = add i32 %bits, %bias
  %rounded_upper = lshr i32 %rounded, 16
  %quiet_nan = or i32 %upper, 64
  %result = select i1 %is_nan, i32 %quiet_nan, i32 %rounded_upper
  %narrow = trunc i32 %result to i16
  %as_bfloat = bitcast i16 %narrow to bfloat
  ret bfloat %as_bfloat
}
"""
_PROCESS = ctypes.CDLL(None)  # the symbols native code may call: libc, libm and what Python loaded
_ELF_MAGIC = b"\x7fELF"
_SYMBOL_TABLE = 2
_UNDEFINED_SECTION = 0


def helpers_module(machine: "llvm.TargetMachine") -> "llvm.ModuleRef":
    module = llvm.parse_assembly(HELPERS)
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    return module


def process_address(name: str) -> int | None:
    """Where this process has function `name`, or None."""
    try:
        function = _PROCESS[name]
    except AttributeError:
        return None
    return ctypes.cast(function, ctypes.c_void_p).value


def undefined_symbols(object_code: bytes) -> list[str]:
    """The named symbols an ELF64 little-endian object uses without defining ([] for another
    format: the check is skipped there)."""
    if object_code[:4] != _ELF_MAGIC or object_code[4] != 2 or object_code[5] != 1:
        return []
    section_offset, = struct.unpack_from("<Q", object_code, 0x28)
    entry_size, count = struct.unpack_from("<HH", object_code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", object_code, section_offset + i * entry_size) for i in range(count)]
    names = []
    for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
        if kind != _SYMBOL_TABLE:
            continue
        strings_offset = sections[link][4]
        for start in range(offset + symbol_size, offset + size, symbol_size):  # entry 0 is the null symbol
            name_offset, _, _, section = struct.unpack_from("<IBBH", object_code, start)
            if section == _UNDEFINED_SECTION and name_offset:
                end = object_code.index(b"\0", strings_offset + name_offset)
                names.append(object_code[strings_offset + name_offset:end].decode())
    return names


def resolve(object_code: bytes) -> None:
    """Make every symbol `object_code` needs known to the JIT at its address in this process;
    refuse the object when one is missing."""
    for name in undefined_symbols(object_code):
        address = process_address(name)
        if address is None:
            raise MlirxlaError(f"native code calls '{name}', which this process does not provide")
        llvm.add_symbol(name, address)
