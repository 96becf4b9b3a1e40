"""Passes over xhlo modules: the module verifier and the lowering back to StableHLO."""
