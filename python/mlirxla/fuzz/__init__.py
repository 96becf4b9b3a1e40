"""Fuzzing: random StableHLO programs run natively against the reference interpreter
(`differential.py` over `programs.py`), and random JAX functions on the plugin against jax's
cpu backend (`jax_functions.py`); `scripts/fuzz` runs them."""
