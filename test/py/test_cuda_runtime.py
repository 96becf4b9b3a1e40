"""The cuda runtime without a GPU: a plain copy of `runtime/cuda` loads an executable the
cuda backend wrote, in a process where torch_mlir, jax and mlirxla cannot be imported, and
runs its plan on a recording stand-in device (`fake_cuda_device.py`): the test checks what a
GPU would have been asked to do (module, kernels, one slab, copies in and out, each launch's
grid, block and pointers, each GEMM's dimensions and operands). The last test runs it on a
real GPU, when `nvidia-smi` finds one."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cuda import compiler, ptxas
from mlirxla.context import new_context
from mlirxla.pipelines.runner import RunOptions
from mlirxla.runtime import oracle

from .conftest import REPOSITORY
from .fake_cuda_device import BASE

PROGRAM = os.path.join(REPOSITORY, "examples", "mlp_softmax.stablehlo.mlir")
# the program's softmax calls exp, from libdevice, which the cuda extra brings with ptxas
pytestmark = pytest.mark.skipif(ptxas.unavailable() is not None, reason=ptxas.unavailable() or "")

DRIVER = """
import importlib.abc, json, sys
import numpy as np

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch_mlir", "jax", "jaxlib", "mlirxla"):
            raise ImportError(f"the runtime imported {name}")
        return None

sys.meta_path.insert(0, Refuse())
import mlirxla_cuda_runtime
from fake_cuda_device import FakeCudaDevice

inputs = [np.load(path) for path in sys.argv[2:]]
device = FakeCudaDevice()
outputs = mlirxla_cuda_runtime.load(sys.argv[1], device).run(inputs)
print(json.dumps({"calls": device.calls, "outputs": [[list(o.shape), str(o.dtype)] for o in outputs]}))
"""


def gpu_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return done.returncode == 0 and "GPU" in done.stdout


def compiled(path: str) -> compiler.CudaProgram:
    with open(path, "rb") as handle:
        imported = frontdoor.import_bytes(handle.read(), path, new_context())
    return compiler.compile_program(imported.module, RunOptions(backend="cuda"))


@pytest.fixture(scope="module")
def program():
    return compiled(PROGRAM)


def inputs_for(program: compiler.CudaProgram) -> list[np.ndarray]:
    generator = np.random.default_rng(0)
    return [generator.standard_normal(p["shape"]).astype(p["dtype"]) for p in program.executable.plan["parameters"]]


def test_a_plain_copy_of_the_runtime_runs_the_plan_on_a_stand_in_device(program, tmp_path):
    copy = tmp_path / "pack"
    shutil.copytree(os.path.join(REPOSITORY, "runtime", "cuda"), copy / "mlirxla_cuda_runtime",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(os.path.dirname(__file__), "fake_cuda_device.py"), copy)
    (copy / "prog.mlirxla").write_bytes(program.executable.to_bytes())
    inputs = inputs_for(program)
    paths = []
    for index, array in enumerate(inputs):
        paths.append(str(copy / f"input{index}.npy"))
        np.save(paths[-1], array)
    done = subprocess.run([sys.executable, "-c", DRIVER, str(copy / "prog.mlirxla"), *paths], capture_output=True, text=True,
                          cwd=str(copy), env={**os.environ, "PYTHONPATH": str(copy)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    calls, plan = report["calls"], program.executable.plan

    kind = "cubin" if program.cubin is not None else "ptx"
    assert calls[0][:2] == ["load_module", kind]
    assert sorted(c[1] for c in calls if c[0] == "function") == plan["kernels"]
    (allocation,) = [c for c in calls if c[0] == "allocate"]
    assert allocation == ["allocate", plan["slab_bytes"], BASE]
    slab_end = BASE + plan["slab_bytes"]

    uploads = [c for c in calls if c[0] == "copy_to_device"]
    assert uploads[len(plan["constants"]):] == [["copy_to_device", BASE + p["offset"], p["bytes"]] for p in plan["parameters"]]

    # GEMMs: cuBLASLt matmuls, their descriptors made at load; the first layer's bias and relu
    # are its epilogue (no kernel of their own), the second layer's GEMM is a plain one
    (prepared,) = [c[1] for c in calls if c[0] == "prepare_matmuls"]
    matmuls = [c for c in calls if c[0] == "matmul"]
    descriptors = [c[1] for c in matmuls]
    assert sorted(map(str, prepared)) == sorted(map(str, descriptors))
    assert [(d["m"], d["n"], d["k"], d["batch"], d["transpose_lhs"], d["transpose_rhs"]) for d in descriptors] == [
        (32, 128, 64, 1, False, False), (32, 10, 128, 1, False, False)]
    assert [(d["operand_dtype"], d["out_dtype"], d["compute"]) for d in descriptors] == [("float32", "float32", "32F_FAST_TF32")] * 2
    assert [d["epilogue"] for d in descriptors] == ["bias_relu", "default"]
    parameter_at = {tuple(p["shape"]): BASE + p["offset"] for p in plan["parameters"]}
    assert matmuls[0][2] == parameter_at[(32, 64)] and matmuls[0][3] == parameter_at[(64, 128)]  # the first layer multiplies the input
    assert matmuls[0][5] == parameter_at[(128,)] and matmuls[1][5] is None  # the bias pointer
    assert matmuls[1][2] == matmuls[0][4]  # the second layer reads the first's activations

    work = [c for c in calls if c[0] in ("launch", "matmul")]
    launches = [c for c in work if c[0] == "launch"]
    assert len(launches) == sum(len(k.launches) for k in program.kernels)
    assert "dot_maximum_fusion_epilogue" not in plan["kernels"]
    for _, kernel, grid, block, shared, pointers, *_ in launches:
        assert kernel in plan["kernels"] and shared == 0
        assert grid[1:] == [1, 1] and block[1:] == [1, 1] and 1 <= block[0] <= 256
        assert all(BASE <= p < slab_end and (p - BASE) % 256 == 0 for p in pointers)
    assert [c[0] for c in work[:3]] == ["matmul", "matmul", "launch"]
    assert any(matmuls[1][4] in launch[5] for launch in launches)  # the softmax reads the logits

    (download,) = [c for c in calls if c[0] == "copy_to_host"]
    output = plan["outputs"][0]
    assert download == ["copy_to_host", BASE + output["offset"], output["bytes"]]
    assert download[1] in launches[-1][5]  # the last kernel (the softmax's division) writes the output
    assert report["outputs"] == [[[32, 10], "float32"]]


def test_the_runtime_refuses_wrong_inputs(program):
    from mlirxla.runtime.cuda import Executable

    from .fake_cuda_device import FakeCudaDevice

    executable = Executable(program.executable, FakeCudaDevice())
    with pytest.raises(ValueError, match="takes 5 input"):
        executable.run([])
    wrong = [np.zeros(p["shape"], np.float64) for p in program.executable.plan["parameters"]]
    with pytest.raises(ValueError, match=r"input 0: expected float32\["):
        executable.run(wrong)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="nvidia-smi finds no GPU")
def test_on_a_gpu_the_outputs_match_the_reference(monkeypatch):
    """Full f32 GEMMs (TF32 would miss the reference's 1e-4), run twice: captured into a CUDA
    graph, then replayed on other inputs."""
    from mlirxla.runtime.cuda import load

    monkeypatch.setenv("MLIRXLA_CUDA_GEMM_PRECISION", "highest")
    program = compiled(PROGRAM)
    executable = load(program.executable.to_bytes())
    for seed in (0, 1):
        generator = np.random.default_rng(seed)
        inputs = [generator.standard_normal(p["shape"]).astype(p["dtype"]) for p in program.executable.plan["parameters"]]
        (output,) = executable.run(inputs)
        with open(PROGRAM, "rb") as handle:
            (expected,) = oracle.evaluate(handle.read(), PROGRAM, "main", inputs)
        np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-5)
    assert executable.execution()["graph"], executable.execution()
