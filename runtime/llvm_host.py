"""Native code the runtime writes itself (LAPACK batch loops, the thread pool), compiled for
the host by llvmlite."""

import functools


def compiled(text: str):
    """An MCJIT engine holding `text` compiled for the host (llvmlite directly: the runtime
    reaches no backend but through the registry, and a loop around a call needs none of the
    cpu backend's kernel optimizations). The triple and data layout are written into the
    text, as the cpu backend's JIT does, rather than set through llvmlite's setters, whose
    ctypes string types would be garbage for the cyclic collector."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(opt=2, jit=True)
    header = f'target datalayout = "{machine.target_data}"\ntarget triple = "{machine.triple}"\n'
    module = llvm.parse_assembly(header + text, llvm.create_context())
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)  # owns the module and the machine
    engine.finalize_object()
    return engine


@functools.cache
def has_feature(feature: str) -> bool:
    """Whether LLVM finds `feature` (as LLVM names it: `avx512vnni`) on this host's CPU."""
    import llvmlite.binding as llvm

    return f"+{feature}" in llvm.get_host_cpu_features().flatten().split(",")
