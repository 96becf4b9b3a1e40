"""Independent launches of one kernel as one (`backends/cuda/launch_merging.py`) and the
horizontal loop fusion that makes such kernels (`transforms/horizontal_loop_fusion.py`):
which launches merge, in which order, and merged kernels run on this CPU against numpy (the
`cuda-host` backend)."""

import numpy as np

from mlirxla.backends.cuda import launch_merging, loop_mapping
from mlirxla.context import new_context
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .test_cuda_emitters import compile_text, run_on_host

TWO_CHAINS = """func.func @f(%a: memref<64xf32>, %b: memref<32xf32>, %t: memref<64xf32>, %u: memref<32xf32>,
             %out_a: memref<64xf32>, %out_b: memref<32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c31 = arith.constant 31 : index
  %c32 = arith.constant 32 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %a[%i] : memref<64xf32>
    %e = math.exp %x : f32
    memref.store %e, %t[%i] : memref<64xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %j = arith.subi %c63, %i : index
    %x = memref.load %t[%j] : memref<64xf32>
    memref.store %x, %out_a[%i] : memref<64xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c32) step (%c1) {
    %x = memref.load %b[%i] : memref<32xf32>
    %n = arith.negf %x : f32
    memref.store %n, %u[%i] : memref<32xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c32) step (%c1) {
    %j = arith.subi %c31, %i : index
    %x = memref.load %u[%j] : memref<32xf32>
    memref.store %x, %out_b[%i] : memref<32xf32>
    scf.reduce
  }
  return
}"""


def stored_arguments(loop: ir.Operation, function) -> set[int]:
    arguments = list(function.regions[0].blocks[0].arguments)
    stored = set()

    def visit(op):
        if op.operation.name in ("memref.store", "vector.store"):
            stored.add(arguments.index(op.operation.operands[1]))
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return stored


def test_two_chains_of_two_launches_are_two_wavefronts_in_order():
    """exp(a) -> t, then t reversed -> out_a; -b -> u, then u reversed -> out_b: four launches
    (of 16 and 8 threads, 4 elements a thread), each second one reading what another thread
    of the first wrote. The first wavefront runs both firsts, the second both seconds (runs
    of consecutive independent launches would have made three)."""
    with new_context():
        module = ir.Module.parse(TWO_CHAINS)
        nests = loop_mapping.map_loop_nests(module, "f", merge=launch_merging.merge_independent)
        module.operation.verify()
        (function,) = ops_named(module, "func.func")
        launches = [op.operation for op in function.regions[0].blocks[0].operations if op.operation.name == "scf.parallel"]
        assert [(n.emitter, n.grid, n.block) for n in nests] == [("loop.merged", 2, 16), ("loop.merged", 2, 16)]
        assert [stored_arguments(loop, function) for loop in launches] == [{2, 3}, {4, 5}]


def test_a_launch_conflicting_with_the_one_before_merges_with_none():
    """The same four launches where the second chain starts from out_a, which the launch
    before it writes: a chain of four, each in a wavefront of its own."""
    text = TWO_CHAINS.replace("%x = memref.load %b[%i] : memref<32xf32>", "%x = memref.load %out_a[%i] : memref<64xf32>")
    with new_context():
        module = ir.Module.parse(text)
        nests = loop_mapping.map_loop_nests(module, "f", merge=launch_merging.merge_independent)
        module.operation.verify()
        (function,) = ops_named(module, "func.func")
        launches = [op.operation for op in function.regions[0].blocks[0].operations if op.operation.name == "scf.parallel"]
        assert len(nests) == 4 and not any(n.emitter == "loop.merged" for n in nests)
        assert [stored_arguments(loop, function) for loop in launches] == [{2}, {4}, {3}, {5}]


THREE_UPDATES = """func.func @main(%w: tensor<96x64xf32>, %gw: tensor<96x64xf32>, %b: tensor<64xf32>, %gb: tensor<64xf32>,
                %s: tensor<5x3xf16>) -> (tensor<96x64xf32>, tensor<64xf32>, tensor<5x3xf16>) {
  %rate = stablehlo.constant dense<0.5> : tensor<96x64xf32>
  %0 = stablehlo.multiply %gw, %rate : tensor<96x64xf32>
  %1 = stablehlo.subtract %w, %0 : tensor<96x64xf32>
  %2 = stablehlo.exponential %gb : tensor<64xf32>
  %3 = stablehlo.subtract %b, %2 : tensor<64xf32>
  %4 = stablehlo.sqrt %s : tensor<5x3xf16>
  return %1, %3, %4 : tensor<96x64xf32>, tensor<64xf32>, tensor<5x3xf16>
}
"""


def test_independent_updates_of_several_shapes_are_one_launch_and_compute_the_same(monkeypatch):
    """A weight's, a bias's and an f16 array's updates, each its own kernel on the cpu
    pipeline: the cuda pipeline's horizontal loop fusion makes them one kernel, one launch over
    the blocks of all three, and on this CPU it computes what numpy does."""
    program = compile_text(THREE_UPDATES)
    (kernel,) = program.kernels
    assert kernel.symbol.startswith("horizontal_loop_fusion")
    assert len(kernel.launches) == 1
    assert any("3 independent launches as one" in decision for decision in program.decisions)
    rng = np.random.default_rng(5)
    w, gw = (rng.standard_normal((96, 64)).astype(np.float32) for _ in range(2))
    b, gb = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    s = rng.uniform(0, 4, (5, 3)).astype(np.float16)
    (new_w, new_b, root), _ = run_on_host(THREE_UPDATES, [w, gw, b, gb, s], monkeypatch)
    np.testing.assert_array_equal(new_w, w - gw * np.float32(0.5))
    np.testing.assert_allclose(new_b, b - np.exp(gb), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(root.astype(np.float32), np.sqrt(s.astype(np.float32)), rtol=1e-3)
