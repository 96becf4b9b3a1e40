"""xhlo-layout-assignment: give every shaped value a layout (XLA's LayoutAssignment, CPU flavour).

A layout is a minor-to-major permutation of a tensor's dimensions; row-major is
`[rank-1, ..., 0]`. Op results carry theirs in `result_layouts` (one per result, `unit` for a
non-tensor), entry parameters and results in the `xhlo.layout` argument / result attribute.

Constraints, in the order XLA's pass applies them (strongest first):
- entry computation layout: the entry function's parameters and results keep a layout they were
  given (`xhlo.layout`), else get row-major (XLA's default ComputationLayout);
- library calls: `dot` and `convolution` operands and results are row-major, as
  CpuLayoutAssignment asks for the Eigen / oneDNN calls (it may also make a dot's rhs
  column-major; we keep row-major);
- `transpose` is made free: its result gets the layout that makes it a bitcast of its operand
  (XLA's "transpose is bitcast" preference);
- elementwise ops propagate their first same-rank operand's layout to their result and ask
  the same of their other same-rank operands (XLA's layout propagation through elementwise
  ops);
- everything else (reshape, broadcast, reductions, while, call, ...) works on row-major
  operands and produces row-major results; non-entry computations and region arguments are
  row-major.
A value whose layout does not match what a use needs reaches that use through an `xhlo.copy`
with the needed layout (XLA's copies for layout conflicts). Each decision is recorded; the
pass reports `layout-assignment.txt`, one line per value with its layout and the constraint
that set it. Changed: any layout attribute set or copy inserted.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.ops import ELEMENTWISE_OPS
from mlirxla.mlir import ir

from .erasure import live_ops
from .pass_base import ModulePass, PassResult, TextReport, rendering_reports

LAYOUT_ATTR = "xhlo.layout"
# HLO counts copy elementwise too (StableHLO has no copy)
ELEMENTWISE = ELEMENTWISE_OPS | {"xhlo.copy"}
LIBRARY_CALLS = frozenset({"xhlo.dot", "xhlo.dot_general", "xhlo.convolution"})


def row_major(rank: int) -> list[int]:
    return list(range(rank - 1, -1, -1))


def is_tensor(value_or_type) -> bool:
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    return isinstance(t, ir.RankedTensorType)


def rank_of(value: ir.Value) -> int:
    return ir.RankedTensorType(value.type).rank


def layout_array(layout: list[int]) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get(list(layout))


def read_layout(attr: ir.Attribute) -> list[int] | None:
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return list(attr)
    try:
        return list(ir.DenseI64ArrayAttr(attr))
    except (ValueError, TypeError):
        return None


def func_of_block(block: ir.Block):
    owner = block.owner
    return owner if owner is not None and owner.operation.name == "func.func" else None


def arg_attr_layout(func, index: int, results: bool = False) -> list[int] | None:
    key = "res_attrs" if results else "arg_attrs"
    if key not in func.attributes:
        return None
    dicts = ir.ArrayAttr(func.attributes[key])
    if index >= len(dicts):
        return None
    d = ir.DictAttr(dicts[index])
    return read_layout(d[LAYOUT_ATTR]) if LAYOUT_ATTR in d else None


def layout_of(value: ir.Value) -> list[int] | None:
    """The value's layout as the module records it (None: not a tensor). Values without a
    recorded layout are row-major."""
    if not is_tensor(value):
        return None
    if isinstance(value.owner, ir.Block):
        func = func_of_block(value.owner)
        if func is not None:
            found = arg_attr_layout(func, ir.BlockArgument(value).arg_number)
            if found is not None:
                return found
        return row_major(rank_of(value))
    op = value.owner
    op = op.operation if hasattr(op, "operation") else op
    if "result_layouts" in op.attributes:
        layouts = ir.ArrayAttr(op.attributes["result_layouts"])
        index = ir.OpResult(value).result_number
        if index < len(layouts):
            found = read_layout(layouts[index])
            if found is not None:
                return found
    return row_major(rank_of(value))


def set_result_layouts(op: ir.Operation, layouts: list[list[int] | None]) -> None:
    elements = [layout_array(l) if l is not None else ir.UnitAttr.get() for l in layouts]
    op.attributes["result_layouts"] = ir.ArrayAttr.get(elements)


def set_func_layouts(func, key: str, layouts: list[list[int] | None]) -> None:
    old = list(ir.ArrayAttr(func.attributes[key])) if key in func.attributes else []
    dicts = []
    for i, layout in enumerate(layouts):
        entries = {}
        if i < len(old):
            d = ir.DictAttr(old[i])
            entries = {d[j].name: d[j].attr for j in range(len(d))}
        if layout is not None:
            entries[LAYOUT_ATTR] = layout_array(layout)
        dicts.append(ir.DictAttr.get(entries))
    func.attributes[key] = ir.ArrayAttr.get(dicts)


def insert_copy(value: ir.Value, layout: list[int] | None, before: ir.Operation) -> ir.Value:
    """An `xhlo.copy` of `value` with result layout `layout`, placed just before `before`."""
    with ir.InsertionPoint(before), before.location:
        attrs = {"result_layouts": ir.ArrayAttr.get([layout_array(layout)])} if layout is not None else {}
        copy = create_op("xhlo.copy", [value], [value.type], attrs)
    return copy.results[0]


def entry_functions(module: ir.Module) -> list:
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    named = [f for f in funcs if ir.StringAttr(f.attributes["sym_name"]).value == "main"]
    if named:
        return named
    return [f for f in funcs if "sym_visibility" not in f.attributes or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"]


def transpose_bitcast_layout(operand_layout: list[int], permutation: list[int]) -> list[int]:
    """The result layout that makes `transpose(x, permutation)` a bitcast of x: result dim i is
    operand dim permutation[i], so operand dim d sits at result dim inverse[d]."""
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return [inverse[d] for d in operand_layout]


@dataclass(frozen=True)
class LayoutAssignmentPass(ModulePass):
    """Assigns a layout to every shaped value and inserts copies where constraints conflict."""

    name: ClassVar[str] = "xhlo-layout-assignment"
    summary: ClassVar[str] = "layout assignment: entry layouts, library-call layouts, propagation, copies for conflicts"

    def run(self, module: ir.Module) -> PassResult:
        assigner = LayoutAssigner()
        entries = {ir.StringAttr(f.attributes["sym_name"]).value for f in entry_functions(module)}
        for op in module.body.operations:
            if op.operation.name != "func.func":
                continue
            is_entry = ir.StringAttr(op.attributes["sym_name"]).value in entries
            assigner.assign_function(op, is_entry)
        if not rendering_reports():
            return PassResult(assigner.changed)
        lines = assigner.render(module)
        return PassResult(assigner.changed, TextReport({"layout-assignment.txt": "\n".join(lines) + ("\n" if lines else "")}))


class LayoutAssigner:
    """One run of layout assignment: what it decided (value, layout, why), the copies it made."""

    def __init__(self):
        self.notes: list[tuple[ir.Value, list[int], str]] = []
        self.copies: list[tuple[ir.Value, list[int], ir.Value]] = []  # (source, layout, copy)
        self.changed = False

    # -- recording -------------------------------------------------------------------------

    def _note(self, value: ir.Value, layout: list[int], why: str) -> None:
        self.notes.append((value, layout, why))

    def render(self, module: ir.Module) -> list[str]:
        state = ir.AsmState(module.operation)
        lines = []
        for value, layout, why in self.notes:
            try:
                name = value.get_name(state)
            except Exception:  # noqa: BLE001 - a value erased later keeps no name
                name = "?"
            lines.append(f"{name} : {value.type} layout={{{','.join(map(str, layout))}}} by {why}")
        return lines

    # -- functions -------------------------------------------------------------------------

    def assign_function(self, func, is_entry: bool) -> None:
        block = func.regions[0].blocks[0]
        fname = ir.StringAttr(func.attributes["sym_name"]).value
        arg_layouts = []
        for i, arg in enumerate(block.arguments):
            if not is_tensor(arg):
                arg_layouts.append(None)
                continue
            given = arg_attr_layout(func, i) if is_entry else None
            layout = given or row_major(rank_of(arg))
            why = ("entry computation layout (given)" if given else "entry computation layout (default row-major)") if is_entry else f"computation @{fname} parameter (row-major)"
            arg_layouts.append(layout)
            self._note(arg, layout, why)
        func_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        result_layouts = []
        for i, t in enumerate(func_type.results):
            if not is_tensor(t):
                result_layouts.append(None)
                continue
            given = arg_attr_layout(func, i, results=True) if is_entry else None
            result_layouts.append(given or row_major(ir.RankedTensorType(t).rank))
        if is_entry:
            before = [arg_attr_layout(func, i) for i in range(len(block.arguments))]
            before_res = [arg_attr_layout(func, i, results=True) for i in range(len(func_type.results))]
            if before != arg_layouts:
                set_func_layouts(func, "arg_attrs", arg_layouts)
                self.changed = True
            if before_res != result_layouts:
                set_func_layouts(func, "res_attrs", result_layouts)
                self.changed = True
        self._assign_block(block, result_layouts, "entry result layout" if is_entry else f"computation @{fname} result (row-major)")

    def _assign_block(self, block: ir.Block, return_layouts: list | None, return_why: str) -> None:
        for op in live_ops(block.operations):
            if op.name in ("func.return", "xhlo.return"):
                needed = return_layouts
                if needed is None:
                    needed = [row_major(rank_of(v)) if is_tensor(v) else None for v in op.operands]
                for i, v in enumerate(list(op.operands)):
                    if i < len(needed) and needed[i] is not None:
                        self._require(op, i, needed[i], return_why)
                continue
            for region in op.regions:
                for inner in region.blocks:
                    for arg in inner.arguments:
                        if is_tensor(arg):
                            self._note(arg, row_major(rank_of(arg)), f"{op.name} region argument (row-major)")
                    self._assign_block(inner, None, f"{op.name} region result (row-major)")
            if op.name.startswith("xhlo."):
                self._assign_op(op)

    def _require(self, op: ir.Operation, index: int, layout: list[int], why: str) -> None:
        value = op.operands[index]
        if layout_of(value) == layout:
            return
        for source, made_layout, made in self.copies:
            if source == value and made_layout == layout and made.owner.operation.block == op.block:
                op.operands[index] = made  # an earlier copy in the same block dominates this use
                self.changed = True
                return
        copy = insert_copy(value, layout, op)
        op.operands[index] = copy
        self.copies.append((value, list(layout), copy))
        self._note(copy, layout, f"copy for layout conflict: {op.name} operand {index} needs {why}")
        self.changed = True

    def _assign_op(self, op: ir.Operation) -> None:
        tensor_results = [r for r in op.results if is_tensor(r)]
        if not tensor_results:
            return
        name = op.name
        if name in ELEMENTWISE and len(op.results) == 1:
            rank = rank_of(op.results[0])
            same = [i for i, v in enumerate(op.operands) if is_tensor(v) and rank_of(v) == rank]
            if same and rank > 0:
                layout = layout_of(op.operands[same[0]])
                for i in same[1:]:
                    self._require(op, i, layout, f"the layout of operand {same[0]} (elementwise)")
                self._set(op, [layout], f"propagated from operand {same[0]} of elementwise {name}")
                return
        if name == "xhlo.transpose":
            permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            layout = transpose_bitcast_layout(layout_of(op.operands[0]), permutation)
            self._set(op, [layout], "transpose made a bitcast of its operand")
            return
        if name == "xhlo.copy" and "result_layouts" in op.attributes:
            self._set(op, [layout_of(op.results[0])], "copy keeps its given layout")
            return
        why = "library call (row-major, as the CPU backend asks)" if name in LIBRARY_CALLS else "row-major default"
        for i, v in enumerate(list(op.operands)):
            if is_tensor(v):
                self._require(op, i, row_major(rank_of(v)), f"row-major ({why})")
        self._set(op, [row_major(rank_of(r)) if is_tensor(r) else None for r in op.results], why)

    def _set(self, op: ir.Operation, layouts: list, why: str) -> None:
        old = op.attributes["result_layouts"] if "result_layouts" in op.attributes else None
        set_result_layouts(op, layouts)
        if old is None or str(old) != str(op.attributes["result_layouts"]):
            self.changed = True
        for r, layout in zip(op.results, layouts):
            if layout is not None:
                self._note(r, layout, why)
