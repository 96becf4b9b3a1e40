"""test/data/jax is what scripts/export-programs writes from examples/jax_programs.py: exported
again into a scratch folder, the programs give the committed files byte for byte, and no others."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import JAX_PROGRAMS, REPOSITORY

pytestmark = pytest.mark.jax
pytest.importorskip("jax")

EXPORTER = os.path.join(REPOSITORY, "examples", "export_programs.py")


def relative_files(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A fresh export, in its own process: the exporter asks jax for four CPU devices before
    anything starts jax's backends."""
    output = tmp_path_factory.mktemp("jax")
    done = subprocess.run([sys.executable, EXPORTER, str(output)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return output


def test_export_writes_the_committed_files_and_no_others(exported):
    committed = relative_files(Path(JAX_PROGRAMS))
    assert "01_mlp_softmax.vhlo.bc" in committed and "programs/transformer.stablehlo.mlir" in committed
    assert relative_files(exported) == committed


def test_export_reproduces_every_committed_file_byte_for_byte(exported):
    stale = [name for name in relative_files(Path(JAX_PROGRAMS))
             if (exported / name).read_bytes() != (Path(JAX_PROGRAMS) / name).read_bytes()]
    assert not stale, f"{stale} differ from a fresh export: run scripts/export-programs"


def test_locations_name_repository_files(exported):
    """No absolute path of the machine that exported reaches the files."""
    text = (exported / "01_mlp_softmax.debuginfo.mlir").read_text()
    assert '"examples/jax_programs.py":' in text
    assert REPOSITORY not in text


def test_the_demo_module_is_the_exported_mlp(exported):
    demo = Path(REPOSITORY, "examples", "mlp_softmax.stablehlo.mlir")
    assert demo.read_bytes() == (exported / "01_mlp_softmax.stablehlo.mlir").read_bytes()
