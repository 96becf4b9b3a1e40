"""A triangular solve as a kernel of its own, for targets that run no host calls (the cuda
backend; on the CPU it is LAPACK's trsm, a host call): one parallel iteration per
right-hand side, each solving its system by substitution.

`op(a) x = b` (left side) or `x op(a) = b` (right side) splits into independent systems
`M y = c`: the columns of b on the left, its rows on the right (`x op(a) = b` is
`op(a)^T x^T = b^T`), where `M` is `op(a)` or its transpose, so that `M[i, k]` is
`a[i, k]` or `a[k, i]` ("swapped", conjugated for the adjoint). `M` is lower triangular
when a's used triangle lands below the diagonal, and then the substitution runs forward
(row 0 first), else backward: `y[i] = (c[i] - sum over the solved k of M[i, k] y[k]) /
M[i, i]` (no division with a unit diagonal). Each iteration reads c[i] just before it writes
y[i] and reads only its own system, so the result may share b's buffer. On a GPU each
thread runs one system (XLA:GPU calls cuBLAS's trsm instead: this is the simple kernel, right
for the small and batched solves of jax programs, not for one large system)."""

from mlirxla.mlir import ir

from .loop_kernels import gpu_kernel_or_host_call


def emit_triangular_solve(emitter, op: ir.Operation) -> list:
    return gpu_kernel_or_host_call(emitter, op, "triangular solve as a kernel, one thread per right-hand side",
                                   lambda symbol: triangular_solve_text(symbol, op))


def triangular_solve_text(symbol: str, op: ir.Operation) -> str:
    a_type, b_type = (ir.RankedTensorType(v.type) for v in op.operands)
    flags = {name: bool(ir.BoolAttr(op.attributes[name]).value) for name in ("left_side", "lower", "unit_diagonal")}
    transpose = ir.StringAttr(op.attributes["transpose_a"]).value
    return substitution_text(symbol, list(a_type.shape), list(b_type.shape), str(a_type.element_type), flags["left_side"],
                             flags["lower"], flags["unit_diagonal"], transpose)


def substitution_text(symbol: str, a_shape: list[int], b_shape: list[int], element: str, left_side: bool, lower: bool,
                      unit_diagonal: bool, transpose: str) -> str:
    batch = b_shape[:-2]
    n = a_shape[-1]
    systems = b_shape[-1] if left_side else b_shape[-2]
    swapped = (transpose != "NO_TRANSPOSE") != (not left_side)
    forward = lower != swapped
    complex_element = element.startswith("complex")
    arithmetic = "complex" if complex_element else "arith"
    suffix = "" if complex_element else "f"
    conjugate = transpose == "ADJOINT" and complex_element
    a_memref, b_memref = memref_type(a_shape, element), memref_type(b_shape, element)
    batch_indices = [f"%d{d}" for d in range(len(batch))]

    def b_at(row: str) -> str:
        return ", ".join(batch_indices + ([row, "%p"] if left_side else ["%p", row]))

    def a_at(row: str, column: str) -> str:
        return ", ".join(batch_indices + ([column, row] if swapped else [row, column]))

    def coefficient(name: str, row: str, column: str) -> list[str]:
        load = f"%{name}{'_stored' if conjugate else ''} = memref.load %a[{a_at(row, column)}] : {a_memref}"
        return [load] + ([f"%{name} = complex.conj %{name}_stored : {element}"] if conjugate else [])

    def position(name: str, counter: str) -> tuple[list[str], str]:
        """The row the `counter`-th step solves (or reads), forward or backward."""
        return ([], counter) if forward else ([f"%{name} = arith.subi %last, {counter} : index"], f"%{name}")

    row_lines, row = position("i", "%t")
    solved_lines, solved = position("k", "%u")

    bounds = [str(size) for size in batch] + [str(systems)]
    constants = "\n".join(f"  %bound{d} = arith.constant {size} : index" for d, size in enumerate(bounds))
    indices = ", ".join(batch_indices + ["%p"])
    lines = [
        f"func.func @{symbol}(%a: {a_memref}, %b: {b_memref}, %x: {b_memref}) {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  %n = arith.constant {n} : index",
        f"  %last = arith.constant {n - 1} : index",
        constants,
        f"  scf.parallel ({indices}) = ({', '.join(['%c0'] * len(bounds))}) to ({', '.join(f'%bound{d}' for d in range(len(bounds)))}) "
        f"step ({', '.join(['%c1'] * len(bounds))}) {{",
        "    scf.for %t = %c0 to %n step %c1 {",
        *("      " + line for line in row_lines),
        f"      %c = memref.load %b[{b_at(row)}] : {b_memref}",
        f"      %rest = scf.for %u = %c0 to %t step %c1 iter_args(%sum = %c) -> ({element}) {{",
        *("        " + line for line in solved_lines),
        *("        " + line for line in coefficient("m", row, solved)),
        f"        %y = memref.load %x[{b_at(solved)}] : {b_memref}",
        f"        %product = {arithmetic}.mul{suffix} %m, %y : {element}",
        f"        %difference = {arithmetic}.sub{suffix} %sum, %product : {element}",
        f"        scf.yield %difference : {element}",
        "      }",
    ]
    if unit_diagonal:
        lines.append(f"      memref.store %rest, %x[{b_at(row)}] : {b_memref}")
    else:
        lines += ["      " + line for line in coefficient("diagonal", row, row)]
        lines += [f"      %solution = {arithmetic}.div{suffix} %rest, %diagonal : {element}",
                  f"      memref.store %solution, %x[{b_at(row)}] : {b_memref}"]
    lines += ["    }", "    scf.reduce", "  }", "  return", "}"]
    return "\n".join(lines)


def memref_type(shape: list[int], element: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{element}>"
