"""Each xhlo op's verify_invariants refuses malformed ops with a sentence at the op's location."""

import pytest

from mlirxla import frontdoor
from mlirxla.errors import MlirxlaError

# (case name, body of @main taking %x: tensor<2x3xf32>, %v: tensor<3xf32>, expected message fragment)
BAD_OPS = [
    ("add_types_differ", '%0 = "xhlo.add"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf16>', "xhlo.add: operand and result element types differ"),
    ("compare_result_not_i1", '%0 = "xhlo.compare"(%x, %x) {comparison_direction = "LT"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>', "result must have i1 elements"),
    ("compare_unknown_direction", '%0 = "xhlo.compare"(%x, %x) {comparison_direction = "LTE"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>', "unknown comparison_direction 'LTE'"),
    ("broadcast_bad_size", '%0 = "xhlo.broadcast"(%v) {dimensions = array<i64: 0>} : (tensor<3xf32>) -> tensor<2x3xf32>', "cannot broadcast to result dimension 0"),
    ("reshape_count", '%0 = "xhlo.reshape"(%x) : (tensor<2x3xf32>) -> tensor<7xf32>', "element count changes"),
    ("transpose_not_permutation", '%0 = "xhlo.transpose"(%x) {permutation = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>', "is not a permutation of rank 2"),
    ("slice_out_of_bounds", '%0 = "xhlo.slice"(%x) {start_indices = array<i64: 0, 0>, limit_indices = array<i64: 3, 3>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x3xf32>', "out of bounds"),
    ("concatenate_shape", '%0 = "xhlo.concatenate"(%x, %x) {dimension = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>', "result shape [5, 3] should be [4, 3]"),
    ("dot_mismatch", '%0 = "xhlo.dot"(%x, %x) {dot_dimension_numbers = {lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>', "does not match rhs dimension 0"),
    ("layout_not_permutation", '%0 = "xhlo.negate"(%x) {result_layouts = [array<i64: 1, 1>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>', "layout [1, 1] is not a permutation"),
    ("constant_type", '%0 = "xhlo.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>', "differs from result type"),
    ("copy_is_fine", '%0 = "xhlo.copy"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>', None),
]

TEMPLATE = """func.func @main(%x: tensor<2x3xf32>, %v: tensor<3xf32>) {{
  {body}
  return
}}
"""


@pytest.mark.parametrize("name,body,message", BAD_OPS, ids=[case[0] for case in BAD_OPS])
def test_op_verifier(name, body, message, context):
    text = TEMPLATE.format(body=body)
    if message is None:
        frontdoor.import_text(text, f"{name}.mlir", context)
        return
    with pytest.raises(MlirxlaError) as raised:
        frontdoor.import_text(text, f"{name}.mlir", context)
    assert message in str(raised.value)
    assert str(raised.value).startswith(f"{name}.mlir:2:")


def test_reducer_signature_is_checked(context):
    text = """func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %r = "xhlo.reduce"(%x, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<i32>):
    "xhlo.return"(%a) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}
"""
    with pytest.raises(MlirxlaError) as raised:
        frontdoor.import_text(text, "reduce.mlir", context)
    assert "xhlo.reduce: reducer takes (tensor<f32>, tensor<i32>), expected (tensor<f32>, tensor<f32>)" in str(raised.value)


def test_builder_signature_is_pinned():
    from mlirxla.dialects.xhlo.ops import AddOp, BroadcastOp

    assert str(AddOp.__init__.__signature__) == "(self, /, lhs, rhs, result, *, loc=None, ip=None)"
    assert str(BroadcastOp.__init__.__signature__) == "(self, /, operand, dimensions, result, *, loc=None, ip=None)"


LAYOUTS_TEMPLATE = """func.func @main(%x: tensor<2x3xf32>, %v: tensor<3xf32>) {{
  %0 = "xhlo.negate"(%x) {{result_layouts = [array<i64: {first}>]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "xhlo.negate"(%v) {{result_layouts = [array<i64: {second}>]}} : (tensor<3xf32>) -> tensor<3xf32>
  return
}}
"""


def test_layout_answers_are_per_layout_and_types(context):
    """A module verification keeps result-layout answers by (layouts, result types): the layout
    found right on a 2-d value is asked again on a 1-d one. (The parser's own verification
    runs outside any scope, so the module is made valid and then changed.)"""
    from mlirxla.mlir import ir
    from mlirxla.transforms.verifier import verify_module

    module = frontdoor.import_text(LAYOUTS_TEMPLATE.format(first="1, 0", second="0"), "layouts.mlir", context).module
    verify_module(module)
    negates = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations if op.operation.name == "xhlo.negate"]
    with context:
        negates[1].attributes["result_layouts"] = negates[0].attributes["result_layouts"]
    with pytest.raises(MlirxlaError, match=r"layout \[1, 0\] is not a permutation of the 1 dimensions"):
        verify_module(module)


SHARDED_TEMPLATE = """module attributes {{mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32}} {{
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
    %0 = "xhlo.negate"(%x) {{xhlo.sharding = "{{devices=[2]{first}}}"}} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "xhlo.fusion"(%0) ({{
    ^bb0(%a: tensor<4xf32>):
      %2 = "xhlo.negate"(%a) {{xhlo.sharding = "{{devices=[2]{second}}}"}} : (tensor<4xf32>) -> tensor<4xf32>
      {foreign}
      "xhlo.return"(%2) : (tensor<4xf32>) -> ()
    }}) {{kind = "loop"}} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }}
}}
"""
FOREIGN = '"check.expect_eq_const"(%a) {value = dense<1.0> : tensor<4xf32>} : (tensor<4xf32>) -> ()'


@pytest.mark.parametrize("first,second,foreign,failure", [
    ("0,1", "0,1", "", None),
    ("0,5", "0,1", "", "3:10: xhlo.negate: sharding: device 5"),
    ("0,1", "0,7", "", "6:12: xhlo.negate: sharding: device 7"),
    ("0,1", "0,1", FOREIGN, "4:10: xhlo.fusion: fused computation holds a non-xhlo op"),
    # the fusion is verified (and noted) before its body, the walk visits its body first
    ("0,1", "0,7", FOREIGN, "6:12: xhlo.negate: sharding: device 7"),
])
def test_module_checks_see_the_ops_the_verifier_noted(first, second, foreign, failure, context):
    """The module-level checks (a sharding naming a device beyond the module's two, a fused
    computation's ops) run on the ops the op verifiers noted, nested ones included, and report
    the first failing op in walk order (inner ops before the op holding them), as a walk of
    their own did."""
    from mlirxla.dialects.xhlo import dialect

    text = SHARDED_TEMPLATE.format(first=first, second=second, foreign=foreign)
    if failure is None:
        frontdoor.import_text(text, "sharded.mlir", context)
    else:
        with pytest.raises(MlirxlaError) as raised:
            frontdoor.import_text(text, "sharded.mlir", context)
        assert str(raised.value).startswith(f"sharded.mlir:{failure}")
    assert dialect._scope is None  # nothing is kept past a verification
