"""Backends: from an imported xhlo module to a compiled program, behind one interface
(`backend.py`) and a registry by name (`registry.py`): `cpu` (native kernels through LLVM,
BLAS, host calls) and `reference` (the StableHLO reference interpreter, as a backend like the
others)."""
