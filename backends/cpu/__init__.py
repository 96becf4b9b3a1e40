"""The CPU backend: kernels through StableHLO, linalg and LLVM to native code (llvmlite), BLAS
for GEMMs, and the thunk sequence the runtime executes. Entry point: `compiler.compile_module`."""
