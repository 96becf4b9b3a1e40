"""A gather of an elementwise producer computes the elements it reads
(`backends/cpu/gathered_producers.py`): a cross-entropy's loss, the label's element of a
log-softmax a row, no longer materializes the log-softmax; a gather that would read more
elements than the producer has keeps it. The programs run on the cpu and cuda-host backends
against the reference interpreter."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu import gathered_producers, lowering
from mlirxla.context import new_context
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.runtime.client import Client

from .conftest import reference_outputs

TAKE = ('"stablehlo.gather"(%{operand}, %{indices}) <{{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], '
        'operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, '
        'indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}}> : (tensor<{rows}x{columns}xf32>, '
        'tensor<{rows}x{taken}x1xi32>) -> tensor<{rows}x{taken}xf32>')


def loss_text(rows: int, columns: int, taken: int) -> str:
    """log(x) - max a row, gathered at `taken` labels a row (jax's take_along_axis)."""
    gather = TAKE.format(operand="shifted", indices="labels", rows=rows, columns=columns, taken=taken)
    return f"""func.func @main(%x: tensor<{rows}x{columns}xf32>, %labels: tensor<{rows}x{taken}x1xi32>) -> tensor<{rows}x{taken}xf32> {{
  %zero = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %max = stablehlo.reduce(%x init: %zero) applies stablehlo.maximum across dimensions = [1] : (tensor<{rows}x{columns}xf32>, tensor<f32>) -> tensor<{rows}xf32>
  %wide = stablehlo.broadcast_in_dim %max, dims = [0] : (tensor<{rows}xf32>) -> tensor<{rows}x{columns}xf32>
  %log = stablehlo.log %x : tensor<{rows}x{columns}xf32>
  %shifted = stablehlo.subtract %log, %wide : tensor<{rows}x{columns}xf32>
  %taken = {gather}
  return %taken : tensor<{rows}x{taken}xf32>
}}
"""


def kernel_text(rows: int, columns: int, taken: int) -> str:
    """The gather and its producer as a kernel function on buffers, the maxima given."""
    gather = TAKE.format(operand="shifted", indices="labels", rows=rows, columns=columns, taken=taken)
    return f"""func.func @kernel(%xs: memref<{rows}x{columns}xf32>, %maxs: memref<{rows}xf32>, %ls: memref<{rows}x{taken}x1xi32>, %out: memref<{rows}x{taken}xf32>) {{
  %x = bufferization.to_tensor %xs restrict : memref<{rows}x{columns}xf32> to tensor<{rows}x{columns}xf32>
  %max = bufferization.to_tensor %maxs restrict : memref<{rows}xf32> to tensor<{rows}xf32>
  %labels = bufferization.to_tensor %ls restrict : memref<{rows}x{taken}x1xi32> to tensor<{rows}x{taken}x1xi32>
  %wide = stablehlo.broadcast_in_dim %max, dims = [0] : (tensor<{rows}xf32>) -> tensor<{rows}x{columns}xf32>
  %log = stablehlo.log %x : tensor<{rows}x{columns}xf32>
  %shifted = stablehlo.subtract %log, %wide : tensor<{rows}x{columns}xf32>
  %taken = {gather}
  bufferization.materialize_in_destination %taken in restrict writable %out : (tensor<{rows}x{taken}xf32>, memref<{rows}x{taken}xf32>) -> ()
  return
}}
"""


def linalg_after_the_rewrite(text: str) -> tuple[int, list[str]]:
    """The rewrites made and the result types of the generics left."""
    lowering.register_passes()
    with new_context():
        module = ir.Module.parse(text)
        lowering.to_linalg(module)
        with ir.Location.unknown():
            rewritten = gathered_producers.compute_gathered_elements(module)
        module.operation.verify()
        return rewritten, [str(g.results[0].type) for g in ops_named(module, "linalg.generic")]


def test_the_gathered_elements_are_computed_where_they_are_read():
    rewritten, generics = linalg_after_the_rewrite(kernel_text(64, 32, 1))
    assert rewritten == 1 and generics == ["tensor<64x1xf32>"]  # no [64, 32] loop nest left


def test_a_gather_reading_more_than_the_producer_has_keeps_it():
    rewritten, generics = linalg_after_the_rewrite(kernel_text(64, 32, 33))  # 64 x 33 reads of 64 x 32 elements
    assert rewritten == 0 and "tensor<64x32xf32>" in generics


@pytest.mark.parametrize("backend", ["cpu", "cuda-host"])
@pytest.mark.parametrize("taken", [1, 40])
def test_a_loss_over_gathered_log_values_matches_the_interpreter(backend, taken):
    text = loss_text(16, 24, taken)
    generator = np.random.default_rng(5)
    x = generator.uniform(0.5, 4.0, (16, 24)).astype(np.float32)
    labels = generator.integers(-3, 27, (16, taken, 1)).astype(np.int32)  # out of range: clamped, as gathers are
    module = frontdoor.import_bytes(text.encode(), "loss.mlir", new_context()).module
    (expected,) = reference_outputs(module, [x, labels])
    (result,) = Client(backend=backend).compile(text).execute_numpy([x, labels])
    np.testing.assert_allclose(result, expected, rtol=2e-6, atol=1e-6)
