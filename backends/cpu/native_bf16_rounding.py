"""f32 -> bf16 roundings in a loop use AVX512-BF16's conversion, the loop run again exactly
when a value it rounded was denormal or a NaN.

A bf16 rounding (`arith.truncf`, expanded by `bf16_truncation.py` into integer ops: a shift,
a mask, two adds, a shift, a truncation and a NaN select) is about ten vector instructions for
16 values. In transformer_bf16's masked exponential kernel, arithmetic-bound, that was a fifth
of its time (85 -> 71 us per slice with the conversion instead). AVX512-BF16's
`vcvtneps2bf16`, which LLVM selects for an `fptrunc` to bfloat on a host with the feature,
rounds to nearest even in one instruction, but it treats a denormal input as zero and keeps a
NaN's payload, where XLA's rounding, ml_dtypes' and the reference interpreter's keep
denormals and make a NaN the quiet NaN of its sign: exact fix-ups of the denormal lanes cost
more than the integer rounding (94-100 us, measured), a NaN select per value 3-5%.

So an innermost loop whose body rounds f32 to bf16 runs once when it can and twice when it
must: first with the native conversion alone, carrying the unsigned minimum of
`(bits << 1) - 1` over every value it rounded, which is below 0x00FFFFFE exactly when one was
a nonzero denormal (zero maps to the top; normals, infinities and NaNs to 0x00FFFFFF and
above), and the unsigned maximum of `bits << 1`, above 0xFF000000 exactly when one was a NaN
(a shift, an add, a minimum and a maximum a vector); then, when either was, the original
loop again, with the integer rounding, writing the same places over (a row of denormal
exponentials or of NaNs costs its loop twice). Running it again is sound
only for a loop that reads nothing it writes and whose stores no other argument can see
half done: it is rewritten only when every memref it stores to is an `llvm.noalias`
argument (no other argument overlaps it) or an allocation, none of which it loads from, and
its body is scalar arithmetic, math, loads and stores (the vectorizer widens both loops). A
loop's results (a value it carries) are those of whichever run came last: the same values.

Only on a host with avx512bf16 (elsewhere LLVM makes the conversion a call per element).
"""

import functools

import llvmlite.binding as llvm

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir, scf
from mlirxla.transforms.erasure import erase

DENORMAL_KEY_BOUND = 0x00FFFFFE  # (bits << 1) - 1 of a nonzero denormal is below it
INFINITY_KEY = -0x01000000  # 0xFF000000, bits << 1 of an infinity; a NaN's is above it
UNSIGNED_LESS, UNSIGNED_GREATER = 6, 8  # arith.cmpi's ult, ugt
VIEWS = ("memref.subview", "memref.reinterpret_cast", "memref.collapse_shape", "memref.expand_shape",
         "memref.cast", "memref.view")
# LLVM's cost model prices a vector `fptrunc` to bfloat as if it were scalarized, so the
# vectorizer chose 4 lanes for a loop of little else (mlp_bf16's bias add: 64 -> 26 GB/s): the
# native loop asks for 16, one AVX-512 vector of f32, which the back end converts in one
# instruction (`convert-scf-to-cf` carries the annotation to the loop's branch)
WHOLE_VECTORS = "#llvm.loop_annotation<vectorize = <width = 16 : i32>>"
# math that becomes LLVM intrinsics, which the vectorizer widens (or calls lane by lane); the
# rest becomes libm calls (cbrt, erf, atan2, ...), and a loop asked to vectorize around one
# makes LLVM print "loop not vectorized" to the user's terminal: such a loop keeps LLVM's choice
VECTORIZED_MATH = frozenset({"math.sqrt", "math.rsqrt", "math.absf", "math.fma", "math.floor", "math.ceil", "math.copysign",
                             "math.roundeven", "math.round", "math.trunc", "math.exp", "math.exp2", "math.log", "math.log2",
                             "math.log10", "math.sin", "math.cos", "math.powf", "math.fpowi"})
BODY_OPS = ("memref.load", "memref.store", "scf.yield", "llvm.intr.ldexp", "llvm.intr.fma", "llvm.intr.fmuladd")


@functools.cache
def host_converts_bf16() -> bool:
    return "+avx512bf16" in llvm.get_host_cpu_features().flatten().split(",")


def round_bf16_natively(module: ir.Module) -> int:
    """Rewrite every such loop of `module` (on a host with avx512bf16); how many."""
    if not host_converts_bf16():
        return 0
    loops = [loop for loop in ops_named(module, "scf.for") if rewritable(loop)]
    for loop in loops:
        with ir.InsertionPoint(loop), loop.location:
            run_natively_first(loop)
    return len(loops)


def roundings(root) -> list[ir.Operation]:
    return [op for op in ops_named(root, "arith.truncf")
            if op.operands[0].type == ir.F32Type.get() and isinstance(op.results[0].type, ir.BF16Type)]


def rewritable(loop: ir.Operation) -> bool:
    """`loop` is innermost, rounds f32 to bf16, computes on scalars only, and stores only to
    memory no other argument overlaps (a `llvm.noalias` argument or an allocation) that it
    does not load from."""
    ops = [op.operation for op in loop.regions[0].blocks[0].operations]
    if not roundings(loop) or any(not simple(op) for op in ops):
        return False
    stored = {root_of(op.operands[1]) for op in ops if op.name == "memref.store"}
    loaded = {root_of(op.operands[0]) for op in ops if op.name == "memref.load"}
    return all(root is not None and root[0] in ("private", "allocation") for root in stored) \
        and None not in loaded and not stored & loaded


def simple(op: ir.Operation) -> bool:
    return not op.regions and (op.name.startswith(("arith.", "math.")) or op.name in BODY_OPS) \
        and not any(isinstance(result.type, ir.VectorType) for result in op.results)


def root_of(memref: ir.Value):
    """The memory `memref` is a view of, as a key: ("private", n) for the function's argument n
    marked `llvm.noalias` (no other argument overlaps it), ("argument", n) for another argument
    (arguments may share a buffer), ("allocation", op) for one made in the function; None for
    anything else."""
    while not isinstance(memref.owner, ir.Block) and memref.owner.operation.name in VIEWS:
        memref = memref.owner.operands[0]
    owner = memref.owner
    if not isinstance(owner, ir.Block):
        return ("allocation", owner) if owner.operation.name in ("memref.alloc", "memref.alloca") else None
    function = owner.owner
    if function is None or function.operation.name != "func.func":
        return None
    number = ir.BlockArgument(memref).arg_number
    if "arg_attrs" in function.attributes and "llvm.noalias" in ir.DictAttr(ir.ArrayAttr(function.attributes["arg_attrs"])[number]):
        return ("private", number)
    return ("argument", number)


def run_natively_first(loop: ir.Operation) -> None:
    """Before `loop`: its native copy, then `if (a denormal or a NaN was rounded) loop`;
    `loop`'s results are the conditional's."""
    i1, i32 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32)
    fast = carrying_keys(loop.clone(), constant(i32, -1), constant(i32, 0))
    least, greatest = list(fast.results)[-2:]
    denormal = ir.Operation.create("arith.cmpi", results=[i1], operands=[least, constant(i32, DENORMAL_KEY_BOUND)],
                                   attributes={"predicate": predicate(UNSIGNED_LESS)}).result
    nan = ir.Operation.create("arith.cmpi", results=[i1], operands=[greatest, constant(i32, INFINITY_KEY)],
                              attributes={"predicate": predicate(UNSIGNED_GREATER)}).result
    exact_needed = ir.Operation.create("arith.ori", results=[i1], operands=[denormal, nan]).result
    rerun = scf.IfOp(exact_needed, [result.type for result in loop.results], has_else=True)
    for old, new in zip(loop.results, rerun.results):
        old.replace_all_uses_with(new)
    with ir.InsertionPoint(rerun.then_block):
        exact = scf.YieldOp(list(loop.results))
    loop.move_before(exact)
    with ir.InsertionPoint(rerun.else_block):
        scf.YieldOp(list(fast.results)[:-2])


def predicate(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def constant(kind: ir.Type, value: int) -> ir.Value:
    return ir.Operation.create("arith.constant", results=[kind], attributes={"value": ir.IntegerAttr.get(kind, value)}).result


def carrying_keys(copy: ir.Operation, least: ir.Value, greatest: ir.Value) -> ir.Operation:
    """`copy` (a clone of the loop, just before it) rebuilt to carry the keys' extremes from
    `least` and `greatest`, its roundings native."""
    carried = list(copy.operands)[3:]
    fast = scf.ForOp(copy.operands[0], copy.operands[1], copy.operands[2], carried + [least, greatest])
    if widened(copy):
        fast.operation.attributes["loop_annotation"] = ir.Attribute.parse(WHOLE_VECTORS)
    old_body, body = copy.regions[0].blocks[0], fast.body
    for old, new in zip(old_body.arguments, list(body.arguments)[:-2]):
        old.replace_all_uses_with(new)
    old_yield = list(old_body.operations)[-1]
    with ir.InsertionPoint(body):
        new_yield = scf.YieldOp(list(old_yield.operands))
    for op in list(old_body.operations)[:-1]:
        op.move_before(new_yield)
    erase(copy)
    keys = tuple(body.arguments)[-2:]
    for rounding in roundings(fast):
        with ir.InsertionPoint(rounding), rounding.location:
            keys = native(rounding, *keys)
    with ir.InsertionPoint.at_block_terminator(body), new_yield.location:
        scf.YieldOp(list(new_yield.operands) + list(keys))
    erase(new_yield)
    return fast


def widened(loop: ir.Operation) -> bool:
    """Whether the vectorizer can widen `loop`'s body: its math is all LLVM intrinsics."""
    names = (op.operation.name for op in loop.regions[0].blocks[0].operations)
    return all(name in VECTORIZED_MATH for name in names if name.startswith("math."))


def native(rounding: ir.Operation, least: ir.Value, greatest: ir.Value) -> tuple[ir.Value, ir.Value]:
    """`rounding` replaced by the conversion; the keys' extremes with this value's."""
    value = rounding.operands[0]
    bf16, i32 = ir.BF16Type.get(), ir.IntegerType.get_signless(32)
    converted = ir.Operation.create("llvm.fptrunc", results=[bf16], operands=[value]).result
    bits = ir.Operation.create("arith.bitcast", results=[i32], operands=[value]).result
    doubled = ir.Operation.create("arith.shli", results=[i32], operands=[bits, constant(i32, 1)]).result
    lowered = ir.Operation.create("arith.addi", results=[i32], operands=[doubled, constant(i32, -1)]).result
    least = ir.Operation.create("arith.minui", results=[i32], operands=[least, lowered]).result
    greatest = ir.Operation.create("arith.maxui", results=[i32], operands=[greatest, doubled]).result
    rounding.results[0].replace_all_uses_with(converted)
    erase(rounding)
    return least, greatest
