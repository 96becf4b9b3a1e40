"""From kernel functions in StableHLO to the LLVM dialect and LLVM IR: the upstream passes,
as a list you can read (and `--dump` shows the module between each, with `dump_passes`).

StableHLO becomes linalg on tensors (the toolkit's `stablehlo-legalize-to-linalg`);
elementwise linalg ops fuse into one loop nest; one-shot bufferization writes results into
the destination memrefs the kernel was given (`kernel_source.py`), so nothing is allocated
for results, and the buffer-deallocation pipeline frees what remains inside a kernel (the
per-slice scratch of batch-slice kernels). linalg becomes loops; the math the LLVM
vectorizer cannot widen by itself (exp, log, tanh, ...) stays as LLVM intrinsics that the
JIT maps to glibc's vector math library (`llvm_jit.py`). Functions take bare pointers
(`use-bare-ptr-memref-call-conv`): a kernel is `void k(ptr, ptr, ...)`, operands then results.
"""

from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir, llvm, passmanager, stablehlo

from . import llvm_text

TO_LINALG = [
    "func.func(stablehlo-legalize-to-linalg)",
    "func.func(linalg-fuse-elementwise-ops)",
    "canonicalize",
    "one-shot-bufferize",
    "buffer-deallocation-pipeline",
    "canonicalize",
]
TO_LLVM = [
    "func.func(convert-linalg-to-loops)",
    "func.func(lower-affine)",
    "convert-scf-to-cf",
    "expand-strided-metadata",
    "lower-affine",
    "finalize-memref-to-llvm",
    "convert-math-to-llvm",
    "convert-arith-to-llvm",
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1}",
    "convert-cf-to-llvm",
    "reconcile-unrealized-casts",
]
PIPELINE = TO_LINALG + TO_LLVM
_REGISTERED = False


def register_passes() -> None:
    global _REGISTERED
    if not _REGISTERED:
        stablehlo.register_stablehlo_passes()
        _REGISTERED = True


def lower_to_llvm_dialect(module: ir.Module, name: str) -> None:
    """Run the whole lowering on `module` in place; an error names the kernel `name`."""
    register_passes()
    try:
        with module.context:
            passmanager.PassManager.parse(f"builtin.module({','.join(PIPELINE)})").run(module.operation)
    except Exception as error:  # the pass manager raises MLIRError with the diagnostics
        raise MlirxlaError(f"kernel {name} failed to lower to LLVM: {str(error).splitlines()[0]}") from None


def translate(module: ir.Module) -> str:
    """LLVM IR text of a module in the LLVM dialect, in the syntax llvmlite's LLVM reads."""
    with module.context:
        return llvm_text.downgrade(str(llvm.translate_module_to_llvmir(module.operation)))
