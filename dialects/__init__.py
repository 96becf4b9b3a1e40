"""Dialects defined by mlirxla: `xhlo` (HLO) and `check` (the interpreter tests' expectations)."""
