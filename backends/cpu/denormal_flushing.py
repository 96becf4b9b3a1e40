"""Kernels run with denormals flushed to zero, as XLA:CPU's do.

XLA:CPU executes with the x86 MXCSR's flush-to-zero (FTZ) and denormals-are-zero (DAZ) bits
set (tsl's `ScopedFlushDenormal` around an execution): a denormal operand reads as zero and a
result that would be denormal is written as zero (`x * 1.5` of 1e-40 is 0 on jax's cpu
backend). Besides giving XLA's results, flushing keeps kernels off the microcode assists
that denormal arithmetic takes on x86, over a hundred cycles an op: a softplus summed over
a 512 x 512 GEMM's output, whose exp(-|x|) underflows into denormals, took 8.7 ms (0.28 on
XLA:CPU).

Each kernel's and each native driver's entry saves MXCSR, sets both bits and puts the saved
word back before it returns, so whichever path calls a kernel (a native driver, the Python
walk, the pool's threads) it runs flushed, and the calling thread (the user's, numpy's
arithmetic on it) keeps IEEE gradual underflow outside executions. MXCSR is written only
where the bits are not set yet: a kernel a driver calls (each step of a loop's) only reads
it. Inside a driver, BLAS and LAPACK calls and the host calls it hands back to Python run
flushed too, as XLA:CPU's custom calls run inside its scope; called from the Python walk,
they run in the caller's mode. Only on x86-64 hosts; elsewhere kernels keep the thread's
mode.

`CompileOptions(flush_denormals=False)` or `MLIRXLA_FLUSH_DENORMALS=0` keeps gradual
underflow, as the StableHLO reference interpreter computes; either is part of the compile
cache's key. The conformance runner asks for it: its expected values are the interpreter's.
"""

import re

from .settings import on_or_off

VARIABLE = "MLIRXLA_FLUSH_DENORMALS"
FLUSHING_BITS = 0x8040  # MXCSR's FTZ (bit 15) and DAZ (bit 6)

# the helpers write MXCSR only when the bits are not set already: LDMXCSR stalls the pipeline,
# and a kernel called from a flushing driver (every kernel of a loop's body, each iteration)
# finds them set (a 36,000-step nested scan of four tiny kernels took 0.73 ms writing MXCSR
# twice a call, 0.28 without)
_HELPERS = f"""
define internal void @mlirxla.flushing.enter(ptr %saved, ptr %flushing) alwaysinline nounwind {{
entry:
  call void @llvm.x86.sse.stmxcsr(ptr %saved)
  %word = load i32, ptr %saved, align 4
  %bits = and i32 %word, {FLUSHING_BITS}
  %set = icmp eq i32 %bits, {FLUSHING_BITS}
  br i1 %set, label %done, label %flush
flush:
  %flushed = or i32 %word, {FLUSHING_BITS}
  store i32 %flushed, ptr %flushing, align 4
  call void @llvm.x86.sse.ldmxcsr(ptr %flushing)
  br label %done
done:
  ret void
}}

define internal void @mlirxla.flushing.leave(ptr %saved) alwaysinline nounwind {{
entry:
  %word = load i32, ptr %saved, align 4
  %bits = and i32 %word, {FLUSHING_BITS}
  %set = icmp eq i32 %bits, {FLUSHING_BITS}
  br i1 %set, label %done, label %restore
restore:
  call void @llvm.x86.sse.ldmxcsr(ptr %saved)
  br label %done
done:
  ret void
}}
"""
_ENTER = """  %mxcsr.saved = alloca i32, align 4
  %mxcsr.flushing = alloca i32, align 4
  call void @mlirxla.flushing.enter(ptr %mxcsr.saved, ptr %mxcsr.flushing)
"""
_LEAVE = "  call void @mlirxla.flushing.leave(ptr %mxcsr.saved)\n"
_DECLARATIONS = ("declare void @llvm.x86.sse.stmxcsr(ptr)", "declare void @llvm.x86.sse.ldmxcsr(ptr)")
_LABEL = re.compile(r"^[\w.$-]+:")


def flushed(option: bool | None = None) -> bool:
    """Whether kernels flush denormals: the compile option when given
    (`CompileOptions.flush_denormals`), else `MLIRXLA_FLUSH_DENORMALS` (1 or 0), on when unset,
    as XLA:CPU runs."""
    return on_or_off(option, VARIABLE, "flush denormals to zero")


def flushing_entry(ir_text: str, symbol: str, triple: str) -> str:
    """`ir_text` with function `symbol` running flushed: MXCSR saved and both bits set on
    entry (after the entry block's label, if it has one) unless they are, the saved word put
    back before each `ret` where it differs. Unchanged off x86-64."""
    if not triple.startswith("x86_64"):
        return ir_text
    lines = ir_text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("define ") and f" @{symbol}(" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("}"))
    body = lines[start + 1:end]
    entry = 1 if body and _LABEL.match(body[0]) else 0
    rewritten = body[:entry] + [_ENTER]
    for line in body[entry:]:
        if line.lstrip().startswith("ret "):
            rewritten.append(_LEAVE)
        rewritten.append(line)
    declarations = [f"{d}\n" for d in _DECLARATIONS if d not in ir_text]
    return "".join(lines[:start + 1] + rewritten + lines[end:] + ["\n"] + declarations + [_HELPERS])
