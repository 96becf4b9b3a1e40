"""The host check's race probe (`backends/cuda/reversed_threads.py`): every launch's blocks and
threads run last to first under `MLIRXLA_CUDA_HOST_ORDER=reversed`. A scatter that sets
repeated targets (its result depends on which thread writes last) tells the two orders apart;
kernels of every emitter give the same bits in both."""

import numpy as np
import pytest

from mlirxla.backends.cuda import host_check
from mlirxla.errors import MlirxlaError

from .test_cuda_emitters import EXPONENTIAL_BESIDE_COLUMN_SUM, SOFTMAX, TOP_K, argmax_text, reduce_text, run_on_host, transpose_text
from .test_cuda_launch_merging import THREE_UPDATES
from .test_cuda_scatter import ADD, TARGETS, UNIQUE_TARGETS, scatter_text
from .test_cuda_sort import TOTAL_ORDER, sort_text

SET = scatter_text("f32", "", combined="%b")


def in_order(order: str, text: str, arguments: list, monkeypatch) -> list[np.ndarray]:
    monkeypatch.setenv("MLIRXLA_CUDA_HOST_ORDER", order)
    outputs, _ = run_on_host(text, arguments, monkeypatch)
    return outputs


def scatter_arguments(targets: np.ndarray) -> list[np.ndarray]:
    updates = np.arange(1, targets.size * 6 + 1, dtype=np.float32).reshape(len(targets), 6)
    return [np.zeros((8, 6), np.float32), targets, updates]


def test_setting_repeated_targets_tells_the_orders_apart(monkeypatch):
    """Rows 1 and 3 are each set by two updates: in index order the later update stays, last
    to first the earlier one (a GPU may keep either)."""
    forward, = in_order("forward", SET, scatter_arguments(TARGETS), monkeypatch)
    backward, = in_order("reversed", SET, scatter_arguments(TARGETS), monkeypatch)
    updates = scatter_arguments(TARGETS)[2]
    np.testing.assert_array_equal(forward[[1, 3]], updates[[2, 5]])
    np.testing.assert_array_equal(backward[[1, 3]], updates[[0, 1]])
    np.testing.assert_array_equal(np.delete(forward, [1, 3], 0), np.delete(backward, [1, 3], 0))


RNG = np.random.default_rng(17)
EMITTERS = {
    "unique scatter targets": (SET, scatter_arguments(UNIQUE_TARGETS)),
    "atomic adds of whole numbers": (scatter_text("f32", ADD.body), scatter_arguments(TARGETS)),
    "row emitter, softmax": (SOFTMAX, [RNG.standard_normal((5, 1024)).astype(np.float32)]),
    "row emitter, argmax through shared memory": (argmax_text(3, 3000), [RNG.integers(0, 9, (3, 3000)).astype(np.float32)]),
    "column emitter": (reduce_text((300, 64), [0]), [RNG.standard_normal((300, 64)).astype(np.float32)]),
    "column emitter with a side output": (EXPONENTIAL_BESIDE_COLUMN_SUM, [RNG.standard_normal((64, 128)).astype(np.float32)]),
    "transpose emitter": (transpose_text([96, 80], [1, 0]), [RNG.standard_normal((96, 80)).astype(np.float32),
                                                             RNG.standard_normal((80, 96)).astype(np.float32)]),
    "sort in shared-memory tiles": (sort_text([3, 5000], 1, ["f32"], TOTAL_ORDER),
                                    [RNG.integers(0, 50, (3, 5000)).astype(np.float32)]),
    "top-k": (TOP_K, [RNG.standard_normal((6, 100)).astype(np.float32)]),
    "merged launches": (THREE_UPDATES, [RNG.standard_normal((96, 64)).astype(np.float32),
                                        RNG.standard_normal((96, 64)).astype(np.float32),
                                        RNG.standard_normal(64).astype(np.float32), RNG.standard_normal(64).astype(np.float32),
                                        RNG.uniform(0, 4, (5, 3)).astype(np.float16)]),
}


@pytest.mark.parametrize("name", EMITTERS)
def test_every_emitter_gives_the_same_bits_in_both_orders(name, monkeypatch):
    text, arguments = EMITTERS[name]
    forward = in_order("forward", text, arguments, monkeypatch)
    backward = in_order("reversed", text, arguments, monkeypatch)
    for one, other in zip(forward, backward, strict=True):
        np.testing.assert_array_equal(one.view(np.uint8), other.view(np.uint8))


def test_an_unknown_order_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("MLIRXLA_CUDA_HOST_ORDER", "shuffled")
    with pytest.raises(MlirxlaError, match="MLIRXLA_CUDA_HOST_ORDER=shuffled: .* forward, reversed"):
        host_check.environment()
