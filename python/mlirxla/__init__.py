"""mlirxla: XLA's compiler and runtime, MLIR-native, in Python."""

__version__ = "0.1.0"
