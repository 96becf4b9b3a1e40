"""What persists across processes keys on a digest of mlirxla's own sources
(`mlirxla/sources.py`): an edit of any source file changes it, and the compile cache and
serialized executables compiled by other sources are not served to this code."""

import json
import os

import numpy as np
import pytest

from mlirxla import sources
from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client
from mlirxla.runtime.pjrt import serialization

IDENTITY = "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}"
NEGATE = "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  %y = stablehlo.negate %x : tensor<2xf32>\n  return %y : tensor<2xf32>\n}"
# What an edit of a pass makes of the digest
EDITED = "0123456789abcdef"


def test_an_edited_source_changes_the_digest(tmp_path):
    (tmp_path / "lowering.py").write_text("UNROLL = 4\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "lowering.pyc").write_bytes(b"compiled")
    before = sources.hash_sources([str(tmp_path)])
    (tmp_path / "__pycache__" / "lowering.pyc").write_bytes(b"compiled again")
    (tmp_path / "notes.txt").write_text("not a source")
    assert sources.hash_sources([str(tmp_path)]) == before
    (tmp_path / "lowering.py").write_text("UNROLL = 8\n")
    assert sources.hash_sources([str(tmp_path)]) != before


def test_the_package_sources_are_hashed_once_each():
    roots = sources.source_roots()
    assert any(os.path.isfile(os.path.join(root, "cpu", "row_engine.py")) for root in roots)
    assert any(os.path.isfile(os.path.join(root, "priority_fusion.py")) for root in roots)
    assert not any(a != b and a.startswith(b + os.sep) for a in roots for b in roots)
    assert sources.DIGEST == sources.hash_sources(roots)[:16]


def test_the_compile_cache_misses_for_other_sources(tmp_path, monkeypatch):
    """An entry compiled before an edit is not served after it; both stay in the folder."""
    Client(cache_dir=str(tmp_path)).compile(NEGATE)
    monkeypatch.setattr(sources, "DIGEST", EDITED)
    client = Client(cache_dir=str(tmp_path))
    outputs = client.compile(NEGATE).execute_numpy([np.array([1, -2], np.float32)])
    assert (client.cache.hits, client.cache.misses) == (0, 1)
    np.testing.assert_array_equal(outputs[0], [-1, 2])
    assert len(os.listdir(tmp_path)) == 2
    client.compile(NEGATE)
    assert (client.cache.hits, client.cache.misses) == (1, 1)


def test_a_serialized_executable_of_other_sources_names_both_digests(monkeypatch):
    client = Client()
    data = serialization.serialize(serialization.SerializedExecutable(client.compile(IDENTITY), (0,), IDENTITY.encode(), b""))
    assert json.loads(data[len(serialization.HEADER):])["environment"].startswith(f"mlirxla={Client.platform_version};sources={sources.DIGEST};torch-mlir=")
    monkeypatch.setattr(sources, "DIGEST", EDITED)
    with pytest.raises(MlirxlaError, match=rf"^the serialized executable was compiled elsewhere: sources \w+ there, {EDITED} here$"):
        serialization.deserialize(client, data)
