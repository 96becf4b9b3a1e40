"""Portable artifacts (VHLO bytecode) from the oldest version the toolkit reads to the current
one import, report their version and compute what the text form computes; newer ones are
refused by the version clamp."""

import os

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir, stablehlo
from mlirxla.runtime import literals, reference

from .conftest import JAX_PROGRAMS

MLP = os.path.join(JAX_PROGRAMS, "01_mlp_softmax.stablehlo.mlir")
VERSIONS = ["0.9.0", "0.14.0", "0.20.0", "1.0.0", "1.5.0", "1.10.0", "1.15.0", stablehlo.get_current_version()]


def serialized(context, version: str) -> bytes:
    with context:
        module = ir.Module.parse(open(MLP).read())
        return stablehlo.serialize_portable_artifact(module, version)


def run_outputs(module, seed: int = 0) -> list[np.ndarray]:
    with module.context:
        types = [ir.RankedTensorType(t) for t in reference.argument_types(module, "main")]
        rng = np.random.default_rng(seed)
        arguments = [rng.standard_normal(list(t.shape)).astype(np.float32) for t in types]
        return [literals.to_numpy(v) for v in reference.execute(module, arguments).outputs]


@pytest.mark.parametrize("version", VERSIONS)
def test_artifact_version_imports_and_matches_text(version, context):
    imported = frontdoor.import_bytes(serialized(context, version), f"mlp.{version}.bc", context)
    assert imported.form == "portable-artifact"
    assert imported.artifact_version == version
    expected = run_outputs(frontdoor.import_file(MLP, context).module)
    actual = run_outputs(imported.module)
    assert all(np.array_equal(a, e) for a, e in zip(actual, expected))


def test_artifact_from_the_future_is_refused(context):
    data = serialized(context, "1.15.0").replace(b"StableHLO_v1.15.0", b"StableHLO_v9.99.0")
    with pytest.raises(MlirxlaError) as raised:
        frontdoor.import_bytes(data, "future.bc", context)
    assert str(raised.value) == (
        f"future.bc: portable artifact version 9.99.0 is newer than the newest this build reads ({stablehlo.get_current_version()})"
    )
