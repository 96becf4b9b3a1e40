"""Put XLA's PJRT C API header (version 0.90) under the include directory given as argument.

The header belongs to another project, so it is never committed: it is taken at build time
from a published sdist that vendors it, pinned by hash. pip does the download so that its
own configuration (index, proxy, certificates) applies. CMake runs this at configure time.
"""

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile

SDIST = "jax_mlx_plugin-0.0.4.tar.gz"
SDIST_SHA256 = "cb26c3ad78bed78537f260c233e89233edfb6c785ca2ead7c275a420ee77f289"
MEMBER = "jax_mlx_plugin-0.0.4/third_party/xla/pjrt/c/pjrt_c_api.h"
HEADER = os.path.join("xla", "pjrt", "c", "pjrt_c_api.h")


def fetch(include_dir: str) -> None:
    target = os.path.join(include_dir, HEADER)
    if os.path.exists(target):
        return
    with tempfile.TemporaryDirectory() as tmp:
        # --no-build-isolation: pip reads the sdist's metadata with the setuptools already
        # here instead of installing that project's build requirements.
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "download", "jax-mlx-plugin==0.0.4", "--no-deps",
             "--no-binary", ":all:", "--no-build-isolation", "-d", tmp],
            capture_output=True, text=True)
        if pip.returncode != 0:
            last = (pip.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"pip download of {SDIST} failed: {last}")
        sdist = os.path.join(tmp, SDIST)
        with open(sdist, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != SDIST_SHA256:
            raise RuntimeError(f"{SDIST} has sha256 {digest}, expected {SDIST_SHA256}")
        with tarfile.open(sdist) as tar:
            data = tar.extractfile(MEMBER).read()
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # Written whole then renamed, so an interrupted build never leaves half a header
        # that the cache check above would take for a finished one.
        partial = target + ".partial"
        with open(partial, "wb") as f:
            f.write(data)
        os.replace(partial, target)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: fetch_pjrt_header.py INCLUDE_DIR", file=sys.stderr)
        return 2
    try:
        fetch(sys.argv[1])
    except (OSError, RuntimeError, KeyError, tarfile.TarError) as e:
        print(f"fetch_pjrt_header: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
