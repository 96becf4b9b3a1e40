"""The thunk emitter's families, one module each: kernels (`kernels.py`), library calls
(`library_calls.py`: GEMMs and im2col convolutions), host calls (`host_calls.py`) and control
flow (`control_flow.py`). Each exports emitters `(emitter, op) -> [thunk]` that
`thunk_emitter.EMITTERS` maps op kinds to."""
