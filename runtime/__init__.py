"""Execution: the PJRT-shaped client and executables, sharded arrays (IFRT's), thunks and
their executor, BLAS and the host library calls, the compile cache; the reference executor
(StableHLO interpreter) and the native one; literals, check judging, the oracle."""
