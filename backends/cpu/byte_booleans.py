"""Booleans are loaded and stored as the bytes they are in memory.

A `pred` buffer holds one byte per element (numpy's bool, XLA's PRED). The LLVM dialect
loads and stores its elements as `i1`, and LLVM's vectorizer does not widen an `i1` access:
a vector of `i1` is a packed bit mask in registers, so it reads each of the 16 lanes with a
scalar load and builds the mask one `insertelement` at a time (and stores each lane alone).
`jax.random.poisson`'s rejection test reads six boolean operands: 104 scalar loads and 96
inserts per 16 elements, most of that kernel's time. Loaded as `i8` and compared with zero
(stored zero-extended), the same accesses are one vector load or store of bytes and one
compare into a mask.

A byte other than 0 and 1 (a bool array made by viewing other bytes, as jax's tests make
them) is true, as numpy and XLA take it in logic. Its conversion to an 8-bit integer, which
is how jax's `view` of bools as int8 or uint8 is lowered, is the byte itself, as on XLA:CPU
(and as the `i1` load's zero extension happened to give before).

It runs on the LLVM dialect, the last step of the lowering.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

NOT_EQUAL = 1  # llvm.icmp's predicate


def access_booleans_as_bytes(module: ir.Module) -> int:
    """Rewrite every `i1` load and store in `module` as one of `i8`; how many were rewritten."""
    boolean, byte = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
    rewritten = 0
    for load in ops_named(module, "llvm.load"):
        if load.results[0].type != boolean:
            continue
        with ir.InsertionPoint(load), load.location:
            wide = ir.Operation.create("llvm.load", results=[byte], operands=list(load.operands),
                                       attributes={name: load.attributes[name] for name in load.attributes}).result
            zero = ir.Operation.create("llvm.mlir.constant", results=[byte], attributes={"value": ir.IntegerAttr.get(byte, 0)}).result
            nonzero = ir.Operation.create("llvm.icmp", results=[boolean], operands=[wide, zero],
                                          attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), NOT_EQUAL)}).result
        for use in list(load.results[0].uses):
            if use.owner.name == "llvm.zext" and use.owner.results[0].type == byte:
                use.owner.results[0].replace_all_uses_with(wide)
        load.results[0].replace_all_uses_with(nonzero)
        load.erase()
        rewritten += 1
    for store in ops_named(module, "llvm.store"):
        if store.operands[0].type != boolean:
            continue
        with ir.InsertionPoint(store), store.location:
            store.operands[0] = ir.Operation.create("llvm.zext", results=[byte], operands=[store.operands[0]]).result
        rewritten += 1
    return rewritten
