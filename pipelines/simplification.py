"""The simplification pipeline (XLA's "simplification" HloPassFix in cpu_compiler.cc).

Run to a fixed point: each pass can expose work for another (algsimp leaves dead ops for
DCE, constant folding feeds algsimp, inlining exposes everything to all of them).
"""

from mlirxla.transforms.algebraic_simplifier import AlgebraicSimplifierPass
from mlirxla.transforms.call_inliner import CallInlinerPass
from mlirxla.transforms.computation_cse import ComputationCsePass
from mlirxla.transforms.constant_folding import ConstantFoldingPass
from mlirxla.transforms.dead_code_elimination import DeadCodeEliminationPass
from mlirxla.transforms.tuple_simplifier import TupleSimplifierPass
from mlirxla.transforms.while_loop_simplifier import WhileLoopSimplifierPass

from .pipeline import Pipeline


def simplification_pipeline() -> Pipeline:
    return (
        Pipeline("simplification")
        .add(CallInlinerPass())
        .add(AlgebraicSimplifierPass())
        .add(ConstantFoldingPass())
        .add(TupleSimplifierPass())
        .add(WhileLoopSimplifierPass())
        .add("cse")
        .add(ComputationCsePass())
        .add(DeadCodeEliminationPass())
    )
