"""Kernels written as loops: the text of a function over memrefs in scf, arith and memref,
for the kernels whose work is no tensor computation the linalg lowering expresses well (a
scatter's read-modify-write through computed indices, a per-row top-k selection). The
function is in destination-passing style like every kernel (operands, then results) and
goes through the same lowering (`lowering.py`), which leaves these dialects to the LLVM
conversion.

`LoopText` hands out SSA names, keeps the index constants at the top of the function (so
they dominate every loop) and indents the loop structure it is given."""

from dataclasses import dataclass, field

from mlirxla.mlir import ir

from .kernel_source import memref_of


def memref_text(tensor_type: ir.Type) -> str:
    return str(memref_of(tensor_type))


def element_text(tensor_type: ir.Type) -> str:
    """The signless element type a buffer holds (`ui32` is `i32` in memory)."""
    return str(ir.MemRefType(memref_of(tensor_type)).element_type)


def is_unsigned(tensor_type: ir.Type) -> bool:
    element = ir.RankedTensorType(tensor_type).element_type
    return isinstance(element, ir.IntegerType) and ir.IntegerType(element).is_unsigned


def is_float(element: str) -> bool:
    return element in ("f16", "bf16", "f32", "f64")


@dataclass
class LoopText:
    symbol: str
    arguments: list[tuple[str, str]]  # (name without %, memref type)
    body: list[str] = field(default_factory=list)
    constants: dict[tuple[str, str], str] = field(default_factory=dict)
    depth: int = 1
    count: int = 0

    def fresh(self, hint: str = "v") -> str:
        self.count += 1
        return f"%{hint}{self.count}"

    def line(self, text: str) -> None:
        self.body.append("  " * self.depth + text)

    def value(self, expression: str, hint: str = "v") -> str:
        name = self.fresh(hint)
        self.line(f"{name} = {expression}")
        return name

    def constant(self, value, element: str = "index") -> str:
        """An `arith.constant` defined once, at the top of the function."""
        key = (str(value), element)
        if key not in self.constants:
            self.constants[key] = f"%k{len(self.constants)}"
        return self.constants[key]

    def open(self, header: str) -> None:
        self.line(header + " {")
        self.depth += 1

    def close(self, trailer: str = "}") -> None:
        self.depth -= 1
        self.line(trailer)

    def loop(self, upper: int | str, hint: str = "i") -> str:
        """Open `scf.for` from 0 to `upper` (a size, or an index value); its induction variable."""
        variable = self.fresh(hint)
        bound = upper if isinstance(upper, str) else self.constant(upper)
        self.open(f"scf.for {variable} = {self.constant(0)} to {bound} step {self.constant(1)}")
        return variable

    def parallel(self, uppers: list[int], hint: str = "r") -> list[str]:
        """Open `scf.parallel` over [0, upper) for each of `uppers` (close it with
        `close_parallel`); its induction variables. No uppers (one iteration: a scalar's
        rows) is a loop of one iteration, whose variable is not returned."""
        variables = [self.fresh(hint) for _ in uppers or [1]]
        zeros, ones = ", ".join(self.constant(0) for _ in variables), ", ".join(self.constant(1) for _ in variables)
        bounds = ", ".join(self.constant(upper) for upper in uppers or [1])
        self.open(f"scf.parallel ({', '.join(variables)}) = ({zeros}) to ({bounds}) step ({ones})")
        return variables if uppers else []

    def close_parallel(self) -> None:
        self.line("scf.reduce")
        self.close()

    def load(self, memref: str, memref_type: str, indices: list[str]) -> str:
        return self.value(f"memref.load {memref}[{', '.join(indices)}] : {memref_type}")

    def store(self, value: str, memref: str, memref_type: str, indices: list[str]) -> None:
        self.line(f"memref.store {value}, {memref}[{', '.join(indices)}] : {memref_type}")

    def text(self) -> str:
        signature = ", ".join(f"%{name}: {memref_type}" for name, memref_type in self.arguments)
        constants = [f"  {name} = arith.constant {value} : {element}" for (value, element), name in self.constants.items()]
        return "\n".join([f"func.func @{self.symbol}({signature}) {{", *constants, *self.body, "  return", "}"])
