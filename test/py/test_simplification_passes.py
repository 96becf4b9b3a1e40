"""The simplification passes (constant folding, call inlining, tuple simplification, while-loop
simplification): the `changed` flag both ways on small modules, and on the JAX samples each
pass leaves the program's results bit for bit what they were."""

import os

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.ir_queries import ops_named, public_entry_name
from mlirxla.mlir import ir
from mlirxla.runtime import literals, reference
from mlirxla.transforms.call_inliner import CallInlinerPass
from mlirxla.transforms.constant_folding import ConstantFoldingPass
from mlirxla.transforms.tuple_simplifier import TupleSimplifierPass
from mlirxla.transforms.while_loop_simplifier import WhileLoopSimplifierPass, iterations, trip_count
from mlirxla.transforms.while_loop_trip_count_annotator import WhileLoopTripCountAnnotatorPass, known_trip_count

from .conftest import JAX_PROGRAMS

PASSES = [ConstantFoldingPass, CallInlinerPass, TupleSimplifierPass, WhileLoopSimplifierPass]
SAMPLE_FILES = [
    "01_mlp_softmax.stablehlo.mlir",
    "02_scan_while_cond_gelu.stablehlo.mlir",
    "programs/mlp_softmax_small.stablehlo.mlir",
    "programs/scan.stablehlo.mlir",
]


def parse(text: str) -> ir.Module:
    return frontdoor.import_text(text, "t.mlir", new_context()).module


def run_pass(pass_, module: ir.Module) -> bool:
    with module.context, ir.Location.unknown():
        changed = pass_.run(module)
        module.operation.verify()
    return changed


def op_names(module: ir.Module) -> list[str]:
    names = []

    def visit(op):
        names.append(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return names


# ---------------------------------------------------------------------------- small modules

FOLDABLE = """
func.func @main() -> tensor<2xf32> {
  %a = "xhlo.constant"() {value = dense<[0.0, 0.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %e = "xhlo.exponential"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %e : tensor<2xf32>
}
"""
NOT_FOLDABLE = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %e = "xhlo.exponential"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %e : tensor<2xf32>
}
"""
CALL = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = "xhlo.call"(%x) {callee = @negate} : (tensor<2xf32>) -> tensor<2xf32>
  return %c : tensor<2xf32>
}
func.func private @negate(%x: tensor<2xf32>) -> tensor<2xf32> {
  %n = "xhlo.negate"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %n : tensor<2xf32>
}
"""
BRANCHES = """
func.func @main(%p: tensor<i1>, %x: tensor<2xf32>) -> tensor<2xf32> {
  %r = "xhlo.conditional"(%p, %x, %x) {branch_computations = [@negate, @identity], branch_operand_counts = array<i64: 1, 1>} : (tensor<i1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}
func.func private @negate(%x: tensor<2xf32>) -> tensor<2xf32> {
  %n = "xhlo.negate"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %n : tensor<2xf32>
}
func.func private @identity(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
"""
TUPLE = """
func.func @main(%a: tensor<f32>, %b: tensor<i32>) -> tensor<i32> {
  %t = "xhlo.tuple"(%a, %b) : (tensor<f32>, tensor<i32>) -> tuple<tensor<f32>, tensor<i32>>
  %e = "xhlo.get_tuple_element"(%t) {index = 1 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<i32>
  return %e : tensor<i32>
}
"""
TUPLE_ARGUMENT = """
func.func @main(%t: tuple<tensor<f32>, tensor<i32>>) -> tensor<i32> {
  %e = "xhlo.get_tuple_element"(%t) {index = 1 : i32} : (tuple<tensor<f32>, tensor<i32>>) -> tensor<i32>
  return %e : tensor<i32>
}
"""
LOOP = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %z = "xhlo.constant"() {{value = dense<0> : tensor<i32>}} : () -> tensor<i32>
  %w:2 = "xhlo.while"(%z, %x) ({{
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %n = "xhlo.constant"() {{value = dense<{bound}> : tensor<i32>}} : () -> tensor<i32>
    %p = "xhlo.compare"(%i, %n) {{compare_type = "SIGNED", comparison_direction = "LT"}} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%p) : (tensor<i1>) -> ()
  }}, {{
  ^bb0(%i: tensor<i32>, %a: tensor<4xf32>):
    %one = "xhlo.constant"() {{value = dense<1> : tensor<i32>}} : () -> tensor<i32>
    %next = "xhlo.add"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %s = "xhlo.multiply"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "xhlo.return"(%next, %s) : (tensor<i32>, tensor<4xf32>) -> ()
  }}) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
  return %w#1 : tensor<4xf32>
}}
"""


def test_constant_folding_changed():
    module = parse(FOLDABLE)
    assert run_pass(ConstantFoldingPass(), module)
    assert "xhlo.exponential" not in op_names(module)
    assert not run_pass(ConstantFoldingPass(), module)


def test_constant_folding_unchanged():
    module = parse(NOT_FOLDABLE)
    assert not run_pass(ConstantFoldingPass(), module)
    assert "xhlo.exponential" in op_names(module)


def test_constant_folding_size_limit():
    module = parse(FOLDABLE)
    assert not run_pass(ConstantFoldingPass(max_result_elements=1), module)
    assert run_pass(ConstantFoldingPass(max_result_elements=2), module)


def test_constant_folding_matches_reference():
    """The folded constant is what the interpreter computes for the unfolded op."""
    before = parse(FOLDABLE)
    expected = literals.to_numpy(reference.execute(before, []).outputs[0])
    after = parse(FOLDABLE)
    run_pass(ConstantFoldingPass(), after)
    actual = literals.to_numpy(reference.execute(after, []).outputs[0])
    assert actual.tobytes() == expected.tobytes()


def test_call_inliner_changed():
    module = parse(CALL)
    assert run_pass(CallInlinerPass(), module)
    names = op_names(module)
    assert "xhlo.call" not in names and "xhlo.negate" in names
    assert names.count("func.func") == 1
    assert not run_pass(CallInlinerPass(), module)


def test_call_inliner_leaves_branch_computations():
    module = parse(BRANCHES)
    assert not run_pass(CallInlinerPass(), module)
    assert op_names(module).count("func.func") == 3


def test_tuple_simplifier_changed():
    module = parse(TUPLE)
    assert run_pass(TupleSimplifierPass(), module)
    assert "xhlo.get_tuple_element" not in op_names(module)
    assert not run_pass(TupleSimplifierPass(), module)


def test_tuple_simplifier_unchanged():
    module = parse(TUPLE_ARGUMENT)
    assert not run_pass(TupleSimplifierPass(), module)


@pytest.mark.parametrize("bound, changed", [(0, True), (1, True), (2, False), (64, False)])
def test_while_loop_simplifier_trip_count(bound, changed):
    text = LOOP.format(bound=bound)
    x = np.arange(4, dtype=np.float32) + 1.5
    expected = literals.to_numpy(reference.execute(parse(text), [x]).outputs[0])
    module = parse(text)
    assert run_pass(WhileLoopSimplifierPass(), module) == changed
    assert ("xhlo.while" in op_names(module)) != changed
    actual = literals.to_numpy(reference.execute(module, [x]).outputs[0])
    assert actual.tobytes() == expected.tobytes()
    assert not run_pass(WhileLoopSimplifierPass(), module)


@pytest.mark.parametrize("start, step, bound, direction, count", [
    (0, 1, 64, "LT", 64), (0, 1, 64, "LE", 65), (0, 3, 10, "LT", 4), (10, -1, 0, "GT", 10), (10, -2, 0, "GE", 6),
    (5, 1, 5, "LT", 0), (0, -1, 64, "LT", None), (0, 0, 1, "LT", None), (120, 4, 127, "LE", None)])
def test_trip_count_in_closed_form(start, step, bound, direction, count):
    """The count of `i = start; while i <direction> bound: i += step` for an i8 `i`; None when
    it would only end by wrapping around (the last case's 128 is outside i8)."""
    assert iterations(start, step, bound, direction, -128, 127) == count


@pytest.mark.parametrize("bound", [0, 2, 64])
def test_trip_count_annotator_writes_the_proved_count(bound):
    module = parse(LOOP.format(bound=bound))
    assert run_pass(WhileLoopTripCountAnnotatorPass(), module)
    (loop,) = ops_named(module, "xhlo.while")
    assert known_trip_count(loop) == bound
    assert not run_pass(WhileLoopTripCountAnnotatorPass(), module)
    unknown = parse(LOOP.format(bound=bound).replace('"xhlo.compare"(%i, %n)', '"xhlo.compare"(%i, %i)'))
    assert not run_pass(WhileLoopTripCountAnnotatorPass(), unknown)


@pytest.mark.parametrize("compare_type, count", [("SIGNED", 4), ("UNSIGNED", None)])
def test_a_count_down_compared_as_unsigned_is_not_counted(compare_type, count):
    """i = 3; while i >= 0: i -= 1 ends at -1 signed, but -1 read as unsigned is 2^32 - 1 >= 0:
    the loop an unsigned compare makes would wrap around, so it gets no count."""
    text = (LOOP.format(bound=0).replace("dense<0> : tensor<i32>} : () -> tensor<i32>\n  %w", "dense<3> : tensor<i32>} : () -> tensor<i32>\n  %w")
            .replace('compare_type = "SIGNED", comparison_direction = "LT"', f'compare_type = "{compare_type}", comparison_direction = "GE"')
            .replace('"xhlo.add"(%i, %one)', '"xhlo.subtract"(%i, %one)'))
    module = parse(text)
    (loop,) = ops_named(module, "xhlo.while")
    assert trip_count(loop) == count

    """The induction variable's result is unused but the cond reads it: it stays.
    Once the loop's counted result is unused too, the data carried value goes."""
    module = parse(LOOP.format(bound=5).replace("return %w#1", "return %x"))
    assert run_pass(WhileLoopSimplifierPass(), module)
    loops = [op for op in module.body.operations[0].regions[0].blocks[0].operations if op.operation.name == "xhlo.while"]
    assert len(loops) == 1 and len(loops[0].operation.operands) == 1
    assert not run_pass(WhileLoopSimplifierPass(), module)


# ---------------------------------------------------------------------------- JAX samples


def random_inputs(module: ir.Module, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    entry = public_entry_name(module)
    arrays = []
    for type_ in reference.argument_types(module, entry):
        shaped = ir.RankedTensorType(type_)
        dtype = literals.storage_dtype(shaped.element_type)
        if np.issubdtype(dtype, np.integer):
            arrays.append(rng.integers(0, 5, size=shaped.shape).astype(dtype))
        else:
            arrays.append(rng.standard_normal(shaped.shape).astype(dtype))
    return arrays


def outputs(module: ir.Module, arguments: list[np.ndarray]) -> list[np.ndarray]:
    return [literals.to_numpy(value) for value in reference.execute(module, arguments).outputs]


@pytest.mark.parametrize("name", SAMPLE_FILES)
@pytest.mark.parametrize("pass_class", PASSES, ids=lambda c: c.name)
def test_sample_results_unchanged(name, pass_class):
    path = os.path.join(JAX_PROGRAMS, name)
    with open(path) as handle:
        text = handle.read()
    before = frontdoor.import_text(text, path, new_context()).module
    arguments = random_inputs(before)
    expected = outputs(before, arguments)
    after = frontdoor.import_text(text, path, new_context()).module
    run_pass(pass_class(), after)
    actual = outputs(after, arguments)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_sample_results_unchanged_after_all_passes(name):
    path = os.path.join(JAX_PROGRAMS, name)
    with open(path) as handle:
        text = handle.read()
    before = frontdoor.import_text(text, path, new_context()).module
    arguments = random_inputs(before, seed=1)
    expected = outputs(before, arguments)
    after = frontdoor.import_text(text, path, new_context()).module
    for pass_class in PASSES:
        run_pass(pass_class(), after)
    for got, want in zip(outputs(after, arguments), expected):
        assert got.tobytes() == want.tobytes()
