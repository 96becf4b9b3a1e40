"""Shared fixtures: a fresh MLIR context per test and the paths of the shared data."""

import os

import pytest

REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.path.abspath(os.path.join(REPOSITORY, "..", "shared"))
SAMPLES = os.path.join(SHARED, "samples", "jax")
CONFORMANCE = os.path.join(SHARED, "conformance", "stablehlo-interpret")


@pytest.fixture
def context():
    from mlirxla.context import new_context

    return new_context()
