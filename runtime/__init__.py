"""Execution: the reference executor (StableHLO interpreter), literals, check judging, the oracle."""
