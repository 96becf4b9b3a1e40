"""scripts/gpu-pack and scripts/gpu-check without a GPU: the pack holds what the GPU machine
needs (executables, expected outputs, the runtime, the JAX functions, gpu-check) under 64 MiB,
its executables load in the pack's runtime copy, gpu-check draws the same inputs as the
packer and judges outputs with the manifest's tolerances, and with no GPU it says so in one
JSON line."""

import json
import math
import os
import runpy
import subprocess
import sys

import numpy as np
import pytest

from mlirxla.backends.cuda import pack, ptxas
from mlirxla.runtime.cuda import ExecutableFile

from .conftest import CONFORMANCE, REPOSITORY
from .fake_cuda_device import ComputingDevice, FakeCudaDevice

pytestmark = pytest.mark.skipif(ptxas.unavailable() is not None, reason=ptxas.unavailable() or "")


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    output = tmp_path_factory.mktemp("pack") / "pack"
    manifest = pack.write_pack(str(output), CONFORMANCE, 4, ["mlp_softmax_small"], log=lambda line: None)
    return output, manifest


def test_the_pack_holds_what_the_gpu_machine_runs(packed):
    output, manifest = packed
    assert manifest["bytes"] < pack.LIMIT_BYTES and not manifest["refused"]
    assert manifest["workloads"]["mlp_softmax_small"]["jax_function"] == "mlp"
    for name in ("gpu-check", "jax_programs.py", "manifest.json", os.path.join("mlirxla_cuda_runtime", "executor.py")):
        assert (output / name).exists(), name
    for entry in manifest["workloads"].values():
        executable = ExecutableFile.from_bytes((output / entry["file"]).read_bytes())
        assert executable.plan["parameters"] == [{k: v for k, v in p.items() if k != "scale"} for p in entry["parameters"]]
        with np.load(output / entry["expected"]) as expected:
            assert [list(expected[f"arr_{i}"].shape) for i in range(len(expected.files))][:len(executable.plan["outputs"])] == \
                [o["shape"] for o in executable.plan["outputs"]]


def test_weights_are_drawn_at_their_initializer_scale_and_a_tf32_benchmark_gets_a_full_f32_twin(packed):
    output, manifest = packed
    workloads = manifest["workloads"]
    assert [p["scale"] for p in workloads["mlp_softmax_small"]["parameters"]] == [1.0, 1.0, 1 / math.sqrt(128), 1.0, 1 / math.sqrt(32)]
    assert workloads["mlp_softmax_small"]["tf32"] and workloads["mlp_softmax_small_highest"]["precision"] == "highest"
    assert workloads["mlp_softmax_small_highest"]["rtol"] == 1e-3

    def computes(name):
        plan = ExecutableFile.from_bytes((output / workloads[name]["file"]).read_bytes()).plan
        return {t["compute"] for t in plan["thunks"] if t["kind"] == "gemm"}

    assert computes("mlp_softmax_small") == {"32F_FAST_TF32"} and computes("mlp_softmax_small_highest") == {"32F"}


def test_gpu_check_draws_the_packers_inputs_and_judges_with_tolerances(packed):
    output, manifest = packed
    check = runpy.run_path(str(output / "gpu-check"), run_name="gpu_check")
    entry = manifest["workloads"]["mlp_softmax_small"]
    drawn = check["draw_inputs"](entry["seed"], entry["parameters"], np)
    for ours, theirs in zip(pack.draw_inputs(entry["seed"], entry["parameters"]), drawn):
        np.testing.assert_array_equal(ours, theirs)
    with np.load(output / entry["expected"]) as stored:
        expected = [stored["arr_0"]]
    assert check["compare"](expected, expected, 1e-3, 1e-4, np) == (True, 0.0)
    ok, worst = check["compare"]([expected[0] + 0.5], expected, 1e-3, 1e-4, np)
    assert not ok and worst == pytest.approx(0.5)
    assert check["compare"]([np.array([1, 2], np.int32)], [np.array([1, 3], np.int32)], 0, 0, np)[0] is False


def test_the_packed_executables_load_in_the_packed_runtime(packed):
    output, manifest = packed
    sys.path.insert(0, str(output))
    try:
        import mlirxla_cuda_runtime

        for entry in manifest["workloads"].values():
            device = FakeCudaDevice()
            inputs = pack.draw_inputs(entry["seed"], entry["parameters"])
            outputs = mlirxla_cuda_runtime.load(str(output / entry["file"]), device).run(inputs)
            assert len(outputs) >= 1 and any(call[0] in ("launch", "matmul", "copy_to_host") for call in device.calls)
    finally:
        sys.path.remove(str(output))
        for name in [name for name in sys.modules if name.split(".")[0] == "mlirxla_cuda_runtime"]:
            del sys.modules[name]


def test_gpu_check_says_plainly_when_there_is_no_gpu(packed):
    output, _ = packed
    done = subprocess.run([sys.executable, str(output / "gpu-check")], capture_output=True, text=True, cwd=REPOSITORY)
    report = json.loads(done.stdout)
    if report["gpu"] is not None:
        pytest.skip(f"a GPU is here ({report['gpu']}): the no-GPU path is not taken")
    assert done.returncode == 3 and "no GPU" in report["reason"]


def test_gpu_check_runs_a_packed_benchmark_end_to_end_and_says_how_it_ran(tmp_path):
    """The benchmark MLP is three cuBLASLt matmuls with their epilogues and no kernel, which
    the computing stand-in runs as cuBLASLt would: gpu-check's workload check, with the pack's
    own runtime, finds its outputs right within the TF32 tolerances the packer wrote, and
    reports one stream and a CUDA graph."""
    output = tmp_path / "pack"
    manifest = pack.write_pack(str(output), None, 0, ["mlp"], log=lambda line: None)
    entry = manifest["workloads"]["mlp"]
    assert entry["tolerance_from"].startswith("TF32 GEMMs") and entry["rtol"] == pack.TF32_RTOL
    check = runpy.run_path(str(output / "gpu-check"), run_name="gpu_check")
    sys.path.insert(0, str(output))
    try:
        import mlirxla_cuda_runtime

        device = ComputingDevice()
        result = check["check_workload"](str(output), entry, device, mlirxla_cuda_runtime, 2, False, np)
    finally:
        sys.path.remove(str(output))
        for name in [name for name in sys.modules if name.split(".")[0] == "mlirxla_cuda_runtime"]:
            del sys.modules[name]
    assert result["ok"], result
    assert (result["streams"], result["graph"], result["graph_reason"]) == (1, True, None)
    assert result["ours_device_ms"] == 1.0 and result["ours_ms"] > 0 and result["ours_latency_ms"] > 0
    assert [c[0] for c in device.calls].count("begin_capture") == 1
    gemms = [t for t in ExecutableFile.from_bytes((output / entry["file"]).read_bytes()).plan["thunks"] if t["kind"] == "gemm"]
    assert result["launches"] == len(gemms) == 3
    assert [(row["kind"], row["flops"], row["ms"]) for row in result["kernels"]] == [
        ("gemm", 2 * t["m"] * t["n"] * t["k"], 1.0) for t in gemms]
    assert all(row["tflops"] == row["flops"] / 1e-3 / 1e12 for row in result["kernels"])

    class FailingProfile:
        def profile(self, repeat):
            raise RuntimeError("CUDA_ERROR_LAUNCH_FAILED")

    assert check["kernel_profile"](FailingProfile(), 2, 1e12) == {"profile_error": "RuntimeError: CUDA_ERROR_LAUNCH_FAILED"}


def test_xla_kernels_counts_the_fusions_and_custom_calls_of_optimized_hlo():
    check = runpy.run_path(os.path.join(REPOSITORY, "scripts", "gpu-check"), run_name="gpu_check")
    hlo = """HloModule jit_f
%fused_exp (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %e = f32[4]{0} exponential(%p), metadata={op_name="jit(f)/fusion(x)"}
}
%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {
  %s = (s32[], f32[4]{0}) parameter(0)
  %fusion.2 = f32[4]{0} fusion(%s), kind=kLoop, calls=%fused_exp
}
ENTRY %main (a: f32[4], b: f32[4,4]) -> (f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  %fusion = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused_exp
  %custom-call.1 = (f32[4,4]{1,0}, s8[0]{0}) custom-call(%b, %b), custom_call_target="__cublas$gemm"
  %gte = f32[4,4]{1,0} get-tuple-element(%custom-call.1), index=0
  %while = (s32[], f32[4]{0}) while(%t), condition=%cond, body=%body
}
"""
    assert check["xla_kernels"](hlo) == 3


@pytest.mark.jax
def test_a_cpu_benchmark_workload_is_packed_without_expected_outputs_and_judged_against_xla(tmp_path):
    """The cpu benchmark's 1024 x 1024 matmul: packed with its GEMM in full f32 and no expected
    file; gpu-check draws the workload's own arguments (the executable's parameters), runs it
    on the computing stand-in and compares with the jax function, here on jax's CPU in place
    of XLA:GPU, at the workload's tolerance, timing both."""
    output = tmp_path / "pack"
    manifest = pack.write_pack(str(output), None, 0, [], log=lambda line: None, tune=False, workloads=["matmul"])
    entry = manifest["workloads"]["workload_matmul"]
    assert (entry["kind"], entry["precision"], entry["rtol"], entry["memory_bound"]) == ("workload", "highest", 1e-4, False)
    assert "expected" not in entry
    assert (output / "benchmark_workloads.py").exists()
    check = runpy.run_path(str(output / "gpu-check"), run_name="gpu_check")
    function, arguments = check["workload_arguments"](str(output), entry, np)
    import jax

    leaves = jax.tree_util.tree_leaves(arguments)
    assert [[list(x.shape), str(x.dtype)] for x in leaves] == [[p["shape"], p["dtype"]] for p in entry["parameters"]]

    def on_cpu(function, arguments, precision, np):
        compiled = jax.jit(function).lower(*arguments).compile()
        last = []
        return ([np.asarray(x) for x in jax.tree_util.tree_leaves(compiled(*arguments))],
                lambda: last.append(compiled(*arguments)), lambda: jax.block_until_ready(last[-1]),
                check["xla_kernels"](compiled.as_text()))

    check["check_cpu_workload"].__globals__["xla_gpu"] = on_cpu
    sys.path.insert(0, str(output))
    try:
        import mlirxla_cuda_runtime

        result = check["check_cpu_workload"](str(output), entry, ComputingDevice(), mlirxla_cuda_runtime, 2, np)
    finally:
        sys.path.remove(str(output))
        for name in [name for name in sys.modules if name.split(".")[0] in ("mlirxla_cuda_runtime", "benchmark_workloads")]:
            del sys.modules[name]
    assert result["ok"], result
    assert result["ratio"] > 0 and result["ours_ms"] > 0 and result["xla_ms"] > 0 and "hbm_fraction" not in result
    assert result["launches"] == 1 and result["kernels"][0]["flops"] == 2 * 1024**3 and isinstance(result["xla_kernels"], int)


@pytest.mark.jax
def test_the_workloads_emitter_kernels_are_tuned_after_the_programs_within_the_tuners_time(tmp_path):
    """tuning.json holds the cpu benchmark workloads' emitter kernels too (the softmax's row
    kernel, once per candidate tiling); the tuner starts no kernel after its budget, and says
    how many it left untuned."""
    output = tmp_path / "pack"
    pack.write_pack(str(output), None, 0, [], log=lambda line: None, workloads=["softmax"])
    (job,) = json.loads((output / "tuning.json").read_text())["kernels"]
    assert len(job["candidates"]) > 1 and {c["emitter"] for c in job["candidates"]} == {"row"}
    check = runpy.run_path(str(output / "gpu-check"), run_name="gpu_check")
    assert list(check["tune"](str(output), TimedFakeDevice(), 2)) == [job["fingerprint"]]
    check["tune"].__globals__["TUNE_BUDGET_S"] = -1.0
    summary = check["autotune"](str(output), str(tmp_path / "autotune.json"), TimedFakeDevice(), "NVIDIA H200", 2)
    assert (summary["kernels"], summary["untuned_for_time"]) == (0, 1)


class TimedFakeDevice(FakeCudaDevice):
    """The stand-in device with CUDA-event timing: a launch of a block of 128 threads takes 1
    ms, any other 2 ms (so the tuner has one fastest candidate to find)."""

    def elapsed_ms(self, work) -> float:
        before = len(self.calls)
        work()
        return sum(1.0 if call[3][0] == 128 else 2.0 for call in self.calls[before:] if call[0] == "launch")


def test_gpu_check_tunes_the_packed_row_kernels_and_the_compiler_reads_its_results(packed, tmp_path, monkeypatch):
    """gpu-check's tuner on the stand-in device: every candidate of every row kernel in the
    pack's tuning.json is loaded and launched on buffers of the kernel's sizes, the fastest is
    written to the results file under the GPU's name; compiling with that file gives those
    launches."""
    from mlirxla import frontdoor
    from mlirxla.backends.cuda import autotune, compiler
    from mlirxla.context import new_context
    from mlirxla.pipelines.runner import RunOptions

    output, _ = packed
    jobs = json.loads((output / "tuning.json").read_text())["kernels"]
    assert jobs and all(sum(c["default"] for c in job["candidates"]) == 1 for job in jobs)
    check = runpy.run_path(str(output / "gpu-check"), run_name="gpu_check")
    device = TimedFakeDevice()
    best = check["tune"](str(output), device, 3)
    assert sorted(best) == sorted(job["fingerprint"] for job in jobs)
    launched = {tuple(call[3]) for call in device.calls if call[0] == "launch"}
    assert launched == {tuple(c["block"]) for job in jobs for c in job["candidates"]}
    assert all(entry["threads_per_row"] * entry["rows_per_block"] == 128 and entry["ms"] == 1.0 for entry in best.values())
    results = tmp_path / "autotune.json"
    check["write_autotune_results"](str(results), "NVIDIA H200", best)

    def launches(environment):
        if environment:
            monkeypatch.setenv(autotune.ENVIRONMENT, str(results))
        path = os.path.join(REPOSITORY, "test", "data", "jax", "programs", "mlp_softmax_small.stablehlo.mlir")
        with open(path, "rb") as handle:
            program = compiler.compile_program(frontdoor.import_bytes(handle.read(), path, new_context()).module,
                                               RunOptions(backend="cuda"))
        return {k.symbol: [launch.block for launch in k.launches] for k in program.kernels if "row" in k.emitters}

    default, tuned = launches(False), launches(True)
    assert default and all(blocks != [(128, 1, 1)] for blocks in default.values())
    assert all(blocks == [(128, 1, 1)] for blocks in tuned.values()) and tuned.keys() == default.keys()


@pytest.mark.iree
def test_a_benchmark_as_an_iree_module_runs_through_gpu_checks_iree_path(tmp_path):
    """gpu-check's IREE workload check, run here on IREE's CPU driver over the small MLP
    compiled for llvm-cpu (on the GPU machine the same code takes the cuda module and driver):
    the outputs right within the benchmark's f32 tolerance, its time, and the ratios to the
    times the benchmark's own workload left."""
    pytest.importorskip("iree.runtime", reason="the iree extra is not installed")
    from mlirxla.backends.cuda import pack_iree
    from mlirxla.backends.iree import toolchain

    output = tmp_path / "pack"
    manifest = pack.write_pack(str(output), None, 0, ["mlp_softmax_small"], log=lambda line: None, tune=False)
    entry = manifest["workloads"]["mlp_softmax_small"]
    with np.load(output / entry["expected"]) as stored:
        expected = [stored[f"arr_{i}"] for i in range(len(stored.files))]
    vmfb, iree_entry = pack_iree.iree_workload("mlp_softmax_small", pack.program_path("mlp_softmax_small"), entry,
                                               pack.f32_atol(expected), toolchain.llvm_cpu())
    (output / iree_entry["file"]).write_bytes(vmfb)
    assert (iree_entry["driver"], iree_entry["expected"], iree_entry["rtol"]) == ("local-task", entry["expected"], 1e-3)
    check = runpy.run_path(str(output / "gpu-check"), run_name="gpu_check")
    result = check["check_iree"](str(output), iree_entry, 2, np, {"mlp_softmax_small": {"ours_ms": 0.5, "xla_ms": 0.25}})
    assert result["ok"], result
    assert result["iree_ms"] > 0 and result["iree_over_xla"] == pytest.approx(2 * result["iree_over_ours"])
    assert result["dispatches"] >= 1
