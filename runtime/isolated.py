"""Run the reference interpreter in a child process, for modules that may crash it.

The interpreter evaluates integer `divide` / `remainder` with the machine's instructions, so
a zero divisor (or INT_MIN / -1) kills the process with SIGFPE; a convolution with an
operand of no elements aborts it ("Incompatible index and shape found while flattening
index"). Modules holding those ops are evaluated in a child: the module and the arguments go
over as MLIR text, the outputs come back as MLIR text, and a crash becomes a one-line error
instead of a dead process.
"""

import os
import signal
import subprocess
import sys
import tempfile

from mlirxla.errors import MlirxlaError, first_line
from mlirxla.ir_queries import first_op_where
from mlirxla.mlir import ir, stablehlo

CRASHY_INTEGER_OPS = frozenset({"stablehlo.divide", "stablehlo.remainder"})
SEPARATOR = "\n// ----- value\n"


def may_crash(module: ir.Module) -> bool:
    """Whether `module` (StableHLO) divides integers or convolves an empty operand, which can
    kill the interpreter."""
    return first_op_where(module, lambda op: divides_integers(op) or convolves_nothing(op)) is not None


def divides_integers(op: ir.Operation) -> bool:
    return op.name in CRASHY_INTEGER_OPS and isinstance(ir.RankedTensorType(op.results[0].type).element_type, ir.IntegerType)


def convolves_nothing(op: ir.Operation) -> bool:
    return op.name == "stablehlo.convolution" and any(0 in ir.RankedTensorType(v.type).shape for v in op.operands)


def evaluate_in_child(module: ir.Module, arguments: list[ir.Attribute]) -> list[ir.Attribute]:
    with tempfile.TemporaryDirectory(prefix="mlirxla-eval-") as directory:
        with open(os.path.join(directory, "module.mlir"), "w") as handle:
            handle.write(module.operation.get_asm(print_generic_op_form=True))
        with open(os.path.join(directory, "arguments.txt"), "w") as handle:
            handle.write(SEPARATOR.join(str(a) for a in arguments))
        done = subprocess.run([sys.executable, "-m", "mlirxla.runtime.isolated", directory], capture_output=True, text=True)
        if done.returncode < 0:
            name = signal.Signals(-done.returncode).name
            cause = " (integer division by zero or overflow?)" if name == "SIGFPE" else ""
            raise MlirxlaError(f"the reference interpreter crashed with {name}{cause}")
        if done.returncode != 0:
            raise MlirxlaError(f"the reference interpreter failed: {first_line(done.stderr) or f'exit status {done.returncode}'}")
        with open(os.path.join(directory, "outputs.txt")) as handle:
            text = handle.read()
    return [ir.Attribute.parse(piece, module.context) for piece in text.split(SEPARATOR)] if text else []


def child(directory: str) -> int:
    from mlirxla.context import new_context

    context = new_context()
    with context:
        with open(os.path.join(directory, "module.mlir")) as handle:
            module = ir.Module.parse(handle.read())
        with open(os.path.join(directory, "arguments.txt")) as handle:
            text = handle.read()
        arguments = [ir.Attribute.parse(piece) for piece in text.split(SEPARATOR)] if text else []
        try:
            outputs = stablehlo.eval_module(module, arguments)
        except Exception as error:
            print(first_line(error), file=sys.stderr)
            return 1
    with open(os.path.join(directory, "outputs.txt"), "w") as handle:
        handle.write(SEPARATOR.join(str(o) for o in outputs))
    return 0


if __name__ == "__main__":
    sys.exit(child(sys.argv[1]))
