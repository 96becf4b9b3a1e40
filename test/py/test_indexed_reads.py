"""A gather's reads at its own loop indices become inputs of its loop nest
(`backends/cpu/indexed_reads.py`), so that it fuses into the reduction reading it: a bag of
embeddings (rows of a table gathered at ids, summed over the bag) is one loop nest, its
gathered rows never materialized; a read at computed indices stays a read. The programs run
on the cpu and cuda-host backends against the reference interpreter."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import lowering
from mlirxla.context import new_context
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.runtime.client import Client

from .conftest import reference_outputs


def bag_body(vocabulary: int, width: int, batch: int, bag: int) -> str:
    """Ids wrapped when negative (jax's indexing), their rows gathered and summed over the bag."""
    return f"""  %zero = stablehlo.constant dense<0> : tensor<{batch}x{bag}xi32>
  %size = stablehlo.constant dense<{vocabulary}> : tensor<{batch}x{bag}xi32>
  %negative = stablehlo.compare LT, %ids, %zero, SIGNED : (tensor<{batch}x{bag}xi32>, tensor<{batch}x{bag}xi32>) -> tensor<{batch}x{bag}xi1>
  %wrapped = stablehlo.add %ids, %size : tensor<{batch}x{bag}xi32>
  %row = stablehlo.select %negative, %wrapped, %ids : tensor<{batch}x{bag}xi1>, tensor<{batch}x{bag}xi32>
  %starts = stablehlo.broadcast_in_dim %row, dims = [0, 1] : (tensor<{batch}x{bag}xi32>) -> tensor<{batch}x{bag}x1xi32>
  %rows = "stablehlo.gather"(%table, %starts) <{{dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, {width}>}}> : (tensor<{vocabulary}x{width}xf32>, tensor<{batch}x{bag}x1xi32>) -> tensor<{batch}x{bag}x{width}xf32>
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%rows init: %init) applies stablehlo.add across dimensions = [1] : (tensor<{batch}x{bag}x{width}xf32>, tensor<f32>) -> tensor<{batch}x{width}xf32>
"""


def bag_text(vocabulary: int, width: int, batch: int, bag: int) -> str:
    return f"""func.func @main(%table: tensor<{vocabulary}x{width}xf32>, %ids: tensor<{batch}x{bag}xi32>) -> tensor<{batch}x{width}xf32> {{
{bag_body(vocabulary, width, batch, bag)}  return %sum : tensor<{batch}x{width}xf32>
}}
"""


def bag_kernel_text(vocabulary: int, width: int, batch: int, bag: int) -> str:
    return f"""func.func @kernel(%t: memref<{vocabulary}x{width}xf32>, %i: memref<{batch}x{bag}xi32>, %out: memref<{batch}x{width}xf32>) {{
  %table = bufferization.to_tensor %t restrict : memref<{vocabulary}x{width}xf32> to tensor<{vocabulary}x{width}xf32>
  %ids = bufferization.to_tensor %i restrict : memref<{batch}x{bag}xi32> to tensor<{batch}x{bag}xi32>
{bag_body(vocabulary, width, batch, bag)}  bufferization.materialize_in_destination %sum in restrict writable %out : (tensor<{batch}x{width}xf32>, memref<{batch}x{width}xf32>) -> ()
  return
}}
"""


def test_the_gather_of_a_bag_fuses_into_its_sum():
    lowering.register_passes()
    with new_context():
        module = ir.Module.parse(bag_kernel_text(100, 16, 8, 5))
        lowering.to_linalg(module)
        module.operation.verify()
        (generic,) = ops_named(module, "linalg.generic")  # ids wrapped, rows read, summed: one nest
        assert str(generic.results[0].type) == "tensor<8x16xf32>"
        assert str(generic.operands[0].type) == "tensor<8x5xi32>"  # the ids, an input defining the bag's size
        (read,) = [op for op in ops_named(generic, "tensor.extract")]  # the table, at computed indices
        assert str(read.operands[0].type) == "tensor<100x16xf32>"


@pytest.mark.parametrize("backend", ["cpu", "cuda-host"])
def test_a_bag_of_embeddings_matches_the_interpreter(backend):
    text = bag_text(100, 16, 8, 16)  # a bag of 16 stays a reduce (one of 5 becomes additions before the kernels)
    generator = np.random.default_rng(6)
    table = generator.standard_normal((100, 16)).astype(np.float32)
    ids = generator.integers(-100, 100, (8, 16)).astype(np.int32)
    module = frontdoor.import_bytes(text.encode(), "bag.mlir", new_context()).module
    (expected,) = reference_outputs(module, [table, ids])
    np.testing.assert_allclose(expected, table[ids].sum(axis=1), rtol=1e-6, atol=1e-6)
    (result,) = Client(backend=backend).compile(text).execute_numpy([table, ids])
    np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-6)
