"""The IREE half of a GPU pack (`scripts/gpu-pack` with the iree extra installed; `--no-iree`
leaves it out): each benchmark program compiled by the iree backend for IREE's cuda target,
and IREE's Python runtime for the GPU machine's Python, so that `gpu-check` runs
mlirxla-on-IREE beside mlirxla's own cuda backend and XLA:GPU in the same process.

The GPU machine has no IREE and reaches no package index: the runtime travels as its wheel
(`iree-base-runtime`, the version installed here, for CPython 3.12 on manylinux x86-64; its
HAL has the cuda driver), which gpu-check unpacks into a temporary folder when `iree.runtime`
does not import. The wheel is fetched once with pip into `~/.cache/mlirxla/wheels` (or given
with `--iree-wheel`). The modules are IREE's `sm_80` code (`backends/iree/toolchain.py`:
IREE 3.13 refuses sm_90), which the CUDA driver compiles for the GPU it finds when it loads
the PTX.
"""

import glob
import os
import shutil
import subprocess
import sys

WHEEL_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "mlirxla", "wheels")
WHEEL_PLATFORM = ("--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                  "--platform", "manylinux_2_17_x86_64", "--only-binary=:all:", "--no-deps")


def iree_workload(name: str, path: str, entry: dict, atol: float, target=None) -> tuple[bytes, dict]:
    """The benchmark `name` (its StableHLO at `path`) as an IREE module for `target` (IREE's
    cuda one when None), and its manifest entry: the benchmark's inputs and expected outputs,
    f32 tolerances (IREE's cuda code multiplies in f32, no TF32: `atol` is the benchmark's
    full-f32 one)."""
    from mlirxla import frontdoor
    from mlirxla.backends.iree import compiler, toolchain
    from mlirxla.context import new_context
    from mlirxla.pipelines.runner import RunOptions

    with open(path, "rb") as handle:
        module = frontdoor.import_bytes(handle.read(), path, new_context()).module
    target = target or toolchain.cuda()
    program = compiler.compile_module(module, RunOptions(backend="iree"), target=target)
    (call,) = program.plan.thunks
    iree_entry = {"kind": "iree", "file": f"{name}.iree-{target.device}.vmfb", "benchmark": name,
                  "function": call.function_name, "driver": target.driver, "seed": entry["seed"],
                  "parameters": entry["parameters"], "expected": entry["expected"], "expected_from": entry["expected_from"],
                  "rtol": 1e-3, "atol": atol, "dispatches": call.attributes["dispatches"]}
    return program.object_code, iree_entry


def runtime_wheel(output: str, given: str | None, log=print) -> str | None:
    """Copy IREE's runtime wheel for the GPU machine into the pack (the one `given`, else the
    cached or freshly fetched one); its file name, or None (said in the log) when none could
    be had."""
    from importlib.metadata import version

    installed = version("iree-base-runtime")  # the package's version (iree.runtime's own names its build)
    pattern = f"iree_base_runtime-{installed}-cp312-*manylinux*x86_64.whl"
    found = [given] if given else sorted(glob.glob(os.path.join(WHEEL_CACHE, pattern)))
    if not found:
        os.makedirs(WHEEL_CACHE, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", *WHEEL_PLATFORM, "-d", WHEEL_CACHE,
                               f"iree-base-runtime=={installed}"], capture_output=True, text=True)
        found = sorted(glob.glob(os.path.join(WHEEL_CACHE, pattern)))
        if done.returncode != 0 or not found:
            log(f"  iree: no runtime wheel for the GPU machine (pip download failed: {done.stderr.strip().splitlines()[-1:]})")
            return None
    shutil.copy(found[0], output)
    return os.path.basename(found[0])
