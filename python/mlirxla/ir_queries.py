"""Questions every layer asks of the IR: which ops a walk finds, which op defines a value, which
function a program starts at.

This module imports the MLIR toolkit only, never a pass, a backend, the runtime or the front
door, so that each of them can import it.

The walks visit `root` (a module or an op) and every op nested in it, `root` included, inner
ops before the ops that contain them (MLIR's post-order).
"""

from collections.abc import Callable

from mlirxla.mlir import ir


def ops_where(root, wanted: Callable[[ir.Operation], bool]) -> list[ir.Operation]:
    """The ops of `root`'s walk for which `wanted(op)` holds."""
    found = []

    def visit(op):
        if wanted(op.operation):
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit)
    return found


def first_op_where(root, wanted: Callable[[ir.Operation], bool]) -> ir.Operation | None:
    """The first op of `root`'s walk for which `wanted(op)` holds (the walk stops there)."""
    found = []

    def visit(op):
        if wanted(op.operation):
            found.append(op.operation)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit)
    return found[0] if found else None


def ops_named(root, *names: str) -> list[ir.Operation]:
    """The ops of `root`'s walk named one of `names` (the name read off each op the walk
    hands over, without a handle made for ops not kept: one Python call per op, which a
    module of a thousand ops pays in every stage that looks for an op)."""
    wanted = frozenset(names)
    found = []

    def visit(op):
        if op.name in wanted:
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit)
    return found


def ops_in_dialect(root, dialect: str) -> list[ir.Operation]:
    prefix = f"{dialect}."
    found = []

    def visit(op):
        if op.name.startswith(prefix):
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit)
    return found


def nested_ops(root) -> list[ir.Operation]:
    """Every op of `root`'s walk."""
    operation = root.operation
    if not len(operation.regions):
        return [operation]  # no walk (and no Python call per op) for an op holding none
    return ops_where(operation, lambda op: True)


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that produces `value`, or None for a block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def is_inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """Whether `op` is nested (at any depth) in a region of `ancestor`."""
    parent = op.parent
    while parent is not None:
        if parent == ancestor:
            return True
        parent = parent.parent
    return False


def module_functions(module: ir.Module) -> list[ir.Operation]:
    """The `func.func` ops at the top of `module`, in order."""
    return [op.operation for op in module.body.operations if op.operation.name == "func.func"]


def function_name(function) -> str:
    return ir.StringAttr(function.attributes["sym_name"]).value


def is_public(function) -> bool:
    """Whether `function` is visible outside its module (a function without visibility is)."""
    return "sym_visibility" not in function.attributes or ir.StringAttr(function.attributes["sym_visibility"]).value == "public"


def entry_function(module: ir.Module) -> ir.Operation | None:
    """The function a compiled program starts at: `main` whatever its visibility, else the first
    public function, else the first function; None when the module has none."""
    functions = module_functions(module)
    mains = [function for function in functions if function_name(function) == "main"]
    public = [function for function in functions if is_public(function)]
    return (mains or public or functions or [None])[0]


def public_function_names(module: ir.Module) -> list[str]:
    return [function_name(function) for function in module_functions(module) if is_public(function)]


def public_entry_name(module: ir.Module) -> str:
    """The name of the function a run starts at: `main` when it is public or no function is,
    else the first public function. Unlike `entry_function` it passes over a private `main`, and
    it names `main` even in a module without one (looking it up then reports it missing)."""
    names = public_function_names(module)
    return "main" if "main" in names or not names else names[0]
