"""Every workload of benchmarks/cpu_vs_xla.py (examples/benchmark_workloads.py), at its small
size, compiled by mlirxla's CPU backend and held to jax's own CPU result."""

import os
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from mlirxla.runtime.client import Client  # noqa: E402

from .conftest import REPOSITORY  # noqa: E402

sys.path.insert(0, os.path.join(REPOSITORY, "examples"))
sys.path.insert(0, os.path.join(REPOSITORY, "benchmarks"))
from benchmark_workloads import WORKLOADS  # noqa: E402
from kernel_bandwidth import kernel_rows  # noqa: E402

pytestmark = pytest.mark.jax


@pytest.fixture(scope="module")
def client():
    return Client()


def test_suite_covers_the_issue_families():
    names = {workload.name for workload in WORKLOADS}
    assert len(names) == len(WORKLOADS) >= 16
    assert {"layernorm", "batchnorm", "attention_mask", "conv_bn_pool", "lstm_scan", "embedding_grad", "top_k", "adam",
            "mlp_grad", "small_mlp", "cross_entropy", "mlp_bf16", "transformer_bf16"} <= names


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda workload: workload.name)
def test_workload_matches_jax(client, workload):
    arguments = workload.random_arguments(np.random.default_rng(0), small=True)
    expected = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jax.jit(workload.function)(*arguments))]
    executable = client.compile(jax.jit(workload.function, keep_unused=True).lower(*arguments).as_text())
    outputs = executable.execute_numpy(jax.tree_util.tree_leaves(arguments))
    assert len(outputs) == len(expected)
    for output, reference in zip(outputs, expected):
        assert output.shape == reference.shape and output.dtype == reference.dtype
        np.testing.assert_allclose(output.astype(np.float64), reference.astype(np.float64), rtol=workload.rtol, atol=workload.atol)


def test_kernel_bandwidth_reports_the_memory_bound_kernels_with_their_bytes():
    machine = {"triad_gbps": 10.0, "balance_flops_per_byte": 4.0}
    (row,) = kernel_rows("chain", 3, machine, min_bytes=0, small=True)
    assert row["bytes"] == 3 * 1000 * 4 and row["calls"] == 1  # two f32[1000] in, one out
    assert row["fraction"] == pytest.approx(row["gbps"] / 10.0)
    assert kernel_rows("chain", 1, machine, min_bytes=row["bytes"] + 1, small=True) == []
    assert kernel_rows("chain", 1, {**machine, "balance_flops_per_byte": 0.0}, min_bytes=0, small=True) == []


def test_kernel_bandwidth_best_rates_a_kernel_by_its_fastest_call(monkeypatch):
    """With `best`, a kernel's rate is its bytes over its fastest call: of runs of 3, 1 and
    2 ms the 1 ms one; and a real run's row is its bytes over the fastest call it saw."""
    import kernel_bandwidth

    class Info:
        module, name, kind, routine = "m", "k", "kernel", "k"

    class Runs:
        thunk_runs = [("t", 0, 3_000_000, 1), ("t", 10, 1_000_010, 1), ("t", 20, 2_000_020, 1)]

        def infos(self):
            return {}

        def info_of(self, thunk, infos):
            return Info

    assert kernel_bandwidth.fastest_calls(Runs()) == {("m", "k", "kernel", "k"): 1_000_000}
    real, seen = kernel_bandwidth.fastest_calls, {}
    monkeypatch.setattr(kernel_bandwidth, "fastest_calls", lambda profile: seen.update(real(profile)) or dict(seen))
    machine = {"triad_gbps": 10.0, "balance_flops_per_byte": 4.0}
    (row,) = kernel_rows("chain", 3, machine, min_bytes=0, small=True, best=True)
    (nanoseconds,) = [ns for key, ns in seen.items() if key[2] == "kernel"]
    assert row["gbps"] == pytest.approx(row["bytes"] / nanoseconds)


def test_kernel_bandwidth_rounds_keep_each_kernels_best_against_the_best_triad(monkeypatch):
    """Over rounds, a kernel's best rate against the best triad and peak: a round whose triad
    was low does not flatter the kernels, one whose kernels were slow does not sink them."""
    import kernel_bandwidth

    machines = iter([{"triad_gbps": 20.0, "peak_gflops": 100.0, "cpu": "c", "cores": 2},
                     {"triad_gbps": 40.0, "peak_gflops": 80.0, "cpu": "c", "cores": 2}])
    rates = iter([[{"workload": "w", "kernel": "k", "routine": "k", "gbps": 30.0, "flops_per_byte": 1.0},
                   {"workload": "w", "kernel": "k", "routine": "k_1", "gbps": 20.0, "flops_per_byte": 1.0},
                   {"workload": "w", "kernel": "dense", "routine": "dense", "gbps": 1.0, "flops_per_byte": 3.0}],
                  [{"workload": "w", "kernel": "k", "routine": "k", "gbps": 10.0, "flops_per_byte": 1.0},
                   {"workload": "w", "kernel": "k", "routine": "k_1", "gbps": 32.0, "flops_per_byte": 1.0},
                   {"workload": "w", "kernel": "dense", "routine": "dense", "gbps": 1.0, "flops_per_byte": 3.0}]])
    monkeypatch.setattr(kernel_bandwidth, "machine_limits", lambda: next(machines))
    monkeypatch.setattr(kernel_bandwidth, "kernel_rates", lambda *arguments, **options: next(rates))
    machine, rows = kernel_bandwidth.best_of_rounds(["w"], 2, 1, 0, True)
    assert machine["triad_gbps"] == 40.0 and machine["balance_flops_per_byte"] == pytest.approx(2.5)
    assert [(row["routine"], row["gbps"], row["fraction"]) for row in rows] == [("k", 30.0, 0.75), ("k_1", 32.0, 0.8)]
