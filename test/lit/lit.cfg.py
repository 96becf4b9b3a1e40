"""lit configuration: FileCheck tests of mlirxla-opt and mlirxla-run (run with `lit test/lit`)."""

import os
import shutil
import sys

import lit.formats

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

config.substitutions.append(("%PYTHON", sys.executable))
config.substitutions.append(("FileCheck", shutil.which("filecheck", path=config.environment["PATH"]) or "filecheck"))
config.substitutions.append(("%samples", os.path.join(repository, "..", "shared", "samples", "jax")))
config.substitutions.append(("%examples", os.path.join(repository, "examples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
