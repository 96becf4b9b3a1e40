"""lit configuration: FileCheck tests of mlirxla-opt and mlirxla-run (run with `lit test/lit`)."""

import os
import shutil
import sys

import lit.formats

from mlirxla.tools.conformance import DEFAULT_DIRECTORY as CONFORMANCE

config.name = "mlirxla"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "Inputs"]

repository = os.path.abspath(os.path.join(config.test_source_root, "..", ".."))
bin_directory = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bin_directory, os.environ.get("PATH", "")])
# every pass runs under the erasure checker (transforms/erasure.py), as in pytest
config.environment["MLIRXLA_CHECK_ERASURE"] = "1"
# and the invariant checker after every changing pass, as in pytest
config.environment["MLIRXLA_VERIFY_EACH"] = "1"

config.substitutions.append(("%PYTHON", sys.executable))
config.substitutions.append(("FileCheck", shutil.which("filecheck", path=config.environment["PATH"]) or "filecheck"))
# the StableHLO of examples/jax_programs.py, written by scripts/export-programs
config.substitutions.append(("%programs", os.path.join(repository, "test", "data", "jax")))
config.substitutions.append(("%examples", os.path.join(repository, "examples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))

# The StableHLO interpreter suite is the one input from outside the repository: tests that
# need it say `REQUIRES: stablehlo-interpret-suite`.
if os.path.isdir(CONFORMANCE):
    config.available_features.add("stablehlo-interpret-suite")

# tests of the cuda backend's PTX need ptxas (the `cuda` extra): `REQUIRES: ptxas`
from mlirxla.backends.cuda.ptxas import find_ptxas  # noqa: E402

if find_ptxas() is not None:
    config.available_features.add("ptxas")
