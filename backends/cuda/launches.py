"""The host side of a lowered kernel function: its `gpu.launch_func` ops, in order, each as
the kernel it launches, its grid and block, and which of the function's arguments it passes
(a pointer each: the kernels take bare pointers)."""

from dataclasses import dataclass

from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

# ops that only view a buffer: the kernel gets the buffer's base pointer, and a view's static
# offset and strides are in its memref type, which the kernel (bare pointers,
# `MemRefDescriptor::fromStaticShape`) applies itself
VIEWS = {"memref.collapse_shape", "memref.expand_shape", "memref.cast", "memref.subview", "memref.reinterpret_cast"}


@dataclass(frozen=True)
class Launch:
    kernel: str  # the PTX entry's name (its gpu.module's)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    arguments: tuple[int, ...]  # the kernel function's argument passed as each pointer
    shared_bytes: int = 0


def read_launches(module: ir.Module, symbol: str) -> list[Launch]:
    host = next((f for f in ops_named(module, "func.func") if ir.StringAttr(f.attributes["sym_name"]).value == symbol), None)
    if host is None:
        raise MlirxlaError(f"kernel {symbol}: no host function after outlining")
    arguments = list(host.regions[0].blocks[0].arguments)
    launches = []
    for op in host.regions[0].blocks[0].operations:
        op = op.operation
        if op.name in ("func.return", "arith.constant") or op.name in VIEWS:
            continue
        if op.name != "gpu.launch_func":
            raise MlirxlaError(f"kernel {symbol}: '{op.name}' is left on the host after outlining")
        launch = op.opview
        kernel = ir.SymbolRefAttr(op.attributes["kernel"]).value[0]
        grid = tuple(constant(v, symbol) for v in (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ))
        block = tuple(constant(v, symbol) for v in (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ))
        passed = tuple(argument_index(v, arguments, symbol) for v in launch.kernelOperands)
        launches.append(Launch(kernel, grid, block, passed))
    return launches


def constant(value: ir.Value, symbol: str) -> int:
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        raise MlirxlaError(f"kernel {symbol}: a launch dimension is not a constant")
    return ir.IntegerAttr(owner.operation.attributes["value"]).value


def argument_index(value: ir.Value, arguments: list[ir.Value], symbol: str) -> int:
    """The function argument whose buffer `value` is (through views of it)."""
    while True:
        for index, argument in enumerate(arguments):
            if value == argument:
                return index
        owner = value.owner
        if not isinstance(owner, ir.OpView) or owner.operation.name not in VIEWS:
            what = owner.operation.name if isinstance(owner, ir.OpView) else "a block argument"
            raise MlirxlaError(f"kernel {symbol}: a launch passes a value of {what}, not a buffer of the kernel's arguments")
        value = owner.operation.operands[0]
