"""The graph of a module no backend compiled (`mlirxla-opt --report`): the entry's ops that
would become thunks, each standing for one, with every SSA value a slice of its own, so that
the fusion graph and its flows are drawn as for an executable."""

from dataclasses import dataclass, field

from mlirxla.ir_queries import entry_function
from mlirxla.mlir import ir
from mlirxla.runtime.executable import TensorSpec
from mlirxla.runtime.thunks import BufferSlice
from mlirxla.transforms.cost_model import byte_size
from mlirxla.transforms.fusion_legality import kind_of

from .thunk_facts import NO_THUNK, ThunkFacts, name_of


@dataclass
class OpThunk:
    """An op of the module as the thunk it would be: its kind (fusions are kernels), its
    operands read and its results written."""

    name: str
    kind: str
    reads: tuple
    writes: tuple


@dataclass
class OpPlan:
    """What `thunk_facts.flows` reads of a plan."""

    parameters: list
    outputs: list
    allocation_kinds: list
    thunks: list = field(default_factory=list)


def spec(value_type) -> TensorSpec:
    try:
        return TensorSpec.of(value_type)
    except Exception:  # a type no executable passes (a tuple): named as it is
        return TensorSpec((), "", str(value_type))


CONTROL_FLOW_KINDS = {"while": "while loop", "conditional": "conditional"}  # one node each, not a cluster


class Slices:
    """A slice per value, in allocations of their own: parameters, constants, values; an op
    that is no thunk (a bitcast, a tuple element) hands on its operand's."""

    def __init__(self):
        self.of: dict = {}
        self.kinds: list[str] = []

    def new(self, value, kind: str) -> BufferSlice:
        self.of[value] = BufferSlice(len(self.kinds), 0, byte_size(value.type))
        self.kinds.append(kind)
        return self.of[value]

    def get(self, value) -> BufferSlice:
        return self.of[value] if value in self.of else self.new(value, "value")

    def pass_through(self, op: ir.Operation) -> None:
        for number, result in enumerate(op.results):
            if kind_of(op) == "constant" or not op.operands:
                self.new(result, "constant")
            else:
                self.of[result] = self.get(op.operands[min(number, len(op.operands) - 1)])


def op_plan(module: ir.Module) -> tuple[OpPlan, list[ThunkFacts]]:
    """The plan and facts of the entry function's ops (a loop or conditional as one node)."""
    block = entry_function(module).regions[0].blocks[0]
    slices = Slices()
    for argument in block.arguments:
        slices.new(argument, "parameter")
    plan = OpPlan([spec(argument.type) for argument in block.arguments], [], slices.kinds)
    facts = []
    for op in block.operations:
        op = op.operation
        if op.name == "func.return":
            plan.outputs = [(slices.get(value), spec(value.type)) for value in op.operands]
        elif kind_of(op) in NO_THUNK:
            slices.pass_through(op)
        else:
            kind = "kernel" if kind_of(op) == "fusion" else CONTROL_FLOW_KINDS.get(kind_of(op), kind_of(op))
            thunk = OpThunk(name_of(op), kind, tuple(map(slices.get, op.operands)), tuple(map(slices.get, op.results)))
            plan.thunks.append(thunk)
            facts.append(ThunkFacts(len(facts), thunk, op))
    return plan, facts
