"""The iree backend (`backends/iree/`): mlirxla's front door and simplification, then IREE's
compiler and runtime. Its answers are the reference interpreter's and numpy's, its dumps sit
in the dump folder under our naming grammar, its compiled programs are cached under IREE's
version, IREE's flags pass through, its .vmfb runs on IREE's own `iree-run-module`, and what
it refuses is refused in one line naming the op and where it is. Without the iree extra these
tests skip, and the backend says which extra to install (that test runs either way)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.iree import toolchain
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.runtime import driver, literals
from mlirxla.runtime.client import Client, CompileOptions, environment

from .conftest import IREE_ABSENT, REPOSITORY, random_arguments, reference_outputs
from .test_backends import PROGRAM

needs_iree = pytest.mark.skipif(IREE_ABSENT is not None, reason=IREE_ABSENT or "")
pytestmark = pytest.mark.iree

MLP = os.path.join(REPOSITORY, "examples", "mlp_softmax.stablehlo.mlir")
ARGUMENTS = [np.array([0.0, 1.0, -1.0, 2.0], np.float32), np.array([7, -3, 4, 9], np.int32)]


def tool(name: str, *arguments: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"mlirxla.tools.{name}", *arguments], capture_output=True, text=True, env=env)


def without_iree(tmp_path) -> dict:
    """An environment in which `import iree.compiler` fails: an empty `iree` package first on
    the path hides the installed one."""
    (tmp_path / "hidden" / "iree").mkdir(parents=True)
    (tmp_path / "hidden" / "iree" / "__init__.py").write_text("")
    return dict(os.environ, PYTHONPATH=str(tmp_path / "hidden"))


def test_without_the_extra_the_backend_names_it(tmp_path):
    """Whether or not IREE is installed here: with it hidden, every door says which extra."""
    env = without_iree(tmp_path)
    done = tool("run", MLP, "--backend", "iree", env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pip install 'mlirxla[iree]'" in done.stderr, done.stderr
    script = "from mlirxla.runtime.client import Client\nClient(backend='iree')\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert "MlirxlaError: the iree backend needs IREE's compiler and runtime: pip install 'mlirxla[iree]'" in done.stderr


@needs_iree
def test_client_computes_and_caches_under_the_iree_version(tmp_path):
    client = Client(backend="iree", cache_dir=str(tmp_path))
    assert client.devices()[0].device_kind == "iree"
    for _ in range(2):  # compiled, then the plan and the vmfb served from the cache
        e, s = client.compile(PROGRAM).execute_numpy(ARGUMENTS)
        np.testing.assert_allclose(e, np.exp(ARGUMENTS[0]), rtol=1e-6)
        assert int(s) == 3 + (-1) + 2 + 4
    assert len(os.listdir(tmp_path)) == 1
    key = environment(client.backend)
    assert toolchain.versions() in key and "iree-compiler=3.13.0" in key and "device=llvm-cpu" in key


@needs_iree
def test_iree_flags_are_part_of_the_key_and_reach_iree(tmp_path):
    client = Client(backend="iree", cache_dir=str(tmp_path))
    plain = client.compile(PROGRAM)
    generic = client.compile(PROGRAM, CompileOptions(iree_flags=("--iree-llvmcpu-target-cpu=generic",)))
    assert plain.fingerprint != generic.fingerprint
    np.testing.assert_allclose(generic.execute_numpy(ARGUMENTS)[0], np.exp(ARGUMENTS[0]), rtol=1e-6)
    with pytest.raises(MlirxlaError, match="iree_flags are for the iree backend; this client compiles with cpu"):
        Client().compile(PROGRAM, CompileOptions(iree_flags=("--iree-llvmcpu-target-cpu=generic",)))


@needs_iree
@pytest.mark.parametrize("name", ["01_mlp_softmax.stablehlo.mlir", "02_scan_while_cond_gelu.stablehlo.mlir"])
def test_jax_samples_match_the_interpreter(name):
    from .conftest import JAX_PROGRAMS

    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), new_context()).module
    arguments = [a * a.dtype.type(0.1) if np.issubdtype(a.dtype, np.floating) else a for a in random_arguments(module, 3)]
    expected = reference_outputs(module, arguments)
    with module.context:
        got = [literals.to_numpy(v) for v in driver.execute(module, arguments, backend="iree").outputs]
    for have, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


@needs_iree
def test_run_dumps_iree_artifacts_under_our_naming(tmp_path):
    done = tool("run", MLP, "--backend", "iree", "--check", "--dump-to", str(tmp_path),
                "--iree-flag=--iree-llvmcpu-target-cpu=generic")
    assert done.returncode == 0, done.stderr
    assert "1 output(s) match" in done.stdout
    files = os.listdir(tmp_path)
    assert all(name.startswith("module_0000.jit_mlp.") for name in files), files
    suffixes = {name.removeprefix("module_0000.jit_mlp.") for name in files}
    for wanted in ("iree-input.stablehlo.mlir", "iree-compile.txt", "iree.vmfb", "iree-dispatches.txt", "thunk-sequence.txt",
                   "iree.phase01.input.mlir", "iree.jit_mlp_main_dispatch_0.mlir"):
        assert wanted in suffixes, wanted
    assert any(name.startswith("iree.") and name.endswith(".s") for name in suffixes)  # the executables' assembly
    dispatches = (tmp_path / "module_0000.jit_mlp.iree-dispatches.txt").read_text()
    assert dispatches.startswith("3 dispatch(es) of 3 executable(s):") and "matmul" in dispatches
    command = (tmp_path / "module_0000.jit_mlp.iree-compile.txt").read_text()
    assert "--iree-llvmcpu-target-cpu=generic" in command and "--iree-llvmcpu-target-cpu=host" not in command
    assert "function iree @main {'device': 'llvm-cpu', 'dispatches': 3}" in (tmp_path / "module_0000.jit_mlp.thunk-sequence.txt").read_text()


def test_iree_flag_belongs_to_the_iree_backend():
    done = tool("run", MLP, "--iree-flag=--iree-llvmcpu-target-cpu=generic")
    assert done.returncode == 2 and "--iree-flag is for --backend iree (the backend is cpu)" in done.stderr


@needs_iree
def test_a_flag_iree_does_not_know_is_one_line():
    done = tool("run", MLP, "--backend", "iree", "--iree-flag=--no-such-iree-flag")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "IREE's compiler failed" in done.stderr and "no-such-iree-flag" in done.stderr


@needs_iree
def test_exported_vmfb_runs_on_iree_run_module(tmp_path):
    vmfb = tmp_path / "model.vmfb"
    done = tool("compile", MLP, "--backend", "iree", "-o", str(vmfb))
    assert done.returncode == 0, done.stderr
    assert "3 dispatch(es)" in done.stdout
    rng = np.random.default_rng(0)
    shapes = [(64, 128), (128,), (128, 10), (10,), (32, 64)]
    arguments = [(0.1 * rng.standard_normal(shape)).astype(np.float32) for shape in shapes]
    inputs = []
    for index, argument in enumerate(arguments):
        np.save(tmp_path / f"arg{index}.npy", argument)
        inputs.append(f"--input=@{tmp_path / f'arg{index}.npy'}")
    # what IREE's iree-run-module console script runs
    done = subprocess.run([sys.executable, "-m", "iree._runtime.scripts.iree_run_module", f"--module={vmfb}",
                           "--device=local-task", "--function=main", *inputs, f"--output=@{tmp_path / 'out.npy'}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    w0, b0, w1, b1, x = arguments
    logits = np.maximum(x @ w0 + b0, 0) @ w1 + b1
    exponentials = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), exponentials / exponentials.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_compile_refuses_output_for_a_backend_without_a_program(tmp_path):
    done = tool("compile", MLP, "-o", str(tmp_path / "model.o"))
    assert done.returncode == 2 and "the cpu backend's code is not a program on its own" in done.stderr


@needs_iree
def test_cuda_target_compiles_without_a_gpu(tmp_path):
    """The cuda path compiles to a vmfb here (sm_80: IREE 3.13 refuses sm_90); it never ran."""
    done = tool("compile", MLP, "--backend", "iree", "-o", str(tmp_path / "model.vmfb"),
                env=dict(os.environ, MLIRXLA_IREE_DEVICE="cuda"))
    assert done.returncode == 0, done.stderr
    assert "IREE cuda: 3 dispatch(es)" in done.stdout and b"cuda" in (tmp_path / "model.vmfb").read_bytes()


@needs_iree
def test_refused_op_is_named_with_its_location(tmp_path):
    path = tmp_path / "call.mlir"
    path.write_text("""func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @my_kernel(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
""")
    done = tool("run", str(path), "--backend", "iree")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{path}:2:8: the iree backend cannot compile 'stablehlo.custom_call' @my_kernel: IREE runs no XLA custom calls" in done.stderr, done.stderr


@needs_iree
def test_refused_element_type_is_named_with_its_location(tmp_path):
    path = tmp_path / "i4.mlir"
    path.write_text("""func.func @main(%x: tensor<4xi8>) -> tensor<4xi8> {
  %0 = stablehlo.convert %x : (tensor<4xi8>) -> tensor<4xi4>
  %1 = stablehlo.convert %0 : (tensor<4xi4>) -> tensor<4xi8>
  return %1 : tensor<4xi8>
}
""")
    done = tool("run", str(path), "--backend", "iree")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{path}:2:8: the iree backend cannot compile 'stablehlo.convert': i4: IREE 3.13 does not pack sub-byte integers" in done.stderr


@needs_iree
def test_iree_errors_carry_the_ops_location(tmp_path):
    """An op IREE itself rejects: its first error, at the op's place in the user's file."""
    path = tmp_path / "solve.mlir"
    path.write_text("""func.func @main(%a: tensor<3x3xf32>, %b: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}
""")
    done = tool("run", str(path), "--backend", "iree")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{path}:2:8: IREE's compiler: failed to legalize operation 'stablehlo.triangular_solve'" in done.stderr, done.stderr


@pytest.mark.jax
@needs_iree
def test_jax_plugin_runs_on_iree():
    pytest.importorskip("jax")
    script = ("import jax, jax.numpy as jnp\n"
              "device = jax.devices('mlirxla')[0]\n"
              "with jax.default_device(device):\n"
              "    f = jax.jit(lambda x, w: jax.nn.softmax(jnp.tanh(x @ w), axis=-1).sum())\n"
              "    print(device.device_kind, round(float(f(jnp.ones((8, 16)), jnp.ones((16, 4)) / 16)), 4))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, MLIRXLA_BACKEND="iree", JAX_PLATFORMS="mlirxla,cpu"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["iree", "8.0"]
    assert "nanobind" not in done.stderr  # no leak report of the IREE objects the plugin's executables hold at exit


LARGE_ELEMENTS = 1 << 16  # 256 KiB of f32: above the size from which arguments are imported
PASS_THROUGH = f"""
func.func @main(%a: tensor<{LARGE_ELEMENTS}xf32>, %p: tensor<{LARGE_ELEMENTS}xi1>) -> (tensor<{LARGE_ELEMENTS}xf32>, tensor<{LARGE_ELEMENTS}xf32>) {{
  %zero = stablehlo.constant dense<0.0> : tensor<{LARGE_ELEMENTS}xf32>
  %kept = stablehlo.select %p, %a, %zero : tensor<{LARGE_ELEMENTS}xi1>, tensor<{LARGE_ELEMENTS}xf32>
  return %a, %kept : tensor<{LARGE_ELEMENTS}xf32>, tensor<{LARGE_ELEMENTS}xf32>
}}"""


def aligned_copy(array: np.ndarray, misalignment: int = 0) -> np.ndarray:
    raw = np.empty(array.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + misalignment
    copy = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


@needs_iree
@pytest.mark.parametrize("misalignment", [0, 16], ids=["aligned", "misaligned"])
@pytest.mark.parametrize("writeable", [True, False], ids=["writable", "read-only"])
def test_large_arguments_are_imported_without_a_copy(misalignment, writeable):
    """IREE reads a large aligned argument where it lies (an argument handed back unchanged is
    the caller's memory); a misaligned one goes through a kept staging copy, and what a call
    returns from it is not overwritten by the next call."""
    function = Client(backend="iree").compile(PASS_THROUGH).executable.plan.thunks[0].function
    generator = np.random.default_rng(0)
    calls = []
    for _ in range(2):
        a = aligned_copy(generator.standard_normal(LARGE_ELEMENTS).astype(np.float32), misalignment)
        p = aligned_copy(generator.random(LARGE_ELEMENTS) < 0.5, misalignment)
        a.flags.writeable = p.flags.writeable = writeable
        calls.append((a, p, function([a, p])))
    for a, p, (same, kept) in calls:
        np.testing.assert_array_equal(same, a)
        np.testing.assert_array_equal(kept, np.where(p, a, 0))
        assert np.shares_memory(same, a) == (misalignment == 0)
